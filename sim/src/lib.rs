//! Deterministic simulator for broker-core.
//!
//! One seed decides everything: the workload, I/O latencies and completion order, the
//! faults the simulated disk injects, and where the process crashes. The real core and
//! the real storage executor run over the simulated disk; checkers confirm that nothing
//! is orphaned, lost, resurrected or corrupted.

pub mod campaign;
pub mod checkers;
pub mod cluster;
pub mod disk;
pub mod disk_kit;
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
pub mod violation;
pub mod workload;

pub use runner::{run, RunOptions, RunReport, RunStats};
pub use swarm::SwarmParams;
pub use violation::{Checker, Violation};
