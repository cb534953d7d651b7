//! An in-memory [`FileSystem`] for tests: every operation is durable at once.
//!
//! A test "crashes" by dropping the broker and its executor while keeping the
//! `MemFs`. The simulator's disk is the strict one that models lost unsynced data.

use crate::error::StorageError;
use crate::fs::FileSystem;
use std::collections::BTreeMap;

/// An in-memory [`FileSystem`] for tests: files by name, every operation durable at once.
/// Cloning takes a snapshot of the whole disk.
///
/// A test "crashes" by dropping the broker and its executor while keeping the `MemFs`.
/// The simulator's disk is the strict one that models lost unsynced data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemFs {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemFs {
    /// An empty disk.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// A file's bytes, if it exists.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// Mutable access to a file's bytes, for tests that corrupt or tear data.
    pub fn file_mut(&mut self, name: &str) -> Option<&mut Vec<u8>> {
        self.files.get_mut(name)
    }

    /// Every file name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    fn get(&self, name: &str) -> Result<&Vec<u8>, StorageError> {
        self.files.get(name).ok_or_else(|| StorageError::NotFound(name.to_string()))
    }

    fn get_mut(&mut self, name: &str) -> Result<&mut Vec<u8>, StorageError> {
        self.files.get_mut(name).ok_or_else(|| StorageError::NotFound(name.to_string()))
    }
}

fn to_usize(v: u64, name: &str) -> Result<usize, StorageError> {
    usize::try_from(v).map_err(|_| StorageError::Io(format!("{name}: offset {v} is out of range")))
}

impl FileSystem for MemFs {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.files.entry(name.to_string()).or_default();
        Ok(())
    }

    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let offset = to_usize(offset, name)?;
        let end = offset.checked_add(data.len()).ok_or_else(|| StorageError::Io(format!("{name}: write overflows")))?;
        let f = self.get_mut(name)?;
        if f.len() < end {
            f.resize(end, 0);
        }
        f[offset..end].copy_from_slice(data);
        Ok(())
    }

    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let f = self.get(name)?;
        let start = to_usize(offset, name)?.min(f.len());
        let end = start.saturating_add(len).min(f.len());
        Ok(f[start..end].to_vec())
    }

    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        Ok(self.get(name)?.len() as u64)
    }

    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let len = to_usize(len, name)?;
        self.get_mut(name)?.resize(len, 0);
        Ok(())
    }

    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.get(name).map(|_| ())
    }

    fn sync_dir(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        let data = self.files.remove(from).ok_or_else(|| StorageError::NotFound(from.to_string()))?;
        self.files.insert(to.to_string(), data);
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        self.files.remove(name).map(|_| ()).ok_or_else(|| StorageError::NotFound(name.to_string()))
    }

    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        Ok(self.names())
    }
}
