//! A file system that fails on purpose, and helpers for results and removals.

use broker_core::{FileSystem, LogId, MemFs, OpOutput, OpResult, StorageError, StorageOp};
use std::collections::BTreeSet;

/// A `MemFs` that fails on purpose: its `remove` fails with an I/O error the first
/// `fail_removes` times, its `sync_dir` the next `fail_dir_syncs` times (the entries then
/// stay as they are: a `MemFs` is always durable), and with a `capacity` (0: none) a
/// write that would grow the files past it writes the bytes that fit, then fails as a
/// full disk (as `write(2)` does), until space is freed.
#[derive(Debug, Default, Clone)]
pub struct FaultyFs {
    /// The files, durable at once (a `MemFs`).
    pub inner: MemFs,
    /// How many removals fail, counting from the first.
    pub fail_removes: u32,
    /// How many removals have failed so far.
    pub failed: u32,
    /// How many removals were attempted.
    pub removes: u32,
    /// How many of the next directory syncs fail.
    pub fail_dir_syncs: u32,
    /// How many directory syncs were attempted.
    pub dir_syncs: u32,
    /// The most bytes the files may hold (0: no limit).
    pub capacity: u64,
}

/// A [`FaultyFs`] set up to fail removals.
pub type FlakyRemoveFs = FaultyFs;
/// A [`FaultyFs`] set up to fail directory fsyncs.
pub type FlakyDirSyncFs = FaultyFs;

impl FaultyFs {
    /// The bytes its files hold, summed: what `capacity` bounds.
    pub fn used(&self) -> u64 {
        self.inner.names().iter().map(|n| self.inner.file(n).map_or(0, |f| f.len() as u64)).sum()
    }
}

impl FileSystem for FaultyFs {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.inner.create(name)
    }
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let len = self.inner.file(name).map_or(0, |f| f.len() as u64);
        let growth = (offset + data.len() as u64).saturating_sub(len);
        let free = self.capacity.saturating_sub(self.used());
        if self.capacity > 0 && growth > free {
            let fits = (len + free).saturating_sub(offset).min(data.len() as u64) as usize;
            if fits > 0 {
                self.inner.write_at(name, offset, &data[..fits])?;
            }
            return Err(StorageError::DiskFull(format!("{name}: no space left after {fits} bytes")));
        }
        self.inner.write_at(name, offset, data)
    }
    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        self.inner.read_at(name, offset, len)
    }
    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        self.inner.len(name)
    }
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.inner.truncate(name, len)
    }
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.inner.sync_file(name)
    }
    fn sync_dir(&mut self) -> Result<(), StorageError> {
        self.dir_syncs += 1;
        if self.fail_dir_syncs > 0 {
            self.fail_dir_syncs -= 1;
            return Err(StorageError::Io("injected failure of the directory fsync".into()));
        }
        self.inner.sync_dir()
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        self.inner.rename(from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        self.removes += 1;
        if self.failed < self.fail_removes {
            self.failed += 1;
            return Err(StorageError::Io(format!("injected failure removing {name}")));
        }
        self.inner.remove(name)
    }
    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        self.inner.list()
    }
}

/// Set of the logs a trace removed.
pub fn removed_logs(ops: &[StorageOp]) -> BTreeSet<LogId> {
    ops.iter()
        .filter_map(|op| match op {
            StorageOp::RemoveLog { log } => Some(*log),
            _ => None,
        })
        .collect()
}

/// A successful `Done` result.
pub fn done() -> OpResult {
    Ok(OpOutput::Done)
}
