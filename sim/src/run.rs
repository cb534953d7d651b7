//! What a run is, for both runners (one broker on the simulated disk,
//! [`crate::one_broker`], and a cluster over the simulated store,
//! [`crate::cluster::runner`]): its options, its counters and report, its bounds, and
//! the core's configuration a seed's parameters give.

use crate::cluster::metrics::ClusterMetrics;
use crate::cluster::script::{ClusterScript, StoreFault};
use crate::disk::CrashMode;
use crate::swarm::SwarmParams;
use crate::trace::TraceLine;
use crate::violation::Violation;
use broker_core::{Command, Config, Time};

/// How long, in simulated time, pending work may take to finish once faults stop.
pub const LIVENESS_BOUND_MS: u64 = 120_000;
/// The longest chaos phase, in simulated time, even if the workload is not done
/// (a broker that never serves again must not stall the run).
pub const CHAOS_LIMIT_MS: u64 = 600_000;

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The seed: it decides everything.
    pub seed: u64,
    /// A planted bug to switch on in the core (there is none without the `planted-bugs`
    /// feature: [`crate::Bug`]).
    pub bug: Option<crate::Bug>,
    /// Keep the trace lines (for `--trace`).
    pub keep_trace: bool,
    /// Override the swarm's parameters (tests use this).
    pub params: Option<SwarmParams>,
    /// Run a fixed script instead of the seed's workload, with no faults.
    pub script: Option<Script>,
    /// Crash right after the k-th storage operation (counting from 1), with this crash mode.
    pub crash_at: Option<(u64, CrashMode)>,
    /// Run a cluster of this many nodes over a shared store (1 to 5), or with 0 one
    /// broker on the simulated disk; without it, the seed's swarm decides (half of the
    /// seeds run a cluster).
    pub nodes: Option<u32>,
    /// Run this fixed cluster workload instead of the seed's (then `script`, `params`
    /// and `nodes` are ignored).
    pub cluster_script: Option<ClusterScript>,
    /// Cluster: inject this fault into the k-th store operation (counting from 1, every
    /// node's operations in the order they reach the store).
    pub store_fault_at: Option<(u64, StoreFault)>,
    /// Run the one broker with [`broker_core::Durability::LogSync`], its interval 1 to
    /// 200 ms by seed (cluster nodes have no such setting).
    pub log_sync: bool,
}

impl RunOptions {
    /// The durability this run's broker uses.
    pub fn durability(&self) -> broker_core::Durability {
        match self.log_sync {
            true => broker_core::Durability::LogSync { journal_ends_ms: 1 + self.seed % 200 },
            false => broker_core::Durability::Journaled,
        }
    }
}

/// A fixed workload for the exhaustive mode.
#[derive(Clone, Debug)]
pub struct Script {
    /// Its name.
    pub name: &'static str,
    /// Groups of commands, issued by one client: the commands of a group at once,
    /// each group once every reply to the one before has come.
    pub groups: Vec<Vec<Command>>,
    /// The journal compaction threshold.
    pub compaction_min_records: u64,
}

