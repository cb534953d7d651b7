//! The exhaustive mode's fixed workloads do what their names say when nothing crashes.

use broker_sim::exhaust::workloads;
use broker_sim::runner::{run, RunOptions};

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
