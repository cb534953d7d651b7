//! The executor kit against broker-core's `Executor` over `MemFs` (with and without
//! crashes) and over the crashable reference file system.

mod crashfs;

use broker_conformance::{check_executor, executor_checks, AlwaysDurable, ExecutorOver, Fresh};
use broker_core::MemFs;
use crashfs::Crashing;

fn plain_checks() -> Vec<&'static str> {
    executor_checks().into_iter().filter(|c| !c.needs_crash).map(|c| c.name).collect()
}

#[test]
fn the_executor_over_memfs_conforms_and_its_crash_checks_are_skipped() {
    let report = check_executor(&mut ExecutorOver(Fresh(MemFs::new)));
    report.assert_conforms();
    assert_eq!(report.passed(), plain_checks(), "{report}");
    let crash: Vec<&str> = executor_checks().into_iter().filter(|c| c.needs_crash).map(|c| c.name).collect();
    assert_eq!(report.skipped(), crash, "{report}");
    assert!(plain_checks().len() >= 10 && crash.len() >= 5, "{report}");
    assert!(executor_checks().iter().all(|c| c.needs_fault.is_none()));
    assert!(report.to_string().starts_with("executor conformance of "), "{report}");
}

#[test]
fn the_executor_over_memfs_kept_whole_at_a_crash_passes_every_check() {
    let report = check_executor(&mut ExecutorOver(AlwaysDurable(Fresh(MemFs::new))));
    report.assert_conforms();
    assert_eq!(report.passed().len(), executor_checks().len(), "{report}");
}

#[test]
fn the_executor_over_the_crashable_reference_passes_every_check() {
    let report = check_executor(&mut ExecutorOver(Crashing::new(&[])));
    report.assert_conforms();
    assert_eq!(report.passed().len(), executor_checks().len(), "{report}");
}
