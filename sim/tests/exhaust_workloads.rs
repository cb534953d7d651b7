//! The exhaustive mode's fixed workloads do what their names say when nothing crashes,
//! and the cluster workloads' store faults are explored, pass, and catch a planted bug.

use broker_sim::cluster::runner::{arrived_ops, StoreFault};
use broker_sim::exhaust::{cluster_workloads, explore_cluster, workloads};
use broker_sim::runner::{run, RunOptions, RunReport};

fn replies(name: &str) -> Vec<String> {
    let script = workloads().into_iter().find(|s| s.name == name).expect("workload exists");
    let report = run(&RunOptions { script: Some(script), keep_trace: true, ..RunOptions::default() });
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    report
        .trace
        .iter()
        .filter(|l| l.kind == "effect" && l.detail.starts_with("req"))
        .map(|l| l.detail.clone())
        .collect()
}

#[test]
fn create_produce_delete_recreate_succeeds_step_by_step() {
    let r = replies("create-produce-delete-recreate");
    assert_eq!(r.len(), 6, "{r:#?}");
    assert!(r[0].contains("Created { topic: TopicId(0) }"), "{}", r[0]);
    assert!(r[1].contains("Produced { topic: TopicId(0)"), "{}", r[1]);
    assert!(r[2].contains("DeleteAccepted { topic: TopicId(0) }"), "{}", r[2]);
    assert!(r[3].contains("Created { topic: TopicId(1) }"), "{}", r[3]);
    assert!(r[4].contains("Produced { topic: TopicId(1)"), "{}", r[4]);
    assert!(r[5].contains("Topics([TopicDescription { name: \"t0\", id: TopicId(1)"), "{}", r[5]);
}

