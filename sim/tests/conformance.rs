//! The conformance kit against the simulated disk: the disk keeps every file-system
//! rule (crashing in every crash mode in turn, with injected fsync and directory-fsync
//! failures), and the kit catches a disk wrapped to skip directory syncs or to lie on a
//! retried sync. The storage executor over the disk keeps every executor rule, crash
//! checks included, and the executor kit catches one whose log sync does nothing.

use broker_conformance::{
    check_executor, check_file_system, checks, executor_checks, ExecutorOver, ExecutorSubject, Fault, Subject,
};
use broker_core::{Executor, FileSystem, OpOutput, OpResult, StorageError, StorageOp};
use broker_sim::disk::{CrashMode, DiskFaults, SimDisk};
use broker_testkit::hooked::{Hooked, Hooks};
use std::collections::BTreeSet;

/// Fresh disks from successive seeds; crashes cycle through every crash mode.
#[derive(Default)]
struct Disks {
    seed: u64,
    crashes: usize,
    /// Crash with this mode only (else every mode in turn).
    mode: Option<CrashMode>,
}

impl Disks {
    fn next_mode(&mut self) -> CrashMode {
        self.crashes += 1;
        self.mode.unwrap_or(CrashMode::ALL[self.crashes % CrashMode::ALL.len()])
    }
}

/// The simulated disk's faults that make the next sync fail: an fsync failure (the
/// file's unsynced data dropped, ext4 style), or an I/O error (the kit calls only
/// `sync_dir` while it is armed).
fn faults_for(fault: Option<Fault>) -> DiskFaults {
    match fault {
        Some(Fault::FileSync) => DiskFaults { fsync_failure: 1.0, ..DiskFaults::none() },
        Some(Fault::DirSync) => DiskFaults { io_error: 1.0, ..DiskFaults::none() },
        _ => DiskFaults::none(),
    }
}

impl Subject for Disks {
    type Fs = SimDisk;

    fn fresh(&mut self) -> SimDisk {
        self.seed += 1;
        SimDisk::new(self.seed)
    }

    fn crash(&mut self, mut fs: SimDisk) -> Option<SimDisk> {
        fs.crash_with(self.next_mode());
        Some(fs)
    }

    fn set_fault(&mut self, fs: &mut SimDisk, fault: Option<Fault>) -> bool {
        fs.set_faults(faults_for(fault));
        true
    }
}

#[test]
fn the_simulated_disk_conforms_with_every_check_run() {
    let mut disks = Disks::default();
    let report = check_file_system(&mut disks);
    report.assert_conforms();
    assert_eq!(report.passed().len(), checks().len(), "nothing skipped:\n{report}");
    assert!(disks.crashes >= CrashMode::ALL.len() * 4, "every crash mode, several times: {}", disks.crashes);
}

#[test]
fn the_simulated_disk_conforms_in_each_crash_mode_alone() {
    for mode in CrashMode::ALL {
        let report = check_file_system(&mut Disks { mode: Some(mode), ..Disks::default() });
        assert!(report.conforms(), "{mode:?}:\n{report}");
    }
}

/// What breaks a simulated disk's contract: `sync_dir` does nothing, or a sync retried
/// after a failure says `Ok` without syncing.
struct Breakage {
    skip_dir_sync: bool,
    lie_on_retry: bool,
    failed: BTreeSet<String>,
}

impl Hooks<SimDisk> for Breakage {
    fn sync_file(&mut self, disk: &mut SimDisk, name: &str) -> Result<(), StorageError> {
        if self.lie_on_retry && self.failed.contains(name) {
            return Ok(()); // "it failed before, so the retry is surely fine"
        }
        let r = disk.sync_file(name);
        if r.is_err() {
            self.failed.insert(name.to_string());
        }
        r
    }
    fn sync_dir(&mut self, disk: &mut SimDisk) -> Result<(), StorageError> {
        if self.skip_dir_sync {
            return Ok(());
        }
        disk.sync_dir()
    }
}

