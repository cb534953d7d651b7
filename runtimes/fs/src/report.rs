//! What the driver and the data directory report: the errors that stop them
//! ([`DriverError`]) and the notices an operator should hear ([`Notice`]). A module of
//! its own, so that `datadir` and `driver`, which both report, take from it rather than
//! from each other.

use broker_core::{BrokerError, HaltReason};
use std::path::PathBuf;
use std::time::Duration;

/// Why the driver could not open a directory or could not go on.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// Another process holds the data directory's lock.
    #[error("data directory {dir} is locked by another broker-fs process{holder} (lock file {lock}); stop it first")]
    Locked {
        /// The data directory another process holds.
        dir: PathBuf,
        /// The lock file's path, `dir/LOCK`.
        lock: PathBuf,
        /// Who holds it, as far as the lock file says (" (pid N)"), or empty.
        holder: String,
    },
    /// The metadata journal is damaged before its tail: refusing to start.
    #[error(
        "the metadata journal {file} is corrupt at byte {offset}: {detail}; refusing to start \
         (a damaged journal middle cannot be repaired by one node: restore the directory from a backup)"
    )]
    CorruptJournal {
        /// The journal file's full path.
        file: PathBuf,
        /// Where the damage begins, in bytes from the start of the file.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// The broker halted; drop the driver and open a new one to recover.
    #[error("the broker halted: {0}")]
    Halted(HaltReason),
    /// Recovery kept failing to read the directory.
    #[error(
        "cannot recover {dir}: {detail} ({attempts} attempts); nothing is served until recovery succeeds: \
         fix the cause (a file or directory in the way, a full disk, permissions), then run broker-fs again"
    )]
    Recovery {
        /// The data directory that could not be recovered.
        dir: PathBuf,
        /// How many times recovery failed.
        attempts: u32,
        /// The last failure, as `OPERATION failed: ERROR`.
        detail: String,
    },
    /// The data directory could not be prepared (created, locked, listed).
    #[error("data directory {dir}: {detail}")]
    Directory {
        /// The data directory, as given to [`crate::Driver::open`].
        dir: PathBuf,
        /// What failed.
        detail: String,
    },
    /// A file of the data directory is a symlink, which broker-fs never follows.
    #[error("data directory file {path}: {detail}")]
    Symlink {
        /// The symlink's path (broker-fs never follows it).
        path: PathBuf,
        /// What it is and what to do.
        detail: String,
    },
    /// Storage kept failing for as long as the driver's
    /// [`RetryPolicy`](crate::patience::RetryPolicy) waits; what was waited for stays
    /// in flight.
    #[error("gave up after {} of failing storage in {}: {}", secs(*timeout), dir.display(), failures.join("; "))]
    GaveUp {
        /// The data directory.
        dir: PathBuf,
        /// How long failures went on: the policy's timeout.
        timeout: Duration,
        /// Each failing operation, as `OPERATION failed N times (last error: ERROR)`.
        failures: Vec<String>,
    },
    /// A request was refused or failed.
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

/// Something an operator should hear about: what the broker reported, or what the
/// driver found in the data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A notice of the broker core (a torn journal tail, a stray log removed, a retry...).
    Broker(broker_core::Notice),
    /// The data directory's file system cannot lock a directory: only `LOCK` keeps a
    /// second writer out, and removing it while a broker runs lets one in.
    DirectoryNotLockable {
        /// The error of the lock.
        detail: String,
    },
    /// A file or directory that is none of the broker's; left alone.
    UnknownEntry {
        /// Its name in the data directory.
        name: String,
        /// Whether it is a directory.
        is_dir: bool,
    },
}

impl Notice {
    /// Whether an operator should be warned (not for news such as a new journal).
    pub fn is_warning(&self) -> bool {
        match self {
            Notice::Broker(n) => n.is_warning(),
            Notice::UnknownEntry { .. } | Notice::DirectoryNotLockable { .. } => true,
        }
    }
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Broker(n) => n.fmt(f),
            Notice::DirectoryNotLockable { detail } => write!(
                f,
                "the data directory itself cannot be locked ({detail}): only its {} file keeps a second \
                 writer out, so never remove it while a broker-fs process runs",
                crate::LOCK_FILE
            ),
            Notice::UnknownEntry { name, is_dir } => {
                let kind = if *is_dir { "directory" } else { "file" };
                write!(f, "unknown entry, left alone: {kind} {name}")
            }
        }
    }
}

/// A duration as people read it: "60 s", "1.5 s".
pub(crate) fn secs(d: Duration) -> String {
    format!("{} s", (d.as_secs_f64() * 10.0).round() / 10.0)
}
