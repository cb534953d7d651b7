//! Exhaustive crash exploration: for a few fixed small workloads, crash right after
//! every storage operation under every crash mode of the simulated disk, recover, run
//! to quiescence and check.

use crate::disk::CrashMode;
use crate::runner::{run, RunOptions, Script};
use crate::violation::Violation;
use broker_core::{Command, ProduceRecord, TopicSettings};

/// The result of an exploration.
#[derive(Debug, Default)]
pub struct ExhaustReport {
    /// Workloads explored.
    pub workloads: usize,
    /// Crash states explored (runs with one crash each).
    pub states: u64,
    /// Violations, each with the state that produced it.
    pub violations: Vec<(String, Violation)>,
}

fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

fn produce(name: &str, values: &[(&str, Option<&str>)]) -> Command {
    let records = values
        .iter()
        .map(|(v, k)| ProduceRecord { key: k.map(|k| k.as_bytes().to_vec()), value: v.as_bytes().to_vec() })
        .collect();
    Command::Produce { topic: name.into(), partition: None, records }
}

fn delete(name: &str) -> Command {
    Command::DeleteTopic { name: name.into() }
}

fn fetch(name: &str) -> Command {
    Command::Fetch { topic: name.into(), partition: 0, offset: 0, max_records: 10 }
}

/// The fixed workloads: create, produce, delete and re-create; a delete while a fetch is
/// in flight; and enough churn to compact the journal (threshold 4 records).
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
    ]
}

/// Explores every crash state of every workload; `log` receives one line per workload.
pub fn explore(bug: Option<broker_core::planted::Bug>, log: &mut dyn FnMut(String)) -> ExhaustReport {
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
    report
}
