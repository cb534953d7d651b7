//! [`RealFs`]: the core's [`FileSystem`] trait over `std::fs`, with real fsyncs.
//!
//! Every name the core passes is a plain file name inside one data directory (the
//! journal, its temporary and backup files, and logs named by
//! [`broker_core::LogId::file_name`], which derives from topic ids only). A name that
//! is not a plain file name is refused, so no input can reach outside the directory.
//! Nor can a symlink planted in the directory: every file is opened with `O_NOFOLLOW`
//! and `len` uses `lstat`, so a link under a broker file's name (a log, `journal`,
//! `journal.tmp`, a backup) is refused with [`StorageError::PermissionDenied`] naming
//! it and saying what to do, and the file it points to is never read, written,
//! truncated or created. (`rename` and `unlink` act on a link itself, never its target.)
//!
//! **Descriptors stay open from a write until its fsync.** Each `RealFs` keeps the files
//! it uses open, in a cache of at most [`MAX_OPEN_FILES`] (least recently used first out).
//! Opening and closing per operation would not be safe: a write-back error is recorded
//! on the inode's page cache mapping, and once the last descriptor is closed the kernel
//! may evict the inode, and the error with it; a descriptor opened afterwards then sees
//! an `fsync` succeed although the data never reached the disk. (Linux 4.16 and later
//! report an error no one has seen to a descriptor opened after it, but only while the
//! inode stays in memory, and not every kernel or file system does even that.) So:
//!
//! - A write, a truncation and the `fsync` that follows go through one descriptor.
//! - A file with unsynced writes is closed only when the bound leaves no clean file to
//!   close, and then it is fsynced first; if that fsync fails, the failure is reported
//!   by the next [`FileSystem::sync_file`] of that file (the core then halts).
//! - Removing a file drops its descriptor; renaming moves the descriptor to the new
//!   name (it is the same file) and drops the one of the file it replaced. A removed or
//!   replaced file is never reached through an old descriptor. Before each use, a
//!   cached descriptor is checked (`lstat`, device and inode) to still be the file of
//!   that name: if something else removed or replaced it, the descriptor is dropped,
//!   and if it held unsynced writes, that is an error (reported again by the next sync).
//! - Dropping a `RealFs` closes its files without syncing them: the core never relies
//!   on a write that no successful sync covered, and a new process recovers from what
//!   is durable.

use broker_core::{FileSystem, StorageError};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// How many files one `RealFs` keeps open at most (each storage worker has its own).
pub const MAX_OPEN_FILES: usize = 64;

/// A flat data directory on a real file system.
///
/// Each copy keeps its own open files: a clone starts with none. The runtime gives
/// each storage worker its own copy; two copies must not work on the same file, and
/// the driver routes every file to one worker.
#[derive(Debug)]
pub struct RealFs {
    dir: PathBuf,
    /// At most this many files open.
    max_open: usize,
    /// Open files by name.
    open: BTreeMap<String, OpenFile>,
    /// Use counter, for least-recently-used eviction.
    clock: u64,
    /// How many files were opened, ever.
    opens: u64,
    /// Failures of the fsync made before a forced close, reported by the next sync.
    failed_syncs: BTreeMap<String, StorageError>,
    /// Test hook: fsyncs before a forced close of these files fail.
    #[cfg(test)]
    failing: std::collections::BTreeSet<String>,
}

/// A file kept open.
#[derive(Debug)]
struct OpenFile {
    file: File,
    /// Opened for writing (else read-only: the file refused writing).
    writable: bool,
    /// Written or truncated since its last successful fsync.
    dirty: bool,
    /// When it was last used.
    used: u64,
    /// The device and inode of the open file (`None` where the platform has none): what
    /// its name must still lead to.
    id: Option<(u64, u64)>,
}

impl Clone for RealFs {
    /// The same directory and bound, with no file open.
    fn clone(&self) -> RealFs {
        RealFs::with_max_open(self.dir.clone(), self.max_open)
    }
}

impl RealFs {
    /// A file system rooted at `dir`, which must exist, keeping at most
    /// [`MAX_OPEN_FILES`] files open.
    pub fn new(dir: impl Into<PathBuf>) -> RealFs {
        RealFs::with_max_open(dir, MAX_OPEN_FILES)
    }

