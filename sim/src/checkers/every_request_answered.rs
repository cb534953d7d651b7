//! **every-request-answered**: every request gets exactly one reply. A request in
//! flight when the broker process dies gets none, which is fine (its outcome is
//! unknown); but a request admitted by the process that lives to the end of the run
//! must be answered by then, and no request is answered twice.

use super::request::Request;
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Reply, RequestId};
use std::collections::BTreeMap;

/// How many unanswered requests a violation lists.
const LISTED: usize = 5;

/// A reply to a request that is not in flight: answered twice, or never issued.
pub(super) fn unexpected_reply(flags: &mut Flags, request: RequestId, reply: &Result<Reply, BrokerError>) {
    let detail = format!("req{} was answered again, or never issued: {reply:?}", request.0);
    flags.flag(Checker::EveryRequestAnswered, detail);
}

/// The run is over: whatever the surviving process admitted must have been answered.
pub(super) fn run_ended(flags: &mut Flags, open: &BTreeMap<RequestId, Request>) {
    if open.is_empty() {
        return;
    }
    let listed: Vec<String> =
        open.iter().take(LISTED).map(|(r, q)| format!("req{} issued at {}: {:?}", r.0, q.at, q.command)).collect();
    let detail = format!(
        "{} requests admitted by the broker that lived to the end were never answered: {}{}",
        open.len(),
        listed.join("; "),
        if open.len() > LISTED { "; ..." } else { "" }
    );
    flags.flag(Checker::EveryRequestAnswered, detail);
}
