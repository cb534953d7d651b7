//! A conformance kit for the two layers of storage a broker-core runtime may write
//! itself: a [`FileSystem`], and an executor of the core's storage operations.
//!
//! The storage executor (`broker_core::Executor`) carries out every storage operation
//! of the broker over a [`FileSystem`], and its crash safety rests on that file system
//! keeping a small contract (`broker_core::fs`, and `DESIGN.md` sections 3 and 6):
//! file data and size are durable after [`FileSystem::sync_file`], entries after
//! [`FileSystem::sync_dir`], rename is atomic, remove of an absent name is
//! [`StorageError::NotFound`], and a failed sync is reported, never hidden.
//!
//! Someone who writes their own file system describes it as a [`Subject`] (how to make
//! an empty one, and, if it can, how to crash it and fail its syncs) and runs
//! [`check_file_system`]. The [`Report`] names every check with its outcome; in a test,
//! [`Report::assert_conforms`] panics listing every failure.
//!
//! ```
//! use broker_conformance::{check_file_system, Fresh};
//! use broker_core::MemFs;
//!
//! // MemFs cannot crash nor fail a sync: those checks are skipped, the others run.
//! let report = check_file_system(&mut Fresh(MemFs::new));
//! report.assert_conforms();
//! assert!(report.outcome("rename-atomic-at-crash").unwrap().is_skipped());
//! ```
//!
//! Someone who writes their own executor (logs and journal stored some other way, or
//! in a format of their own) describes it as an [`ExecutorSubject`] (how to make one
//! over empty storage, how to carry out a [`StorageOp`] on it, and, if it can, how to
//! crash it) and runs [`check_executor`]: [`executor_checks`] lists the rules of the
//! runtime contract (`broker_core::effect`) it checks, through operations only. For
//! `broker_core::Executor` over a file-system [`Subject`], [`ExecutorOver`] is ready
//! made, so every file system checked can have its executor checked too:
//!
//! ```
//! use broker_conformance::{check_executor, ExecutorOver, Fresh};
//! use broker_core::MemFs;
//!
//! let report = check_executor(&mut ExecutorOver(Fresh(MemFs::new)));
//! report.assert_conforms();
//! assert!(report.outcome("synced-appends-survive-crash").unwrap().is_skipped());
//! ```
//!
//! What the executor kit cannot check is in the README: above all corruption
//! detection, which needs damaged bytes in a format only the executor knows.
//!
//! The file-system checks ([`checks`] lists them with their rules) come in three groups:
//!
//! - **Plain behaviour**, run on every subject: create, remove, reads and writes,
//!   length and truncation, listing, rename, whole-file reads, large I/O.
//! - **Durability at a crash**, run when [`Subject::crash`] is supported: what a
//!   successful `sync_file` and `sync_dir` promise, and what an unsynced write may and
//!   may not do at a crash.
//! - **Failed syncs**, run when [`Subject::set_fault`] supports the [`Fault`]: a failed
//!   sync is reported, and the way the executor recovers from one (write again, sync
//!   again) makes the data durable.
//!
//! What the file-system kit does not check, because the contract allows it: that unsynced data is
//! lost at a crash (any of it may survive), and what a successful `sync_file` right
//! after a failed one says about the failed one's data. On Linux a failed write-back
//! drops the dirty pages, and the next fsync succeeds without them (DESIGN.md section
//! 3): the executor never retries a sync hoping it heals, so neither does the kit.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use broker_core::cluster::store::{StoreOp, StoreResult};
use broker_core::{Executor, FileSystem, OpResult, StorageError, StorageOp};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod checks;
mod exec_checks;
mod store_checks;

/// A fault the kit asks a [`Subject`] to inject, around one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// `sync_file` of a file with unsynced changes fails as a failed write-back does on
    /// Linux: it returns an error, and the file's unsynced changes may be lost (dropped
    /// from the durable future while still readable, kept, or anything in between).
    FileSync,
    /// `sync_dir` fails: it returns an error, and the durability of the entries created,
    /// renamed or removed since the last successful one is unknown.
    DirSync,
}

