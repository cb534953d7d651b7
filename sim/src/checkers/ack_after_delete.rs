//! **no-ack-after-delete**: once the deletion of an incarnation is acknowledged, no
//! produce to that incarnation is acknowledged. A client that heard `DeleteAccepted`
//! must never afterwards hear that records were durably added to what it deleted.

use super::request::Request;
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Reply, Time, TopicId};
use std::collections::BTreeMap;

/// Acknowledged deletions, with when the first was acknowledged.
#[derive(Debug, Default)]
pub(super) struct AckAfterDelete {
    deleted: BTreeMap<TopicId, Time>,
}

impl AckAfterDelete {
    pub(super) fn replied(&mut self, flags: &mut Flags, req: &Request, reply: &Result<Reply, BrokerError>) {
        match reply {
            Ok(Reply::DeleteAccepted { topic }) => {
                self.deleted.entry(*topic).or_insert(flags.now());
            }
            Ok(Reply::Produced { topic, positions }) => {
                if let Some(acked_at) = self.deleted.get(topic) {
                    let detail = format!(
                        "a produce of {} records issued at {} was acknowledged for {topic}, whose deletion was \
                         acknowledged at {acked_at}",
                        positions.len(),
                        req.at
                    );
                    flags.flag(Checker::NoAckAfterDelete, detail);
                }
            }
            _ => {}
        }
    }
}
