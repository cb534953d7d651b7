//! A file-system wrapper that kills the process after a chosen number of calls, so the
//! simulator can crash in the middle of a storage operation (between the steps of a
//! journal compaction, say), not only between operations.

use broker_core::{FileSystem, StorageError};

/// Wraps a file system; once tripped, every call fails and touches nothing, as if the
/// process had died at that instant.
#[derive(Debug)]
pub struct Tripwire<F> {
    inner: F,
    /// Calls left before the wire trips; `None` when disarmed.
    remaining: Option<u64>,
    /// Trip right after the next fsync instead of after a count.
    after_sync: bool,
    tripped: bool,
    calls: u64,
}

impl<F> Tripwire<F> {
    /// A disarmed wire around `inner`.
    pub fn new(inner: F) -> Tripwire<F> {
        Tripwire { inner, remaining: None, after_sync: false, tripped: false, calls: 0 }
    }

    /// Trips after `n` more calls complete (0: the next call fails).
    pub fn arm_after_calls(&mut self, n: u64) {
        self.remaining = Some(n);
    }

    /// Trips right after the next fsync (file or directory) completes.
    pub fn arm_after_next_sync(&mut self) {
        self.after_sync = true;
    }

    /// Disarms and resets the wire.
    pub fn disarm(&mut self) {
        self.remaining = None;
        self.after_sync = false;
        self.tripped = false;
    }

    /// Whether the wire has tripped.
    pub fn tripped(&self) -> bool {
        self.tripped
    }

    /// Calls made through the wire since it was created.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// The wrapped file system, mutably.
    pub fn inner_mut(&mut self) -> &mut F {
        &mut self.inner
    }

    /// Unwraps.
    pub fn into_inner(self) -> F {
        self.inner
    }

    fn enter(&mut self) -> Result<(), StorageError> {
        if self.tripped {
            return Err(StorageError::Io("process died (simulated crash)".into()));
        }
        if let Some(n) = self.remaining {
            if n == 0 {
                self.tripped = true;
                self.remaining = None;
                return Err(StorageError::Io("process died (simulated crash)".into()));
            }
            self.remaining = Some(n - 1);
        }
        self.calls += 1;
        Ok(())
    }

    fn synced(&mut self) {
        if self.after_sync {
            self.after_sync = false;
            self.tripped = true;
        }
    }
}

impl<F: FileSystem> FileSystem for Tripwire<F> {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.create(name)
    }
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.write_at(name, offset, data)
    }
    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        self.enter()?;
        self.inner.read_at(name, offset, len)
    }
    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        self.enter()?;
        self.inner.len(name)
    }
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.truncate(name, len)
    }
    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.allocate(name, len)
    }
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.enter()?;
        let r = self.inner.sync_file(name);
        self.synced();
        r
    }
    fn sync_dir(&mut self) -> Result<(), StorageError> {
        self.enter()?;
        let r = self.inner.sync_dir();
        self.synced();
        r
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.rename(from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        self.enter()?;
        self.inner.remove(name)
    }
    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        self.enter()?;
        self.inner.list()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::MemFs;

    #[test]
    fn trips_after_count_and_then_touches_nothing() {
        let mut t = Tripwire::new(MemFs::new());
        t.arm_after_calls(1);
        t.create("a").unwrap();
        assert!(t.create("b").is_err());
        assert!(t.tripped());
        assert!(t.write_at("a", 0, b"x").is_err());
        assert_eq!(t.inner().names(), vec!["a".to_string()]);
        assert_eq!(t.inner().file("a"), Some(&b""[..]));
    }

    #[test]
    fn trips_right_after_a_sync() {
        let mut t = Tripwire::new(MemFs::new());
        t.arm_after_next_sync();
        t.create("a").unwrap();
        t.sync_dir().unwrap();
        assert!(t.tripped());
        assert!(t.list().is_err());
    }
}