    /// A file system rooted at `dir` keeping at most `max` files open (at least one).
    pub fn with_max_open(dir: impl Into<PathBuf>, max: usize) -> RealFs {
        RealFs {
            dir: dir.into(),
            max_open: max.max(1),
            open: BTreeMap::new(),
            clock: 0,
            opens: 0,
            failed_syncs: BTreeMap::new(),
            #[cfg(test)]
            failing: Default::default(),
        }
    }

    /// How many files this file system has opened so far.
    pub fn opens(&self) -> u64 {
        self.opens
    }

    /// How many files it holds open now.
    pub fn open_files(&self) -> usize {
        self.open.len()
    }

    /// Whether it holds `name` open.
    pub fn is_open(&self, name: &str) -> bool {
        self.open.contains_key(name)
    }

    /// Test hook: every fsync of `name` made before a forced close fails.
    #[cfg(test)]
    fn fail_syncs_of(&mut self, name: &str) {
        self.failing.insert(name.to_string());
    }

    /// The open file `name`, opened (and created, with `create`) if it is not; for
    /// writing when `write` is set. Marks it used.
    fn file(&mut self, name: &str, write: bool, create: bool) -> Result<&mut OpenFile, StorageError> {
        self.check_identity(name)?;
        self.checked_file(name, write, create)
    }

    /// [`RealFs::file`] once [`RealFs::check_identity`] has run.
    fn checked_file(&mut self, name: &str, write: bool, create: bool) -> Result<&mut OpenFile, StorageError> {
        self.clock += 1;
        let stale = self.open.get(name).is_some_and(|f| write && !f.writable);
        if stale {
            // Opened read-only, and never written through: nothing to sync.
            self.open.remove(name);
        }
        if !self.open.contains_key(name) {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(create);
            let (file, writable) = match self.open_file(name, &o) {
                Err(StorageError::PermissionDenied(_)) if !write && !create => {
                    (self.open_file(name, OpenOptions::new().read(true))?, false)
                }
                other => (other?, true),
            };
            self.make_room();
            let id = file_id(&file);
            self.open.insert(name.to_string(), OpenFile { file, writable, dirty: false, used: 0, id });
        }
        let clock = self.clock;
        let f = self.open.get_mut(name).ok_or_else(|| StorageError::Io(format!("{name}: not open")))?;
        f.used = clock;
        Ok(f)
    }

    /// Drops the descriptor of `name` if the name no longer leads to its file (removed,
    /// renamed or replaced by someone else): the next use opens the file the name now
    /// leads to, as a per-operation open would. If the old file had unsynced writes,
    /// they are not in the directory: that is an error, also kept for the next sync.
    fn check_identity(&mut self, name: &str) -> Result<(), StorageError> {
        let Some(f) = self.open.get(name) else { return Ok(()) };
        let path = self.path(name)?;
        if same_file(f.id, &path) {
            return Ok(());
        }
        let dirty = self.open.remove(name).is_some_and(|f| f.dirty);
        if !dirty {
            return Ok(());
        }
        let e = StorageError::Io(format!(
            "{name} was removed or replaced by something other than broker-fs while it held writes not yet \
             synced: they are not in the data directory. Stop whatever changes the data directory, then restart \
             broker-fs: it recovers from what is durable"
        ));
        self.failed_syncs.insert(name.to_string(), e.clone());
        Err(e)
    }

    /// Closes one file if the bound is reached: the least recently used of those with
    /// no unsynced writes, else the least recently used, fsynced first (a failure is
    /// kept for the next sync of that file).
    fn make_room(&mut self) {
        while self.open.len() >= self.max_open {
            let lru = |clean: bool| {
                self.open.iter().filter(|(_, f)| !clean || !f.dirty).min_by_key(|(_, f)| f.used).map(|(n, _)| n.clone())
            };
            let Some(name) = lru(true).or_else(|| lru(false)) else { return };
            let Some(f) = self.open.remove(&name) else { return };
            if f.dirty {
                if let Err(e) = self.sync_before_close(&name, &f.file) {
                    let what = format!("{name}: fsync before closing it (the open-file bound forced it) failed: {e}");
                    self.failed_syncs.insert(name, StorageError::Io(what));
                }
            }
        }
    }

