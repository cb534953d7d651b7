//! One answered call of a cluster run's history, as the checkers judge it once the run
//! is over: its interval, from invocation to answer, the store's record to judge it
//! by, and where its violations go, each stamped with the instant it was answered and
//! told with the call (request, node, command, interval).

use crate::cluster::history::Call;
use crate::cluster::store::{Life, SimStore};
use crate::violation::{Checker, Flags, Violation};
use broker_core::{RequestId, Time, TopicId};

/// A call under judgement.
pub struct Judged<'a> {
    /// What the store ever held.
    pub store: &'a SimStore,
    /// The call.
    pub call: &'a Call,
    /// Its request.
    pub request: RequestId,
    /// When it was invoked.
    pub from: Time,
    /// When it was answered.
    pub to: Time,
    flags: Flags<'a>,
}

impl<'a> Judged<'a> {
    /// Call `request` of the history, reporting into `out`; `None` if it was never
    /// answered (nothing to judge).
    pub fn new(store: &'a SimStore, request: RequestId, call: &'a Call, out: &'a mut Vec<Violation>) -> Option<Self> {
        let (answered, _) = call.answer.as_ref()?;
        let flags = Flags::new(*answered, out);
        Some(Judged { store, call, request, from: call.invoked, to: *answered, flags })
    }

    /// Reports that the call broke `checker`'s invariant, as `what` says.
    pub fn flag(&mut self, checker: Checker, what: String) {
        let detail = format!(
            "req{} to node {} ({}), invoked {} and answered {}: {what}",
            self.request.0,
            self.call.node,
            crate::cluster::history::CallText(self.call),
            self.from,
            self.to
        );
        self.flags.flag(checker, detail);
    }

    /// The life of `topic`, if it is an incarnation of `name`.
    pub fn life(&self, topic: TopicId, name: &str) -> Option<&'a Life> {
        self.store.lives.get(&topic).filter(|l| l.name == name)
    }
}