/// The file system under test, as the kit needs it.
///
/// Only [`Subject::fresh`] is required. A subject that cannot crash or inject faults
/// keeps the default methods, and the checks that need them are reported as
/// [`Outcome::Skipped`].
pub trait Subject {
    /// The file system under test.
    type Fs: FileSystem;

    /// A new, empty file system (an empty directory), with no fault armed. Called once
    /// or more per check; file systems are never shared between checks.
    fn fresh(&mut self) -> Self::Fs;

    /// Simulates a crash (a power loss) of `fs` and returns what survives, a file
    /// system that holds the durable state only, plus whatever part of the unsynced
    /// state the subject lets survive. `None`: this subject cannot crash (the default),
    /// and the durability checks are skipped.
    fn crash(&mut self, fs: Self::Fs) -> Option<Self::Fs> {
        drop(fs);
        None
    }

    /// Arms (`Some`) or disarms (`None`) an injected fault on `fs`. While
    /// [`Fault::FileSync`] is armed, every `sync_file` of a file with unsynced changes
    /// fails; while [`Fault::DirSync`] is armed, every `sync_dir` fails. The kit arms a
    /// fault around a single call and disarms it right after. Returns whether the fault
    /// is supported (the default supports none): checks needing an unsupported fault
    /// are skipped.
    fn set_fault(&mut self, fs: &mut Self::Fs, fault: Option<Fault>) -> bool {
        let _ = (fs, fault);
        false
    }
}

/// A subject from a function that makes an empty file system; it cannot crash or
/// inject faults. `Fresh(MemFs::new)`, or `Fresh(|| MyFs::in_temp_dir())`.
#[derive(Clone, Copy, Debug)]
pub struct Fresh<F>(pub F);

impl<F, Fs> Subject for Fresh<F>
where
    F: FnMut() -> Fs,
    Fs: FileSystem,
{
    type Fs = Fs;

    fn fresh(&mut self) -> Fs {
        (self.0)()
    }
}

/// A subject for a file system that makes every operation durable as it completes (as
/// `MemFs` does): a crash keeps it whole, so the crash checks run; it cannot inject
/// faults. `AlwaysDurable(Fresh(MemFs::new))`.
#[derive(Clone, Copy, Debug)]
pub struct AlwaysDurable<S>(pub S);

impl<S: Subject> Subject for AlwaysDurable<S> {
    type Fs = S::Fs;

    fn fresh(&mut self) -> S::Fs {
        self.0.fresh()
    }

    fn crash(&mut self, fs: S::Fs) -> Option<S::Fs> {
        Some(fs)
    }
}

/// The executor under test, as the kit needs it: something that carries out
/// [`StorageOp`]s and returns their [`OpResult`]s by the runtime contract
/// (`broker_core::effect`), as `broker_core::Executor` does over a [`FileSystem`].
///
/// Only [`ExecutorSubject::fresh`] and [`ExecutorSubject::execute`] are required; a
/// subject that cannot crash keeps the default [`ExecutorSubject::crash`], and the
/// durability checks are reported as [`Outcome::Skipped`]. For `broker_core::Executor`
/// over a file-system [`Subject`] there is [`ExecutorOver`].
pub trait ExecutorSubject {
    /// The executor under test, with whatever storage it carries out operations on.
    type Exec;

    /// A new executor over new, empty storage (no journal, no logs). Called once or
    /// more per check; storage is never shared between checks.
    fn fresh(&mut self) -> Self::Exec;

    /// Carries out `op` on `exec` and returns its result, as a runtime would report it
    /// to the core. The kit issues operations one at a time, each after the previous
    /// one completed, and only operations the core could issue in that state.
    fn execute(&mut self, exec: &mut Self::Exec, op: &StorageOp) -> OpResult;

