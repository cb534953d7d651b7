//! The data directory: creating it, locking it (exclusively to write, shared to read),
//! and telling the broker's files from anything else in it.
//!
//! The lock is an advisory `flock` held for the driver's lifetime, so two processes
//! never write one directory; readers share it and exclude only a writer. It is taken
//! on the directory itself, which an operator does not delete while it is in use (a
//! lock on a file alone is lost to the next process when the file is removed or
//! replaced, and after a kill -9 a leftover `LOCK` looks stale), and on `LOCK` too, so
//! that older versions, which lock only `LOCK`, are excluded as well. `LOCK` names the
//! holder's pid, for the message of the next process that tries and for `status`.

use crate::realfs::{is_symlink, no_follow, sync_directory};
use crate::report::{DriverError, Notice};
use broker_core::executor::{JOURNAL_BACKUP_PREFIX, JOURNAL_RESERVE_FILE, JOURNAL_TMP_FILE};
use broker_core::{LogId, JOURNAL_FILE};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;

/// The name of the lock file at the top of the data directory.
pub const LOCK_FILE: &str = "LOCK";

/// The locks on a data directory, held together (released when dropped).
#[derive(Debug)]
pub(crate) struct DirLock {
    _dir: Option<File>,
    _file: Option<File>,
}

/// Locks the directory itself, exclusively or shared. `Ok(None)` where its file system
/// cannot lock a directory (some network file systems): `LOCK` alone must do, which
/// the notice says.
fn lock_directory(dir: &Path, exclusive: bool, notices: &mut Vec<Notice>) -> Result<Option<File>, DriverError> {
    let err = |detail: String| DriverError::Directory { dir: dir.to_path_buf(), detail };
    let handle = File::open(dir).map_err(|e| err(format!("cannot open it to lock it: {e}")))?;
    let locked = if exclusive { handle.try_lock() } else { handle.try_lock_shared() };
    match locked {
        Ok(()) => Ok(Some(handle)),
        Err(TryLockError::WouldBlock) => Err(DriverError::Locked {
            dir: dir.to_path_buf(),
            lock: dir.join(LOCK_FILE),
            holder: lock_holder(&dir.join(LOCK_FILE)),
        }),
        Err(TryLockError::Error(e)) => {
            notices.push(Notice::DirectoryNotLockable { detail: e.to_string() });
            Ok(None)
        }
    }
}

/// Creates the data directory if needed and takes its locks, exclusively.
pub(crate) fn prepare_directory(dir: &Path, notices: &mut Vec<Notice>) -> Result<DirLock, DriverError> {
    let err = |detail: String| DriverError::Directory { dir: dir.to_path_buf(), detail };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create it: {e}")))?;
        // Make the new directory's own entry durable.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_directory(parent).map_err(|e| err(format!("cannot sync its parent: {e}")))?;
        }
    }
    let dir_lock = lock_directory(dir, true, notices)?;
    let lock_path = dir.join(LOCK_FILE);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    // Never through a symlink: locking would truncate and write the link's target.
    no_follow(&mut options);
    let mut lock = options.open(&lock_path).map_err(|e| {
        if is_symlink(&lock_path) {
            let detail = format!(
                "{LOCK_FILE} is a symbolic link: broker-fs never follows links in its data directory (locking \
                 through it would write the file it points to); remove the link, and broker-fs creates the lock \
                 file anew"
            );
            DriverError::Symlink { path: lock_path.clone(), detail }
        } else {
            let advice = if e.kind() == std::io::ErrorKind::ReadOnlyFilesystem {
                " (the data directory is read-only: list, describe, status and fetch still work; \
                 to write, make it writable, for example by remounting it read-write)"
            } else {
                ""
            };
            err(format!("cannot open the lock file {}: {e}{advice}", lock_path.display()))
        }
    })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = lock_holder(&lock_path);
            return Err(DriverError::Locked { dir: dir.to_path_buf(), lock: lock_path, holder });
        }
        Err(TryLockError::Error(e)) => return Err(err(format!("cannot lock {}: {e}", lock_path.display()))),
    }
    // For the error message of the next process that tries; not needed for safety.
    let _ = lock.set_len(0).and_then(|()| writeln!(lock, "{}", std::process::id()));
    Ok(DirLock { _dir: dir_lock, _file: Some(lock) })
}

