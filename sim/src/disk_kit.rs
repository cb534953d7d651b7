//! Holds the simulated disk against a real file system: one script of file-system calls
//! runs on the simulated disk and on the real thing (in `sim/tests/linux_disk.rs`:
//! `broker-fs`'s `RealFs` on a small tmpfs that fills, a tmpfs remounted read-only, an
//! ext4 whose loop device runs out of backing store, and strace failing chosen system
//! calls), each call's result and the directory's contents after it are recorded as
//! one line, and [`find_seed`] searches the simulated disk's seeds for one that
//! produces every line the real file system produced.
//!
//! A difference means the model is kinder (or only other) than the world it stands for:
//! widen the simulated disk until it can produce what the real one did, never the other
//! way round.

use crate::disk::{DiskFaults, ReadOnly, SimDisk, BLOCK_SIZE};
use broker_core::{FileSystem, StorageError};
use std::ops::Range;

/// One file-system call of a script. Names are plain file names in one directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// [`FileSystem::create`].
    Create(&'static str),
    /// [`FileSystem::write_at`] of `len` bytes of a pattern drawn from `fill`.
    Write {
        /// The file.
        name: &'static str,
        /// Where.
        offset: u64,
        /// How many bytes.
        len: usize,
        /// Which pattern.
        fill: u8,
    },
    /// [`FileSystem::read_at`].
    Read(&'static str, u64, usize),
    /// [`FileSystem::len`].
    Len(&'static str),
    /// [`FileSystem::truncate`].
    Truncate(&'static str, u64),
    /// [`FileSystem::allocate`].
    Allocate(&'static str, u64),
    /// [`FileSystem::sync_file`].
    Sync(&'static str),
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// [`FileSystem::rename`].
    Rename(&'static str, &'static str),
    /// [`FileSystem::remove`].
    Remove(&'static str),
    /// [`FileSystem::list`].
    List,
    /// Creates the file and writes whole blocks of [`BLOCK_SIZE`] to it until a write
    /// fails: the disk is then full to its last block.
    Fill(&'static str),
}

/// An error a step's call is made to fail with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    /// EIO.
    Eio,
    /// ENOSPC.
    Enospc,
    /// EXDEV (a rename across file systems).
    Exdev,
}

/// One step of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call, as the file system answers it.
    Call(Call),
    /// A call whose system call is failed with an injected error: on Linux, strace
    /// fails it before the kernel runs it; on the simulated disk, the fault of that kind
    /// is certain for this call.
    Failing(Call, Injected),
    /// The file system is remounted read-only (the runtime's open files closed first,
    /// as a remount requires).
    RemountReadOnly,
}

/// A script and the simulated disk that must be able to produce what Linux does with it.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name.
    pub name: &'static str,
    /// What the real file system is (how the Linux side sets it up).
    pub real: RealSetup,
    /// The simulated disk's faults for the script (faults the swarm draws, at rates
    /// high enough that a search over a few thousand seeds meets them).
    pub faults: DiskFaults,
    /// The steps.
    pub steps: Vec<Step>,
}

/// The real file system a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RealSetup {
    /// A tmpfs of this many bytes.
    Tmpfs(u64),
    /// An ext4 of `image` bytes on a loop device whose backing file lies on a tmpfs of
    /// `backing` bytes: writes the file system accepts fail on their way to the device
    /// once the backing store is full (as on a thin-provisioned volume).
    Ext4OnFullDevice {
        /// The file system's size.
        image: u64,
        /// The backing store's size.
        backing: u64,
    },
}

/// A run of a script: one line per step.
pub type Trace = Vec<String>;

/// What a script runs on: a file system, and the means to look behind its back and to
/// change its world.
pub trait Target {
    /// The file system under test.
    type Fs: FileSystem;
    /// The file system.
    fn fs(&mut self) -> &mut Self::Fs;
    /// Every file of the directory (not directories) and its bytes, sorted by name, read
    /// behind the file system's back.
    fn files(&mut self) -> Vec<(String, Vec<u8>)>;
    /// Remounts the file system read-only.
    fn remount_read_only(&mut self);
    /// Makes the next call fail with `fault` (the Linux side arranged it in advance).
    fn inject(&mut self, call: &Call, fault: Injected);
    /// Ends an injection.
    fn end_injection(&mut self);
}

/// Runs `steps` on `target` and records each step's line.
pub fn run_script<T: Target>(target: &mut T, steps: &[Step]) -> Trace {
    run_until(target, steps, |_, _| true)
}

/// Runs `steps` on `target` while `go_on` says so of each step's line (it gets the
/// step's index and line); returns the lines so far.
fn run_until<T: Target>(target: &mut T, steps: &[Step], mut go_on: impl FnMut(usize, &str) -> bool) -> Trace {
    let mut trace = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let result = match step {
            Step::Call(call) => run_call(target.fs(), call),
            Step::Failing(call, fault) => {
                target.inject(call, *fault);
                let r = run_call(target.fs(), call);
                target.end_injection();
                r
            }
            Step::RemountReadOnly => {
                target.remount_read_only();
                "remounted".into()
            }
        };
        let line = format!("{i} {step:?}: {result} | {}", describe_files(&target.files()));
        let more = go_on(i, &line);
        trace.push(line);
        if !more {
            break;
        }
    }
    trace
}

/// The bytes a [`Call::Write`] writes.
pub fn pattern(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add((i / 251) as u8).wrapping_mul(31).wrapping_add(i as u8) | 1).collect()
}

fn run_call<F: FileSystem>(fs: &mut F, call: &Call) -> String {
    let done = |r: Result<(), StorageError>| show(r.map(|()| String::new()));
    match call {
        Call::Create(n) => done(fs.create(n)),
        Call::Write { name, offset, len, fill } => done(fs.write_at(name, *offset, &pattern(*len, *fill))),
        Call::Read(n, offset, len) => {
            show(fs.read_at(n, *offset, *len).map(|b| format!("{} bytes {:08x}", b.len(), checksum(&b))))
        }
        Call::Len(n) => show(fs.len(n).map(|l| l.to_string())),
        Call::Truncate(n, len) => done(fs.truncate(n, *len)),
        Call::Allocate(n, len) => done(fs.allocate(n, *len)),
        Call::Sync(n) => done(fs.sync_file(n)),
        Call::SyncDir => done(fs.sync_dir()),
        Call::Rename(a, b) => done(fs.rename(a, b)),
        Call::Remove(n) => done(fs.remove(n)),
        Call::List => show(fs.list().map(|names| names.join(","))),
        Call::Fill(n) => {
            if let Err(e) = fs.create(n) {
                return show(Err(e));
            }
            let block = vec![0x5a; BLOCK_SIZE as usize];
            let mut at = 0u64;
            loop {
                if let Err(e) = fs.write_at(n, at, &block) {
                    return format!("filled {at} bytes, then {}", kind(&e));
                }
                at += BLOCK_SIZE;
            }
        }
    }
}

/// A result as a line shows it: the error's kind only (messages differ between file
/// systems and say nothing about what happened).
fn show(r: Result<String, StorageError>) -> String {
    match r {
        Ok(v) if v.is_empty() => "ok".into(),
        Ok(v) => format!("ok {v}"),
        Err(e) => kind(&e).into(),
    }
}

fn kind(e: &StorageError) -> &'static str {
    match e {
        StorageError::NotFound(_) => "NotFound",
        StorageError::PermissionDenied(_) => "PermissionDenied",
        StorageError::DiskFull(_) => "DiskFull",
        StorageError::Io(_) => "Io",
        StorageError::DirSyncFailed(_) => "DirSyncFailed",
        StorageError::Corrupt { .. } => "Corrupt",
    }
}

