//! **fetch-incarnation**: a fetch reply never names an incarnation whose deletion was
//! acknowledged before the reply, and never shows a record under an incarnation the
//! record cannot have been produced to, acknowledged or not.
//!
//! The core admits a request the instant it is issued (ids are handed out, names are
//! hidden), and request ids ascend in issue order. So a produce issued before the
//! create that answered `Created { topic }` cannot have written to `topic` (it did not
//! exist yet), and a produce issued after a delete that answered `DeleteAccepted {
//! topic }` cannot have either (the name no longer led to it). A retried idempotent
//! batch's values were sent by each of its sends: one of them must fit.

use super::request::Request;
use crate::model::{label, ByValueId, ValueId};
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Command, Reply, RequestId, TopicId};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub(super) struct FetchIncarnation {
    /// The produce that sent each value (values are unique in a run, but for the sends
    /// of a retried idempotent batch; looked up only).
    produced_by: ByValueId<ValueId, RequestId>,
    /// The later sends of each value sent again (a retried idempotent batch's).
    sent_again: ByValueId<ValueId, Vec<RequestId>>,
    /// The create request that answered `Created` for each incarnation.
    created_by: BTreeMap<TopicId, RequestId>,
    /// The earliest-issued delete request that answered `DeleteAccepted` for each incarnation.
    deleted_by: BTreeMap<TopicId, RequestId>,
}

impl FetchIncarnation {
    /// A produce was issued with values of these ids (none for other commands).
    pub(super) fn issued(&mut self, request: RequestId, values: &[ValueId]) {
        for id in values {
            match self.produced_by.entry(id.clone()) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(request);
                }
                std::collections::hash_map::Entry::Occupied(_) => {
                    self.sent_again.entry(id.clone()).or_default().push(request);
                }
            }
        }
    }

    pub(super) fn replied(
        &mut self,
        flags: &mut Flags,
        request: RequestId,
        req: &Request,
        reply: &Result<Reply, BrokerError>,
    ) {
        match (reply, &*req.command) {
            (Ok(Reply::Created { topic }), Command::CreateTopic { .. }) => {
                self.created_by.insert(*topic, request);
            }
            (Ok(Reply::DeleteAccepted { topic }), Command::DeleteTopic { .. }) => {
                let first = self.deleted_by.entry(*topic).or_insert(request);
                *first = (*first).min(request);
            }
            (Ok(Reply::Fetched { topic, records, .. }), Command::Fetch { topic: name, partition, .. }) => {
                if self.deleted_by.contains_key(topic) {
                    let detail = format!(
                        "a fetch of {name}/p{partition} issued at {} was answered from {topic}, whose deletion was \
                         already acknowledged",
                        req.at
                    );
                    flags.flag(Checker::FetchIncarnation, detail);
                }
                for r in records {
                    let id = ValueId::of(&r.value);
                    let Some(by) = self.produced_by.get(&id) else { continue };
                    let created = self.created_by.get(topic);
                    let deleted = self.deleted_by.get(topic);
                    if let Some(again) = self.sent_again.get(&id) {
                        // One of its sends was issued in the incarnation's life.
                        let fits = |s: &RequestId| created.is_none_or(|c| s > c) && deleted.is_none_or(|d| s < d);
                        if fits(by) || again.iter().any(fits) {
                            continue;
                        }
                    }
                    if let Some(created) = created.filter(|c| by < *c) {
                        let detail = format!(
                            "{topic}/p{partition}@{} holds {}, produced by req{} before {topic} was created by req{}",
                            r.offset,
                            label(&r.value),
                            by.0,
                            created.0
                        );
                        flags.flag(Checker::FetchIncarnation, detail);
                    }
                    if let Some(deleted) = deleted.filter(|d| by > *d) {
                        let detail = format!(
                            "{topic}/p{partition}@{} holds {}, produced by req{} after req{} deleted {topic}",
                            r.offset,
                            label(&r.value),
                            by.0,
                            deleted.0
                        );
                        flags.flag(Checker::FetchIncarnation, detail);
                    }
                }
            }
            _ => {}
        }
    }
}