/// Commits land and read back; a commit past the high watermark is refused and leaves
/// nothing; the deleted group is gone from the list; the topic created again starts
/// with no position, and a commit there at its log start lands.
#[test]
fn group_offsets_commit_read_delete_and_start_afresh() {
    let r = replies("group-offsets");
    assert_eq!(r.len(), 15, "{r:#?}");
    let answer = |req: u64| {
        let prefix = format!("req{req} ");
        r.iter().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no reply to req{req}: {r:#?}")).clone()
    };
    for req in [3, 4, 5] {
        assert!(answer(req).contains("OffsetsCommitted { topic: TopicId(0) }"), "{r:#?}");
    }
    assert!(answer(6).contains("Ok(Offsets t0 p0@2+4B:") && answer(6).contains(" p1@1+4B:"), "{}", answer(6));
    assert!(answer(7).contains("OffsetOutOfRange { offset: 3, high_watermark: 2 }"), "{}", answer(7));
    assert!(answer(8).contains("GroupDeleted"), "{}", answer(8));
    assert!(answer(9).contains(r#"Groups(["g0"])"#), "{}", answer(9));
    assert!(answer(11).contains("Created { topic: TopicId(1) }"), "{}", answer(11));
    assert!(answer(12).contains("Ok(Offsets t1 (none))"), "{}", answer(12));
    assert!(answer(13).contains("OffsetsCommitted { topic: TopicId(1) }"), "{}", answer(13));
    assert!(answer(14).contains("Ok(Offsets t1 p0@2+4B:"), "{}", answer(14));
    assert!(answer(15).contains(r#"Groups(["g0"])"#), "{}", answer(15));
}

/// Without a crash: the producer gets id 0; its first batch and the retry sent right
/// after it are answered with the same positions, and so are both retries sent once
/// they were; a gap is refused; the next batch follows; a fetch shows each record once.
#[test]
fn idempotent_producer_retries_are_answered_with_the_first_positions() {
    let r = replies("idempotent-producer");
    assert_eq!(r.len(), 11, "{r:#?}");
    let answer = |req: u64| {
        let prefix = format!("req{req} ");
        r.iter().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no reply to req{req}: {r:#?}")).clone()
    };
    assert!(answer(2).contains("ProducerInitialized { producer_id: 0, epoch: 0 }"), "{}", answer(2));
    let first = "positions: [RecordPosition { partition: 0, offset: 0 }, RecordPosition { partition: 0, offset: 1 }]";
    for req in [3, 4, 6] {
        assert!(answer(req).contains(first), "req{req}: {}", answer(req));
    }
    let third = "positions: [RecordPosition { partition: 0, offset: 2 }]";
    for req in [5, 7, 10] {
        assert!(answer(req).contains(third), "req{req}: {}", answer(req));
    }
    assert!(answer(8).contains("OutOfOrderSequence { producer_id: 0, expected: 3, got: 9 }"), "{}", answer(8));
    assert!(answer(9).contains("positions: [RecordPosition { partition: 0, offset: 3 }]"), "{}", answer(9));
    assert!(answer(11).contains("Fetched t0 4 records from 0"), "{}", answer(11));
}

/// With producers' states forgotten at every start, a crash between the producer's
/// first batches and their retries has a retry appended again: appended-once sees it.
#[cfg(feature = "planted-bugs")]
#[test]
fn idempotent_producer_workload_catches_state_not_recovered() {
    use broker_core::planted::Bug;
    use broker_sim::disk::CrashMode;
    use broker_sim::Checker;
    let script = workloads().into_iter().find(|s| s.name == "idempotent-producer").expect("workload exists");
    let bug = Some(Bug::ProducerStateNotRecovered);
    let base = RunOptions { script: Some(script), bug, ..RunOptions::default() };
    let clean = run(&base);
    assert!(clean.violations.is_empty(), "without a crash the bug shows nothing: {:?}", clean.violations);
    let caught = (1..=clean.stats.storage_ops).find(|k| {
        let r = run(&RunOptions { crash_at: Some((*k, CrashMode::DropAll)), seed: *k, ..base.clone() });
        r.violations.iter().any(|v| v.checker == Checker::AppendedOnce && v.detail.contains("appended again"))
    });
    assert!(caught.is_some(), "no crash point of the workload shows a batch appended again");
}

#[test]
fn delete_races_an_in_flight_fetch() {
    let r = replies("delete-while-fetch-in-flight");
    assert!(r.iter().any(|l| l.contains("Fetched t0 2 records from 0")), "{r:#?}");
    assert!(r.iter().any(|l| l.contains("DeleteAccepted { topic: TopicId(0) }")), "{r:#?}");
}

#[test]
fn compaction_workload_compacts() {
    let script = workloads().into_iter().find(|s| s.name == "compaction").expect("workload exists");
    let report = run(&RunOptions { script: Some(script), keep_trace: true, ..RunOptions::default() });
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let replaces = report.trace.iter().filter(|l| l.kind == "execute" && l.detail.contains("ReplaceJournal")).count();
    assert!(replaces >= 2, "expected compactions beyond the start-up rewrite, saw {replaces}");
    assert_eq!(report.stats.deletions_completed, 4);
}

#[test]
fn delete_is_issued_while_the_fetch_read_is_outstanding() {
    let script = workloads().into_iter().find(|s| s.name == "delete-while-fetch-in-flight").expect("workload exists");
    let report = run(&RunOptions { script: Some(script), keep_trace: true, ..RunOptions::default() });
    let pos = |needle: &str| report.trace.iter().position(|l| l.detail.contains(needle));
    let read_issued = pos("Read t0/p0").expect("a read is issued");
    let delete_cmd = pos("DeleteTopic").expect("the delete is issued");
    let read_done =
        report.trace.iter().position(|l| l.kind == "execute" && l.detail.contains("Read t0/p0")).expect("read runs");
    let remove = pos("RemoveLog t0/p0").expect("the log is removed");
    assert!(read_issued < delete_cmd && delete_cmd < read_done, "the delete must arrive while the read is in flight");
    assert!(read_done < remove, "no removal before the read completes");
}

fn cluster_run(name: &str, fault: Option<(u64, StoreFault)>) -> RunReport {
    let script = cluster_workloads().into_iter().find(|s| s.name == name).expect("workload exists");
    run(&RunOptions { cluster_script: Some(script), store_fault_at: fault, keep_trace: true, ..RunOptions::default() })
}

fn cluster_replies(report: &RunReport) -> Vec<String> {
    report.trace.iter().filter(|l| l.kind == "reply").map(|l| l.detail.clone()).collect()
}

#[test]
fn two_node_deletion_workload_deletes_during_io_and_recreates() {
    for name in ["2-node-delete-during-io", "2-node-delete-compacting"] {
        let report = cluster_run(name, None);
        assert!(report.violations.is_empty(), "{name}: {:?}", report.violations);
        let r = cluster_replies(&report);
        assert_eq!(r.len(), 12, "{name}: {r:#?}");
        let find = |needle: &str| r.iter().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{name}: {r:#?}"));
        assert!(find("req1 ").starts_with("node 0 req1 Ok(Created { topic: TopicId(1) })"), "{name}: {r:#?}");
        assert!(find("req2 ").starts_with("node 0 req2 Ok(Produced { topic: TopicId(1)"), "{name}: {r:#?}");
        assert!(find("req3 ").starts_with("node 0 req3 Ok(Produced { topic: TopicId(1)"), "{name}: {r:#?}");
        assert!(find("req4 ").starts_with("node 1 req4 Ok(Produced { topic: TopicId(1)"), "{name}: {r:#?}");
        // The produce and the fetches race the delete on the other node.
        assert!(find("req5 ").starts_with("node 1 req5 "), "{name}: {r:#?}");
        assert!(find("req6 ").starts_with("node 1 req6 "), "{name}: {r:#?}");
        assert!(find("req7 ").starts_with("node 1 req7 "), "{name}: {r:#?}");
        assert!(find("req8 ").starts_with("node 0 req8 Ok(DeleteAccepted { topic: TopicId(1) })"), "{name}: {r:#?}");
        assert!(find("req9 ").starts_with("node 1 req9 Ok(Created { topic: TopicId(4) })"), "{name}: {r:#?}");
        assert!(find("req10 ").starts_with("node 0 req10 Ok(Produced { topic: TopicId(4)"), "{name}: {r:#?}");
        assert!(find("req11 ").contains("id: TopicId(4)"), "{name}: {r:#?}");
        assert!(find("req12 ").starts_with("node 1 req12 Ok(Fetched t4 1 records from 0"), "{name}: {r:#?}");
        assert_eq!(report.stats.nodes, 2);
        assert_eq!(report.stats.deletions_completed, 1);
        // Both nodes remove the deleted incarnation: one completion wins the race.
        assert!(report.stats.lost_races >= 1, "{name}: {:?}", report.stats);
        let snapshots = report.trace.iter().filter(|l| l.kind == "store" && l.detail.contains(" create s/")).count();
        assert_eq!(snapshots > 0, name.ends_with("compacting"), "{name}: {snapshots} snapshots written");
    }
}

#[test]
fn every_store_fault_strikes_the_operation_it_names() {
    let name = "2-node-delete-during-io";
    let clean = cluster_run(name, None);
    let ops: Vec<String> = clean.trace.iter().filter(|l| l.kind == "store").map(|l| op_of(&l.detail)).collect();
    let writes = arrived_ops(&clean.trace);
    assert_eq!(ops.len(), writes.len());
    assert!(ops.len() >= 40, "only {} store operations", ops.len());
    assert!(writes.iter().filter(|w| **w).count() >= 10, "{ops:#?}");
    for (k, write) in (1..).zip(&writes) {
        for fault in StoreFault::ALL.into_iter().filter(|f| f.applies(*write)) {
            let r = cluster_run(name, Some((k, fault)));
            let state = format!("{fault:?} at op {k}");
            assert!(r.violations.is_empty(), "{state}: {:?}", r.violations);
            let line = r.trace.iter().filter(|l| l.kind == "store").nth(k as usize - 1).expect("op k arrives");
            assert_eq!(op_of(&line.detail), ops[k as usize - 1], "{state}: another operation was struck");
            assert!(line.detail.ends_with(&format!(", injected {fault:?})")), "{state}: {}", line.detail);
            let s = &r.stats;
            let seen = match fault {
                StoreFault::CrashAfter | StoreFault::CrashBefore => {
                    (s.node_crashes, s.unknown_outcomes, s.store_errors)
                }
                StoreFault::TimeoutLanded | StoreFault::TimeoutLost => (s.unknown_outcomes, s.node_crashes, 0),
                StoreFault::TimeoutLandsLate | StoreFault::TimeoutLandsLast => (s.unknown_outcomes, s.late_landings, 0),
                StoreFault::Fail => (s.store_errors, s.node_crashes, s.unknown_outcomes),
                StoreFault::Overtaken { .. } => (s.held_back, s.node_crashes, s.store_errors),
            };
            let want = match fault {
                StoreFault::TimeoutLandsLate | StoreFault::TimeoutLandsLast => (1, 1, 0),
                _ => (1, 0, 0),
            };
            assert_eq!(seen, want, "{state}: {s:?}");
        }
    }
}

/// A trace line of an operation reaching the store, without its fate.
fn op_of(detail: &str) -> String {
    detail[..detail.rfind(" (").unwrap_or(detail.len())].to_string()
}

#[test]
fn cluster_store_faults_explored_find_nothing() {
    let mut lines = Vec::new();
    let report = explore_cluster(None, &mut |l| lines.push(l));
    assert_eq!(report.cluster_workloads, 2);
    assert!(report.cluster_states >= 400, "only {} store-fault states: {lines:?}", report.cluster_states);
    assert!(report.violations.is_empty(), "{:#?}", &report.violations[..report.violations.len().min(5)]);
}

/// A journal append that takes another node's seq as its own (an overwrite, as far as
/// the node knows) passes the fault-free 2-node run, but the store faults catch it: a
/// timeout or a failure that delays one node's append lets the other's land first.
#[cfg(feature = "planted-bugs")]
#[test]
fn cluster_store_faults_catch_an_unconditional_append() {
    use broker_core::planted::Bug;
    use broker_sim::Checker;
    let report = explore_cluster(Some(Bug::ClusterUnconditionalAppend), &mut |_| {});
    let states: Vec<&String> = report.violations.iter().map(|(state, _)| state).collect();
    assert!(!states.is_empty(), "the exhaustive cluster workloads miss the unconditional append");
    assert!(states.iter().all(|s| !s.ends_with("without a fault")), "{states:?}");
    assert!(
        report.violations.iter().any(|(_, v)| v.checker == Checker::OneLiveIncarnation),
        "{:#?}",
        &report.violations[..report.violations.len().min(5)]
    );
}

/// Every planted cluster bug breaks some state of the cluster workloads (some only
/// with a fault injected: the unconditional append, skipping the fence, the reconciler
/// that deletes unknown ids, no tailing), but those whose failure needs what the two
/// fixed workloads lack, which the seeded runs bring about (`sim/tests/planted.rs`): a
/// delete while one incarnation of the name is being deleted and another live, a
/// request deadline passing during an append, a describe, two produces to one topic in
/// flight on one node at once (one rides in the other's object), nodes that poll so
/// often, in pages so small, that they are never idle together unless told to stop, and
/// a fetch on a node that has not read the topic's newest object (the workloads' fetch
/// runs where the topic was written, so its listing of a half-removed topic cannot
/// show an end below its offset).
#[cfg(feature = "planted-bugs")]
#[test]
fn cluster_store_faults_catch_every_cluster_bug() {
    use broker_core::planted::Bug;
    let seeded_only = [
        Bug::ClusterDeleteAcksDeleting,
        Bug::ClusterUnavailableAppend,
        Bug::ClusterDescribeCached,
        Bug::ClusterRiderAtLeaderBase,
        Bug::ClusterBackgroundNeverStops,
        Bug::ClusterUnfencedOutOfRange,
    ];
    for bug in Bug::ALL.into_iter().filter(|b| b.name().starts_with("cluster-") && !seeded_only.contains(b)) {
        let report = explore_cluster(Some(bug), &mut |_| {});
        assert!(!report.violations.is_empty(), "{bug} breaks no state of the cluster workloads");
    }
}

/// With committed offsets kept by topic name, the group workload's topic created again
/// shows the positions committed to the one before, with no crash needed.
#[cfg(feature = "planted-bugs")]
#[test]
fn group_offsets_workload_catches_offsets_kept_by_name() {
    use broker_core::planted::Bug;
    use broker_sim::Checker;
    let script = workloads().into_iter().find(|s| s.name == "group-offsets").expect("workload exists");
    let bug = Some(Bug::GroupOffsetsKeyedByName);
    let report = run(&RunOptions { script: Some(script), bug, ..RunOptions::default() });
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.checker == Checker::GroupOffsets && v.detail.contains("another incarnation of the name")),
        "{:#?}",
        report.violations
    );
}