fn describe_files(files: &[(String, Vec<u8>)]) -> String {
    files.iter().map(|(n, b)| format!("{n}={}:{:08x}", b.len(), checksum(b))).collect::<Vec<_>>().join(" ")
}

fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The simulated disk as a [`Target`].
#[derive(Debug)]
pub struct SimTarget {
    disk: SimDisk,
    faults: DiskFaults,
}

impl SimTarget {
    /// A fresh simulated disk for `scenario`, its random choices drawn from `seed`.
    pub fn new(scenario: &Scenario, seed: u64) -> SimTarget {
        SimTarget { disk: SimDisk::with_faults(seed, scenario.faults), faults: scenario.faults }
    }
}

impl Target for SimTarget {
    type Fs = SimDisk;

    fn fs(&mut self) -> &mut SimDisk {
        &mut self.disk
    }

    fn files(&mut self) -> Vec<(String, Vec<u8>)> {
        self.disk.live_names().into_iter().filter_map(|n| self.disk.live_file(&n).map(|b| (n, b))).collect()
    }

    fn remount_read_only(&mut self) {
        self.disk.set_read_only(Some(ReadOnly::Mounted));
    }

    fn inject(&mut self, call: &Call, fault: Injected) {
        let mut f = self.faults;
        match (call, fault) {
            (Call::Write { .. } | Call::Allocate(..) | Call::Create(_), Injected::Enospc) => f.disk_full = 1.0,
            (_, Injected::Enospc) => f.fsync_failure = 1.0,
            (_, Injected::Eio | Injected::Exdev) => f.io_error = 1.0,
        }
        self.disk.set_faults(f);
    }

