//! The simulated disk: one flat directory whose files and entries become durable only
//! through the fsyncs a careful program issues. It is stricter than real file systems,
//! so that every missing fsync in the storage executor can be caught.
//!
//! # Model
//!
//! - Every file (an *identity*, like an inode) has a **durable image** and a **live
//!   image**. Reads see the live image (the page cache). The directory has a
//!   **durable** and a **live** set of entries (name → file identity).
//! - Every mutating call appends an **unsynced operation** to one list, in issue order:
//!   data writes (file, offset, bytes), size changes (file, length), and directory
//!   operations (create, rename, remove of an entry).
//! - [`FileSystem::sync_file`] applies that file's pending data operations, in order, to
//!   its durable image, and nothing else. [`FileSystem::sync_dir`] applies every pending
//!   directory operation, in order, to the durable directory, and nothing else. So a
//!   file whose data is synced but whose entry is not may still vanish in a crash, and
//!   a removed file may come back with its durable content.
//! - [`SimDisk::crash`] keeps the durable state, applies some of the unsynced operations
//!   according to a [`CrashMode`], and makes the live state equal to the new durable
//!   state. Nothing is unsynced afterwards; files no entry names are gone.
//!
//! Writes tear at [`SECTOR_SIZE`] granularity: a torn write persists any subset of its
//! sector-sized pieces (split at absolute sector boundaries of the file), and an append
//! that grows the file may leave it longer, with zeros or random garbage in the parts
//! of the new range that did not persist.
//!
//! Faults ([`DiskFaults`], all off by default) are injected with the disk's own random
//! stream and counted in [`FaultCounters`]. Slow operations and reordered completions
//! are the simulator's business (it schedules completions), not the disk's.
//!
//! Everything is deterministic: the only randomness is a [`SimRng`] derived from the
//! seed given to the constructor, and all state lives in ordered maps and vectors.
//!
//! # Decisions the design left open
//!
//! - Directory operations remember the file identity they touched. Applied out of
//!   order (a crash subset), a rename still moves only its own file and a remove only
//!   drops the entry if it still names that file, so a rename is atomic: a crash leaves
//!   the old or the new entry, never a mix (unless [`DiskFaults::broken_rename`]).
//! - A crash that applies a subset keeps issue order within each file; operations on
//!   different files commute, so any cross-file order is covered.
//! - A missing name is reported as [`StorageError::NotFound`] before any fault is drawn;
//!   an empty write inside the file records nothing.
//! - A failed fsync drops all of the file's unsynced data and size changes, and is only
//!   injected when there are some. `sync_dir` fails only through an I/O error, which
//!   leaves the directory operations pending.
//! - Bit rot XORs every byte of a bad sector with a non-zero mask, so any checksum
//!   catches it. Only a write covering the whole sector (or all of it up to the end
//!   of the file) rewrites it: reads are clean at once, the medium once that write is
//!   durable. A partial rewrite leaves the sector bad. Cutting the file below the
//!   sector also drops it. Rot is injected on syncs of any file (logs, the journal and
//!   its temporary file, backups, the reserve), in any of its durable sectors (headers
//!   and the last, partly filled sector included).
//! - A torn write that grows the file persists its new size half of the time; the
//!   non-persisted parts of the new range are all zeros or all random garbage.
//! - Renaming onto another name of the same file does nothing (POSIX); only a broken
//!   rename can create such a second name.

mod image;
mod space;

use crate::rng::SimRng;
use broker_core::{FileSystem, StorageError};
use image::Image;
use space::Blocks;
pub use space::BLOCK_SIZE;
use std::collections::{BTreeMap, BTreeSet};

/// The sector size of the simulated disk: the unit of torn writes and of bit rot.
pub const SECTOR_SIZE: u64 = 512;

/// The largest file the simulated disk holds. A write or truncate past it fails with
/// [`StorageError::DiskFull`] (a capacity limit, not an injected fault, so not counted).
pub const MAX_FILE_LEN: u64 = 1 << 30;

/// Per-kind fault probabilities, each in `0.0..=1.0`. All zero by default: a disk
/// built with [`DiskFaults::default`] never fails on its own (crashes still lose
/// unsynced data, since the caller asks for them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskFaults {
    /// Chance that any [`FileSystem`] call fails with [`StorageError::Io`]. It changes
    /// nothing, except that a failing `write_at` of two or more sectors applies, half
    /// of the time, a random proper subset of its sector pieces to the live image (all
    /// before a skipped one, some after it); those pieces are then ordinary unsynced writes.
    pub io_error: f64,
    /// Chance that a `write_at`, or a `create` of a new name, fails with
    /// [`StorageError::DiskFull`] (a quota, a thin-provisioned volume, another program
    /// filling the disk). A write writes nothing, or a prefix of itself up to a block it
    /// could not allocate (any number of its new blocks, none included), growing the
    /// file by it, as `write(2)` returns a short count before ENOSPC; a create changes
    /// nothing.
    pub disk_full: f64,
    /// Chance that a `sync_file` of a file with unsynced data fails (ext4/XFS
    /// behaviour): it returns [`StorageError::Io`] (EIO) or, as a thin-provisioned or
    /// loop-backed volume does when its backing store is full, [`StorageError::DiskFull`]
    /// (ENOSPC), and that file's unsynced data and size changes are dropped from the
    /// durable future. They stay readable in the live image but never become durable,
    /// and a later fsync succeeds without them.
    pub fsync_failure: f64,
    /// Chance, at each successful `sync_file` that made data durable, that one of that
    /// file's durable sectors goes bad (latent bit rot): any file, logs and journal alike.
    pub bit_rot: f64,
    /// Chance, during a crash in [`CrashMode::Prefix`] or [`CrashMode::RandomSubset`],
    /// that a write is applied torn rather than whole ([`CrashMode::OneTorn`] always
    /// tears its write).
    pub torn_write: f64,
    /// Chance that a crash applying an unsynced rename lands it half done: both names
    /// or neither name durable. Breaks rename atomicity; off by default, and the
    /// simulator never turns it on: the runtime contract requires an atomic rename
    /// (`ReplaceJournal`), which every file system the runtimes support provides.
    pub broken_rename: f64,
    /// Chance that an injected I/O error or failed fsync also leaves the file system
    /// read-only, as ext4 does when its journal aborts or under `errors=remount-ro`.
    /// From then on, creating a name, writing, truncating, allocating, renaming and
    /// removing fail with [`StorageError::PermissionDenied`], an fsync of unsynced data
    /// fails and drops it, and reads still work (see [`SimDisk::set_read_only`] for the
    /// two kinds). It lasts until the next crash (a reboot) or until faults are switched
    /// off (an operator repaired the file system).
    pub read_only_after_error: f64,
    /// The disk's capacity in bytes (0: unbounded), counted in whole blocks of
    /// [`BLOCK_SIZE`] over the files the live directory names, as Linux counts them: a
    /// write allocates the blocks it touches, a `truncate` that grows a file allocates
    /// nothing (a hole), one that cuts it frees the blocks past its end. While faults are
    /// on, a write that needs more blocks than are free writes what fits (up to the first
    /// block it cannot allocate), growing the file by it, then fails with
    /// [`StorageError::DiskFull`]; a create of a new name or a rename on a full disk may
    /// fail with it or succeed (tmpfs needs no block for either, ext4 may need a
    /// directory block); and an fsync of a file with unsynced data on a disk over 90%
    /// full may fail with it too (delayed allocation finds no block), dropping that data
    /// as a failed fsync does. The disk stays full until files shrink or go.
    pub capacity: u64,
}