    /// Simulates a crash (a power loss) under `exec` and returns a new executor (as a
    /// restarted runtime makes one) over the storage that survives: the durable state,
    /// plus whatever part of the unsynced state the subject lets survive. `None`: this
    /// subject cannot crash (the default), and the durability checks are skipped.
    fn crash(&mut self, exec: Self::Exec) -> Option<Self::Exec> {
        drop(exec);
        None
    }
}

/// The executor subject of `broker_core::Executor` over the file systems of a
/// file-system [`Subject`]: a fresh executor runs over [`Subject::fresh`], and a crash
/// is [`Subject::crash`] of its file system with a new executor over what survives (so
/// the durability checks run when the file system can crash).
///
/// ```
/// use broker_conformance::{check_executor, ExecutorOver, Fresh};
/// use broker_core::MemFs;
///
/// let report = check_executor(&mut ExecutorOver(Fresh(MemFs::new)));
/// report.assert_conforms();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ExecutorOver<S>(pub S);

impl<S: Subject> ExecutorSubject for ExecutorOver<S> {
    type Exec = Executor<S::Fs>;

    fn fresh(&mut self) -> Executor<S::Fs> {
        Executor::new(self.0.fresh())
    }

    fn execute(&mut self, exec: &mut Executor<S::Fs>, op: &StorageOp) -> OpResult {
        exec.execute(op)
    }

    fn crash(&mut self, exec: Executor<S::Fs>) -> Option<Executor<S::Fs>> {
        self.0.crash(exec.into_fs()).map(Executor::new)
    }
}

/// The shared store under test, as the store checks need it: something that carries
/// out the cluster's [`StoreOp`]s by the store contract (`broker_core::cluster::store`),
/// as a runtime's adapter of S3, PostgreSQL or a directory does.
///
/// Only [`StoreSubject::fresh`] and [`StoreSubject::run`] are required. A subject whose
/// store can take operations concurrently overrides [`StoreSubject::race`] so that the
/// race check issues its creates together; the default issues them one after another.
pub trait StoreSubject {
    /// The store under test (a handle on it).
    type Store;

    /// A new, empty store: no key under any prefix (a new directory, bucket prefix or
    /// table). Called once per check; stores are never shared between checks.
    fn fresh(&mut self) -> Self::Store;

    /// Carries out `op` on `store` and returns its result.
    fn run(&mut self, store: &mut Self::Store, op: StoreOp) -> StoreResult;

    /// Carries out every one of `ops` on `store`, concurrently if the subject can, and
    /// returns their results in the order of `ops`.
    fn race(&mut self, store: &mut Self::Store, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        ops.into_iter().map(|op| self.run(store, op)).collect()
    }
}

/// A store subject from a function that makes an empty store and one that carries out
/// an operation on it: `FreshStore(MemStore::default, |s, op| Ok(s.apply(&op)))`.
#[derive(Clone, Copy, Debug)]
pub struct FreshStore<F, R>(pub F, pub R);

impl<F, R, St> StoreSubject for FreshStore<F, R>
where
    F: FnMut() -> St,
    R: FnMut(&mut St, StoreOp) -> StoreResult,
{
    type Store = St;

    fn fresh(&mut self) -> St {
        (self.0)()
    }

    fn run(&mut self, store: &mut St, op: StoreOp) -> StoreResult {
        (self.1)(store, op)
    }
}

/// One check of the kit: its name, the contract rule it checks, and what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// A short, stable name (kebab-case), as [`Report::outcome`] takes it.
    pub name: &'static str,
    /// The rule of the contract it checks, in a sentence or two.
    pub rule: &'static str,
    /// Whether it needs [`Subject::crash`] (of an executor check:
    /// [`ExecutorSubject::crash`]).
    pub needs_crash: bool,
    /// The fault it needs [`Subject::set_fault`] to inject, if any (never for an
    /// executor check).
    pub needs_fault: Option<Fault>,
}

/// Every file-system check of the kit, in the order [`check_file_system`] runs them.
pub fn checks() -> Vec<Check> {
    checks::all::<Fresh<fn() -> broker_core::MemFs>>().into_iter().map(|(check, _)| check).collect()
}