    fn sync_before_close(&self, name: &str, file: &File) -> io::Result<()> {
        #[cfg(test)]
        if self.failing.contains(name) {
            return Err(io::Error::other("injected failure"));
        }
        let _ = name;
        file.sync_data()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `name`, which must be a plain file name.
    fn path(&self, name: &str) -> Result<PathBuf, StorageError> {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0'])
            && Path::new(name).components().count() == 1;
        if !plain {
            return Err(StorageError::PermissionDenied(format!("{name:?} is not a plain file name")));
        }
        Ok(self.dir.join(name))
    }

    fn open_file(&mut self, name: &str, options: &OpenOptions) -> Result<File, StorageError> {
        let path = self.path(name)?;
        self.opens += 1;
        let mut options = options.clone();
        no_follow(&mut options);
        options
            .open(&path)
            .map_err(|e| if is_symlink(&path) { symlink_refused(name) } else { map_err(name, "open", &e) })
    }
}

/// Whether `path` (not followed if a link) is the file open as `file`.
/// The device and inode of an open file, taken once when it is opened (an open file's
/// never change), so that checking its name costs one `lstat`.
fn file_id(file: &File) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

/// Whether `path` still leads to the file whose [`file_id`] is `id`.
fn same_file(id: Option<(u64, u64)>, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (id, std::fs::symlink_metadata(path)) {
            (Some(id), Ok(b)) => id == (b.dev(), b.ino()),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (id, path);
        true
    }
}

/// Never opens through a symlink: with `O_NOFOLLOW`, `open` fails (`ELOOP`) when the
/// last component is a link, even with `O_CREAT` and a dangling link.
pub fn no_follow(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// Whether `path` itself (not what it points to) is a symlink.
pub fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// What an operator is told when a file of the data directory is a symlink.
pub fn symlink_message(name: &str) -> String {
    format!(
        "{name} is a symbolic link: broker-fs never follows links in its data directory (a link could make it \
         write outside it); remove the link, and put the file itself in its place if it was one of the broker's"
    )
}

/// The error for a file of the data directory that is a symlink.
fn symlink_refused(name: &str) -> StorageError {
    StorageError::PermissionDenied(symlink_message(name))
}

/// Maps an I/O error to the core's typed storage errors, naming the file and the call.
pub fn map_err(name: &str, call: &str, e: &io::Error) -> StorageError {
    let what = format!("{name}: {call}: {e}");
    match e.kind() {
        ErrorKind::NotFound => StorageError::NotFound(what),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => StorageError::PermissionDenied(what),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => StorageError::DiskFull(what),
        _ => StorageError::Io(what),
    }
}

/// Writes all of `data` at `offset` (positioned write; no shared file cursor).
fn write_all_at(file: &File, offset: u64, data: &[u8]) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, data, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(data)
    }
}