impl DiskFaults {
    /// No faults at all (the default).
    pub fn none() -> DiskFaults {
        DiskFaults::default()
    }
}

/// How many faults of each kind the disk has injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FaultCounters {
    /// Calls failed with an injected I/O error.
    pub io_errors: u64,
    /// Failed writes that applied a prefix of their sectors to the live image.
    pub partial_writes: u64,
    /// Calls failed with an injected disk-full error.
    pub disk_full: u64,
    /// Calls failed because the disk was at its capacity ([`DiskFaults::capacity`]).
    pub out_of_space: u64,
    /// Writes that failed for lack of space after writing part of their bytes.
    pub short_writes: u64,
    /// Times the file system went read-only after an error.
    pub read_only_turns: u64,
    /// Calls refused because the file system was read-only.
    pub read_only_refusals: u64,
    /// Failed fsyncs (unsynced data dropped from the durable future).
    pub fsync_failures: u64,
    /// Unsynced operations dropped by failed fsyncs.
    pub ops_dropped_by_fsync: u64,
    /// Durable sectors marked bad by bit rot.
    pub bit_rot_sectors: u64,
    /// Of those, the last sector of their file (where rot looks like a torn write).
    pub rot_last_sectors: u64,
    /// Of those, sectors of files named `journal*`: the journal, its temporary file,
    /// backups and reserve.
    pub rot_journal_sectors: u64,
    /// Writes applied torn by crashes.
    pub torn_writes: u64,
    /// Renames a crash left half done (both names or neither).
    pub broken_renames: u64,
    /// Crashes.
    pub crashes: u64,
    /// Unsynced operations crashes dropped (torn writes count as applied).
    pub ops_dropped_by_crash: u64,
}

/// Which unsynced operations a crash applies on top of the durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashMode {
    /// None: only the durable state survives.
    DropAll,
    /// A random prefix (in issue order) of the unsynced operations; the first operation
    /// after the prefix may be applied torn (see [`DiskFaults::torn_write`]).
    Prefix,
    /// Every unsynced operation but one, chosen at random.
    AllButOne,
    /// One random unsynced write, torn (a random subset of its sectors persists);
    /// everything else is dropped. With no unsynced write, nothing is applied.
    OneTorn,
    /// Any subset of the unsynced operations, across all files. Operations on different
    /// files (and the data and directory sides) commute, so this covers any order
    /// across files; within one file the subset is applied in issue order, which gives
    /// each sector the content of some write to it (or its durable content).
    /// Writes may be torn (see [`DiskFaults::torn_write`]).
    RandomSubset,
}

impl CrashMode {
    /// Every crash mode.
    pub const ALL: [CrashMode; 5] =
        [CrashMode::DropAll, CrashMode::Prefix, CrashMode::AllButOne, CrashMode::OneTorn, CrashMode::RandomSubset];

    /// A short name, for traces and replay commands.
    pub fn name(self) -> &'static str {
        match self {
            CrashMode::DropAll => "drop-all",
            CrashMode::Prefix => "prefix",
            CrashMode::AllButOne => "all-but-one",
            CrashMode::OneTorn => "one-torn",
            CrashMode::RandomSubset => "random-subset",
        }
    }
}

/// What a crash did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CrashReport {
    /// The crash mode: the caller's, or for [`SimDisk::crash`] one drawn uniformly.
    pub mode: CrashMode,
    /// Unsynced operations applied, whole or torn.
    pub ops_applied: usize,
    /// Unsynced operations dropped. `ops_applied + ops_dropped` is the number of
    /// operations that were unsynced before the crash.
    pub ops_dropped: usize,
    /// Of the applied operations, writes applied torn.
    pub ops_torn: usize,
    /// Of the applied operations, renames left half done.
    pub renames_broken: usize,
}

/// A file identity (an inode number). Never reused within one disk.
type FileId = u64;

#[derive(Clone, Debug, Default)]
struct File {
    /// What survives a crash.
    durable: Image,
    /// What reads see. A crash makes it a copy of `durable` that shares every chunk
    /// until one side writes it.
    live: Image,
    /// Bad sectors on the medium (of the durable image). Pristine bytes are kept; reads
    /// corrupt these sectors deterministically.
    rot: BTreeSet<u64>,
    /// Bad sectors the live image has since rewritten whole (or cut off): live reads of
    /// them are clean, though the medium stays bad until the rewrite becomes durable.
    live_clean: BTreeSet<u64>,
    /// The blocks the live image holds ([`DiskFaults::capacity`]).
    blocks: Blocks,
}