    fn end_injection(&mut self) {
        self.disk.set_faults(self.faults);
    }
}

/// The simulated disk's run of `scenario` with `seed`.
pub fn simulate(scenario: &Scenario, seed: u64) -> Trace {
    run_script(&mut SimTarget::new(scenario, seed), &scenario.steps)
}

/// Why no seed produced a real run: the seed that matched it longest, and the first
/// line where it differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The seed whose run matched the longest prefix.
    pub seed: u64,
    /// The step where it differs.
    pub step: usize,
    /// What the real file system did there.
    pub real: String,
    /// What the simulated disk did there.
    pub simulated: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no seed of the simulated disk produces what the real file system did; the closest (seed {}) \
             differs at step {}:\n  real:      {}\n  simulated: {}",
            self.seed, self.step, self.real, self.simulated
        )
    }
}

/// The first seed in `seeds` whose run of `scenario` is exactly `real` (each run stops
/// at its first line that differs).
pub fn find_seed(scenario: &Scenario, real: &[String], seeds: Range<u64>) -> Result<u64, Mismatch> {
    let mut best: Option<Mismatch> = None;
    for seed in seeds {
        let mut target = SimTarget::new(scenario, seed);
        let sim = run_until(&mut target, &scenario.steps, |i, line| real.get(i).is_some_and(|r| r == line));
        if sim == real {
            return Ok(seed);
        }
        let step = sim.iter().zip(real).take_while(|(a, b)| a == b).count();
        if best.as_ref().is_none_or(|b| step > b.step) {
            best = Some(Mismatch {
                seed,
                step,
                real: real.get(step).cloned().unwrap_or_else(|| "(no step)".into()),
                simulated: sim.get(step).cloned().unwrap_or_else(|| "(no step)".into()),
            });
        }
    }
    Err(best.unwrap_or(Mismatch { seed: 0, step: 0, real: String::new(), simulated: String::new() }))
}