/// Reads up to `len` bytes at `offset` (fewer only at the end of the file), into
/// memory the reads fill: a fetch reads up to megabytes, and a buffer of zeros written
/// first cost a pass over them (6% of the log worker's time in a fetch). The file's
/// cursor moves; every other access of the runtime is positioned.
fn read_full_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len);
    // `read_to_end` retries an interrupted read and stops at the end of the file.
    f.take(len as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Makes a directory's entries durable: open the directory and fsync it.
///
/// On Windows a directory cannot be opened for syncing and NTFS journals its
/// metadata, so this is a no-op there.
pub fn sync_directory(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

impl FileSystem for RealFs {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.file(name, true, true).map(drop)
    }

    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let f = self.file(name, true, false)?;
        // Dirty even if the write fails: part of it may be in the page cache.
        f.dirty = true;
        write_all_at(&f.file, offset, data).map_err(|e| map_err(name, "write", &e))
    }

    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let f = self.file(name, false, false)?;
        read_full_at(&f.file, offset, len).map_err(|e| map_err(name, "read", &e))
    }

    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        self.check_identity(name)?;
        if let Some(f) = self.open.get(name) {
            // The file this runtime writes, whatever happened to the name.
            return f.file.metadata().map(|m| m.len()).map_err(|e| map_err(name, "stat", &e));
        }
        let path = self.path(name)?;
        // lstat: a symlink is refused, never measured through.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| map_err(name, "stat", &e))?;
        if meta.file_type().is_symlink() {
            return Err(symlink_refused(name));
        }
        Ok(meta.len())
    }

    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let f = self.file(name, true, false)?;
        f.dirty = true;
        f.file.set_len(len).map_err(|e| map_err(name, "truncate", &e))
    }

    /// `fallocate(2)` on Linux, which holds the space even where zeros would be
    /// compressed; elsewhere, or where the file system cannot allocate, zeros written
    /// from the end. Either may fail after taking part of the space (ext4 keeps what
    /// it allocated): the caller cuts the file back.
    fn allocate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let f = self.file(name, true, false)?;
        f.dirty = true;
        #[cfg(target_os = "linux")]
        {
            let have = f.file.metadata().map_err(|e| map_err(name, "stat", &e))?.len();
            if have >= len {
                return Ok(());
            }
            match rustix::fs::fallocate(&f.file, rustix::fs::FallocateFlags::empty(), 0, len) {
                Ok(()) => return Ok(()),
                Err(rustix::io::Errno::OPNOTSUPP) => {}
                Err(e) => return Err(map_err(name, "fallocate", &e.into())),
            }
        }
        broker_core::fs::grow_with_zeros(self, name, len)
    }

    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.check_identity(name)?;
        if let Some(e) = self.failed_syncs.remove(name) {
            // The fsync before a forced close failed, or the file was replaced with
            // unsynced writes: what they covered is unknown.
            return Err(e);
        }
        let f = self.checked_file(name, true, false)?;
        // fdatasync: flushes the data and the metadata needed to read it back (the
        // size included), which is all a log or the journal needs. Entries (create,
        // rename, unlink) are made durable by `sync_dir`.
        f.file.sync_data().map_err(|e| map_err(name, "fsync", &e))?;
        f.dirty = false;
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<(), StorageError> {
        sync_directory(&self.dir).map_err(|e| map_err(&self.dir.display().to_string(), "fsync of the directory", &e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        let (a, b) = (self.path(from)?, self.path(to)?);
        // rename(2) replaces `to` atomically within one directory.
        std::fs::rename(&a, &b).map_err(|e| map_err(from, &format!("rename to {to}"), &e))?;
        // The file that was `to` is gone: its descriptor (and any failure kept for it)
        // goes with it. `from`'s descriptor is the renamed file's: it moves to `to`.
        self.open.remove(to);
        self.failed_syncs.remove(to);
        if let Some(f) = self.open.remove(from) {
            self.open.insert(to.to_string(), f);
        }
        if let Some(e) = self.failed_syncs.remove(from) {
            self.failed_syncs.insert(to.to_string(), e);
        }
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        let path = self.path(name)?;
        let result = std::fs::remove_file(&path).map_err(|e| map_err(name, "unlink", &e));
        if matches!(result, Ok(()) | Err(StorageError::NotFound(_))) {
            // Never reached through an old descriptor again.
            self.open.remove(name);
            self.failed_syncs.remove(name);
        }
        result
    }

    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        let dir = self.dir.display().to_string();
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(|e| map_err(&dir, "list", &e))? {
            let entry = entry.map_err(|e| map_err(&dir, "list", &e))?;
            // Directories are never files of the broker: leave them out, so the core
            // can never try to remove one. Names that are not UTF-8 are not ours either.
            let is_dir = entry.file_type().map_err(|e| map_err(&dir, "stat", &e))?.is_dir();
            if let (false, Ok(name)) = (is_dir, entry.file_name().into_string()) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("broker-fs-realfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trip_of_every_operation() {
        let dir = temp_dir("ops");
        let mut fs = RealFs::new(&dir);
        fs.create("a").unwrap();
        fs.write_at("a", 4, b"xyz").unwrap();
        assert_eq!(fs.len("a").unwrap(), 7);
        assert_eq!(fs.read_at("a", 0, 100).unwrap(), b"\0\0\0\0xyz");
        assert_eq!(fs.read_at("a", 5, 1).unwrap(), b"y");
        fs.create("a").unwrap();
        assert_eq!(fs.len("a").unwrap(), 7, "create leaves an existing file as it is");
        fs.truncate("a", 5).unwrap();
        fs.sync_file("a").unwrap();
        fs.sync_dir().unwrap();
        fs.rename("a", "b").unwrap();
        assert_eq!(fs.list().unwrap(), vec!["b".to_string()]);
        assert_eq!(fs.read_all("b").unwrap(), b"\0\0\0\0x");
        fs.remove("b").unwrap();
        assert!(matches!(fs.remove("b"), Err(StorageError::NotFound(_))));
        assert!(matches!(fs.read_at("b", 0, 1), Err(StorageError::NotFound(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_that_are_not_plain_are_refused() {
        let dir = temp_dir("names");
        let mut fs = RealFs::new(&dir);
        for bad in ["", ".", "..", "../x", "a/b", "/etc/passwd", "a\0b"] {
            assert!(matches!(fs.create(bad), Err(StorageError::PermissionDenied(_))), "{bad:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directories_are_not_listed() {
        let dir = temp_dir("list");
        std::fs::create_dir(dir.join("0000000000000001-00000000.log")).unwrap();
        std::fs::write(dir.join("journal"), b"").unwrap();
        assert_eq!(RealFs::new(&dir).list().unwrap(), vec!["journal".to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every operation that opens `name` (through the executor too) refuses a symlink
    /// planted under a broker file's name, and leaves its target alone.
    #[cfg(unix)]
    #[test]
    fn symlinks_in_the_directory_are_refused_and_nothing_outside_changes() {
        use broker_core::{Executor, LogId, StorageOp, TopicId};
        let dir = temp_dir("links");
        let outside = temp_dir("links-outside");
        let target = outside.join("precious");
        std::fs::write(&target, b"outside").unwrap();
        let log = LogId { topic: TopicId(0), partition: 0 };
        let log_name = log.file_name();
        let refused = |name: &str, what: &str, r: Result<(), StorageError>| match r {
            Err(StorageError::PermissionDenied(m)) if m.contains(name) && m.contains("symbolic link") => {}
            other => panic!("{what} of {name} through a symlink: {other:?}"),
        };
        for name in [log_name.as_str(), "journal", "journal.tmp", "journal.torn.0"] {
            std::os::unix::fs::symlink(&target, dir.join(name)).unwrap();
            let mut fs = RealFs::new(&dir);
            refused(name, "create", fs.create(name));
            refused(name, "write", fs.write_at(name, 0, b"inside"));
            refused(name, "truncate", fs.truncate(name, 0));
            refused(name, "sync", fs.sync_file(name));
            refused(name, "read", fs.read_at(name, 0, 3).map(drop));
            refused(name, "len", fs.len(name).map(drop));
            assert_eq!(std::fs::read(&target).unwrap(), b"outside", "{name}: the target is untouched");
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        // Through the executor: a log creation, a journal replacement.
        std::os::unix::fs::symlink(&target, dir.join(&log_name)).unwrap();
        std::os::unix::fs::symlink(&target, dir.join("journal.tmp")).unwrap();
        let mut exec = Executor::new(RealFs::new(&dir));
        assert!(exec.execute(&StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false }).is_err());
        assert!(exec
            .execute(&StorageOp::OpenLog { log, acked_end: 0, first_offset: 0, keep_whole_tail: false })
            .is_err());
        assert!(exec.execute(&StorageOp::ReplaceJournal { contents: b"new".to_vec(), keep_old: false }).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"outside");
        // A dangling link: creating through it must not create its target.
        let missing = outside.join("missing");
        std::fs::remove_file(dir.join("journal.tmp")).unwrap();
        std::os::unix::fs::symlink(&missing, dir.join("journal.tmp")).unwrap();
        refused("journal.tmp", "create", RealFs::new(&dir).create("journal.tmp"));
        assert!(!missing.exists(), "nothing is created outside the directory");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn writes_then_sync_go_through_one_descriptor() {
        let dir = temp_dir("one-fd");
        let mut fs = RealFs::new(&dir);
        fs.create("a").unwrap();
        fs.write_at("a", 0, b"hello").unwrap();
        fs.truncate("a", 4).unwrap();
        fs.write_at("a", 4, b"o!").unwrap();
        assert_eq!(fs.read_at("a", 0, 10).unwrap(), b"hello!");
        assert_eq!(fs.len("a").unwrap(), 6);
        fs.sync_file("a").unwrap();
        assert_eq!(fs.opens(), 1, "one open from the first write to the sync");
        assert!(fs.is_open("a"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bound_on_open_files_is_honoured_and_unsynced_files_are_kept_longest() {
        let dir = temp_dir("bound");
        let mut fs = RealFs::with_max_open(&dir, 3);
        for name in ["a", "b", "c"] {
            fs.create(name).unwrap();
        }
        fs.write_at("a", 0, b"unsynced").unwrap();
        fs.read_at("b", 0, 1).unwrap();
        fs.read_at("c", 0, 1).unwrap();
        fs.create("d").unwrap();
        assert_eq!(fs.open_files(), 3);
        assert!(fs.is_open("a"), "a has unsynced writes: a clean file is closed instead, though a was used first");
        assert!(!fs.is_open("b"), "b is the least recently used clean file");
        for i in 0..20 {
            let name = format!("f{i}");
            fs.create(&name).unwrap();
            fs.write_at(&name, 0, name.as_bytes()).unwrap();
            assert!(fs.open_files() <= 3, "{} open", fs.open_files());
        }
        for i in 0..20 {
            let name = format!("f{i}");
            fs.sync_file(&name).unwrap();
            assert_eq!(fs.read_all(&name).unwrap(), name.as_bytes());
        }
        fs.sync_file("a").unwrap();
        assert_eq!(fs.read_all("a").unwrap(), b"unsynced");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_sync_before_a_forced_close_is_reported_by_the_next_sync() {
        let dir = temp_dir("evict-fail");
        let mut fs = RealFs::with_max_open(&dir, 1);
        fs.create("a").unwrap();
        fs.write_at("a", 0, b"x").unwrap();
        fs.fail_syncs_of("a");
        fs.create("b").unwrap();
        assert!(!fs.is_open("a"), "the bound forced a closed");
        match fs.sync_file("a") {
            Err(StorageError::Io(m)) => assert!(m.contains("a") && m.contains("before closing"), "{m}"),
            other => panic!("the failure must be reported: {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_removed_or_renamed_file_is_never_reached_through_its_old_descriptor() {
        let dir = temp_dir("stale");
        let mut fs = RealFs::new(&dir);
        fs.create("a").unwrap();
        fs.write_at("a", 0, b"old").unwrap();
        fs.remove("a").unwrap();
        assert!(!fs.is_open("a"), "removing a file drops its descriptor");
        std::fs::write(dir.join("a"), b"new").unwrap();
        assert_eq!(fs.read_all("a").unwrap(), b"new", "the new file is read, not the removed one");
        fs.write_at("a", 3, b"!").unwrap();
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"new!");

        // Rename: the journal's descriptor goes with the replaced file; journal.tmp's
        // descriptor now reaches the file named journal.
        fs.create("journal").unwrap();
        fs.write_at("journal", 0, b"old journal").unwrap();
        fs.create("journal.tmp").unwrap();
        fs.write_at("journal.tmp", 0, b"new journal").unwrap();
        fs.sync_file("journal.tmp").unwrap();
        fs.rename("journal.tmp", "journal").unwrap();
        assert!(!fs.is_open("journal.tmp"));
        let opens = fs.opens();
        fs.write_at("journal", 11, b"+").unwrap();
        fs.sync_file("journal").unwrap();
        assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b"new journal+");
        assert_eq!(fs.opens(), opens, "the renamed file's descriptor is kept, under its new name");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_replaced_behind_its_back_is_reopened_and_lost_unsynced_writes_are_an_error() {
        let dir = temp_dir("replaced");
        let mut fs = RealFs::new(&dir);
        fs.create("a").unwrap();
        fs.write_at("a", 0, b"synced").unwrap();
        fs.sync_file("a").unwrap();
        std::fs::rename(dir.join("a"), dir.join("a.moved")).unwrap();
        std::fs::write(dir.join("a"), b"other").unwrap();
        assert_eq!(fs.read_all("a").unwrap(), b"other", "the file the name leads to now");
        fs.write_at("a", 0, b"unsynced").unwrap();
        std::fs::remove_file(dir.join("a")).unwrap();
        match fs.sync_file("a") {
            Err(StorageError::Io(m)) => assert!(m.contains("removed or replaced"), "{m}"),
            other => panic!("unsynced writes to a removed file must fail the sync: {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
