//! The cluster's checkers, one file each, each with its invariant in its doc comment.
//! Six are the cluster's own ([`linearizable_lifecycle`], [`one_live_incarnation`],
//! [`acked_readable_everywhere`], [`one_completion`], [`heals_in_bound`],
//! [`failed_writes_no_effect`]); the others judge, in a cluster, the invariant of the
//! one-broker checker whose name they keep.
//!
//! The runner calls them at the points they judge: [`store_did`] with what each store
//! operation did, as it is carried out (the store tells it as plain facts, and judges
//! nothing); [`liveness::spins`], [`every_request_answered::answered_again`] and
//! [`heals_in_bound`] as the run goes; [`run_over`] once the run is over; and, if it
//! settled, [`after_settling`] with the cluster lent through [`settled::Settled`], then
//! [`no_orphans`] after one reconciliation.
//!
//! Three files are no checker: [`replies`] walks the history once the run is over and
//! hands each answered call, as a [`judged::Judged`], to every checker its reply
//! concerns, in a fixed order; [`judged`] is that call; [`settled`] is what the runner
//! lends. The checkers read the store's record and the clients' history; they never
//! take from the runner.

pub mod acked_offsets_served;
pub mod acked_readable_everywhere;
pub mod every_request_answered;
pub mod failed_writes_no_effect;
pub mod fetch_incarnation;
pub mod heals_in_bound;
pub mod judged;
pub mod linearizable_lifecycle;
pub mod liveness;
pub mod no_orphans;
pub mod no_premature_removal;
pub mod one_completion;
pub mod one_live_incarnation;
pub mod replies;
pub mod settled;

use crate::cluster::history::History;
use crate::cluster::store::{Fact, SimStore};
use crate::violation::{Flags, Violation};
use broker_core::Time;
use settled::Settled;

/// The store carried out an operation that did `facts`, in order.
pub fn store_did(flags: &mut Flags, facts: &[Fact]) {
    for fact in facts {
        no_premature_removal::store_did(flags, fact);
        acked_offsets_served::store_did(flags, fact);
        one_live_incarnation::store_did(flags, fact);
        one_completion::store_did(flags, fact);
    }
}

/// The run is over at `now`, settled or not: every deletion must have completed, every
/// call not cut off been answered, and every answer be judged.
pub fn run_over(out: &mut Vec<Violation>, now: Time, history: &History, store: &SimStore) {
    let mut flags = Flags::new(now, out);
    liveness::deletions_pending(&mut flags, store);
    every_request_answered::at_end(&mut flags, history);
    replies::judge(out, history, store);
}

/// The run has settled: each node, fenced by a listing, holds the journal's catalog and
/// serves every record written to a live topic.
pub fn after_settling(cluster: &mut impl Settled) {
    let live = acked_readable_everywhere::live(cluster);
    for n in 0..cluster.nodes() {
        cluster.ask(n, broker_core::Command::ListTopics);
        if one_live_incarnation::catalog_at_end(cluster, n) {
            acked_readable_everywhere::read_back(cluster, n, &live);
        }
    }
}