/// Every executor check of the kit, in the order [`check_executor`] runs them (none
/// needs a fault; those with [`Check::needs_crash`] need [`ExecutorSubject::crash`]).
pub fn executor_checks() -> Vec<Check> {
    exec_checks::all::<ExecutorOver<Fresh<fn() -> broker_core::MemFs>>>().into_iter().map(|(check, _)| check).collect()
}

/// Every shared-store check of the kit, in the order [`check_store`] runs them.
pub fn store_checks() -> Vec<Check> {
    type Mem = FreshStore<
        fn() -> broker_core::cluster::memstore::MemStore,
        fn(&mut broker_core::cluster::memstore::MemStore, StoreOp) -> StoreResult,
    >;
    store_checks::all::<Mem>().into_iter().map(|(check, _)| check).collect()
}

/// What came of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file system kept the rule.
    Passed,
    /// It broke the rule: what the check saw (the rule itself is in [`Check::rule`]).
    Failed(String),
    /// Not run, and why (the subject cannot crash, or cannot inject the fault).
    Skipped(String),
}

impl Outcome {
    /// Whether the check passed.
    pub fn is_passed(&self) -> bool {
        matches!(self, Outcome::Passed)
    }

    /// Whether the check failed.
    pub fn is_failed(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// Whether the check was skipped.
    pub fn is_skipped(&self) -> bool {
        matches!(self, Outcome::Skipped(_))
    }
}

/// One check and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// The check that ran, with its name and the rule it enforces.
    pub check: Check,
    /// What came of it.
    pub outcome: Outcome,
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.check.name;
        match &self.outcome {
            Outcome::Passed => write!(f, "pass  {name}"),
            Outcome::Skipped(why) => write!(f, "skip  {name}: {why}"),
            Outcome::Failed(seen) => {
                write!(f, "FAIL  {name}\n      contract: {}\n      seen: {seen}", self.check.rule)
            }
        }
    }
}

/// The outcome of every check against one subject (of [`check_file_system`] or of
/// [`check_executor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What was checked: "file-system", "executor" or "shared-store".
    kind: &'static str,
    subject: String,
    results: Vec<CheckResult>,
}

