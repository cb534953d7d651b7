//! The executor kit against broken executors: broker-core's `Executor` over the
//! crashable reference file system, wrapped so that one operation breaks the runtime
//! contract. Each must fail exactly the checks its bug breaks.

mod crashfs;

use broker_conformance::{check_executor, executor_checks, ExecutorOver, ExecutorSubject, Outcome, Subject};
use broker_core::{Executor, FileSystem, JournalRecord, LogId, OpOutput, OpResult, StorageError, StorageOp};
use crashfs::{Bug, CrashFs, Crashing};
use std::collections::BTreeMap;

/// A bug of a broken executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExecBug {
    /// ReadJournal without a journal returns an empty one, `Journal(Some([]))`.
    JournalNeverNone,
    /// ReplaceJournal writes the new contents over the journal in place (synced, its
    /// entry too) without cutting it: a shorter journal keeps the old one's tail.
    ReplaceJournalInPlace,
    /// AppendJournal replaces the journal with its commit (laid out at its start).
    AppendJournalOverwrites,
    /// CreateLog of an existing log empties it (removes it and creates it anew).
    CreateLogTruncates,
    /// OpenLog of an absent log creates it.
    OpenLogCreates,
    /// Read returns every record without its key.
    ReadDropsKeys,
    /// Read returns everything from the offset on, whatever `max_records`.
    ReadIgnoresMaxRecords,
    /// Read returns as many records as `max_records` allows, whatever `max_bytes`.
    ReadIgnoresMaxBytes,
    /// OpenLog cuts every record, acknowledged or not, and reports `acked_end` as the
    /// next offset all the same.
    OpenLogCutsAcked,
    /// OpenLog ignores `acked_end`: it opens the log at the end of what it appended.
    OpenLogIgnoresAcked,
    /// RemoveLog of an absent log fails with NotFound.
    RemoveLogAbsentFails,
    /// SyncLog returns Done and syncs nothing.
    SyncLogDoesNothing,
    /// SyncJournal returns Done and syncs nothing.
    SyncJournalDoesNothing,
    /// ReplaceJournal skips its directory fsyncs (the rename may not be durable).
    ReplaceJournalSkipsDirSync,
    /// CreateLog skips its directory fsync.
    CreateLogSkipsDirSync,
    /// RemoveLog skips its directory fsync.
    RemoveLogSkipsDirSync,
}

/// A broken executor: the real one, and the end of what was appended to each log (for
/// [`ExecBug::OpenLogIgnoresAcked`]).
struct BrokenExec {
    inner: Executor<CrashFs>,
    appended: BTreeMap<LogId, u64>,
}

/// Broken executors over the crashable reference file system.
struct BrokenExecutors {
    fs: Crashing,
    bug: ExecBug,
}

impl BrokenExecutors {
    fn new(bug: ExecBug) -> BrokenExecutors {
        BrokenExecutors { fs: Crashing::new(&[]), bug }
    }
}

/// Runs `op` with the file system's directory fsync doing nothing.
fn without_dir_sync(exec: &mut Executor<CrashFs>, op: &StorageOp) -> OpResult {
    exec.fs_mut().set_bug(Bug::SkipDirSync, true);
    let r = exec.execute(op);
    exec.fs_mut().set_bug(Bug::SkipDirSync, false);
    r
}

/// A new executor over the same file system (forgetting what the old one cached).
fn renew(exec: &mut Executor<CrashFs>) {
    let old = std::mem::replace(exec, Executor::new(CrashFs::new(&[])));
    *exec = Executor::new(old.into_fs());
}

impl ExecutorSubject for BrokenExecutors {
    type Exec = BrokenExec;

    fn fresh(&mut self) -> BrokenExec {
        BrokenExec { inner: Executor::new(self.fs.fresh()), appended: BTreeMap::new() }
    }

    fn crash(&mut self, exec: BrokenExec) -> Option<BrokenExec> {
        let fs = self.fs.crash(exec.inner.into_fs())?;
        Some(BrokenExec { inner: Executor::new(fs), appended: exec.appended })
    }

