//! **liveness**, in cluster runs: once faults stop, every tombstone gets its `Removed`
//! within the bound ([`crate::run::LIVENESS_BOUND_MS`] of simulated time); a scripted
//! run quiesces; and no node leaves a deadline due once woken at it (in a real runtime
//! it would spin).

use crate::cluster::store::SimStore;
use crate::run::LIVENESS_BOUND_MS;
use crate::violation::{Checker, Flags};
use broker_core::Time;

/// Node `node`, woken at its deadline `at`, still asks to be woken then.
pub fn spins(flags: &mut Flags, node: usize, at: Time) {
    flags.flag(Checker::Liveness, format!("node {node} still asks to be woken at {at} once woken then: it would spin"));
}

/// The run is over: every deletion the journal holds must have completed.
pub fn deletions_pending(flags: &mut Flags, store: &SimStore) {
    for (id, t) in store.truth.deleting() {
        let t = &t.name;
        flags.flag(
            Checker::Liveness,
            format!("the deletion of {t:?} ({id}) never completed, {LIVENESS_BOUND_MS} ms after faults stopped"),
        );
    }
}

/// The run never quiesced within the bound after faults stopped: what it should have
/// reached cannot be read back.
pub fn never_quiesced(flags: &mut Flags) {
    let detail = "the run never quiesced: the final read-back and reconciliation could not run";
    flags.flag(Checker::Liveness, detail.into());
}