impl Report {
    /// The subject's type name.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Every check with its outcome, in the order they ran.
    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// The outcome of the check named `name`, if the kit has one of that name.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.results.iter().find(|r| r.check.name == name).map(|r| &r.outcome)
    }

    /// The names of the checks that failed, in order.
    pub fn failed(&self) -> Vec<&'static str> {
        self.names(Outcome::is_failed)
    }

    /// The names of the checks that were skipped, in order.
    pub fn skipped(&self) -> Vec<&'static str> {
        self.names(Outcome::is_skipped)
    }

    /// The names of the checks that passed, in order.
    pub fn passed(&self) -> Vec<&'static str> {
        self.names(Outcome::is_passed)
    }

    fn names(&self, keep: fn(&Outcome) -> bool) -> Vec<&'static str> {
        self.results.iter().filter(|r| keep(&r.outcome)).map(|r| r.check.name).collect()
    }

    /// Whether no check failed (skipped checks do not count against it).
    pub fn conforms(&self) -> bool {
        self.results.iter().all(|r| !r.outcome.is_failed())
    }

    /// Panics, with every failure's rule and what was seen, unless the subject conforms
    /// (no check failed; skipped checks are allowed). For use in a `#[test]`.
    #[track_caller]
    pub fn assert_conforms(&self) {
        if !self.conforms() {
            panic!("{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (failed, skipped) = (self.failed().len(), self.skipped().len());
        let passed = self.results.len() - failed - skipped;
        writeln!(
            f,
            "{} conformance of {}: {passed} passed, {failed} failed, {skipped} skipped",
            self.kind, self.subject
        )?;
        for r in &self.results {
            writeln!(f, "  {r}")?;
        }
        Ok(())
    }
}

/// How many times a check that crashes is run: a subject may let any part of the
/// unsynced state survive a crash, so one lucky crash must not hide a broken rule.
pub const CRASH_ROUNDS: usize = 4;

/// Runs every check of the kit against `subject` and reports each one's outcome.
///
/// Each check gets file systems of its own from [`Subject::fresh`]; a check that
/// crashes is run [`CRASH_ROUNDS`] times, and fails at its first failing round. A check that
/// panics (in the file system, or in the subject) is reported failed with the panic's
/// message, and the others still run.
pub fn check_file_system<S: Subject>(subject: &mut S) -> Report {
    let can_crash = {
        let fs = subject.fresh();
        subject.crash(fs).is_some()
    };
    let mut faults = Vec::new();
    for fault in [Fault::FileSync, Fault::DirSync] {
        let mut fs = subject.fresh();
        if subject.set_fault(&mut fs, Some(fault)) {
            faults.push(fault);
        }
        subject.set_fault(&mut fs, None);
    }
    let skip = |check: &Check| {
        if check.needs_crash && !can_crash {
            Some("the subject cannot crash (Subject::crash returned None)".to_string())
        } else {
            check
                .needs_fault
                .filter(|f| !faults.contains(f))
                .map(|f| format!("the subject cannot inject {f:?} (Subject::set_fault returned false)"))
        }
    };
    let results = run_checks(subject, checks::all::<S>(), skip);
    Report { kind: "file-system", subject: std::any::type_name::<S>().to_string(), results }
}

/// Runs `checks` against `subject`, each unless `skip` gives a reason: a check that
/// crashes runs [`CRASH_ROUNDS`] times and fails at its first failing round; a panic
/// fails the check it happens in.
fn run_checks<S>(
    subject: &mut S,
    checks: Vec<(Check, checks::Run<S>)>,
    skip: impl Fn(&Check) -> Option<String>,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for (check, run) in checks {
        let outcome = match skip(&check) {
            Some(why) => Outcome::Skipped(why),
            None => {
                let rounds = if check.needs_crash { CRASH_ROUNDS } else { 1 };
                let mut outcome = Outcome::Passed;
                for round in 1..=rounds {
                    let seen = match catch_unwind(AssertUnwindSafe(|| run(subject))) {
                        Ok(Ok(())) => continue,
                        Ok(Err(seen)) => seen,
                        Err(panic) => format!("panicked: {}", panic_message(&*panic)),
                    };
                    let at = if rounds > 1 { format!(" (in round {round} of {rounds})") } else { String::new() };
                    outcome = Outcome::Failed(format!("{seen}{at}"));
                    break;
                }
                outcome
            }
        };
        results.push(CheckResult { check, outcome });
    }
    results
}

/// Runs every executor check of the kit against `subject` and reports each one's
/// outcome.
///
/// Each check gets executors of its own from [`ExecutorSubject::fresh`]; a check that
/// crashes is run [`CRASH_ROUNDS`] times, and fails at its first failing round. A check
/// that panics (in the executor, or in the subject) is reported failed with the panic's
/// message, and the others still run.
pub fn check_executor<S: ExecutorSubject>(subject: &mut S) -> Report {
    let can_crash = {
        let exec = subject.fresh();
        subject.crash(exec).is_some()
    };
    let skip = |check: &Check| {
        (check.needs_crash && !can_crash)
            .then(|| "the subject cannot crash (ExecutorSubject::crash returned None)".to_string())
    };
    let results = run_checks(subject, exec_checks::all::<S>(), skip);
    Report { kind: "executor", subject: std::any::type_name::<S>().to_string(), results }
}

/// Runs every shared-store check of the kit against `subject` and reports each one's
/// outcome. A check that panics is reported failed with the panic's message, and the
/// others still run.
pub fn check_store<S: StoreSubject>(subject: &mut S) -> Report {
    let results = run_checks(subject, store_checks::all::<S>(), |_| None);
    Report { kind: "shared-store", subject: std::any::type_name::<S>().to_string(), results }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// What a failing file-system call is reported as: the call and the error.
fn failed_call(call: fmt::Arguments<'_>, e: &StorageError) -> String {
    format!("{call} failed: {e}")
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