impl Script {
    /// Fault-free parameters that run this script with one client.
    pub(crate) fn params(&self) -> SwarmParams {
        let mut p = SwarmParams::draw(0);
        p.clients = 1;
        p.depth = u32::MAX;
        p.commands = self.groups.iter().map(Vec::len).sum::<usize>() as u32;
        p.think_us = 100;
        p.latency_us = (50, 50);
        p.slow_op = 0.0;
        p.io_error = 0.0;
        p.disk_full = 0.0;
        p.fsync_failure = 0.0;
        p.bit_rot = 0.0;
        p.read_only_after_error = 0.0;
        p.crash_every_us = 0;
        p.targeted_crash = 0.0;
        p.halt_loses_cache = 1.0;
        p.compaction_min_records = self.compaction_min_records;
        p.removal_concurrency = 2;
        p.big_batch = 0.0;
        p.disk_capacity = 0;
        p
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Client commands issued.
    pub commands: u64,
    /// Replies received.
    pub replies: u64,
    /// Crashes (random, targeted and after halts that lose the page cache).
    pub crashes: u64,
    /// Halts of the broker.
    pub halts: u64,
    /// Restarts of the broker.
    pub restarts: u64,
    /// Topics whose deletion was acknowledged (tombstone durable), each counted once.
    pub deletions_started: u64,
    /// Deletions whose completion was journaled.
    pub deletions_completed: u64,
    /// Storage operations executed.
    pub storage_ops: u64,
    /// Storage operations made slow (x100 latency).
    pub slow_ops: u64,
    /// Completions delivered after the completion of a later-issued operation.
    pub reordered_completions: u64,
    /// Produces whose batch spans more than one disk sector.
    pub large_batches: u64,
    /// Produces over the broker's batch or record limit (refused with a typed error).
    pub batches_over_limit: u64,
    /// Producer ids handed out (one broker).
    pub producer_ids: u64,
    /// Idempotent batches acknowledged, each once per incarnation.
    pub idempotent_batches: u64,
    /// Retries of idempotent batches answered with the positions of an earlier
    /// acknowledgement of their batch.
    pub duplicate_answers: u64,
    /// Of those, answered by a later life of the broker than the one that first
    /// acknowledged the batch (its state survived a crash or a halt).
    pub duplicates_across_crash: u64,
    /// Idempotent batches acknowledged after an earlier send of theirs was cut off by
    /// a crash or a halt.
    pub acked_after_cut_off: u64,
    /// Cluster: nodes (0: one broker on the simulated disk).
    pub nodes: u32,
    /// Cluster: store operations the store failed (nothing happened).
    pub store_errors: u64,
    /// Cluster: store operations that timed out or were cut off, their outcome unknown.
    pub unknown_outcomes: u64,
    /// Cluster: writes that landed after their node was told the outcome is unknown.
    pub late_landings: u64,
    /// Cluster: writes that landed and were answered with an error of unknown outcome
    /// (a 5xx after the write, as S3 may answer).
    pub errors_after_landing: u64,
    /// Cluster: listing pages cut short (or empty) though more keys followed.
    pub short_pages: u64,
    /// Cluster: keys outside the layout planted in the store before the run.
    pub foreign_keys: u64,
    /// Cluster: nodes whose clock was set off the others' (an offset and a drift).
    pub skewed_clocks: u64,
    /// Cluster: store operations held back so that later ones overtake them (`exhaust`).
    pub held_back: u64,
    /// Cluster: cuts of a node from the store.
    pub cuts: u64,
    /// Cluster: node crashes.
    pub node_crashes: u64,
    /// Cluster: conditional creates that found their key taken (journal or segment).
    pub lost_races: u64,
    /// Cluster: produces whose records rode in another's segment (group commit).
    pub rides: u64,
    /// Cluster: orphan segments the final reconciliation removed.
    pub orphans_removed: u64,
    /// Cluster: journal keys a delayed create wrote again after compaction deleted them.
    pub stale_landings: u64,
    /// Cluster: replies that say the store was unavailable or the outcome is unknown
    /// (a request's deadline, or a produce overtaken by its topic's delete).
    pub uncertain_replies: u64,
}

/// The outcome of one run.
#[derive(Debug)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// The hash of the whole trace.
    pub trace_hash: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time at the end.
    pub sim_time: Time,
    /// Counters.
    pub stats: RunStats,
    /// Faults the disk injected, by kind.
    pub faults: crate::disk::FaultCounters,
    /// Broken invariants.
    pub violations: Vec<Violation>,
    /// When the broker read a journal in which rot had struck both copies of a commit
    /// (or of the header): damage beyond what the journal's redundancy covers.
    pub journal_lost_to_rot: Option<Time>,
    /// Violations found at or after that moment: expected consequences of that damage,
    /// reported apart from `violations` and never counted as passing checks.
    pub excused: Vec<Violation>,
    /// The trace lines, if kept.
    pub trace: Vec<TraceLine>,
    /// The parameters the seed drew.
    pub params: SwarmParams,
    /// What a cluster run measured (`None` for one broker).
    pub cluster: Option<ClusterMetrics>,
}

/// The core's configuration a seed's parameters give, with `bug` planted (one broker
/// and every cluster node alike).
pub fn core_config(
    params: &SwarmParams,
    #[cfg_attr(not(feature = "planted-bugs"), allow(unused_variables))] bug: Option<crate::Bug>,
) -> Config {
    Config {
        compaction_min_records: params.compaction_min_records,
        compaction_ratio: 2,
        removal_concurrency: params.removal_concurrency,
        max_partitions: 16,
        max_batch_bytes: params.batch_limit,
        max_fetch_bytes: params.batch_limit,
        max_record_bytes: params.record_limit,
        #[cfg(feature = "planted-bugs")]
        bugs: bug.map(broker_core::planted::PlantedBugs::only).unwrap_or_default(),
        ..Config::default()
    }
}