/// How a file system is read-only ([`SimDisk::set_read_only`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadOnly {
    /// Mounted read-only (`mount -o remount,ro`, or ext4's `errors=remount-ro`): no file
    /// opens for writing, so a `create` of an existing name fails too, and so may an
    /// fsync (a runtime opens a file for writing to sync it).
    Mounted,
    /// The journal aborted after an error (ext4's `emergency_ro`): existing files still
    /// open for writing and fsyncs of files with nothing unsynced succeed, but nothing
    /// can change.
    Aborted,
}

/// One unsynced operation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Write { file: FileId, offset: u64, data: Vec<u8> },
    Truncate { file: FileId, len: u64 },
    Create { name: String, file: FileId },
    Rename { from: String, to: String, file: FileId },
    Remove { name: String, file: FileId },
}

impl Op {
    /// The file whose data or size this operation changes, if it is a data operation.
    fn data_file(&self) -> Option<FileId> {
        match self {
            Op::Write { file, .. } | Op::Truncate { file, .. } => Some(*file),
            Op::Create { .. } | Op::Rename { .. } | Op::Remove { .. } => None,
        }
    }
}

/// What a crash does with one unsynced operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Drop,
    Apply,
    Tear,
}

/// A simulated disk holding one flat directory. See the [module docs](self) for the model.
///
/// Cloning takes a full snapshot, random stream included, so a simulator can try
/// several crashes from one point. File contents are shared copy-on-write
/// (`image::Image`), so a clone costs a pointer per chunk of every file, not its bytes.
#[derive(Clone, Debug)]
pub struct SimDisk {
    rng: SimRng,
    faults: DiskFaults,
    faults_enabled: bool,
    files: BTreeMap<FileId, File>,
    next_file: FileId,
    durable_dir: BTreeMap<String, FileId>,
    live_dir: BTreeMap<String, FileId>,
    pending: Vec<Op>,
    counters: FaultCounters,
    rotted: BTreeSet<String>,
    read_only: Option<ReadOnly>,
    /// The read-only state came from an injected failure (switching faults off ends it).
    read_only_by_fault: bool,
}

impl SimDisk {
    /// An empty, fault-free disk whose random choices (crash modes, torn sectors,
    /// garbage) all derive from `seed` (through `SimRng::fork(seed, "disk")`).
    pub fn new(seed: u64) -> SimDisk {
        SimDisk::with_faults(seed, DiskFaults::none())
    }

    /// An empty disk injecting `faults`, all random choices derived from `seed`.
    pub fn with_faults(seed: u64, faults: DiskFaults) -> SimDisk {
        SimDisk {
            rng: SimRng::fork(seed, "disk"),
            faults,
            faults_enabled: true,
            files: BTreeMap::new(),
            next_file: 1,
            durable_dir: BTreeMap::new(),
            live_dir: BTreeMap::new(),
            pending: Vec::new(),
            counters: FaultCounters::default(),
            rotted: BTreeSet::new(),
            read_only: None,
            read_only_by_fault: false,
        }
    }

    /// The fault probabilities.
    pub fn faults(&self) -> DiskFaults {
        self.faults
    }

    /// Replaces the fault probabilities.
    pub fn set_faults(&mut self, faults: DiskFaults) {
        self.faults = faults;
    }

    /// Switches fault injection on or off (on at construction). While off, no fault of
    /// any kind is injected, crashes tear only in [`CrashMode::OneTorn`] and never break
    /// a rename; sectors already rotted stay bad (the damage is on the medium).
    pub fn set_faults_enabled(&mut self, enabled: bool) {
        self.faults_enabled = enabled;
        if !enabled && self.read_only_by_fault {
            self.read_only = None;
            self.read_only_by_fault = false;
        }
    }

    /// Makes the file system read-only, or writable again (`None`). Made
    /// [`ReadOnly::Mounted`], it first makes everything durable, as a remount does; a
    /// crash makes it writable again.
    pub fn set_read_only(&mut self, read_only: Option<ReadOnly>) {
        if read_only == Some(ReadOnly::Mounted) {
            for op in std::mem::take(&mut self.pending) {
                self.apply(op);
            }
        }
        self.read_only = read_only;
        self.read_only_by_fault = false;
    }

    /// Whether, and how, the file system is read-only.
    pub fn read_only(&self) -> Option<ReadOnly> {
        self.read_only
    }

    /// Whether fault injection is on.
    pub fn faults_enabled(&self) -> bool {
        self.faults_enabled
    }

    /// How many faults of each kind were injected so far.
    pub fn counters(&self) -> FaultCounters {
        self.counters
    }

    /// The sector size: the unit of torn writes and bit rot ([`SECTOR_SIZE`]).
    pub fn sector_size(&self) -> u64 {
        SECTOR_SIZE
    }

    /// How many operations are not yet durable.
    pub fn unsynced_ops(&self) -> usize {
        self.pending.len()
    }

    /// The entries that survive a [`CrashMode::DropAll`] crash, sorted.
    pub fn durable_names(&self) -> Vec<String> {
        self.durable_dir.keys().cloned().collect()
    }

    /// The entries reads and `list` see now, sorted.
    pub fn live_names(&self) -> Vec<String> {
        self.live_dir.keys().cloned().collect()
    }

    /// The bytes a read of `name` would return after a [`CrashMode::DropAll`] crash
    /// (durable content, bit rot applied), or `None` if the durable directory has no
    /// such entry.
    pub fn durable_file(&self, name: &str) -> Option<Vec<u8>> {
        let id = *self.durable_dir.get(name)?;
        let f = self.files.get(&id)?;
        let mut out = f.durable.to_vec();
        corrupt(&mut out, 0, id, &f.rot, &BTreeSet::new());
        Some(out)
    }

    /// The bytes a read of `name` returns now (live content, bit rot applied), or
    /// `None` if the live directory has no such entry. Injects no fault.
    pub fn live_file(&self, name: &str) -> Option<Vec<u8>> {
        let id = *self.live_dir.get(name)?;
        let f = self.files.get(&id)?;
        let mut out = f.live.to_vec();
        corrupt(&mut out, 0, id, &f.rot, &f.live_clean);
        Some(out)
    }

