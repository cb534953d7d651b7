//! A small crashable in-memory file system for the kit's own tests: the reference that
//! passes every check, and, with a [`Bug`] switched on, file systems that must fail.
//!
//! Each file has a durable image, a live image (what reads see) and its unsynced data
//! operations; the directory has a durable and a live map of names to files and the
//! unsynced directory operations, in groups that a crash applies whole (a rename is
//! one group). `sync_file` applies the file's operations to its durable image,
//! `sync_dir` every directory group. A crash keeps the durable state plus a prefix of
//! the directory groups (its length cycles with the crash count) and, on odd crashes,
//! every unsynced data operation. A failed `sync_file` drops the file's unsynced
//! operations, as Linux drops the dirty pages of a failed write-back; a failed
//! `sync_dir` keeps the directory's.
#![allow(dead_code)]

use broker_conformance::{Fault, Subject};
use broker_core::{FileSystem, StorageError};
use std::collections::BTreeMap;

/// A bug a broken file system has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// `sync_dir` does nothing: created, renamed and removed entries never become durable.
    SkipDirSync,
    /// A failed write-back is reported as `Ok` (the data is lost all the same).
    SwallowFailedSync,
    /// After a failed write-back of a file, every later `sync_file` of it says `Ok`
    /// but makes nothing durable: the retry reports the lost data as durable.
    StickyFailedSync,
    /// A failed `sync_dir` is reported as `Ok`.
    SwallowFailedDirSync,
    /// A failed `sync_dir` drops the unsynced entries from the durable future, and a
    /// later `sync_dir` does not bring them back.
    FailedDirSyncLosesEntries,
    /// `create` of an existing file empties it.
    CreateTruncates,
    /// `remove` of an absent name returns `Ok`.
    RemoveAbsentOk,
    /// `remove` of an absent name panics.
    PanicsOnAbsentRemove,
    /// A removed file's bytes come back when its name is created again (a stale cache).
    StaleAfterRemove,
    /// `len` of an absent name returns `Ok(0)`.
    LenOfAbsentIsZero,
    /// `write_at` to an absent name creates it.
    WriteCreates,
    /// `write_at` always appends at the end of the file, whatever the offset.
    WriteAppends,
    /// A gap made by a write or truncate past the end holds 0xAA instead of zeros.
    GarbageExtension,
    /// `read_at` pads a read past the end with zeros up to the length asked.
    ReadPadsWithZeros,
    /// `read_at` returns at most 64 KiB (a single short read taken for the whole).
    ShortReads,
    /// `list` returns the names in reverse order.
    UnsortedList,
    /// `rename` copies the file and leaves the source in place.
    RenameKeepsSource,
    /// `rename` is three directory operations a crash may split: remove the target,
    /// add the target, remove the source.
    NonAtomicRename,
    /// `sync_file` makes writes durable but not truncations.
    SyncIgnoresTruncate,
    /// `allocate` sets the file's length, cutting a longer file.
    AllocateTruncates,
    /// A crash zeroes the synced part of the 4 KiB block an unsynced write starts in
    /// (a block rewritten whole and torn).
    CrashTearsBlock,
}

type Id = u64;

#[derive(Clone, Debug)]
enum DataOp {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

#[derive(Clone, Debug)]
enum DirOp {
    Add(String, Id),
    /// Drops the entry if it still names this file.
    Drop(String, Id),
}

#[derive(Clone, Debug, Default)]
struct File {
    durable: Vec<u8>,
    live: Vec<u8>,
    pending: Vec<DataOp>,
    /// A write-back of it failed (for [`Bug::StickyFailedSync`]).
    failed: bool,
}

/// The crashable file system.
#[derive(Clone, Debug, Default)]
pub struct CrashFs {
    bugs: Vec<Bug>,
    files: BTreeMap<Id, File>,
    next: Id,
    durable: BTreeMap<String, Id>,
    live: BTreeMap<String, Id>,
    pending: Vec<Vec<DirOp>>,
    armed: Option<Fault>,
    /// Removed files by name (for [`Bug::StaleAfterRemove`]).
    removed: BTreeMap<String, Id>,
}

fn not_found(name: &str) -> StorageError {
    StorageError::NotFound(name.to_string())
}

impl CrashFs {
    pub fn new(bugs: &[Bug]) -> CrashFs {
        CrashFs { bugs: bugs.to_vec(), next: 1, ..CrashFs::default() }
    }

