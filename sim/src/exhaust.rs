//! Exhaustive crash exploration: for a few fixed small workloads, crash right after
//! every storage operation under every crash mode of the simulated disk, recover, run
//! to quiescence and check.
//!
//! Then the same for a cluster: for fixed 2-node workloads around deletion (one of them
//! compacting the journal), strike every operation that reaches the shared store, one
//! per run, with every [`StoreFault`] that makes sense for it (a crash of its node after
//! or before it; a timeout whose write landed, never lands, lands before the node's
//! retry or long after; a failure), run to quiescence and check.

use crate::cluster::runner::{arrived_ops, ClusterScript, StoreFault};
use crate::disk::CrashMode;
use crate::run::{RunOptions, Script};
use crate::runner::run;
use crate::violation::Violation;
use broker_core::{Command, CommittedOffset, ProduceRecord, ProducerBatch, TopicSettings};

/// The result of an exploration.
#[derive(Debug, Default)]
pub struct ExhaustReport {
    /// One-broker workloads explored.
    pub workloads: usize,
    /// Crash states explored (runs with one crash each).
    pub states: u64,
    /// Cluster workloads explored.
    pub cluster_workloads: usize,
    /// Store-fault states explored (cluster runs with one fault each).
    pub cluster_states: u64,
    /// Violations, each with the state that produced it.
    pub violations: Vec<(String, Violation)>,
}

fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

fn produce(name: &str, values: &[(&str, Option<&str>)]) -> Command {
    let records = values
        .iter()
        .map(|(v, k)| ProduceRecord { key: k.map(|k| k.as_bytes().to_vec()), value: v.as_bytes().to_vec().into() })
        .collect();
    Command::Produce { topic: name.into(), partition: None, records }
}

fn delete(name: &str) -> Command {
    Command::DeleteTopic { name: name.into() }
}

fn fetch(name: &str) -> Command {
    fetch_at(name, 0, 0)
}

fn fetch_at(name: &str, partition: u32, offset: u64) -> Command {
    Command::Fetch { topic: name.into(), partition, offset, max_records: 10, max_bytes: None }
}

fn commit(group: &str, name: &str, positions: &[(u32, u64)]) -> Command {
    let offsets = positions
        .iter()
        .map(|&(partition, offset)| CommittedOffset { partition, offset, metadata: format!("{group}@{offset}") })
        .collect();
    Command::CommitOffsets { group: group.into(), topic: name.into(), incarnation: None, offsets }
}

fn read_offsets(group: &str, name: &str) -> Command {
    Command::FetchOffsets { group: group.into(), topic: name.into() }
}

/// A batch of producer 0 (the first id a broker hands out), epoch 0, to partition 0.
fn idempotent(name: &str, first_sequence: u32, values: &[&str]) -> Command {
    Command::ProduceIdempotent {
        topic: name.into(),
        partition: 0,
        producer: ProducerBatch { producer_id: 0, epoch: 0, first_sequence },
        records: values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect(),
    }
}

/// The fixed workloads: create, produce, delete and re-create; a delete while a fetch is
/// in flight; enough churn to compact the journal (threshold 4 records); and consumer
/// groups committing, reading, deleted and listed around a topic's deletion and
/// re-creation; an idempotent producer whose batches are retried in flight and after
/// whatever crash came before (compacting after a few records, so that a snapshot holds
/// its state). (`k1` hashes to partition 1 of 2, `k3` to partition 0.)
pub fn workloads() -> Vec<Script> {
    let mut compaction = Vec::new();
    for i in 0..4 {
        compaction.push(vec![create("t0", 2)]);
        compaction.push(vec![produce("t0", &[(&format!("c{i}")[..], None)])]);
        compaction.push(vec![delete("t0")]);
    }
    compaction.push(vec![create("t1", 1)]);
    compaction.push(vec![produce("t1", &[("last", Some("k"))])]);
    vec![
        Script {
            name: "create-produce-delete-recreate",
            groups: vec![
                vec![create("t0", 2)],
                vec![produce("t0", &[("a", Some("k1")), ("b", None), ("c", None)])],
                vec![delete("t0")],
                vec![create("t0", 1)],
                vec![produce("t0", &[("d", None)])],
                vec![Command::ListTopics],
            ],
            compaction_min_records: 1_000,
        },
        Script {
            name: "delete-while-fetch-in-flight",
            groups: vec![
                vec![create("t0", 1)],
                vec![produce("t0", &[("a", None), ("b", None)])],
                vec![fetch("t0"), delete("t0")],
                vec![create("t0", 1)],
                vec![produce("t0", &[("c", None)])],
            ],
            compaction_min_records: 1_000,
        },
        Script { name: "compaction", groups: compaction, compaction_min_records: 4 },
        Script {
            name: "group-offsets",
            groups: vec![
                vec![create("t0", 2)],
                vec![produce("t0", &[("a", Some("k3")), ("b", Some("k3")), ("c", Some("k1"))])],
                vec![commit("g0", "t0", &[(0, 1), (1, 1)]), commit("g1", "t0", &[(1, 0)])],
                vec![commit("g0", "t0", &[(0, 2)]), read_offsets("g0", "t0"), commit("g1", "t0", &[(0, 3)])],
                vec![Command::DeleteGroup { group: "g1".into() }, Command::ListGroups],
                vec![delete("t0")],
                vec![create("t0", 1)],
                vec![read_offsets("g0", "t0"), commit("g0", "t0", &[(0, 2)])],
                vec![read_offsets("g0", "t0"), Command::ListGroups],
            ],
            compaction_min_records: 1_000,
        },
        Script {
            name: "idempotent-producer",
            groups: vec![
                vec![create("t0", 1)],
                vec![Command::InitProducer],
                vec![
                    idempotent("t0", 0, &["i1-a", "i2-b"]),
                    idempotent("t0", 0, &["i1-a", "i2-b"]),
                    idempotent("t0", 2, &["i3-c"]),
                ],
                vec![idempotent("t0", 0, &["i1-a", "i2-b"]), idempotent("t0", 2, &["i3-c"])],
                vec![idempotent("t0", 9, &["i4-gap"]), idempotent("t0", 3, &["i5-d"])],
                vec![idempotent("t0", 2, &["i3-c"]), fetch("t0")],
            ],
            compaction_min_records: 6,
        },
    ]
}

