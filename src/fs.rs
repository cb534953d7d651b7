//! The small file-system trait the storage executor runs on.
//!
//! All names live in one flat data directory; a name is a plain file name, never a
//! path. Implementations: [`crate::memfs::MemFs`] (in memory, for tests), the
//! simulator's faulty disk, and the real `std::fs` one in `broker-fs`.

use crate::error::StorageError;

/// A flat directory of files with explicit durability.
///
/// Durability rules a careful caller assumes (and the simulator enforces): file data
/// and size are durable only after [`FileSystem::sync_file`]; creating, renaming or
/// removing an entry is durable only after [`FileSystem::sync_dir`]; rename is atomic.
pub trait FileSystem {
    /// Creates an empty file if `name` does not exist; an existing file is left as is.
    fn create(&mut self, name: &str) -> Result<(), StorageError>;
    /// Writes `data` at byte `offset`, extending the file (with zeros) as needed.
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError>;
    /// Reads up to `len` bytes from `offset`; fewer at the end of the file.
    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError>;
    /// The file's current length.
    fn len(&mut self, name: &str) -> Result<u64, StorageError>;
    /// Cuts or extends the file to `len` bytes.
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError>;
    /// Makes the file's data and size durable (fsync).
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError>;
    /// Makes the directory's entries durable (fsync of the directory).
    fn sync_dir(&mut self) -> Result<(), StorageError>;
    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError>;
    /// Removes a file; `NotFound` if absent.
    fn remove(&mut self, name: &str) -> Result<(), StorageError>;
    /// Every file name in the directory, sorted.
    fn list(&mut self) -> Result<Vec<String>, StorageError>;

    /// Grows the file to at least `len` bytes with its space allocated (as `fallocate`
    /// does), so that writes below `len` need no more space. A file already as long is
    /// left as it is.
    ///
    /// Like a write, it may fail after allocating part of the space, the file grown by
    /// that part: a caller that wants all or nothing cuts the file back to its old length.
    /// The default writes zeros from the file's end, which holds the space on most file
    /// systems but not on those that compress or deduplicate zeros; an implementation
    /// that can allocate should override it.
    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        grow_with_zeros(self, name, len)
    }

    /// Reads the whole file.
    fn read_all(&mut self, name: &str) -> Result<Vec<u8>, StorageError> {
        let len = self.len(name)?;
        let len = usize::try_from(len).map_err(|_| StorageError::Io(format!("{name} is too large to read")))?;
        self.read_at(name, 0, len)
    }
}

/// Grows `name` to `len` bytes by writing zeros from its end, 64 KiB at a time (what
/// [`FileSystem::allocate`] does unless an implementation allocates another way).
pub fn grow_with_zeros<F: FileSystem + ?Sized>(fs: &mut F, name: &str, len: u64) -> Result<(), StorageError> {
    const CHUNK: u64 = 64 << 10;
    let mut at = fs.len(name)?;
    let zeros = vec![0u8; len.saturating_sub(at).min(CHUNK) as usize];
    while at < len {
        let n = (len - at).min(CHUNK);
        fs.write_at(name, at, &zeros[..n as usize])?;
        at += n;
    }
    Ok(())
}
