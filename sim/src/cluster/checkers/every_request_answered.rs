//! **every-request-answered**, in cluster runs: every command is answered once, by the
//! node it was sent to; by the end of the run, every one whose node did not crash
//! before answering (a crash cuts it off: its outcome is unknown).

use crate::cluster::history::History;
use crate::violation::{Checker, Flags};
use broker_core::RequestId;

/// Node `node` answered `request`, which the history holds as answered already, cut
/// off, or never sent.
pub fn answered_again(flags: &mut Flags, node: usize, request: RequestId) {
    flags.flag(Checker::EveryRequestAnswered, format!("node {node} answered req{} twice, or unasked", request.0));
}

/// The run is over: every call not cut off must have been answered.
pub fn at_end(flags: &mut Flags, history: &History) {
    for (r, c) in history.calls.iter().filter(|(_, c)| c.answer.is_none() && !c.cut_off) {
        flags.flag(Checker::EveryRequestAnswered, format!("req{} to node {} was never answered", r.0, c.node));
    }
}
