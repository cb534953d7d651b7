//! **create-of-live-name**: a create is never answered `Created` while its name is
//! live. The model knows the name is live when the create is issued if an incarnation
//! of it is definitely live (its creation was acknowledged and no delete of the name
//! has been issued since its create), or if an earlier create of it is in flight with
//! no delete of the name issued after that create (the core admits each request the
//! instant it is issued, so that create holds the name).

use super::request::Request;
use crate::model::Model;
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Command, Reply, RequestId};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub(super) struct CreateOfLiveName {
    /// The last delete issued for each name.
    last_delete: BTreeMap<String, RequestId>,
    /// Creates in flight that must be refused, with why.
    must_refuse: BTreeMap<RequestId, String>,
}

impl CreateOfLiveName {
    pub(super) fn issued(
        &mut self,
        model: &Model,
        open: &BTreeMap<RequestId, Request>,
        request: RequestId,
        command: &Command,
    ) {
        match command {
            Command::DeleteTopic { name } => {
                self.last_delete.insert(name.clone(), request);
            }
            Command::CreateTopic { name, .. } => {
                let mut why = Vec::new();
                if let Some(id) = model.definitely_live(name) {
                    why.push(format!("{id} is live"));
                }
                let last_delete = self.last_delete.get(name).copied().unwrap_or(RequestId(0));
                for (r, q) in open.range(last_delete..) {
                    if matches!(&*q.command, Command::CreateTopic { name: n, .. } if n == name) && *r > last_delete {
                        why.push(format!("create req{} is in flight", r.0));
                    }
                }
                if !why.is_empty() {
                    self.must_refuse.insert(request, why.join(", "));
                }
            }
            _ => {}
        }
    }

    pub(super) fn cut_off<'a>(&mut self, requests: impl Iterator<Item = &'a RequestId>) {
        for r in requests {
            self.must_refuse.remove(r);
        }
    }

    pub(super) fn replied(
        &mut self,
        flags: &mut Flags,
        request: RequestId,
        req: &Request,
        reply: &Result<Reply, BrokerError>,
    ) {
        let Some(why) = self.must_refuse.remove(&request) else { return };
        if let (Ok(Reply::Created { topic }), Command::CreateTopic { name, .. }) = (reply, &*req.command) {
            let detail = format!("a create of {name} issued at {} was answered created ({topic}), but {why}", req.at);
            flags.flag(Checker::CreateOfLiveName, detail);
        }
    }
}