    /// The bytes a read of `name` would return now if no rot had been injected (the
    /// simulator's knowledge, for telling damage the broker must survive from damage no
    /// redundancy can), or `None` if the live directory has no such entry.
    pub fn live_file_unrotted(&self, name: &str) -> Option<Vec<u8>> {
        let id = *self.live_dir.get(name)?;
        Some(self.files.get(&id)?.live.to_vec())
    }

    /// Whether a read of `name` would now return any byte rot changed: a bad sector
    /// within its live length that no later write made clean.
    pub fn live_file_rotted(&self, name: &str) -> bool {
        let Some(f) = self.live_dir.get(name).and_then(|id| self.files.get(id)) else {
            return false;
        };
        let len = f.live.len();
        len > 0 && f.rot.range(..=(len - 1) / SECTOR_SIZE).any(|s| !f.live_clean.contains(s))
    }

    /// The names (as named when it happened) of every file that has had bit rot
    /// injected, sorted: any file (logs, the journal and its temporary, backup and
    /// reserve files).
    pub fn rotted_files(&self) -> Vec<String> {
        self.rotted.iter().cloned().collect()
    }

    /// A hash of the whole state (files, entries, unsynced operations, counters and
    /// the random stream's next output), to prove two runs identical.
    pub fn state_hash(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(self.dir_hash(&self.durable_dir));
        h.u64(self.dir_hash(&self.live_dir));
        for (id, f) in &self.files {
            h.u64(*id);
            h.image(&f.durable);
            h.image(&f.live);
            h.u64(f.rot.len() as u64);
            f.rot.iter().for_each(|s| h.u64(*s));
            h.u64(f.live_clean.len() as u64);
            f.live_clean.iter().for_each(|s| h.u64(*s));
            h.u64(f.blocks.count());
        }
        h.u64(match self.read_only {
            None => 0,
            Some(ReadOnly::Mounted) => 1,
            Some(ReadOnly::Aborted) => 2,
        });
        h.u64(self.next_file);
        for op in &self.pending {
            match op {
                Op::Write { file, offset, data } => {
                    h.u64(1);
                    h.u64(*file);
                    h.u64(*offset);
                    h.bytes(data);
                }
                Op::Truncate { file, len } => {
                    h.u64(2);
                    h.u64(*file);
                    h.u64(*len);
                }
                Op::Create { name, file } => {
                    h.u64(3);
                    h.bytes(name.as_bytes());
                    h.u64(*file);
                }
                Op::Rename { from, to, file } => {
                    h.u64(4);
                    h.bytes(from.as_bytes());
                    h.bytes(to.as_bytes());
                    h.u64(*file);
                }
                Op::Remove { name, file } => {
                    h.u64(5);
                    h.bytes(name.as_bytes());
                    h.u64(*file);
                }
            }
        }
        let c = &self.counters;
        for v in [
            c.io_errors,
            c.partial_writes,
            c.disk_full,
            c.out_of_space,
            c.short_writes,
            c.read_only_turns,
            c.read_only_refusals,
            c.rot_last_sectors,
            c.rot_journal_sectors,
            c.fsync_failures,
            c.ops_dropped_by_fsync,
            c.bit_rot_sectors,
            c.torn_writes,
            c.broken_renames,
            c.crashes,
            c.ops_dropped_by_crash,
        ] {
            h.u64(v);
        }
        self.rotted.iter().for_each(|n| h.bytes(n.as_bytes()));
        h.u64(self.rng.clone().u64());
        h.finish()
    }

    fn dir_hash(&self, dir: &BTreeMap<String, FileId>) -> u64 {
        let mut h = Fnv::new();
        for (name, id) in dir {
            h.bytes(name.as_bytes());
            h.u64(*id);
        }
        h.finish()
    }

    /// Crashes with a crash mode chosen by the disk's random stream (uniformly).
    pub fn crash(&mut self) -> CrashReport {
        let mode = CrashMode::ALL[self.rng.below(CrashMode::ALL.len() as u64) as usize];
        self.crash_with(mode)
    }

    /// Crashes with the given mode: the durable state plus the unsynced operations the
    /// mode applies becomes the new durable state, the live state becomes equal to it,
    /// nothing is unsynced, and files no durable entry names are gone.
    pub fn crash_with(&mut self, mode: CrashMode) -> CrashReport {
        let ops = std::mem::take(&mut self.pending);
        let n = ops.len();
        let mut plan = vec![Fate::Drop; n];
        match mode {
            CrashMode::DropAll => {}
            CrashMode::Prefix => {
                let k = self.rng.below(n as u64 + 1) as usize;
                plan[..k].fill(Fate::Apply);
                if k < n && matches!(ops[k], Op::Write { .. }) && self.inject(self.faults.torn_write) {
                    plan[k] = Fate::Tear;
                }
            }
            CrashMode::AllButOne => {
                plan.fill(Fate::Apply);
                if n > 0 {
                    plan[self.rng.below(n as u64) as usize] = Fate::Drop;
                }
            }
            CrashMode::OneTorn => {
                let writes: Vec<usize> = (0..n).filter(|&i| matches!(ops[i], Op::Write { .. })).collect();
                if let Some(&i) = self.rng.pick(&writes) {
                    plan[i] = Fate::Tear;
                }
            }
            CrashMode::RandomSubset => {
                for (i, op) in ops.iter().enumerate() {
                    if self.rng.chance(0.5) {
                        let tear = matches!(op, Op::Write { .. }) && self.inject(self.faults.torn_write);
                        plan[i] = if tear { Fate::Tear } else { Fate::Apply };
                    }
                }
            }
        }
        let mut report = CrashReport { mode, ops_applied: 0, ops_dropped: 0, ops_torn: 0, renames_broken: 0 };
        for (op, fate) in ops.into_iter().zip(plan) {
            match fate {
                Fate::Drop => report.ops_dropped += 1,
                Fate::Apply => {
                    report.ops_applied += 1;
                    if let Op::Rename { from, to, file } = &op {
                        if self.inject(self.faults.broken_rename) {
                            report.renames_broken += 1;
                            self.break_rename(from, to, *file);
                            continue;
                        }
                    }
                    self.apply(op);
                }
                Fate::Tear => {
                    report.ops_applied += 1;
                    report.ops_torn += 1;
                    if let Op::Write { file, offset, data } = op {
                        self.apply_torn_write(file, offset, &data);
                    }
                }
            }
        }
        // The live state restarts from the durable one; unnamed files are gone.
        let named: BTreeSet<FileId> = self.durable_dir.values().copied().collect();
        self.files.retain(|id, _| named.contains(id));
        for f in self.files.values_mut() {
            f.live = f.durable.clone();
            f.live_clean.clear();
            f.blocks = Blocks::dense(f.live.len());
        }
        self.live_dir = self.durable_dir.clone();
        // A reboot: the file system is checked and mounted writable again.
        self.read_only = None;
        self.read_only_by_fault = false;
        self.counters.crashes += 1;
        self.counters.ops_dropped_by_crash += report.ops_dropped as u64;
        self.counters.torn_writes += report.ops_torn as u64;
        self.counters.broken_renames += report.renames_broken as u64;
        report
    }