/// The pid that `LOCK` names, if it names one.
pub fn lock_file_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join(LOCK_FILE)).ok().and_then(|s| s.trim().parse::<u32>().ok())
}

/// Whether process `pid` runs on this machine (`None` where that cannot be told).
pub fn pid_running(pid: u32) -> Option<bool> {
    let proc = Path::new("/proc");
    proc.join("self").exists().then(|| proc.join(pid.to_string()).exists())
}

/// Who holds the lock, as far as `LOCK` tells, for error messages: " (pid N)" and
/// whether it runs, or why `LOCK` cannot tell.
fn lock_holder(lock_path: &Path) -> String {
    if !lock_path.exists() {
        return format!(" (its {LOCK_FILE} file was removed while the directory was in use, so it names no pid)");
    }
    let Some(pid) = lock_path.parent().and_then(lock_file_pid) else { return String::new() };
    match pid_running(pid) {
        Some(true) => format!(" (pid {pid}, running)"),
        None => format!(" (pid {pid})"),
        Some(false) => {
            format!(" ({LOCK_FILE} names pid {pid}, which is not running: the holder did not write its pid)")
        }
    }
}

/// Takes a shared lock on an existing data directory without writing anything (the
/// directory may be read-only or its disk full): readers exclude a writer, not each other.
pub(crate) fn lock_for_reading(dir: &Path, notices: &mut Vec<Notice>) -> Result<DirLock, DriverError> {
    let err = |detail: String| DriverError::Directory { dir: dir.to_path_buf(), detail };
    if !dir.is_dir() {
        return Err(err("no such data directory (a read-only command creates nothing)".into()));
    }
    let dir_lock = lock_directory(dir, false, notices)?;
    let lock_path = dir.join(LOCK_FILE);
    let mut options = OpenOptions::new();
    options.read(true);
    no_follow(&mut options);
    let lock = match options.open(&lock_path) {
        Ok(lock) => lock,
        // No older version can hold it: the directory's own lock is enough.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DirLock { _dir: dir_lock, _file: None }),
        Err(e) => return Err(err(format!("cannot open the lock file {}: {e}", lock_path.display()))),
    };
    match lock.try_lock_shared() {
        Ok(()) => Ok(DirLock { _dir: dir_lock, _file: Some(lock) }),
        Err(TryLockError::WouldBlock) => {
            let holder = lock_holder(&lock_path);
            Err(DriverError::Locked { dir: dir.to_path_buf(), lock: lock_path, holder })
        }
        Err(TryLockError::Error(e)) => Err(err(format!("cannot lock {}: {e}", lock_path.display()))),
    }
}

/// Reports every entry of the data directory that is none of the broker's.
pub(crate) fn scan_directory(dir: &Path) -> Result<Vec<Notice>, DriverError> {
    let err =
        |e: std::io::Error| DriverError::Directory { dir: dir.to_path_buf(), detail: format!("cannot list: {e}") };
    let mut notices = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(err)?.collect::<Result<_, _>>().map_err(err)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let is_dir = entry.file_type().map_err(err)?.is_dir();
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_dir || !is_broker_file(&name) {
            notices.push(Notice::UnknownEntry { name, is_dir });
        }
    }
    Ok(notices)
}

/// Whether `name` is a file the broker writes: the lock, the journal and its
/// temporary, reserve and backup files, and logs.
pub fn is_broker_file(name: &str) -> bool {
    name == LOCK_FILE
        || name == crate::durability_file::DURABILITY_FILE
        || name == crate::durability_file::DURABILITY_TMP_FILE
        || name == JOURNAL_FILE
        || name == JOURNAL_TMP_FILE
        || name == JOURNAL_RESERVE_FILE
        || name
            .strip_prefix(JOURNAL_BACKUP_PREFIX)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || LogId::parse_file_name(name).is_some()
}