    fn execute(&mut self, exec: &mut BrokenExec, op: &StorageOp) -> OpResult {
        use ExecBug::*;
        let BrokenExec { inner, appended } = exec;
        match (self.bug, op) {
            (JournalNeverNone, StorageOp::ReadJournal) => match inner.execute(op)? {
                OpOutput::Journal(None) => Ok(OpOutput::Journal(Some(Vec::new()))),
                out => Ok(out),
            },
            (ReplaceJournalInPlace, StorageOp::ReplaceJournal { contents, .. }) => {
                let fs = inner.fs_mut();
                fs.create("journal")?;
                fs.write_at("journal", 0, contents)?;
                fs.sync_file("journal")?;
                fs.sync_dir()?;
                renew(inner);
                Ok(OpOutput::Done)
            }
            (AppendJournalOverwrites, StorageOp::AppendJournal { epoch, records }) => {
                let contents = JournalRecord::encode_commit(records, *epoch, 0);
                inner.execute(&StorageOp::ReplaceJournal { contents, keep_old: false })
            }
            (CreateLogTruncates, StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false }) => {
                inner.execute(&StorageOp::RemoveLog { log: *log })?;
                inner.execute(op)
            }
            (OpenLogCreates, StorageOp::OpenLog { log, .. }) => {
                inner.execute(&StorageOp::CreateLog { log: *log, first_offset: 0, keep_whole_tail: false })?;
                inner.execute(op)
            }
            (ReadDropsKeys, StorageOp::Read { .. }) => match inner.execute(op)? {
                OpOutput::Records(mut records) => {
                    records.iter_mut().for_each(|r| r.key = None);
                    Ok(OpOutput::Records(records))
                }
                out => Ok(out),
            },
            (ReadIgnoresMaxRecords, StorageOp::Read { log, offset, max_bytes, .. }) => inner
                .execute(&StorageOp::Read { log: *log, offset: *offset, max_records: u32::MAX, max_bytes: *max_bytes }),
            (ReadIgnoresMaxBytes, StorageOp::Read { log, offset, max_records, .. }) => {
                inner.execute(&StorageOp::Read {
                    log: *log,
                    offset: *offset,
                    max_records: *max_records,
                    max_bytes: u64::MAX,
                })
            }
            (OpenLogCutsAcked, StorageOp::OpenLog { log, acked_end, .. }) => {
                inner.execute(&StorageOp::OpenLog {
                    log: *log,
                    acked_end: 0,
                    first_offset: 0,
                    keep_whole_tail: false,
                })?;
                Ok(OpOutput::Opened { next_offset: *acked_end, damaged: Vec::new(), tail_cut: None })
            }
            (OpenLogIgnoresAcked, StorageOp::OpenLog { log, acked_end, .. }) => {
                let end = appended.get(log).copied().unwrap_or(*acked_end);
                inner.execute(&StorageOp::OpenLog {
                    log: *log,
                    acked_end: end,
                    first_offset: 0,
                    keep_whole_tail: false,
                })
            }
            (RemoveLogAbsentFails, StorageOp::RemoveLog { log }) => match inner.execute(&StorageOp::ListLogs)? {
                OpOutput::Logs(logs) if !logs.contains(log) => Err(StorageError::NotFound(log.file_name())),
                _ => inner.execute(op),
            },
            (SyncLogDoesNothing, StorageOp::SyncLog { .. }) | (SyncJournalDoesNothing, StorageOp::SyncJournal) => {
                Ok(OpOutput::Done)
            }
            (ReplaceJournalSkipsDirSync, StorageOp::ReplaceJournal { .. })
            | (CreateLogSkipsDirSync, StorageOp::CreateLog { .. })
            | (RemoveLogSkipsDirSync, StorageOp::RemoveLog { .. }) => without_dir_sync(inner, op),
            (_, op) => {
                let r = inner.execute(op);
                match op {
                    StorageOp::Append { log, records } if r.is_ok() => {
                        if let Some(last) = records.last() {
                            appended.insert(*log, last.offset + 1);
                        }
                    }
                    StorageOp::RemoveLog { log } => {
                        appended.remove(log);
                    }
                    _ => {}
                }
                r
            }
        }
    }
}

/// Each bug, and exactly the checks it must fail (every other check passes).
const EXPECTED: &[(ExecBug, &[&str])] = &[
    (ExecBug::JournalNeverNone, &["fresh-store-is-empty"]),
    // The shorter replacement keeps the old tail: wrong contents, and appends after it
    // land past the stale tail; a later replacement is read back wrong after a crash.
    (
        ExecBug::ReplaceJournalInPlace,
        &["replace-journal-then-read", "append-journal-appends", "replaced-journal-survives-crash"],
    ),
    (ExecBug::AppendJournalOverwrites, &["append-journal-appends", "synced-journal-appends-survive-crash"]),
    (ExecBug::CreateLogTruncates, &["create-log-idempotent-and-listed"]),
    // A removed log comes back when it is opened.
    (
        ExecBug::OpenLogCreates,
        &["open-absent-log-not-found", "remove-log-idempotent", "removed-log-stays-gone-after-crash"],
    ),
    // Every check that reads keyed records back.
    (
        ExecBug::ReadDropsKeys,
        &[
            "create-log-idempotent-and-listed",
            "append-sync-read",
            "read-honours-max-records",
            "read-honours-max-bytes",
            "open-log-at-acked-end",
            "open-log-cuts-unacknowledged",
            "open-log-reports-missing-acked",
            "remove-log-idempotent",
            "synced-appends-survive-crash",
            "created-log-survives-crash",
        ],
    ),
    (ExecBug::ReadIgnoresMaxRecords, &["append-sync-read", "read-honours-max-records"]),
    (ExecBug::ReadIgnoresMaxBytes, &["read-honours-max-bytes"]),
    // Acknowledged records are gone, and the next append (at acked_end) is refused.
    (
        ExecBug::OpenLogCutsAcked,
        &[
            "create-log-idempotent-and-listed",
            "open-log-at-acked-end",
            "open-log-cuts-unacknowledged",
            "open-log-reports-missing-acked",
            "synced-appends-survive-crash",
        ],
    ),
    // Passes open-log-at-acked-end, where acked_end is the end of what was appended.
    (
        ExecBug::OpenLogIgnoresAcked,
        &["open-log-cuts-unacknowledged", "open-log-reports-missing-acked", "synced-appends-survive-crash"],
    ),
    (ExecBug::RemoveLogAbsentFails, &["remove-log-idempotent"]),
    (ExecBug::SyncLogDoesNothing, &["synced-appends-survive-crash"]),
    (ExecBug::SyncJournalDoesNothing, &["synced-journal-appends-survive-crash"]),
    // The journal's entry may vanish at a crash, with the appends to it.
    (ExecBug::ReplaceJournalSkipsDirSync, &["replaced-journal-survives-crash", "synced-journal-appends-survive-crash"]),
    // The log may vanish at a crash, with its synced records.
    (ExecBug::CreateLogSkipsDirSync, &["synced-appends-survive-crash", "created-log-survives-crash"]),
    (ExecBug::RemoveLogSkipsDirSync, &["removed-log-stays-gone-after-crash"]),
];

