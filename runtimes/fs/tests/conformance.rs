//! The conformance kit against `RealFs` on temporary directories, and against the
//! storage executor over it. A real file system cannot crash in-process, nor fail an
//! fsync on demand: those checks are skipped (the kill -9 tests and the simulator cover
//! them), every other one runs.

use broker_conformance::{check_executor, check_file_system, checks, executor_checks, ExecutorOver, Subject};
use broker_fs::RealFs;
use std::path::PathBuf;

/// Each `fresh` is a new, empty temporary directory; all are removed on drop unless a
/// test failed (then they are kept for inspection).
struct TempDirs {
    tag: &'static str,
    max_open: usize,
    dirs: Vec<PathBuf>,
}

impl TempDirs {
    fn new(tag: &'static str, max_open: usize) -> TempDirs {
        TempDirs { tag, max_open, dirs: Vec::new() }
    }
}

impl Subject for TempDirs {
    type Fs = RealFs;

    fn fresh(&mut self) -> RealFs {
        let n = self.dirs.len();
        let dir = std::env::temp_dir().join(format!("broker-fs-conformance-{}-{}-{n}", self.tag, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        self.dirs.push(dir.clone());
        RealFs::with_max_open(dir, self.max_open)
    }
}

impl Drop for TempDirs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("keeping {:?} for inspection", self.dirs);
            return;
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn plain_checks() -> Vec<&'static str> {
    checks().into_iter().filter(|c| !c.needs_crash && c.needs_fault.is_none()).map(|c| c.name).collect()
}

#[test]
fn real_fs_conforms_and_runs_every_check_that_needs_no_crash() {
    let report = check_file_system(&mut TempDirs::new("default", broker_fs::realfs::MAX_OPEN_FILES));
    report.assert_conforms();
    assert_eq!(report.passed(), plain_checks(), "{report}");
    assert_eq!(report.skipped().len(), checks().len() - plain_checks().len(), "{report}");
}

/// With room for two open files, most checks close files that hold unsynced writes
/// (fsyncing them first) and open them again: the results must not change.
#[test]
fn real_fs_conforms_with_two_open_files_at_most() {
    let report = check_file_system(&mut TempDirs::new("two-open", 2));
    report.assert_conforms();
    assert_eq!(report.passed(), plain_checks(), "{report}");
}

#[test]
fn the_executor_over_real_fs_conforms_and_runs_every_check_that_needs_no_crash() {
    let report = check_executor(&mut ExecutorOver(TempDirs::new("executor", broker_fs::realfs::MAX_OPEN_FILES)));
    report.assert_conforms();
    let plain: Vec<&str> = executor_checks().into_iter().filter(|c| !c.needs_crash).map(|c| c.name).collect();
    assert_eq!(report.passed(), plain, "{report}");
    assert_eq!(report.skipped().len(), executor_checks().len() - plain.len(), "{report}");
}

/// With room for two open files, the executor's logs and journal files are closed and
/// opened again between operations: the results must not change.
#[test]
fn the_executor_over_real_fs_conforms_with_two_open_files_at_most() {
    let report = check_executor(&mut ExecutorOver(TempDirs::new("executor-two-open", 2)));
    report.assert_conforms();
}
