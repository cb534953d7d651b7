//! The data directory: creating it, locking it (exclusively to write, shared to read),
//! and telling the broker's files from anything else in it.
//!
//! The lock is an advisory `flock` on `LOCK`, held for the driver's lifetime, so two
//! processes never write one directory; readers share it and exclude only a writer. The
//! lock file names the holder's pid, for the message of the next process that tries.

use crate::driver::{DriverError, Notice};
use crate::realfs::{is_symlink, no_follow, sync_directory};
use broker_core::executor::{JOURNAL_BACKUP_PREFIX, JOURNAL_RESERVE_FILE, JOURNAL_TMP_FILE};
use broker_core::journal::JOURNAL_FILE;
use broker_core::LogId;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;

/// The name of the lock file at the top of the data directory.
pub const LOCK_FILE: &str = "LOCK";

/// Creates the data directory if needed and takes its lock.
pub(crate) fn prepare_directory(dir: &Path) -> Result<File, DriverError> {
    let err = |detail: String| DriverError::Directory { dir: dir.to_path_buf(), detail };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create it: {e}")))?;
        // Make the new directory's own entry durable.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_directory(parent).map_err(|e| err(format!("cannot sync its parent: {e}")))?;
        }
    }
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
    Ok(lock)
}

/// " (pid N)" when the lock file names the process holding it, for error messages.
fn lock_holder(lock_path: &Path) -> String {
    std::fs::read_to_string(lock_path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default()
}

/// Takes a shared lock on an existing data directory without writing anything (the
/// directory may be read-only or its disk full): readers exclude a writer, not each other.
pub(crate) fn lock_for_reading(dir: &Path) -> Result<Option<File>, DriverError> {
    let err = |detail: String| DriverError::Directory { dir: dir.to_path_buf(), detail };
    if !dir.is_dir() {
        return Err(err("no such data directory (a read-only command creates nothing)".into()));
    }
    let lock_path = dir.join(LOCK_FILE);
    let mut options = OpenOptions::new();
    options.read(true);
    no_follow(&mut options);
    let lock = match options.open(&lock_path) {
        Ok(lock) => lock,
        // Never written to by a broker that could lock it: nothing to exclude.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot open the lock file {}: {e}", lock_path.display()))),
    };
    match lock.try_lock_shared() {
        Ok(()) => Ok(Some(lock)),
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
        || name == JOURNAL_FILE
        || name == JOURNAL_TMP_FILE
        || name == JOURNAL_RESERVE_FILE
        || name
            .strip_prefix(JOURNAL_BACKUP_PREFIX)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || LogId::parse_file_name(name).is_some()
}