    // --- internals -------------------------------------------------------------------

    /// Whether to inject a fault of probability `p` now (draws only if `p > 0`).
    fn inject(&mut self, p: f64) -> bool {
        self.faults_enabled && self.rng.chance(p)
    }

    /// The blocks the directory's files hold now.
    fn used_blocks(&self) -> u64 {
        self.live_dir.values().filter_map(|id| self.files.get(id)).map(|f| f.blocks.count()).sum()
    }

    /// How many blocks are free, if the capacity is in force (faults on, a capacity set).
    fn free_blocks(&self) -> Option<u64> {
        let cap = self.faults.capacity;
        (cap > 0 && self.faults_enabled).then(|| (cap / BLOCK_SIZE).saturating_sub(self.used_blocks()))
    }

    /// Whether a create of a new name or a rename fails for lack of space: only on a
    /// full disk, and then only some of the time (see [`DiskFaults::capacity`]).
    fn entry_refused(&mut self, call: &str, name: &str) -> Result<(), StorageError> {
        if self.free_blocks() == Some(0) && self.rng.chance(0.5) {
            self.counters.out_of_space += 1;
            return Err(StorageError::DiskFull(format!("{call} {name}: no space left on the disk")));
        }
        Ok(())
    }

    /// An injected I/O error for `call` on `name`, if one is due; it may leave the file
    /// system read-only ([`DiskFaults::read_only_after_error`]).
    fn io_fault(&mut self, call: &str, name: &str) -> Result<(), StorageError> {
        if self.inject(self.faults.io_error) {
            self.counters.io_errors += 1;
            self.maybe_turn_read_only();
            return Err(StorageError::Io(format!("injected I/O error: {call} {name}")));
        }
        Ok(())
    }

    /// After an injected failure: the file system may go read-only, of either kind.
    fn maybe_turn_read_only(&mut self) {
        if self.read_only.is_none() && self.inject(self.faults.read_only_after_error) {
            self.counters.read_only_turns += 1;
            self.read_only_by_fault = true;
            self.read_only = Some(if self.rng.chance(0.5) { ReadOnly::Aborted } else { ReadOnly::Mounted });
        }
    }

    /// Refuses a call that would change something on a read-only file system.
    fn check_writable(&mut self, call: &str, name: &str) -> Result<(), StorageError> {
        if self.read_only.is_some() {
            self.counters.read_only_refusals += 1;
            return Err(StorageError::PermissionDenied(format!("{call} {name}: read-only file system")));
        }
        Ok(())
    }

    fn id_of(&self, name: &str) -> Result<FileId, StorageError> {
        self.live_dir.get(name).copied().ok_or_else(|| StorageError::NotFound(name.to_string()))
    }

    fn file_mut(&mut self, id: FileId) -> Result<&mut File, StorageError> {
        self.files.get_mut(&id).ok_or_else(|| StorageError::Io(format!("simulated disk lost file #{id}")))
    }

    /// Applies `data` at `offset` to the live image, allocating the blocks it touches,
    /// and records the unsynced write.
    fn live_write(&mut self, id: FileId, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let f = self.file_mut(id)?;
        if data.is_empty() && offset <= f.live.len() {
            return Ok(()); // changes nothing: no unsynced operation
        }
        f.live.write(offset, data);
        let (lo, hi) = space::block_span(offset, offset + data.len() as u64);
        f.blocks.insert(lo, hi);
        let cleaned = covered(&f.rot, offset, offset + data.len() as u64, f.live.len());
        f.live_clean.extend(cleaned);
        self.pending.push(Op::Write { file: id, offset, data: data.to_vec() });
        Ok(())
    }

    /// Writes what fits of `data` at `offset` with `free` blocks left: all of it, or the
    /// bytes before the first block it cannot allocate. Returns whether all of it fit.
    fn write_what_fits(&mut self, id: FileId, offset: u64, data: &[u8], free: u64) -> Result<bool, StorageError> {
        let end = offset + data.len() as u64;
        let (reached, _) = space::plan_write(&self.file_mut(id)?.blocks, offset, end, free);
        if reached > offset {
            self.live_write(id, offset, &data[..(reached - offset) as usize])?;
        }
        Ok(reached == end)
    }

    /// How many blocks a write of `offset..end` to file `id` would allocate.
    fn blocks_needed(&mut self, id: FileId, offset: u64, end: u64) -> Result<u64, StorageError> {
        let (lo, hi) = space::block_span(offset, end);
        Ok(self.file_mut(id)?.blocks.gaps(lo, hi).iter().map(|(a, b)| b - a).sum())
    }

