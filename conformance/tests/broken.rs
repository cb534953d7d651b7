//! The kit against a crashable reference file system (it must pass every check) and
//! against broken variants of it (each must fail exactly the checks its bug breaks).

mod crashfs;

use broker_conformance::{check_file_system, checks, Outcome};
use crashfs::{Bug, Crashing};

#[test]
fn the_reference_passes_every_check_with_none_skipped() {
    let report = check_file_system(&mut Crashing::new(&[]));
    report.assert_conforms();
    assert_eq!(report.passed().len(), checks().len(), "{report}");
}

/// Each bug, and exactly the checks it must fail (every other check passes).
const EXPECTED: &[(Bug, &[&str])] = &[
    // The brief's two: created, renamed and removed entries vanish at a crash...
    (
        Bug::SkipDirSync,
        &[
            "synced-data-survives-crash",
            "unsynced-write-spares-synced-data",
            "create-durable-after-sync-dir",
            "remove-durable-after-sync-dir",
            "rename-durable-after-sync-dir",
            "rename-atomic-at-crash",
            "rewrite-after-failed-sync-durable",
            "dir-sync-after-failure-durable",
        ],
    ),
    // ...and a failed sync whose retry says Ok though the data is lost.
    (Bug::StickyFailedSync, &["rewrite-after-failed-sync-durable"]),
    (Bug::SwallowFailedSync, &["failed-sync-reported"]),
    (Bug::SwallowFailedDirSync, &["failed-dir-sync-reported"]),
    (Bug::FailedDirSyncLosesEntries, &["dir-sync-after-failure-durable"]),
    (Bug::CreateTruncates, &["create-is-idempotent"]),
    (Bug::RemoveAbsentOk, &["remove-and-not-found"]),
    (Bug::StaleAfterRemove, &["remove-and-not-found"]),
    (Bug::LenOfAbsentIsZero, &["remove-and-not-found", "absent-file-errors", "rename-replaces"]),
    (Bug::WriteCreates, &["absent-file-errors"]),
    (
        Bug::WriteAppends,
        &[
            "write-then-read",
            "write-extends-with-zeros",
            "len-and-truncate",
            "large-io",
            "rewrite-after-failed-sync-durable",
            "dir-sync-after-failure-durable",
        ],
    ),
    (Bug::GarbageExtension, &["write-extends-with-zeros", "len-and-truncate", "large-io"]),
    (Bug::ReadPadsWithZeros, &["read-past-end-is-short", "large-io"]),
    (Bug::ShortReads, &["read-all", "large-io"]),
    (Bug::UnsortedList, &["remove-and-not-found", "list-sorted-and-complete", "rename-replaces"]),
    (
        Bug::RenameKeepsSource,
        &["list-sorted-and-complete", "rename-replaces", "rename-durable-after-sync-dir", "rename-atomic-at-crash"],
    ),
    (Bug::NonAtomicRename, &["rename-atomic-at-crash"]),
    (Bug::SyncIgnoresTruncate, &["synced-data-survives-crash"]),
    (Bug::AllocateTruncates, &["allocate-grows-with-zeros"]),
    (Bug::CrashTearsBlock, &["unsynced-write-spares-synced-data"]),
];

#[test]
fn each_broken_file_system_fails_exactly_the_checks_its_bug_breaks() {
    for (bug, want) in EXPECTED {
        let report = check_file_system(&mut Crashing::new(&[*bug]));
        assert_eq!(report.failed(), *want, "{bug:?}:\n{report}");
        assert_eq!(report.passed().len() + want.len(), checks().len(), "{bug:?}: nothing skipped\n{report}");
    }
}

#[test]
fn every_check_fails_for_some_broken_file_system() {
    for check in checks() {
        assert!(
            EXPECTED.iter().any(|(_, failed)| failed.contains(&check.name)),
            "no broken file system fails {}: a check that cannot fail proves nothing",
            check.name
        );
    }
}

#[test]
fn a_directory_sync_that_does_nothing_loses_created_files_and_the_report_says_so() {
    let report = check_file_system(&mut Crashing::new(&[Bug::SkipDirSync]));
    let Some(Outcome::Failed(seen)) = report.outcome("create-durable-after-sync-dir") else { panic!("{report}") };
    assert!(seen.contains("0000000000000001-00000000.log") && seen.contains("is gone after a crash"), "{seen}");
    let text = report.to_string();
    assert!(text.contains("FAIL  create-durable-after-sync-dir"), "{text}");
    assert!(text.contains("contract: after create, write_at, sync_file and sync_dir"), "{text}");
    let panic = std::panic::catch_unwind(|| report.assert_conforms()).expect_err("it does not conform");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    for name in report.failed() {
        assert!(message.contains(&format!("FAIL  {name}")), "{message}");
    }
}

#[test]
fn a_failed_sync_reported_durable_on_retry_is_caught() {
    let report = check_file_system(&mut Crashing::new(&[Bug::StickyFailedSync]));
    let Some(Outcome::Failed(seen)) = report.outcome("rewrite-after-failed-sync-durable") else { panic!("{report}") };
    assert!(seen.contains("a successful sync_file and a crash, read_all(\"a.log\")"), "{seen}");
    // The failure itself was reported: only the retry lies.
    assert_eq!(report.outcome("failed-sync-reported"), Some(&Outcome::Passed));
}

#[test]
fn a_file_system_that_panics_fails_the_checks_it_panics_in_and_the_others_still_run() {
    let report = check_file_system(&mut Crashing::new(&[Bug::PanicsOnAbsentRemove]));
    let Some(Outcome::Failed(seen)) = report.outcome("remove-and-not-found") else { panic!("{report}") };
    assert!(seen.starts_with("panicked: remove of an absent file"), "{seen}");
    assert_eq!(report.failed(), ["remove-and-not-found"], "{report}");
}
