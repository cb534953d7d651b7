//! A file system that forwards every call to an inner one, except where a test's hook
//! steps in: a failing or lying file system is written as the few calls it changes.
//!
//! ```
//! use broker_core::{FileSystem, MemFs, StorageError};
//! use broker_testkit::hooked::{Hooked, Hooks};
//!
//! /// Directory syncs that do nothing (a file system that breaks the contract).
//! struct SkipDirSync;
//! impl Hooks<MemFs> for SkipDirSync {
//!     fn sync_dir(&mut self, _: &mut MemFs) -> Result<(), StorageError> {
//!         Ok(())
//!     }
//! }
//!
//! let mut fs = Hooked { fs: MemFs::new(), hooks: SkipDirSync };
//! fs.create("a").unwrap();
//! fs.sync_dir().unwrap();
//! assert_eq!(fs.list().unwrap(), vec!["a".to_string()]);
//! ```

use broker_core::{FileSystem, StorageError};

/// The calls of a [`FileSystem`], each given the inner file system; every one forwards
/// unchanged unless a test overrides it.
pub trait Hooks<F: FileSystem> {
    /// [`FileSystem::create`].
    fn create(&mut self, fs: &mut F, name: &str) -> Result<(), StorageError> {
        fs.create(name)
    }
    /// [`FileSystem::write_at`].
    fn write_at(&mut self, fs: &mut F, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        fs.write_at(name, offset, data)
    }
    /// [`FileSystem::read_at`].
    fn read_at(&mut self, fs: &mut F, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        fs.read_at(name, offset, len)
    }
    /// [`FileSystem::len`].
    fn len(&mut self, fs: &mut F, name: &str) -> Result<u64, StorageError> {
        fs.len(name)
    }
    /// [`FileSystem::truncate`].
    fn truncate(&mut self, fs: &mut F, name: &str, len: u64) -> Result<(), StorageError> {
        fs.truncate(name, len)
    }
    /// [`FileSystem::allocate`].
    fn allocate(&mut self, fs: &mut F, name: &str, len: u64) -> Result<(), StorageError> {
        fs.allocate(name, len)
    }
    /// [`FileSystem::sync_file`].
    fn sync_file(&mut self, fs: &mut F, name: &str) -> Result<(), StorageError> {
        fs.sync_file(name)
    }
    /// [`FileSystem::sync_dir`].
    fn sync_dir(&mut self, fs: &mut F) -> Result<(), StorageError> {
        fs.sync_dir()
    }
    /// [`FileSystem::rename`].
    fn rename(&mut self, fs: &mut F, from: &str, to: &str) -> Result<(), StorageError> {
        fs.rename(from, to)
    }
    /// [`FileSystem::remove`].
    fn remove(&mut self, fs: &mut F, name: &str) -> Result<(), StorageError> {
        fs.remove(name)
    }
    /// [`FileSystem::list`].
    fn list(&mut self, fs: &mut F) -> Result<Vec<String>, StorageError> {
        fs.list()
    }
}

/// `fs` with `hooks` in front of it.
#[derive(Debug, Clone, Default)]
pub struct Hooked<F, H> {
    /// The file system the calls reach.
    pub fs: F,
    /// What steps in front of it.
    pub hooks: H,
}

impl<F: FileSystem, H: Hooks<F>> FileSystem for Hooked<F, H> {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.hooks.create(&mut self.fs, name)
    }
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        self.hooks.write_at(&mut self.fs, name, offset, data)
    }
    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        self.hooks.read_at(&mut self.fs, name, offset, len)
    }
    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        self.hooks.len(&mut self.fs, name)
    }
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.hooks.truncate(&mut self.fs, name, len)
    }
    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.hooks.allocate(&mut self.fs, name, len)
    }
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.hooks.sync_file(&mut self.fs, name)
    }
    fn sync_dir(&mut self) -> Result<(), StorageError> {
        self.hooks.sync_dir(&mut self.fs)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        self.hooks.rename(&mut self.fs, from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        self.hooks.remove(&mut self.fs, name)
    }
    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        self.hooks.list(&mut self.fs)
    }
}
