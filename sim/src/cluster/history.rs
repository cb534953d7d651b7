//! The clients' view of a cluster run: every command with the node it went to, when it
//! was invoked, and its reply and when it came, in the order invoked. The lifecycle
//! checker judges it against the store's record once the run is over.

use broker_core::{BrokerError, Command, Reply, RequestId, Time};
use std::collections::BTreeMap;
use std::rc::Rc;

/// One command and what became of it.
#[derive(Clone, Debug)]
pub struct Call {
    /// The node it was sent to.
    pub node: usize,
    /// The command.
    pub command: Rc<Command>,
    /// When it was sent.
    pub invoked: Time,
    /// Its reply and when it came.
    pub answer: Option<(Time, Result<Reply, BrokerError>)>,
    /// Its node crashed before it answered: the command may or may not take effect.
    pub cut_off: bool,
}

/// Every command of a run, by request id (ids grow with invocation time).
#[derive(Debug, Default)]
pub struct History {
    /// The calls.
    pub calls: BTreeMap<RequestId, Call>,
}

impl History {
    /// A command is sent to `node` at `now`.
    pub fn invoked(&mut self, now: Time, request: RequestId, node: usize, command: Rc<Command>) {
        self.calls.insert(request, Call { node, command, invoked: now, answer: None, cut_off: false });
    }

    /// A reply arrives at `now`. Returns false if the request was unknown or answered
    /// already.
    pub fn answered(&mut self, now: Time, request: RequestId, reply: Result<Reply, BrokerError>) -> bool {
        match self.calls.get_mut(&request) {
            Some(call) if call.answer.is_none() && !call.cut_off => {
                call.answer = Some((now, reply));
                true
            }
            _ => false,
        }
    }

    /// The node of these requests crashed.
    pub fn cut_off<'a>(&mut self, requests: impl Iterator<Item = &'a RequestId>) {
        for r in requests {
            if let Some(call) = self.calls.get_mut(r) {
                call.cut_off = true;
            }
        }
    }
}
