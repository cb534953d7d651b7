//! What a cluster run measures in simulated time, for the benchmark
//! (`sim/benches/cluster.rs`): the runner fills it in, and the run's report carries it.

use broker_core::Time;

/// What a cluster run measured, in simulated time (for the benchmark).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterMetrics {
    /// Microseconds from a delete's invocation to its acknowledgement, for each delete
    /// that wrote its tombstone.
    pub delete_ack_us: Vec<u64>,
    /// Microseconds from a tombstone's landing until every node that is up has folded
    /// it, and so refuses writes to its incarnation.
    pub fanout_us: Vec<u64>,
    /// Microseconds from invocation to acknowledgement of each acknowledged produce.
    pub produce_us: Vec<u64>,
    /// When the last client command was answered.
    pub last_reply: Time,
    /// Listings of the journal (fence rounds and tailing).
    pub journal_lists: u64,
}
