//! The runtime contract: what the core asks of storage, what it expects back, and
//! every effect that leaves the core.
//!
//! A runtime executes [`StorageOp`]s and reports each one's result with its [`OpId`].
//! It must honour these rules, which the core's correctness rests on:
//!
//! - Mutations of the same target (one log, or the journal) take effect in the order
//!   they were issued. A read may take effect at any time after it is issued (the core
//!   never removes a log while a read of it is outstanding). Operations on different
//!   targets may run concurrently, and completions may be delivered in any order.
//! - A completion reports success only once the operation's promise (below) holds.
//! - Any operation may fail. After a failed append or sync, the state of the
//!   unsynced data is unknown: the core never retries a sync hoping it recovers
//!   (fsyncgate); it halts and recovers from what is durable.
//! - The same holds for the directory: after a failed directory fsync (once a log was
//!   created or removed, or the journal renamed into place), whether that entry is
//!   durable is unknown, and a later directory fsync that succeeds proves nothing about
//!   it. A runtime reports such a failure as [`StorageError::DirSyncFailed`], never as
//!   an ordinary error, and never retries the fsync itself; the core halts on it
//!   ([`HaltReason::DirectorySyncFailed`]), whatever the operation. Any other failure of
//!   [`StorageOp::CreateLog`] or [`StorageOp::RemoveLog`] (not found, permission
//!   denied, disk full) is retried by the core with backoff.

use crate::command::{ProduceRecord, Reply, StoredRecord};
use crate::error::{BrokerError, HaltReason, StorageError};
use crate::ids::{LogId, OpId, RequestId};
use crate::journal::JournalRecord;
use crate::notice::Notice;
use serde::{Deserialize, Serialize};

/// A record to append, with the offset the core assigned it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendRecord {
    /// Its offset, assigned by the core: an append's first record gets the log's next
    /// offset, the others follow one by one.
    pub offset: u64,
    /// The key and value as the client produced them.
    pub record: ProduceRecord,
}

/// A storage operation the core asks its runtime to carry out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StorageOp {
    /// Read the whole metadata journal. Output: [`OpOutput::Journal`], `None` if there is none.
    ReadJournal,
    /// Append one commit of `records` at the end of the journal: the runtime lays out
    /// its bytes ([`JournalRecord::encode_commit_into`]: copy A, zeros up to the next
    /// 4 KiB boundary, copy B) for the position where they land, the end of the
    /// journal's last whole commit (after the last [`StorageOp::ReplaceJournal`]'s
    /// contents or the journal read, and the earlier appends). Durable only after a
    /// later [`StorageOp::SyncJournal`] completes. Output: [`OpOutput::Done`].
    AppendJournal {
        /// The epoch of the journal appended to (the one in its header), which salts
        /// both copies.
        epoch: u64,
        /// The records of the commit, in order: one frame holds them all.
        records: Vec<JournalRecord>,
    },
    /// Make every journal append issued before it durable. Output: [`OpOutput::Done`].
    SyncJournal,
    /// Atomically replace the journal with `contents` (write a temporary file, sync it,
    /// rename it over the journal, sync the directory). Once complete, the new journal
    /// is durable and the old one is gone; a crash before leaves the old one whole.
    /// With `keep_old`, the old journal's bytes are first copied to a durable backup
    /// file, whose name the output reports (recovery keeps a copy of a torn journal; the executor keeps at most
    /// [`crate::executor::MAX_JOURNAL_BACKUPS`] of them, removing the oldest). A failed fsync of the directory
    /// is [`StorageError::DirSyncFailed`]. Output: [`OpOutput::Done`].
    ReplaceJournal {
        /// The new journal's full contents.
        contents: Vec<u8>,
        /// Copy the old journal aside first.
        keep_old: bool,
    },
    /// List every log in storage. Output: [`OpOutput::Logs`], ordered.
    ListLogs,
    /// Create an empty log. Idempotent: an existing log is left as it is. Durable once
    /// complete (its directory entry is synced; a failed directory fsync is
    /// [`StorageError::DirSyncFailed`]). Output: [`OpOutput::Done`].
    CreateLog {
        /// The log to create; byte-oriented runtimes name its file [`LogId::file_name`].
        log: LogId,
        /// The offset of its first record ([`crate::journal::TopicMeta::offset_base`]).
        first_offset: u64,
        /// The log runs under [`crate::Durability::LogSync`] (as for
        /// [`StorageOp::OpenLog`]): an executor that must find its tail again (after a
        /// failed append) never cuts what follows the last whole frame.
        keep_whole_tail: bool,
    },
    /// Open an existing log: validate it and report the next offset, which is
    /// `acked_end` (or more, with `keep_whole_tail`). Records below `acked_end` were
    /// acknowledged (the journal says so): damage among them, or their absence, is
    /// reported as corruption on every read of them and their offsets are never reused;
    /// nothing of them is ever cut. Everything from `acked_end` on was never acknowledged
    /// (a torn write, or bytes still in the page cache that never became durable) and is
    /// cut, durably, before the output; with `keep_whole_tail` only from the first frame
    /// that is damaged or does not continue the offsets, and the cut is reported.
    /// Output: [`OpOutput::Opened`]; `NotFound` if absent.
    OpenLog {
        /// A live log, named by the journal.
        log: LogId,
        /// One past the last acknowledged offset, from the journal.
        acked_end: u64,
        /// The log's first offset ([`crate::journal::TopicMeta::offset_base`]); with
        /// `acked_end` equal to it, nothing is acknowledged.
        first_offset: u64,
        /// Keep the records after `acked_end` that the file holds whole, in offset
        /// order, right after it: under [`crate::Durability::LogSync`] a record is
        /// acknowledged once its log is synced, before the journal holds its end, so
        /// they may have been acknowledged. The rest of the tail is cut as always, and
        /// reported in [`OpOutput::Opened::tail_cut`].
        keep_whole_tail: bool,
    },
    /// Append records (with dense offsets continuing the log). Durable only after a
    /// later [`StorageOp::SyncLog`] of the same log completes; after a crash an
    /// unsynced append may vanish or survive in part. Output: [`OpOutput::Done`].
    Append {
        /// The log to append to, at its end.
        log: LogId,
        /// The records, offsets ascending by one.
        records: Vec<AppendRecord>,
    },
    /// Make every append to this log issued before it durable. Output: [`OpOutput::Done`].
    SyncLog {
        /// The log whose earlier appends become durable.
        log: LogId,
    },
    /// Read up to `max_records` records from `offset`. A record that fails its checksum
    /// is reported as [`StorageError::Corrupt`], never returned. Output: [`OpOutput::Records`].
    Read {
        /// The log to read (never removed while a read of it is outstanding).
        log: LogId,
        /// The first offset to return, below the high watermark.
        offset: u64,
        /// The most records to return: at least 1, never past the high watermark.
        max_records: u32,
        /// The most key and value bytes to return, summed over the records; the first
        /// record is returned whatever its size, so a read always makes progress.
        max_bytes: u64,
    },
    /// Remove a log. Idempotent: removing an absent log succeeds. Durable once complete
    /// (its directory entry is synced; a failed directory fsync is
    /// [`StorageError::DirSyncFailed`]). Output: [`OpOutput::Done`].
    RemoveLog {
        /// A log of a deleted topic, or a stray that no topic names.
        log: LogId,
    },
}