/// The scenarios: what the write path meets on a full disk, under I/O errors and on a
/// read-only file system.
pub fn scenarios() -> Vec<Scenario> {
    use Call::*;
    use Step::{Call as Do, Failing, RemountReadOnly};
    let tmpfs = |blocks: u64| RealSetup::Tmpfs(blocks * BLOCK_SIZE);
    let capacity = |blocks: u64| DiskFaults { capacity: blocks * BLOCK_SIZE, ..DiskFaults::none() };
    let write = |name, offset, len, fill| Write { name, offset, len, fill };
    vec![
        Scenario {
            name: "short-write-then-enospc",
            real: tmpfs(16),
            faults: capacity(16),
            steps: vec![
                Do(Create("journal")),
                Do(write("journal", 0, 8269, 1)),
                Do(Sync("journal")),
                Do(SyncDir),
                Do(Fill("filler")),
                // A commit appended to the journal: what fits in its last block lands.
                Do(write("journal", 8269, 4044, 2)),
                Do(Len("journal")),
                Do(Read("journal", 8000, 8000)),
                // Retried at the same offset: the same prefix, the same failure.
                Do(write("journal", 8269, 4044, 2)),
                Do(Sync("journal")),
                // Cut back, and room made: the whole commit fits.
                Do(Truncate("journal", 8269)),
                Do(Truncate("filler", 3 * BLOCK_SIZE)),
                Do(write("journal", 8269, 4044, 2)),
                Do(Sync("journal")),
                Do(Len("journal")),
            ],
        },
        Scenario {
            name: "names-and-sizes-on-a-full-disk",
            real: tmpfs(8),
            faults: capacity(8),
            steps: vec![
                Do(Create("a")),
                Do(write("a", 0, 5000, 3)),
                Do(Fill("filler")),
                Do(Create("b")),
                Do(Rename("b", "c")),
                Do(Rename("a", "c")),
                Do(List),
                // Growing a file makes a hole, which takes no block; writing into it does.
                Do(Truncate("c", 64 * BLOCK_SIZE)),
                Do(Len("c")),
                Do(Read("c", 20 * BLOCK_SIZE, 100)),
                Do(write("c", 20 * BLOCK_SIZE, 100, 4)),
                Do(Allocate("c", 70 * BLOCK_SIZE)),
                Do(Len("c")),
                Do(Truncate("c", 100)),
                Do(Sync("c")),
                Do(SyncDir),
                Do(Remove("filler")),
                Do(Allocate("c", 4 * BLOCK_SIZE)),
                Do(Len("c")),
                Do(Sync("c")),
            ],
        },
        Scenario {
            name: "allocate-more-than-is-free",
            real: tmpfs(8),
            faults: capacity(8),
            steps: vec![
                Do(Create("reserve")),
                Do(Allocate("reserve", 5 * BLOCK_SIZE)),
                Do(Len("reserve")),
                Do(Create("log")),
                Do(write("log", 0, 100, 5)),
                Do(Allocate("reserve", 9 * BLOCK_SIZE)),
                Do(Len("reserve")),
                Do(write("log", 100, 2 * BLOCK_SIZE as usize, 6)),
                Do(Len("log")),
                Do(Truncate("reserve", 0)),
                Do(write("log", 100, 2 * BLOCK_SIZE as usize, 6)),
                Do(Sync("log")),
            ],
        },
        // Each system call fails once at most (strace fails the n-th call of each).
        Scenario {
            name: "injected-errors",
            real: tmpfs(64),
            faults: DiskFaults::none(),
            steps: vec![
                Do(Create("journal")),
                Do(write("journal", 0, 3000, 7)),
                Failing(write("journal", 3000, 5000, 8), Injected::Eio),
                Do(Len("journal")),
                Failing(Sync("journal"), Injected::Eio),
                Do(write("journal", 3000, 100, 9)),
                Do(Sync("journal")),
                Failing(Truncate("journal", 10), Injected::Eio),
                Do(Len("journal")),
                Do(Create("journal.tmp")),
                Failing(Rename("journal.tmp", "journal"), Injected::Exdev),
                Do(List),
                Failing(Remove("journal.tmp"), Injected::Eio),
                Do(List),
                Failing(Allocate("journal.tmp", 3 * BLOCK_SIZE), Injected::Enospc),
                Do(Len("journal.tmp")),
                Failing(SyncDir, Injected::Eio),
                Do(SyncDir),
            ],
        },
        Scenario {
            name: "injected-enospc",
            real: tmpfs(64),
            faults: DiskFaults::none(),
            steps: vec![
                Do(Create("log")),
                Do(write("log", 0, 3000, 7)),
                Failing(write("log", 3000, 9000, 8), Injected::Enospc),
                Do(Len("log")),
                Do(write("log", 3000, 9000, 8)),
                Failing(Sync("log"), Injected::Enospc),
                Do(Sync("log")),
                Do(Len("log")),
            ],
        },
        Scenario {
            name: "read-only-remount",
            real: tmpfs(64),
            faults: DiskFaults::none(),
            steps: vec![
                Do(Create("journal")),
                Do(write("journal", 0, 5000, 10)),
                Do(Create("log")),
                Do(write("log", 0, 100, 11)),
                RemountReadOnly,
                Do(Create("new")),
                Do(Create("journal")),
                Do(write("journal", 5000, 10, 12)),
                Do(Truncate("log", 0)),
                Do(Allocate("log", BLOCK_SIZE)),
                Do(Sync("journal")),
                Do(SyncDir),
                Do(Rename("log", "log2")),
                Do(Remove("log")),
                Do(Read("journal", 0, 6000)),
                Do(Len("log")),
                Do(List),
            ],
        },
        Scenario {
            name: "device-out-of-space-under-ext4",
            real: RealSetup::Ext4OnFullDevice { image: 16 << 20, backing: 3 << 20 },
            faults: DiskFaults { fsync_failure: 0.5, read_only_after_error: 0.5, ..DiskFaults::none() },
            steps: vec![
                Do(Create("journal")),
                Do(write("journal", 0, 100, 13)),
                Do(Sync("journal")),
                Do(SyncDir),
                Do(Create("log")),
                // Accepted into the page cache; the device cannot take it.
                Do(write("log", 0, 4 << 20, 14)),
                Do(Sync("log")),
                Do(Sync("log")),
                Do(Sync("journal")),
                Do(write("journal", 100, 10, 15)),
                Do(Create("new")),
                Do(Create("journal")),
                Do(Remove("log")),
                Do(Read("log", 0, 100)),
                Do(Len("log")),
                Do(List),
                Do(SyncDir),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_the_simulated_disk_cannot_produce_is_reported_where_it_differs() {
        let scenario = scenarios().into_iter().find(|s| s.name == "short-write-then-enospc").expect("scenario");
        let mut real = simulate(&scenario, 0);
        assert_eq!(find_seed(&scenario, &real, 0..1), Ok(0), "a run of its own is found");
        // What a disk kinder than Linux shows: the write refused whole, nothing landed.
        let journal =
            |line: &str| line.split(" journal=").nth(1).map(|s| s.split(' ').next().unwrap_or("").to_string());
        assert_ne!(journal(&real[5]), journal(&real[4]), "the write landed in part");
        let kinder = real[5].replace(&journal(&real[5]).unwrap(), &journal(&real[4]).unwrap());
        real[5] = kinder.clone();
        let m = find_seed(&scenario, &real, 0..500).expect_err("no seed writes nothing there");
        assert_eq!((m.step, m.real.as_str()), (5, kinder.as_str()));
        assert!(m.to_string().contains("differs at step 5"), "{m}");
    }

    #[test]
    fn every_scenario_runs_on_the_simulated_disk() {
        for s in scenarios() {
            let run = simulate(&s, 1);
            assert_eq!(run.len(), s.steps.len(), "{}", s.name);
            assert_eq!(run, simulate(&s, 1), "{}: the same seed, the same run", s.name);
        }
    }
}
