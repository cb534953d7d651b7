//! What an operator should hear about: things the broker found or did on its own and
//! carried on from. They leave the core as [`crate::Effect::Notice`], so a runtime prints
//! or logs them as they come instead of working them out from storage operations.
//!
//! Client-facing outcomes are replies and fatal conditions are halts; a notice is neither:
//! nothing waits for it, and a runtime that drops it loses only the message.

use crate::error::StorageError;
use crate::ids::{LogId, TopicId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A background operation that failed and will be tried again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// Reading the journal at the start.
    ReadJournal,
    /// Listing the logs at the start (to find strays).
    ListLogs,
    /// Opening a live log at the start.
    OpenLog(LogId),
    /// Creating a log of a new topic.
    CreateLog(LogId),
    /// Removing a log of a deleted topic.
    RemoveLog(LogId),
    /// Removing a log that no topic names.
    RemoveStray(LogId),
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::ReadJournal => write!(f, "reading the journal"),
            Operation::ListLogs => write!(f, "listing the data directory"),
            Operation::OpenLog(log) => write!(f, "opening log {}", log.file_name()),
            Operation::CreateLog(log) => write!(f, "creating log {}", log.file_name()),
            Operation::RemoveLog(log) => write!(f, "removing log {}", log.file_name()),
            Operation::RemoveStray(log) => write!(f, "removing stray log {}", log.file_name()),
        }
    }
}

/// Something the broker noticed that an operator should hear about: something it found
/// or did on its own and carried on from. A notice leaves the core as
/// [`crate::Effect::Notice`], so a runtime prints or logs it as it comes instead of
/// working it out from storage operations.
///
/// Client-facing outcomes are replies and fatal conditions are halts; a notice is neither:
/// nothing waits for it, and a runtime that drops it loses only the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Notice {
    /// No journal existed: the broker started a new, empty one.
    NewJournal,
    /// The journal ended in a torn commit (a write cut off by a crash); the commit was
    /// never acknowledged and is ignored. A broker that writes rewrites the journal
    /// without it; a read-only one leaves the file as it is.
    TornJournalTail {
        /// Where the torn commit began, in bytes: the rewritten journal holds nothing from there on.
        offset: u64,
        /// What was wrong with the tail.
        detail: String,
        /// Whether the journal was rewritten (false in a read-only start).
        rewritten: bool,
        /// The file the runtime kept the old journal in, if it named one.
        backup: Option<String>,
    },
    /// One copy of a journal commit (or of its header) was damaged; its other copy was
    /// intact and used. A broker that writes rewrites the journal whole; a read-only one
    /// leaves the file as it is. The medium may be failing.
    JournalCopyRepaired {
        /// Where the damaged copy begins.
        offset: u64,
        /// What was wrong with it.
        detail: String,
        /// Whether the journal was rewritten (false in a read-only start).
        rewritten: bool,
        /// The file the runtime kept the old journal in, if it named one.
        backup: Option<String>,
    },
    /// A log that no topic names (left by a crash during a create or a removal) was
    /// removed at the start.
    StrayLogRemoved {
        /// The removed log (its topic id is never handed to a new topic).
        log: LogId,
    },
    /// A background operation failed; the broker tries it again after a backoff.
    Retrying {
        /// What failed.
        operation: Operation,
        /// How.
        error: StorageError,
        /// How many times it has failed so far, this one included: counted per log (reset
        /// when a create or removal of it succeeds), and in one count shared by the two
        /// reads of a start (the journal and the log listing), never reset.
        failures: u32,
        /// When the broker tries again, in milliseconds from now.
        retry_in_ms: u64,
    },
    /// Every log of a deleted topic is removed, and the completion record goes to the
    /// journal with the next commit. (A crash before that commit is durable leaves the
    /// next start nothing to remove: it finishes the deletion again, with this notice.)
    DeletionFinished {
        /// The deleted incarnation's id.
        topic: TopicId,
        /// Its name.
        name: String,
    },
    /// Opening a log under [`crate::Durability::LogSync`] cut its tail from the first
    /// frame that was damaged or did not continue the offsets: a write torn by a crash,
    /// or records acknowledged and then damaged before the journal held their end
    /// (nothing on disk tells which). The log continues from `offset`; records a client
    /// was told are at `offset` or after it on this log may be gone.
    TailCut {
        /// The log that was cut.
        log: LogId,
        /// The first offset not kept: the next record appended takes it.
        offset: u64,
        /// How many bytes follow the last frame kept (0 for a log that cannot be read at
        /// all); they stay in the file until appends overwrite them.
        bytes: u64,
        /// What was found where the cut begins.
        detail: String,
    },
    /// Acknowledged records that cannot be read back: damage found when a log was opened,
    /// or a read that failed its checksum. Fetches of them report corruption.
    Corruption {
        /// The log holding the damaged records.
        log: LogId,
        /// The first damaged offset: the range is `from..to`.
        from: u64,
        /// One past the last damaged offset.
        to: u64,
        /// What was found, and where.
        detail: String,
    },
}

