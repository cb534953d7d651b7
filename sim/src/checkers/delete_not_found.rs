//! **delete-not-found**: a delete is never answered `TopicNotFound` while its name has
//! a live or pending incarnation. The model knows one exists when the delete is issued
//! if any of these holds:
//!
//! - an incarnation of the name is definitely live (its creation was acknowledged and
//!   no delete of the name has been issued since its create);
//! - a create or a delete of the name is in flight (admitted and not yet answered, so
//!   its incarnation is live, or being deleted and waiting for its tombstone);
//! - a delete issued while an incarnation was definitely live is within that
//!   incarnation's grace delay: removal cannot even start before the delay has passed
//!   since that delete (a crash restarts the delay, never shortens it).

use super::request::Request;
use crate::model::Model;
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Command, Reply, RequestId, Time, TopicId};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub(super) struct DeleteNotFound {
    /// The grace delay of each incarnation whose creation was acknowledged.
    grace_ms: BTreeMap<TopicId, u64>,
    /// Per name: an incarnation is pending deletion at least until then.
    pending_until: BTreeMap<String, Time>,
    /// Deletes in flight that must find something, with why.
    must_find: BTreeMap<RequestId, String>,
}

impl DeleteNotFound {
    pub(super) fn issued(
        &mut self,
        now: Time,
        model: &Model,
        open: &BTreeMap<RequestId, Request>,
        request: RequestId,
        command: &Command,
    ) {
        let Command::DeleteTopic { name } = command else { return };
        let mut why = Vec::new();
        if let Some(id) = model.definitely_live(name) {
            why.push(format!("{id} is live"));
            if let Some(grace) = self.grace_ms.get(&id).filter(|g| **g > 0) {
                let until = now.plus_millis(*grace);
                let at = self.pending_until.entry(name.clone()).or_insert(until);
                *at = (*at).max(until);
            }
        }
        for (r, q) in open {
            match &*q.command {
                Command::CreateTopic { name: n, .. } if n == name => {
                    why.push(format!("create req{} is in flight", r.0))
                }
                Command::DeleteTopic { name: n } if n == name => why.push(format!("delete req{} is in flight", r.0)),
                _ => {}
            }
        }
        if let Some(until) = self.pending_until.get(name).filter(|u| **u > now) {
            why.push(format!("a deletion is in its grace delay until {until}"));
        }
        if !why.is_empty() {
            self.must_find.insert(request, why.join(", "));
        }
    }

    pub(super) fn cut_off<'a>(&mut self, requests: impl Iterator<Item = &'a RequestId>) {
        for r in requests {
            self.must_find.remove(r);
        }
    }

    pub(super) fn replied(
        &mut self,
        flags: &mut Flags,
        request: RequestId,
        req: &Request,
        reply: &Result<Reply, BrokerError>,
    ) {
        if let (Ok(Reply::Created { topic }), Command::CreateTopic { settings, .. }) = (reply, &*req.command) {
            self.grace_ms.insert(*topic, settings.deletion_grace_ms);
        }
        let Some(why) = self.must_find.remove(&request) else { return };
        if let (Err(BrokerError::TopicNotFound { name }), Command::DeleteTopic { .. }) = (reply, &*req.command) {
            let detail = format!("a delete of {name} issued at {} got not-found, but when it was issued {why}", req.at);
            flags.flag(Checker::DeleteNotFound, detail);
        }
    }
}