/// A simulated disk behind a [`Breakage`].
type Broken = Hooked<SimDisk, Breakage>;

/// Broken disks; crashes keep only what is durable (a power loss with nothing lucky).
struct BrokenDisks {
    seed: u64,
    skip_dir_sync: bool,
    lie_on_retry: bool,
}

impl Subject for BrokenDisks {
    type Fs = Broken;

    fn fresh(&mut self) -> Broken {
        self.seed += 1;
        let hooks =
            Breakage { skip_dir_sync: self.skip_dir_sync, lie_on_retry: self.lie_on_retry, failed: BTreeSet::new() };
        Hooked { fs: SimDisk::new(self.seed), hooks }
    }

    fn crash(&mut self, mut fs: Broken) -> Option<Broken> {
        fs.fs.crash_with(CrashMode::DropAll);
        fs.hooks.failed.clear();
        Some(fs)
    }

    fn set_fault(&mut self, fs: &mut Broken, fault: Option<Fault>) -> bool {
        fs.fs.set_faults(faults_for(fault));
        true
    }
}

#[test]
fn a_disk_whose_directory_sync_does_nothing_fails_the_entry_durability_checks() {
    let report = check_file_system(&mut BrokenDisks { seed: 0, skip_dir_sync: true, lie_on_retry: false });
    for check in ["create-durable-after-sync-dir", "remove-durable-after-sync-dir", "rename-durable-after-sync-dir"] {
        assert!(report.outcome(check).is_some_and(|o| o.is_failed()), "{check}:\n{report}");
    }
    assert!(report.passed().contains(&"rename-replaces"), "the plain checks still pass:\n{report}");
}

#[test]
fn a_disk_that_says_ok_to_a_retried_sync_without_syncing_fails_the_rewrite_check() {
    let report = check_file_system(&mut BrokenDisks { seed: 0, skip_dir_sync: false, lie_on_retry: true });
    assert_eq!(report.failed(), ["rewrite-after-failed-sync-durable"], "{report}");
}

#[test]
fn the_executor_over_the_simulated_disk_conforms_with_every_check_run() {
    let mut over = ExecutorOver(Disks::default());
    let report = check_executor(&mut over);
    report.assert_conforms();
    assert_eq!(report.passed().len(), executor_checks().len(), "nothing skipped:\n{report}");
    assert!(over.0.crashes >= CrashMode::ALL.len() * 4, "every crash mode, several times: {}", over.0.crashes);
}

#[test]
fn the_executor_over_the_simulated_disk_conforms_in_each_crash_mode_alone() {
    for mode in CrashMode::ALL {
        let report = check_executor(&mut ExecutorOver(Disks { mode: Some(mode), ..Disks::default() }));
        assert!(report.conforms(), "{mode:?}:\n{report}");
    }
}

/// The executor over the simulated disk, with a `SyncLog` that returns `Done` and
/// syncs nothing; crashes keep only what is durable.
struct NoLogSync(ExecutorOver<Disks>);

impl ExecutorSubject for NoLogSync {
    type Exec = Executor<SimDisk>;

    fn fresh(&mut self) -> Executor<SimDisk> {
        self.0.fresh()
    }

    fn execute(&mut self, exec: &mut Executor<SimDisk>, op: &StorageOp) -> OpResult {
        match op {
            StorageOp::SyncLog { .. } => Ok(OpOutput::Done),
            _ => self.0.execute(exec, op),
        }
    }

    fn crash(&mut self, exec: Executor<SimDisk>) -> Option<Executor<SimDisk>> {
        self.0.crash(exec)
    }
}

#[test]
fn an_executor_whose_log_sync_does_nothing_loses_acknowledged_records_at_a_crash() {
    let mut subject = NoLogSync(ExecutorOver(Disks { mode: Some(CrashMode::DropAll), ..Disks::default() }));
    let report = check_executor(&mut subject);
    assert_eq!(report.failed(), ["synced-appends-survive-crash"], "{report}");
}
