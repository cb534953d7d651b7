//! Cluster runs: 1 to 5 [`broker_core::cluster::node::Node`]s over one simulated shared
//! store (DESIGN.md, section 10), with store latency, errors, timeouts whose outcome is
//! unknown, nodes cut off from the store, and node crashes and restarts.
//!
//! - [`params`]: what a cluster seed draws;
//! - [`store`]: the simulated store and the record of what it ever held, which judges
//!   nothing but tells what each operation did;
//! - [`history`]: every command, its node, and when it was invoked and answered;
//! - [`checkers`]: the cluster's checkers, one file each, over that record and history;
//! - [`runner`]: the run itself, which calls the checkers;
//! - [`metrics`]: what a run measures in simulated time, for the benchmark;
//! - [`script`]: fixed workloads and the one store fault the exhaustive mode injects.

pub mod checkers;
pub mod history;
pub mod metrics;
pub mod params;
pub mod runner;
pub mod script;
pub mod store;

pub use params::ClusterParams;