#[test]
fn each_broken_executor_fails_exactly_the_checks_its_bug_breaks() {
    for (bug, want) in EXPECTED {
        let report = check_executor(&mut BrokenExecutors::new(*bug));
        assert_eq!(report.failed(), *want, "{bug:?}:\n{report}");
        assert_eq!(report.passed().len() + want.len(), executor_checks().len(), "{bug:?}: nothing skipped\n{report}");
    }
}

#[test]
fn every_executor_check_fails_for_some_broken_executor() {
    for check in executor_checks() {
        assert!(
            EXPECTED.iter().any(|(_, failed)| failed.contains(&check.name)),
            "no broken executor fails {}: a check that cannot fail proves nothing",
            check.name
        );
    }
}

#[test]
fn a_log_sync_that_does_nothing_loses_acknowledged_records_and_the_report_says_so() {
    let report = check_executor(&mut BrokenExecutors::new(ExecBug::SyncLogDoesNothing));
    let Some(Outcome::Failed(seen)) = report.outcome("synced-appends-survive-crash") else { panic!("{report}") };
    assert!(seen.contains("OpenLog(t15/p0, acked_end: 5) reported next_offset 5 and damaged [0..5]"), "{seen}");
    let text = report.to_string();
    assert!(text.starts_with("executor conformance of "), "{text}");
    assert!(text.contains("FAIL  synced-appends-survive-crash\n      contract: after Append and SyncLog"), "{text}");
}

#[test]
fn an_open_that_ignores_acked_end_is_caught_without_a_crash() {
    let report = check_executor(&mut BrokenExecutors::new(ExecBug::OpenLogIgnoresAcked));
    let Some(Outcome::Failed(seen)) = report.outcome("open-log-cuts-unacknowledged") else { panic!("{report}") };
    assert!(seen.contains("OpenLog(t12/p0, acked_end: 6) reported next_offset 10"), "{seen}");
    let Some(Outcome::Failed(seen)) = report.outcome("open-log-reports-missing-acked") else { panic!("{report}") };
    assert!(seen.contains("reported next_offset 5, not 8"), "{seen}");
}

/// The real executor over a file system whose `sync_dir` does nothing: the executor
/// kit catches it too, in every check of an entry's durability.
#[test]
fn the_real_executor_over_a_file_system_without_directory_syncs_fails_the_entry_checks() {
    let report = check_executor(&mut ExecutorOver(Crashing::new(&[Bug::SkipDirSync])));
    assert_eq!(
        report.failed(),
        [
            "synced-appends-survive-crash",
            "replaced-journal-survives-crash",
            "synced-journal-appends-survive-crash",
            "created-log-survives-crash",
            "removed-log-stays-gone-after-crash",
        ],
        "{report}"
    );
}

/// An executor that panics fails the check it panics in; the others still run.
#[test]
fn an_executor_that_panics_fails_the_checks_it_panics_in() {
    struct Panicking(ExecutorOver<Crashing>);
    impl ExecutorSubject for Panicking {
        type Exec = Executor<CrashFs>;
        fn fresh(&mut self) -> Executor<CrashFs> {
            self.0.fresh()
        }
        fn execute(&mut self, exec: &mut Executor<CrashFs>, op: &StorageOp) -> OpResult {
            if let StorageOp::RemoveLog { log } = op {
                if !exec.fs_mut().list()?.contains(&log.file_name()) {
                    panic!("remove of an absent log: {log}");
                }
            }
            self.0.execute(exec, op)
        }
    }
    let report = check_executor(&mut Panicking(ExecutorOver(Crashing::new(&[]))));
    assert_eq!(report.failed(), ["remove-log-idempotent"], "{report}");
    let Some(Outcome::Failed(seen)) = report.outcome("remove-log-idempotent") else { panic!("{report}") };
    assert!(seen.starts_with("panicked: remove of an absent log: t14/p0"), "{seen}");
    assert_eq!(report.skipped().len(), executor_checks().iter().filter(|c| c.needs_crash).count(), "{report}");
}