    /// Applies one unsynced operation whole to the durable state.
    fn apply(&mut self, op: Op) {
        match op {
            Op::Write { file, offset, data } => {
                if let Some(f) = self.files.get_mut(&file) {
                    f.durable.write(offset, &data);
                    let healed = covered(&f.rot, offset, offset + data.len() as u64, f.durable.len());
                    for s in healed {
                        f.rot.remove(&s);
                        f.live_clean.remove(&s);
                    }
                }
            }
            Op::Truncate { file, len } => {
                if let Some(f) = self.files.get_mut(&file) {
                    f.durable.set_len(len);
                    f.rot.retain(|s| s * SECTOR_SIZE < len);
                    f.live_clean.retain(|s| s * SECTOR_SIZE < len);
                }
            }
            Op::Create { name, file } => {
                self.durable_dir.insert(name, file);
            }
            Op::Rename { from, to, file } => {
                if self.durable_dir.get(&from) == Some(&file) {
                    self.durable_dir.remove(&from);
                }
                self.durable_dir.insert(to, file);
            }
            Op::Remove { name, file } => {
                if self.durable_dir.get(&name) == Some(&file) {
                    self.durable_dir.remove(&name);
                }
            }
        }
    }

    /// A rename a crash leaves half done: both names, or neither, name the file.
    fn break_rename(&mut self, from: &str, to: &str, file: FileId) {
        if self.rng.chance(0.5) {
            self.durable_dir.insert(from.to_string(), file);
            self.durable_dir.insert(to.to_string(), file);
        } else {
            if self.durable_dir.get(from) == Some(&file) {
                self.durable_dir.remove(from);
            }
            self.durable_dir.remove(to);
        }
    }

    /// Applies a write torn to the durable image: a random subset of its sector pieces
    /// persists. If it grows the file, the size may or may not persist; the parts of the
    /// new range that did not persist hold zeros or random garbage.
    fn apply_torn_write(&mut self, id: FileId, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let pieces = pieces(offset, end);
        let keep: Vec<bool> = pieces.iter().map(|_| self.rng.chance(0.5)).collect();
        let Some(old_len) = self.files.get(&id).map(|f| f.durable.len()) else { return };
        let mut new_len = old_len;
        let mut garbage = Vec::new();
        if end > old_len {
            let size_persisted = self.rng.chance(0.5);
            let last_kept = pieces.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| p.1).max();
            new_len = if size_persisted { end } else { old_len.max(last_kept.unwrap_or(old_len)) };
            if new_len > old_len && self.rng.chance(0.5) {
                garbage = vec![0u8; (new_len - old_len) as usize];
                self.rng.fill(&mut garbage);
            }
        }
        let Some(f) = self.files.get_mut(&id) else { return };
        if new_len > old_len {
            f.durable.set_len(new_len);
            if !garbage.is_empty() {
                f.durable.write(old_len, &garbage);
            }
        }
        for (&(lo, hi), _) in pieces.iter().zip(&keep).filter(|(_, k)| **k) {
            let src = &data[(lo - offset) as usize..(hi - offset) as usize];
            f.durable.write(lo, src);
            for s in covered(&f.rot, lo, hi, new_len) {
                f.rot.remove(&s);
                f.live_clean.remove(&s);
            }
        }
    }

    fn check_name(name: &str) -> Result<(), StorageError> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(StorageError::Io(format!("invalid file name {name:?} for a flat directory")));
        }
        Ok(())
    }

    fn check_len(name: &str, len: u64) -> Result<(), StorageError> {
        if len > MAX_FILE_LEN {
            return Err(StorageError::DiskFull(format!("{name}: {len} bytes exceed the simulated disk's file limit")));
        }
        Ok(())
    }
}