impl Notice {
    /// Whether an operator should be warned (a new journal and a finished deletion are
    /// only news).
    pub fn is_warning(&self) -> bool {
        !matches!(self, Notice::NewJournal | Notice::DeletionFinished { .. })
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = |f: &mut fmt::Formatter<'_>, backup: &Option<String>| match backup {
            Some(b) => write!(f, "; the old journal is kept as {b}"),
            None => Ok(()),
        };
        match self {
            Notice::NewJournal => write!(f, "no journal found: started a new, empty one"),
            Notice::TornJournalTail { offset, detail, rewritten: true, backup } => {
                write!(f, "the journal had a torn tail at byte {offset} ({detail}): truncated it")?;
                kept(f, backup)
            }
            Notice::TornJournalTail { offset, detail, rewritten: false, .. } => write!(
                f,
                "the journal has a torn tail at byte {offset} ({detail}): ignored it; opened read-only, the \
                 file is left as it is"
            ),
            Notice::JournalCopyRepaired { offset, detail, rewritten: true, backup } => {
                write!(
                    f,
                    "the journal had a damaged copy at byte {offset} ({detail}): used its other copy and \
                     rewrote the journal; check the disk"
                )?;
                kept(f, backup)
            }
            Notice::JournalCopyRepaired { offset, detail, rewritten: false, .. } => write!(
                f,
                "the journal has a damaged copy at byte {offset} ({detail}): used its other copy; opened \
                 read-only, the file is left as it is; check the disk"
            ),
            Notice::StrayLogRemoved { log } => write!(f, "removed stray log {}: no topic names it", log.file_name()),
            Notice::Retrying { operation, error, failures, retry_in_ms } => {
                write!(f, "{operation} failed ({error}); retrying in {retry_in_ms} ms (failure {failures})")
            }
            Notice::DeletionFinished { topic, name } => {
                write!(f, "the deletion of {name:?} (id {topic}) finished: its logs are removed")
            }
            Notice::TailCut { log, offset, bytes: 0, detail } => write!(
                f,
                "log {} cannot be read ({detail}): records acknowledged under durability log-sync from offset \
                 {offset} on, past the journal's end, cannot be counted and the next appends take their offsets; \
                 check the disk",
                log.file_name()
            ),
            Notice::TailCut { log, offset, bytes, detail } => write!(
                f,
                "log {} was cut at offset {offset}: {bytes} bytes after its last whole frame ({detail}) were \
                 a write torn by a crash, or records acknowledged under durability log-sync and damaged \
                 before the journal held their end; if the machine did not lose power, check the disk",
                log.file_name()
            ),
            Notice::Corruption { log, from, to, detail } => write!(
                f,
                "log {} offsets {from}..{to} cannot be read back ({detail}); fetches of them report \
                 corruption: check the disk",
                log.file_name()
            ),
        }
    }
}
