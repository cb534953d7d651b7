//! The clients' view of a cluster run: every command with the node it went to, when it
//! was invoked, and its reply and when it came, in the order invoked. The lifecycle
//! checker judges it against the store's record once the run is over.
//!
//! A produce's values are kept as their ids ([`ValueId`]), never their bytes: a run's
//! batches refused past the limits carry hundreds of megabytes, and the history lasts
//! the whole run.

use crate::model::ValueId;
use crate::trace::CommandText;
use crate::workload::Issue;
use broker_core::{BrokerError, Command, Reply, RequestId, Time};
use std::collections::BTreeMap;
use std::fmt::{self, Display, Formatter};
use std::rc::Rc;

/// One command and what became of it.
#[derive(Clone, Debug)]
pub struct Call {
    /// The node it was sent to.
    pub node: usize,
    /// The command; a produce without its records, whose values are in `values`.
    pub command: Rc<Command>,
    /// The ids of a produce's values, in record order (none for any other command).
    pub values: Rc<[ValueId]>,
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
    pub fn invoked(&mut self, now: Time, request: RequestId, node: usize, issue: &Issue) {
        let command = match &issue.command {
            Command::Produce { topic, partition, .. } => {
                Command::Produce { topic: topic.clone(), partition: *partition, records: Vec::new() }
            }
            other => other.clone(),
        };
        let call = Call {
            node,
            command: Rc::new(command),
            values: issue.values.clone(),
            invoked: now,
            answer: None,
            cut_off: false,
        };
        self.calls.insert(request, call);
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

/// A call's command, rendered for a violation: a produce as its topic, partition,
/// record count and value bytes (the history keeps no values).
pub struct CallText<'a>(pub &'a Call);

impl Display for CallText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Command::Produce { topic, partition, .. } = &*self.0.command else {
            return CommandText(&self.0.command).fmt(f);
        };
        write!(f, "Produce {topic:?}")?;
        if let Some(p) = partition {
            write!(f, " to partition {p}")?;
        }
        let bytes: usize = self.0.values.iter().map(|v| v.len_and_crc().0).sum();
        write!(f, " {} records, {bytes} value bytes", self.0.values.len())
    }
}
