//! **removal-concurrency**: log removals in flight never exceed the configured removal
//! concurrency. A removal is in flight from the moment the core issues its `RemoveLog`
//! until its completion is delivered back to the core, within one life of the process
//! (a crash ends them all).

use crate::violation::{Checker, Flags};
use broker_core::{OpId, StorageOp};
use std::collections::BTreeSet;

#[derive(Debug)]
pub(super) struct RemovalConcurrency {
    limit: usize,
    in_flight: BTreeSet<OpId>,
    /// Whether this life has already been flagged (one violation per life is enough).
    flagged: bool,
}

impl RemovalConcurrency {
    pub(super) fn new(limit: usize) -> RemovalConcurrency {
        RemovalConcurrency { limit, in_flight: BTreeSet::new(), flagged: false }
    }

    pub(super) fn issued(&mut self, flags: &mut Flags, id: OpId, op: &StorageOp) {
        let StorageOp::RemoveLog { log } = op else { return };
        self.in_flight.insert(id);
        if self.in_flight.len() > self.limit && !self.flagged {
            self.flagged = true;
            let detail = format!(
                "removal of {log} makes {} removals in flight, above the removal concurrency of {}",
                self.in_flight.len(),
                self.limit
            );
            flags.flag(Checker::RemovalConcurrency, detail);
        }
    }

    pub(super) fn completed(&mut self, id: OpId) {
        self.in_flight.remove(&id);
    }

    pub(super) fn process_died(&mut self) {
        self.in_flight.clear();
        self.flagged = false;
    }
}