/// The fixed cluster workloads. Node 0 creates `t0` (no grace delay: removal starts at
/// once) and writes both partitions, then a second segment of partition 1; node 1 writes
/// a third, learning that partition's end but not partition 0's. Then node 1 produces
/// to both partitions (one at its known end, the other listed and read: the read may
/// meet the removal after the write landed) and fetches partition 0 from the start and
/// partition 1 past its first two segments (a removal half done may have left only the
/// first), while node 0 deletes `t0`. Node 1 creates it again and produces to it, and
/// both list and fetch. Then the same with compaction after every two journal entries.
/// (`k1` hashes to partition 1, `k3` to partition 0.)
pub fn cluster_workloads() -> Vec<ClusterScript> {
    let groups = vec![
        vec![(0, create("t0", 2))],
        vec![(0, produce("t0", &[("a", Some("k1")), ("b", Some("k3"))]))],
        vec![(0, produce("t0", &[("a2", Some("k1"))]))],
        vec![(1, produce("t0", &[("a3", Some("k1"))]))],
        vec![
            (1, produce("t0", &[("c", Some("k3")), ("e", Some("k1"))])),
            (1, fetch("t0")),
            (1, fetch_at("t0", 1, 2)),
            (0, delete("t0")),
        ],
        vec![(1, create("t0", 1))],
        vec![(0, produce("t0", &[("d", None)]))],
        vec![(0, Command::ListTopics), (1, fetch("t0"))],
    ];
    vec![
        ClusterScript { name: "2-node-delete-during-io", nodes: 2, groups: groups.clone(), compact_after_entries: 0 },
        ClusterScript { name: "2-node-delete-compacting", nodes: 2, groups, compact_after_entries: 2 },
    ]
}

/// Explores every crash state of every one-broker workload, then every store-fault
/// state of every cluster workload; `log` receives one line per workload.
pub fn explore(bug: Option<crate::Bug>, log: &mut dyn FnMut(String)) -> ExhaustReport {
    let mut report = ExhaustReport::default();
    for script in workloads() {
        report.workloads += 1;
        let base = RunOptions { seed: 0, bug, script: Some(script.clone()), ..RunOptions::default() };
        let clean = run(&base);
        for v in clean.violations {
            report.violations.push((format!("{} without a crash", script.name), v));
        }
        let ops = clean.stats.storage_ops;
        let mut states = 0;
        for k in 1..=ops {
            for mode in CrashMode::ALL {
                let opts = RunOptions { crash_at: Some((k, mode)), seed: k, ..base.clone() };
                let r = run(&opts);
                states += 1;
                for v in r.violations {
                    report.violations.push((format!("{} crash after op {k} ({mode:?})", script.name), v));
                }
            }
        }
        report.states += states;
        log(format!("{:<32} {ops:>4} storage ops, {states:>5} crash states", script.name));
    }
    explore_cluster_into(&mut report, bug, log);
    report
}

/// Explores every store-fault state of the cluster workloads only; `log` receives one
/// line per workload.
pub fn explore_cluster(bug: Option<crate::Bug>, log: &mut dyn FnMut(String)) -> ExhaustReport {
    let mut report = ExhaustReport::default();
    explore_cluster_into(&mut report, bug, log);
    report
}

/// For each cluster workload: runs it without a fault, numbers the operations that
/// reached the store, then runs it once per operation and fault that applies to it.
/// Up to the struck operation every run repeats the fault-free one (the same seed and a
/// fixed latency), so the k-th operation is the same in both.
fn explore_cluster_into(report: &mut ExhaustReport, bug: Option<crate::Bug>, log: &mut dyn FnMut(String)) {
    for script in cluster_workloads() {
        report.cluster_workloads += 1;
        let base = RunOptions { seed: 0, bug, cluster_script: Some(script.clone()), ..RunOptions::default() };
        let clean = run(&RunOptions { keep_trace: true, ..base.clone() });
        for v in clean.violations {
            report.violations.push((format!("{} without a fault", script.name), v));
        }
        let ops = arrived_ops(&clean.trace);
        let mut states = 0;
        for (k, write) in (1..).zip(&ops) {
            for fault in StoreFault::ALL.into_iter().filter(|f| f.applies(*write)) {
                let r = run(&RunOptions { store_fault_at: Some((k, fault)), ..base.clone() });
                states += 1;
                for v in r.violations {
                    report.violations.push((format!("{} {fault:?} at store op {k}", script.name), v));
                }
            }
        }
        report.cluster_states += states;
        log(format!("{:<32} {:>4} store ops,   {states:>5} fault states", script.name, ops.len()));
    }
}
