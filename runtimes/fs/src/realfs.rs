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
//! Files are opened for each operation and closed after it. That costs one `open`
//! per operation, next to an `fsync` that costs far more, and it keeps no state that
//! could go stale: a removed file can never be written through an old handle. On
//! Linux (4.16 and later) a writeback error that no one has seen yet is reported to
//! the next `fsync`, even through a descriptor opened after the error, so a failed
//! write-back is never lost by reopening.

use broker_core::{FileSystem, StorageError};
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// A flat data directory on a real file system.
///
/// Cheap to clone: the runtime gives each storage worker its own copy. Two copies
/// must not work on the same file at once; the driver routes every file to one worker.
#[derive(Clone, Debug)]
pub struct RealFs {
    dir: PathBuf,
}

impl RealFs {
    /// A file system rooted at `dir`, which must exist.
    pub fn new(dir: impl Into<PathBuf>) -> RealFs {
        RealFs { dir: dir.into() }
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

    fn open(&self, name: &str, options: &OpenOptions) -> Result<File, StorageError> {
        let path = self.path(name)?;
        let mut options = options.clone();
        no_follow(&mut options);
        options
            .open(&path)
            .map_err(|e| if is_symlink(&path) { symlink_refused(name) } else { map_err(name, "open", &e) })
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

fn write_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true);
    o
}

fn read_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true);
    o
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

/// Reads up to `buf.len()` bytes at `offset`; returns how many (fewer only at the end).
fn read_full_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(file, &mut buf[done..], offset + done as u64);
        #[cfg(not(unix))]
        let n = {
            use std::io::{Read, Seek, SeekFrom};
            let mut f = file;
            f.seek(SeekFrom::Start(offset + done as u64)).and_then(|_| f.read(&mut buf[done..]))
        };
        match n {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
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
        let mut o = write_options();
        o.create(true);
        self.open(name, &o).map(drop)
    }

    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let f = self.open(name, &write_options())?;
        write_all_at(&f, offset, data).map_err(|e| map_err(name, "write", &e))
    }

    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let f = self.open(name, &read_options())?;
        let mut buf = vec![0u8; len];
        let n = read_full_at(&f, offset, &mut buf).map_err(|e| map_err(name, "read", &e))?;
        buf.truncate(n);
        Ok(buf)
    }

    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        let path = self.path(name)?;
        // lstat: a symlink is refused, never measured through.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| map_err(name, "stat", &e))?;
        if meta.file_type().is_symlink() {
            return Err(symlink_refused(name));
        }
        Ok(meta.len())
    }

    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let f = self.open(name, &write_options())?;
        f.set_len(len).map_err(|e| map_err(name, "truncate", &e))
    }

    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        let f = self.open(name, &write_options())?;
        // fdatasync: flushes the data and the metadata needed to read it back (the
        // size included), which is all a log or the journal needs. Entries (create,
        // rename, unlink) are made durable by `sync_dir`.
        f.sync_data().map_err(|e| map_err(name, "fsync", &e))
    }

    fn sync_dir(&mut self) -> Result<(), StorageError> {
        sync_directory(&self.dir).map_err(|e| map_err(&self.dir.display().to_string(), "fsync of the directory", &e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        let (a, b) = (self.path(from)?, self.path(to)?);
        // rename(2) replaces `to` atomically within one directory.
        std::fs::rename(&a, &b).map_err(|e| map_err(from, &format!("rename to {to}"), &e))
    }

    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        let path = self.path(name)?;
        std::fs::remove_file(&path).map_err(|e| map_err(name, "unlink", &e))
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
        assert!(exec.execute(&StorageOp::CreateLog { log }).is_err());
        assert!(exec.execute(&StorageOp::OpenLog { log, acked_end: 0 }).is_err());
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
}