    /// Switches `bug` on or off (a broken executor's test switches a bug on around one
    /// operation).
    pub fn set_bug(&mut self, bug: Bug, on: bool) {
        self.bugs.retain(|b| *b != bug);
        if on {
            self.bugs.push(bug);
        }
    }

    fn has(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    fn id(&self, name: &str) -> Result<Id, StorageError> {
        self.live.get(name).copied().ok_or_else(|| not_found(name))
    }

    fn file(&mut self, name: &str) -> Result<&mut File, StorageError> {
        let id = self.id(name)?;
        Ok(self.files.entry(id).or_default())
    }

    fn fill(&self) -> u8 {
        if self.has(Bug::GarbageExtension) {
            0xaa
        } else {
            0
        }
    }

    /// The file system after a crash; `n` is the how-manieth crash this is.
    pub fn crashed(mut self, n: u64) -> CrashFs {
        let groups = std::mem::take(&mut self.pending);
        let keep = (n as usize) % (groups.len() + 1);
        for group in groups.into_iter().take(keep) {
            self.apply(group);
        }
        let tear = self.has(Bug::CrashTearsBlock);
        for f in self.files.values_mut() {
            let pending = std::mem::take(&mut f.pending);
            if tear {
                if let Some(DataOp::Write(offset, _)) = pending.first() {
                    let block = (*offset as usize / 4096) * 4096;
                    let end = (*offset as usize).min(f.durable.len());
                    f.durable[block.min(end)..end].fill(0);
                }
            }
            if n % 2 == 1 {
                for op in pending {
                    apply_data(&mut f.durable, op, 0);
                }
            }
            f.live = f.durable.clone();
        }
        let named: Vec<Id> = self.durable.values().copied().collect();
        self.files.retain(|id, _| named.contains(id));
        self.live = self.durable.clone();
        self.armed = None;
        self.removed.clear();
        self
    }

    fn apply(&mut self, group: Vec<DirOp>) {
        for op in group {
            match op {
                DirOp::Add(name, id) => {
                    self.durable.insert(name, id);
                }
                DirOp::Drop(name, id) => {
                    if self.durable.get(&name) == Some(&id) {
                        self.durable.remove(&name);
                    }
                }
            }
        }
    }
}

fn apply_data(img: &mut Vec<u8>, op: DataOp, fill: u8) {
    match op {
        DataOp::Write(offset, data) => {
            let (start, end) = (offset as usize, offset as usize + data.len());
            if img.len() < end {
                img.resize(end, fill);
            }
            img[start..end].copy_from_slice(&data);
        }
        DataOp::Truncate(len) => img.resize(len as usize, fill),
    }
}

impl FileSystem for CrashFs {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        if self.live.contains_key(name) {
            if self.has(Bug::CreateTruncates) {
                return self.truncate(name, 0);
            }
            return Ok(());
        }
        let id = match self.removed.remove(name) {
            Some(id) if self.has(Bug::StaleAfterRemove) => id,
            _ => {
                self.next += 1;
                self.files.insert(self.next, File::default());
                self.next
            }
        };
        self.live.insert(name.to_string(), id);
        self.pending.push(vec![DirOp::Add(name.to_string(), id)]);
        Ok(())
    }

    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        if !self.live.contains_key(name) && self.has(Bug::WriteCreates) {
            self.create(name)?;
        }
        let fill = self.fill();
        let appends = self.has(Bug::WriteAppends);
        let f = self.file(name)?;
        let offset = if appends { f.live.len() as u64 } else { offset };
        let op = DataOp::Write(offset, data.to_vec());
        apply_data(&mut f.live, op.clone(), fill);
        f.pending.push(op);
        Ok(())
    }

    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let (pad, short) = (self.has(Bug::ReadPadsWithZeros), self.has(Bug::ShortReads));
        let f = self.file(name)?;
        let start = (offset as usize).min(f.live.len());
        let len = if short { len.min(64 << 10) } else { len };
        let end = start.saturating_add(len).min(f.live.len());
        let mut out = f.live[start..end].to_vec();
        if pad {
            out.resize(len, 0);
        }
        Ok(out)
    }

    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        let zero = self.has(Bug::LenOfAbsentIsZero);
        match self.file(name) {
            Err(StorageError::NotFound(_)) if zero => Ok(0),
            r => r.map(|f| f.live.len() as u64),
        }
    }

    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let fill = self.fill();
        let f = self.file(name)?;
        apply_data(&mut f.live, DataOp::Truncate(len), fill);
        f.pending.push(DataOp::Truncate(len));
        Ok(())
    }

    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        if self.has(Bug::AllocateTruncates) {
            return self.truncate(name, len);
        }
        broker_core::fs::grow_with_zeros(self, name, len)
    }

    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        let armed = self.armed == Some(Fault::FileSync);
        let (swallow, sticky) = (self.has(Bug::SwallowFailedSync), self.has(Bug::StickyFailedSync));
        let ignore_truncate = self.has(Bug::SyncIgnoresTruncate);
        let fill = self.fill();
        let f = self.file(name)?;
        let pending = std::mem::take(&mut f.pending);
        if armed && !pending.is_empty() {
            f.failed = true;
            if swallow {
                return Ok(());
            }
            return Err(StorageError::Io(format!("injected write-back failure of {name}")));
        }
        if sticky && f.failed {
            return Ok(());
        }
        for op in pending {
            if !(ignore_truncate && matches!(op, DataOp::Truncate(_))) {
                apply_data(&mut f.durable, op, fill);
            }
        }
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<(), StorageError> {
        if self.armed == Some(Fault::DirSync) {
            if self.has(Bug::SwallowFailedDirSync) {
                return Ok(());
            }
            if self.has(Bug::FailedDirSyncLosesEntries) {
                self.pending.clear();
            }
            return Err(StorageError::Io("injected failure of the directory fsync".into()));
        }
        if self.has(Bug::SkipDirSync) {
            return Ok(());
        }
        for group in std::mem::take(&mut self.pending) {
            self.apply(group);
        }
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        let id = self.id(from)?;
        if from == to {
            return Ok(());
        }
        if self.has(Bug::RenameKeepsSource) {
            let data = self.file(from)?.live.clone();
            self.create(to)?;
            self.truncate(to, 0)?;
            return self.write_at(to, 0, &data);
        }
        let old = self.live.insert(to.to_string(), id);
        self.live.remove(from);
        let (add, drop) = (DirOp::Add(to.to_string(), id), DirOp::Drop(from.to_string(), id));
        if self.has(Bug::NonAtomicRename) {
            if let Some(old) = old {
                self.pending.push(vec![DirOp::Drop(to.to_string(), old)]);
            }
            self.pending.push(vec![add]);
            self.pending.push(vec![drop]);
        } else {
            self.pending.push(vec![add, drop]);
        }
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        match self.live.remove(name) {
            Some(id) => {
                self.removed.insert(name.to_string(), id);
                self.pending.push(vec![DirOp::Drop(name.to_string(), id)]);
                Ok(())
            }
            None if self.has(Bug::RemoveAbsentOk) => Ok(()),
            None if self.has(Bug::PanicsOnAbsentRemove) => panic!("remove of an absent file: {name}"),
            None => Err(not_found(name)),
        }
    }

    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        let mut names: Vec<String> = self.live.keys().cloned().collect();
        if self.has(Bug::UnsortedList) {
            names.reverse();
        }
        Ok(names)
    }
}

/// The subject: [`CrashFs`] with some bugs, crashing and injecting every fault.
pub struct Crashing {
    pub bugs: Vec<Bug>,
    crashes: u64,
}

impl Crashing {
    pub fn new(bugs: &[Bug]) -> Crashing {
        Crashing { bugs: bugs.to_vec(), crashes: 0 }
    }
}

impl Subject for Crashing {
    type Fs = CrashFs;

    fn fresh(&mut self) -> CrashFs {
        CrashFs::new(&self.bugs)
    }

    fn crash(&mut self, fs: CrashFs) -> Option<CrashFs> {
        self.crashes += 1;
        Some(fs.crashed(self.crashes))
    }

    fn set_fault(&mut self, fs: &mut CrashFs, fault: Option<Fault>) -> bool {
        fs.armed = fault;
        true
    }
}
