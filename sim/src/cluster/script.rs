//! Fixed cluster workloads and the one store fault the exhaustive mode injects into
//! one operation of them (`broker-sim exhaust`).

use crate::cluster::params::ClusterParams;
use crate::swarm::SwarmParams;
use crate::trace::TraceLine;
use broker_core::Command;

/// A fixed cluster workload: groups of commands from one client, each command to a
/// named node; the commands of a group at once, each group once every command of the
/// one before is answered (or cut off by its node's crash). No fault but the one of
/// [`crate::run::RunOptions::store_fault_at`], if any.
#[derive(Clone, Debug)]
pub struct ClusterScript {
    /// Its name.
    pub name: &'static str,
    /// Nodes sharing the store.
    pub nodes: u32,
    /// The groups: (node, command).
    pub groups: Vec<Vec<(usize, Command)>>,
    /// Compaction threshold of every node (0: never), as [`ClusterParams::compact_after_entries`].
    pub compact_after_entries: u64,
}

/// One-way latency of every store operation in a scripted run, in microseconds.
pub(crate) const SCRIPT_LATENCY_US: u64 = 100;
/// How long a scripted client waits before it looks again whether it may send.
pub(crate) const SCRIPT_THINK_US: u64 = 100;

impl ClusterScript {
    /// Fault-free parameters that run this script: a fixed latency, so operations reach
    /// the store in the order they are issued and every run repeats the same schedule;
    /// timeouts short enough that a run with one stays short; and tailing and the
    /// reconciler every few milliseconds, so that they run during the workload and their
    /// operations are struck too.
    pub fn params(&self) -> (SwarmParams, ClusterParams) {
        let cluster = ClusterParams {
            timeout_us: 20_000,
            down_for_us: (5_000, 5_000),
            tail_every_ms: 5,
            reconcile_every_ms: 5,
            compact_after_entries: self.compact_after_entries,
            ..ClusterParams::fault_free(self.nodes, (SCRIPT_LATENCY_US, SCRIPT_LATENCY_US))
        };
        let mut p = SwarmParams::draw(0);
        p.clients = 1;
        p.depth = u32::MAX;
        p.commands = self.groups.iter().map(Vec::len).sum::<usize>() as u32;
        p.think_us = SCRIPT_THINK_US;
        p.cluster = Some(cluster.clone());
        (p, cluster)
    }
}

/// The one fault [`crate::run::RunOptions::store_fault_at`] injects into the store operation it
/// names: the k-th to reach the store, counting every node's operations from 1 in the
/// order they arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFault {
    /// The node that issued it crashes right after the store carried it out.
    CrashAfter,
    /// That node crashes right before it reaches the store: it never happens.
    CrashBefore,
    /// It times out, its outcome unknown to the node; a write landed at once.
    TimeoutLanded,
    /// It times out; a write never lands.
    TimeoutLost,
    /// It times out; a write lands once the node has heard the outcome is unknown and
    /// had time for one round trip (to read the key back), before a retry arrives.
    TimeoutLandsLate,
    /// It times out; a write lands long after, once the node has retried and the run
    /// has moved on ([`LANDS_LAST_US`] after it arrived).
    TimeoutLandsLast,
    /// The store fails it: nothing happens.
    Fail,
    /// It reaches the store `by_us` microseconds later than it would, and is carried
    /// out then: the operations issued meanwhile, by either node, overtake it. So the
    /// schedule of concurrent operations is explored, not one order.
    Overtaken {
        /// How much later it arrives.
        by_us: u64,
    },
}

/// How long after it arrived a write of [`StoreFault::TimeoutLandsLast`] lands.
pub const LANDS_LAST_US: u64 = 1_000_000;

impl StoreFault {
    /// Every fault. An operation is overtaken by those issued within three round
    /// trips, within thirty, and within three hundred (a whole request of the other
    /// node, fences and all).
    pub const ALL: [StoreFault; 10] = [
        StoreFault::CrashAfter,
        StoreFault::CrashBefore,
        StoreFault::TimeoutLanded,
        StoreFault::TimeoutLost,
        StoreFault::TimeoutLandsLate,
        StoreFault::TimeoutLandsLast,
        StoreFault::Fail,
        StoreFault::Overtaken { by_us: 6 * SCRIPT_LATENCY_US },
        StoreFault::Overtaken { by_us: 60 * SCRIPT_LATENCY_US },
        StoreFault::Overtaken { by_us: 600 * SCRIPT_LATENCY_US },
    ];

    /// Whether the fault makes a state of its own for a write (`write`) or a read: a
    /// read has nothing to land, and crashing before it or after it is the same.
    pub fn applies(self, write: bool) -> bool {
        write
            || matches!(
                self,
                StoreFault::CrashAfter | StoreFault::TimeoutLost | StoreFault::Fail | StoreFault::Overtaken { .. }
            )
    }
}

/// The store operations of a run kept with its trace, in the order they reached the
/// store (the numbering of [`crate::run::RunOptions::store_fault_at`]): for each, whether it is a
/// write (a create or a delete).
pub fn arrived_ops(trace: &[TraceLine]) -> Vec<bool> {
    trace
        .iter()
        .filter(|l| l.kind == "store")
        .map(|l| matches!(l.detail.split_whitespace().nth(3), Some("create" | "delete")))
        .collect()
}