impl FileSystem for SimDisk {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        Self::check_name(name)?;
        if self.read_only.is_some() {
            // An existing file may still open for writing after a journal abort (and when
            // a runtime holds it open already); a new name never gets an entry.
            let exists = self.live_dir.contains_key(name);
            if !(exists && (self.read_only == Some(ReadOnly::Aborted) || self.rng.chance(0.5))) {
                self.check_writable("create", name)?;
            }
        }
        self.io_fault("create", name)?;
        if self.live_dir.contains_key(name) {
            return Ok(());
        }
        if self.inject(self.faults.disk_full) {
            self.counters.disk_full += 1;
            return Err(StorageError::DiskFull(format!("injected: create {name}")));
        }
        self.entry_refused("create", name)?;
        let id = self.next_file;
        self.next_file += 1;
        self.files.insert(id, File::default());
        self.live_dir.insert(name.to_string(), id);
        self.pending.push(Op::Create { name: name.to_string(), file: id });
        Ok(())
    }

    /// On an injected I/O error, a write of two or more sector pieces applies, half of
    /// the time, a random proper subset of its pieces to the live image (as unsynced
    /// writes, in order) before failing: a write torn without a crash. A write that
    /// finds too few free blocks writes what fits, then fails ([`DiskFaults::capacity`]).
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let id = self.id_of(name)?;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| StorageError::Io(format!("{name}: write overflows")))?;
        Self::check_len(name, end)?;
        self.check_writable("write", name)?;
        if self.inject(self.faults.io_error) {
            self.counters.io_errors += 1;
            let pieces = pieces(offset, end);
            if pieces.len() >= 2 && self.rng.chance(0.5) {
                let skip = self.rng.below(pieces.len() as u64) as usize;
                let mut free = self.free_blocks().unwrap_or(u64::MAX);
                for (i, (lo, hi)) in pieces.iter().enumerate() {
                    if i != skip && (i < skip || self.rng.chance(0.5)) {
                        // Only pieces whose blocks the disk still has land.
                        let need = self.blocks_needed(id, *lo, *hi)?;
                        if need <= free {
                            free -= need;
                            let part = &data[(lo - offset) as usize..(hi - offset) as usize];
                            self.live_write(id, *lo, part)?;
                        }
                    }
                }
                self.counters.partial_writes += 1;
            }
            self.maybe_turn_read_only();
            return Err(StorageError::Io(format!("injected I/O error: write {name} at {offset}")));
        }
        if self.inject(self.faults.disk_full) {
            self.counters.disk_full += 1;
            // Nothing written (refused before any byte, as a quota checked up front), or
            // as if the disk had only some of the blocks this write needs: the bytes up
            // to the first block it could not get land.
            let need = self.blocks_needed(id, offset, end)?;
            if need > 0 && self.rng.chance(0.5) {
                let had = self.rng.below(need).min(self.free_blocks().unwrap_or(u64::MAX));
                self.write_what_fits(id, offset, data, had)?;
            }
            return Err(StorageError::DiskFull(format!("injected: write {name} at {offset}")));
        }
        if let Some(free) = self.free_blocks() {
            if !self.write_what_fits(id, offset, data, free)? {
                self.counters.out_of_space += 1;
                let written = self.file_mut(id)?.live.len() > offset;
                self.counters.short_writes += u64::from(written);
                let used = self.used_blocks();
                return Err(StorageError::DiskFull(format!(
                    "write {name} at {offset}: no space left ({used} blocks of {BLOCK_SIZE} bytes used)"
                )));
            }
            return Ok(());
        }
        self.live_write(id, offset, data)
    }

    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let id = self.id_of(name)?;
        self.io_fault("read", name)?;
        let f = self.file_mut(id)?;
        let start = offset.min(f.live.len());
        let mut out = f.live.read(start, len);
        corrupt(&mut out, start, id, &f.rot, &f.live_clean);
        Ok(out)
    }

    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        let id = self.id_of(name)?;
        self.io_fault("len", name)?;
        Ok(self.file_mut(id)?.live.len())
    }

    /// Growing a file allocates nothing (the new bytes are a hole); cutting it frees
    /// its blocks past the new end.
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let id = self.id_of(name)?;
        Self::check_len(name, len)?;
        self.check_writable("truncate", name)?;
        self.io_fault("truncate", name)?;
        let f = self.file_mut(id)?;
        f.live.set_len(len);
        f.blocks.cut(len.div_ceil(BLOCK_SIZE));
        let cut: Vec<u64> = f.rot.iter().copied().filter(|s| s * SECTOR_SIZE >= len).collect();
        f.live_clean.extend(cut);
        self.pending.push(Op::Truncate { file: id, len });
        Ok(())
    }

    /// Allocates every block below `len` and grows the file to it. Without enough free
    /// blocks it fails with [`StorageError::DiskFull`], having allocated all of it,
    /// none of it (tmpfs), or some of it with the file grown over what it got (ext4).
    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let id = self.id_of(name)?;
        Self::check_len(name, len)?;
        self.check_writable("allocate", name)?;
        self.io_fault("allocate", name)?;
        if self.inject(self.faults.disk_full) {
            self.counters.disk_full += 1;
            return Err(StorageError::DiskFull(format!("injected: allocate {name} to {len} bytes")));
        }
        let have = self.file_mut(id)?.live.len();
        let need = self.blocks_needed(id, 0, len)?;
        let free = self.free_blocks().unwrap_or(u64::MAX);
        let got = if need <= free { need } else { self.rng.below(free + 1) };
        let gaps = self.file_mut(id)?.blocks.gaps(0, len.div_ceil(BLOCK_SIZE));
        let mut left = got;
        let mut reached = 0;
        for (a, b) in gaps {
            let n = (b - a).min(left);
            self.file_mut(id)?.blocks.insert(a, a + n);
            left -= n;
            reached = a + n;
            if n < b - a {
                break;
            }
        }
        let new_len = if got == need { len.max(have) } else { (reached * BLOCK_SIZE).min(len).max(have) };
        if new_len > have {
            self.file_mut(id)?.live.set_len(new_len);
            self.pending.push(Op::Truncate { file: id, len: new_len });
        }
        if got < need {
            self.counters.out_of_space += 1;
            return Err(StorageError::DiskFull(format!("allocate {name} to {len} bytes: no space left")));
        }
        Ok(())
    }

    /// Applies this file's unsynced data operations to its durable image, in order.
    /// May fail with an injected I/O error (nothing changes, the data stays unsynced)
    /// or an injected fsync failure (the data is dropped from the durable future).
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        let id = self.id_of(name)?;
        if self.read_only.is_none() {
            self.io_fault("fsync", name)?;
        }
        let (mine, rest): (Vec<Op>, Vec<Op>) =
            std::mem::take(&mut self.pending).into_iter().partition(|op| op.data_file() == Some(id));
        self.pending = rest;
        let lost = mine.len() as u64;
        if let Some(ro) = self.read_only {
            // Nothing reaches the disk any more: unsynced data is lost. With nothing
            // unsynced, a runtime that opens the file for writing to sync it is refused on
            // a file system mounted read-only, and one whose journal aborted may still
            // report the earlier failure (EIO) or succeed.
            self.counters.ops_dropped_by_fsync += lost;
            let refused = match (lost > 0, ro) {
                (true, _) if self.rng.chance(0.5) => Some(false),
                (true, _) => Some(true),
                (false, ReadOnly::Mounted) => self.rng.chance(0.5).then_some(false),
                (false, ReadOnly::Aborted) => self.rng.chance(0.5).then_some(true),
            };
            return match refused {
                None => Ok(()),
                Some(io) => {
                    self.counters.read_only_refusals += 1;
                    Err(if io {
                        StorageError::Io(format!("fsync {name}: I/O error on a read-only file system"))
                    } else {
                        StorageError::PermissionDenied(format!("fsync {name}: read-only file system"))
                    })
                }
            };
        }
        let nearly_full =
            self.free_blocks().is_some_and(|free| free.saturating_mul(10) <= self.faults.capacity / BLOCK_SIZE);
        if lost > 0 && nearly_full && self.inject(0.5) {
            self.counters.out_of_space += 1;
            self.counters.ops_dropped_by_fsync += lost;
            return Err(StorageError::DiskFull(format!(
                "fsync {name}: no space left for its unsynced data: {lost} operations lost"
            )));
        }
        if lost > 0 && self.inject(self.faults.fsync_failure) {
            self.counters.fsync_failures += 1;
            self.counters.ops_dropped_by_fsync += lost;
            self.maybe_turn_read_only();
            if self.rng.chance(0.5) {
                return Err(StorageError::DiskFull(format!(
                    "injected fsync failure: {name}: the volume has no space for it: {lost} unsynced operations lost"
                )));
            }
            return Err(StorageError::Io(format!("injected fsync failure: {name}: {lost} unsynced operations lost")));
        }
        let made_durable = !mine.is_empty();
        for op in mine {
            self.apply(op);
        }
        // Rot lands in any durable sector of any file, headers and last, partly filled
        // sectors included: the broker must repair or report it, never take it for a
        // torn write.
        if made_durable && self.inject(self.faults.bit_rot) {
            let sectors = self.files.get(&id).map_or(0, |f| f.durable.len().div_ceil(SECTOR_SIZE));
            if sectors >= 1 {
                let s = self.rng.below(sectors);
                let f = self.file_mut(id)?;
                f.live_clean.remove(&s);
                if f.rot.insert(s) {
                    self.counters.bit_rot_sectors += 1;
                    self.counters.rot_last_sectors += u64::from(s + 1 == sectors);
                    self.counters.rot_journal_sectors += u64::from(name.starts_with("journal"));
                    self.rotted.insert(name.to_string());
                }
            }
        }
        Ok(())
    }

    /// Applies every unsynced directory operation to the durable directory, in order.
    /// On a read-only file system, pending ones can no longer be made durable.
    fn sync_dir(&mut self) -> Result<(), StorageError> {
        if self.read_only.is_some() {
            // Pending entries can no longer be made durable: the fsync fails (EIO or
            // EROFS); a file system whose journal aborted may also answer success (they
            // stay pending: a crash decides).
            let pending = self.pending.iter().any(|op| op.data_file().is_none());
            if !pending || (self.read_only == Some(ReadOnly::Aborted) && self.rng.chance(1.0 / 3.0)) {
                return Ok(());
            }
            self.counters.read_only_refusals += 1;
            if self.rng.chance(0.5) {
                return Err(StorageError::Io("fsync of the directory: I/O error on a read-only file system".into()));
            }
            return Err(StorageError::PermissionDenied("fsync of the directory: read-only file system".into()));
        }
        self.io_fault("fsync", "the directory")?;
        let (dir_ops, rest): (Vec<Op>, Vec<Op>) =
            std::mem::take(&mut self.pending).into_iter().partition(|op| op.data_file().is_none());
        self.pending = rest;
        for op in dir_ops {
            self.apply(op);
        }
        Ok(())
    }

    /// Renaming a name to itself, or to another name of the same file (possible only
    /// after a broken rename), does nothing, as POSIX specifies.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        let id = self.id_of(from)?;
        Self::check_name(to)?;
        self.check_writable("rename", from)?;
        self.io_fault("rename", from)?;
        if self.live_dir.get(to) == Some(&id) {
            return Ok(());
        }
        self.entry_refused("rename", from)?;
        self.live_dir.remove(from);
        self.live_dir.insert(to.to_string(), id);
        self.pending.push(Op::Rename { from: from.to_string(), to: to.to_string(), file: id });
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        let id = self.id_of(name)?;
        self.check_writable("remove", name)?;
        self.io_fault("remove", name)?;
        self.live_dir.remove(name);
        self.pending.push(Op::Remove { name: name.to_string(), file: id });
        Ok(())
    }

    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        self.io_fault("list", "the directory")?;
        Ok(self.live_names())
    }
}