impl StorageOp {
    /// The log this operation targets, if any (journal operations target none).
    pub fn log(&self) -> Option<LogId> {
        match self {
            StorageOp::CreateLog { log, .. }
            | StorageOp::OpenLog { log, .. }
            | StorageOp::Append { log, .. }
            | StorageOp::SyncLog { log }
            | StorageOp::Read { log, .. }
            | StorageOp::RemoveLog { log } => Some(*log),
            StorageOp::ReadJournal
            | StorageOp::AppendJournal { .. }
            | StorageOp::SyncJournal
            | StorageOp::ReplaceJournal { .. }
            | StorageOp::ListLogs => None,
        }
    }
}

/// What a successful storage operation returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpOutput {
    /// The operation took effect (and is durable where its doc says so).
    Done,
    /// The journal's bytes, or `None` if no journal exists yet.
    Journal(Option<Vec<u8>>),
    /// Every log in storage, ordered.
    Logs(Vec<LogId>),
    /// A log was opened; `next_offset` is the `acked_end` it was opened with (acknowledged
    /// records missing at its end are reported damaged, their offsets never reused).
    Opened {
        /// The offset the next append must use.
        next_offset: u64,
        /// Ranges of acknowledged offsets whose records are damaged or missing: every
        /// read of them reports corruption.
        damaged: Vec<DamagedRange>,
        /// With `keep_whole_tail`, what was cut after the last record kept, if
        /// anything: a write torn by a crash, or records acknowledged and then damaged
        /// before the journal held their end (nothing tells which). Always `None`
        /// without it: what is cut then was never acknowledged.
        tail_cut: Option<TailCut>,
    },
    /// Records read, offsets dense from the requested one.
    Records(Vec<StoredRecord>),
    /// The journal was replaced and its old contents kept in this file first (the
    /// output of a [`StorageOp::ReplaceJournal`] with `keep_old`; [`OpOutput::Done`]
    /// there is accepted too, from a runtime that does not name its copies).
    BackedUp(String),
}

/// Offsets `from..to` of a log whose records cannot be read back (damage found on open).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedRange {
    /// The first damaged offset.
    pub from: u64,
    /// One past the last damaged offset.
    pub to: u64,
    /// What was found, and at which byte.
    pub detail: String,
}

/// The tail of a log that opening cut although it may have held acknowledged records
/// ([`StorageOp::OpenLog::keep_whole_tail`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailCut {
    /// The file position the log was cut at.
    pub position: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// What was found there.
    pub detail: String,
}

/// The result of one storage operation.
pub type OpResult = Result<OpOutput, StorageError>;

/// Everything that leaves the core.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// Carry out a storage operation and report its result with `id`.
    Storage {
        /// Echo this in the completion.
        id: OpId,
        /// What to carry out; each variant's doc says when it is durable.
        op: StorageOp,
    },
    /// Answer a client request.
    Reply {
        /// The id the runtime gave the command in [`crate::Broker::handle_command`].
        request: RequestId,
        /// The reply, or why the command failed.
        reply: Result<Reply, BrokerError>,
    },
    /// Something an operator should hear about; nothing waits for it.
    Notice(Notice),
    /// The broker stopped; drop it and start a new one, which recovers from storage.
    Halt(HaltReason),
}
