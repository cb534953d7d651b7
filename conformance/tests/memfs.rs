//! The kit against broker-core's `MemFs`: every operation is durable at once, so a
//! crash that keeps it whole is a correct one, and every durability check passes.

use broker_conformance::{check_file_system, checks, AlwaysDurable, Fresh};
use broker_core::MemFs;

#[test]
fn memfs_conforms_and_its_crash_and_fault_checks_are_skipped_without_crash_support() {
    let report = check_file_system(&mut Fresh(MemFs::new));
    report.assert_conforms();
    let all = checks();
    let plain: Vec<&str> = all.iter().filter(|c| !c.needs_crash && c.needs_fault.is_none()).map(|c| c.name).collect();
    let other: Vec<&str> = all.iter().filter(|c| c.needs_crash || c.needs_fault.is_some()).map(|c| c.name).collect();
    assert_eq!(report.passed(), plain);
    assert_eq!(report.skipped(), other);
    assert!(plain.len() >= 10 && other.len() >= 9, "{report}");
}

#[test]
fn memfs_kept_whole_at_a_crash_passes_the_durability_checks() {
    let report = check_file_system(&mut AlwaysDurable(Fresh(MemFs::new)));
    report.assert_conforms();
    let all = checks();
    let faults: Vec<&str> = all.iter().filter(|c| c.needs_fault.is_some()).map(|c| c.name).collect();
    assert_eq!(report.skipped(), faults, "{report}");
    assert_eq!(report.passed().len(), all.len() - faults.len());
}