/// `lo..hi` split at sector boundaries.
fn pieces(lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = lo;
    while at < hi {
        let stop = ((at / SECTOR_SIZE + 1) * SECTOR_SIZE).min(hi);
        out.push((at, stop));
        at = stop;
    }
    out
}

/// The sectors of `set` that `lo..hi` covers whole in a file `file_len` bytes long
/// (a last, partial sector counts as covered if the range reaches the end of file).
fn covered(set: &BTreeSet<u64>, lo: u64, hi: u64, file_len: u64) -> Vec<u64> {
    if lo >= hi {
        return Vec::new();
    }
    set.range(lo / SECTOR_SIZE..=(hi - 1) / SECTOR_SIZE)
        .copied()
        .filter(|&s| {
            let start = s * SECTOR_SIZE;
            let end = (start + SECTOR_SIZE).min(file_len);
            start >= lo && end <= hi
        })
        .collect()
}

/// Corrupts, in `buf` (the bytes of file `id` from position `at`), every byte of a
/// sector in `rot` but not in `clean`, deterministically: XOR with a non-zero mask
/// derived from the file, the sector and the position, so a re-read gives the same
/// bad bytes and a retry never heals them.
fn corrupt(buf: &mut [u8], at: u64, id: FileId, rot: &BTreeSet<u64>, clean: &BTreeSet<u64>) {
    if buf.is_empty() {
        return;
    }
    let end = at + buf.len() as u64;
    for &s in rot.range(at / SECTOR_SIZE..=(end - 1) / SECTOR_SIZE) {
        if clean.contains(&s) {
            continue;
        }
        let lo = (s * SECTOR_SIZE).max(at);
        let hi = ((s + 1) * SECTOR_SIZE).min(end);
        for p in lo..hi {
            buf[(p - at) as usize] ^= rot_mask(id, s, p);
        }
    }
}

/// The non-zero XOR mask of byte `pos` in bad sector `sector` of file `id`.
fn rot_mask(id: FileId, sector: u64, pos: u64) -> u8 {
    let mut z =
        id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sector.rotate_left(29) ^ pos.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z as u8) | 1
}

/// FNV-1a, for [`SimDisk::state_hash`].
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn byte(&mut self, b: u8) {
        self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }

    fn u64(&mut self, v: u64) {
        v.to_le_bytes().into_iter().for_each(|b| self.byte(b));
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        b.iter().for_each(|&b| self.byte(b));
    }

    /// As [`Fnv::bytes`] of the image's bytes in one slice.
    fn image(&mut self, img: &Image) {
        self.u64(img.len());
        img.slices().flatten().for_each(|&b| self.byte(b));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests;
