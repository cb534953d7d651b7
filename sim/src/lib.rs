//! Deterministic simulator for broker-core.
//!
//! One seed decides everything: the workload, I/O latencies and completion order, the
//! faults the simulated disk injects, and where the process crashes. The real core and
//! the real storage executor run over the simulated disk; checkers confirm that nothing
//! is orphaned, lost, resurrected or corrupted.

pub mod campaign;
pub mod checkers;
pub mod client_wakes;
pub mod cluster;
pub mod disk;
pub mod disk_kit;
pub mod events;
pub mod exhaust;
pub mod fuzzing;
pub mod model;
pub mod one_broker;
pub mod rng;
pub mod run;
pub mod runner;
pub mod swarm;
pub mod trace;
pub mod tripwire;
pub mod value_crc;
pub mod violation;
pub mod workload;

pub use runner::{run, RunOptions, RunReport, RunStats};
pub use swarm::SwarmParams;
pub use violation::{Checker, Violation};

/// A bug planted in the core, for the options that switch one on
/// ([`RunOptions::bug`], [`campaign::CampaignOptions::bug`], [`exhaust::explore`]).
#[cfg(feature = "planted-bugs")]
pub use broker_core::planted::Bug;

/// A bug planted in the core: there is none in a build without the `planted-bugs`
/// feature, so an option that switches one on is always `None`.
#[cfg(not(feature = "planted-bugs"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {}

#[cfg(not(feature = "planted-bugs"))]
impl std::fmt::Display for Bug {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}
