//! Typed errors: what a client is told, what a runtime reports, and why a broker halts.

use crate::ids::{LogId, OpId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a client command failed. A command rejected with one of these changed nothing,
/// except [`BrokerError::Halted`], whose outcome is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum BrokerError {
    /// The name breaks the topic naming rules.
    #[error("invalid topic name {name:?}: it {reason}")]
    InvalidTopicName {
        /// The offending name (at most its first 64 characters).
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The partition count is zero or above the configured limit.
    #[error("invalid partition count {requested}: must be between 1 and {max}")]
    InvalidPartitionCount {
        /// What the client asked for.
        requested: u32,
        /// The broker's configured limit.
        max: u32,
    },
    /// A topic setting is out of range.
    #[error("invalid topic settings: {0}")]
    InvalidSettings(String),
    /// A live topic (or one being created) already has this name.
    #[error("topic {name:?} already exists")]
    TopicAlreadyExists {
        /// The name asked for.
        name: String,
    },
    /// No live topic has this name (deleted topics are hidden at once).
    #[error("topic {name:?} not found")]
    TopicNotFound {
        /// The name asked for.
        name: String,
    },
    /// The topic exists but has no such partition.
    #[error("topic {name:?} has no partition {partition} (it has {partitions})")]
    PartitionNotFound {
        /// The topic name.
        name: String,
        /// The partition asked for.
        partition: u32,
        /// How many partitions the topic has.
        partitions: u32,
    },
    /// The fetch offset is past the partition's high watermark.
    #[error("offset {offset} is out of range: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The next offset to be acknowledged.
        high_watermark: u64,
    },
    /// The fetch offset is before the partition's first offset: a position of an earlier
    /// incarnation of the name, or of none.
    #[error(
        "offset {offset} is out of range: this topic's offsets begin at {log_start} (past every offset of the \
         topics deleted before it was created)"
    )]
    OffsetBeforeStart {
        /// The offset asked for.
        offset: u64,
        /// The partition's first offset.
        log_start: u64,
    },
    /// A produce's records, as one stored batch, are larger than the broker's batch limit
    /// (which never exceeds what one log frame holds). Nothing was written: split the
    /// records over several produces.
    #[error("the batch takes {bytes} bytes, over the limit of {max} bytes: split it over several produces")]
    BatchTooLarge {
        /// The batch's size as stored ([`crate::logcodec::batch_bytes`]), in bytes.
        bytes: u64,
        /// The limit, [`crate::Config::batch_bytes_limit`], in bytes.
        max: u64,
    },
    /// A consumer group's id is empty or longer than 249 bytes.
    #[error("invalid group id {group:?}: it {reason}")]
    InvalidGroup {
        /// The offending id (at most its first 64 characters).
        group: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// No position is committed for this group.
    #[error("group {group:?} not found: it holds no committed offset")]
    GroupNotFound {
        /// The group asked for.
        group: String,
    },
    /// The metadata of a committed offset is longer than the broker keeps.
    #[error("offset metadata of {len} bytes is over the limit of {max} bytes")]
    OffsetMetadataTooLarge {
        /// Its length.
        len: usize,
        /// [`crate::Config::max_offset_metadata_bytes`].
        max: usize,
    },
    /// The commit would take the committed offsets past the bytes the broker keeps for
    /// them: delete the groups no longer used.
    #[error("committed offsets would take {bytes} bytes, over the limit of {max}: delete groups no longer used")]
    CommittedOffsetsFull {
        /// What they would take.
        bytes: u64,
        /// [`crate::Config::max_committed_offsets_bytes`].
        max: u64,
    },
    /// The commit names an incarnation that is not the topic's live one: its positions
    /// belong to a deleted incarnation of the name (or to none).
    #[error("topic {name:?} is now incarnation {live}, not {given}: positions of another incarnation are not kept")]
    StaleIncarnation {
        /// The topic's name.
        name: String,
        /// The incarnation the commit named.
        given: u64,
        /// The live incarnation.
        live: u64,
    },
    /// An idempotent produce names a producer id this broker never handed out.
    #[error("producer id {producer_id} is unknown: ask for one with InitProducer")]
    UnknownProducer {
        /// The id given.
        producer_id: u64,
    },
    /// An idempotent produce comes from an older epoch of its producer than one already
    /// seen on the partition: another instance of the producer took over.
    #[error("producer {producer_id} at epoch {epoch} is fenced: the partition has seen epoch {current}")]
    ProducerFenced {
        /// The producer id.
        producer_id: u64,
        /// The epoch given.
        epoch: u16,
        /// The newest epoch the partition has seen.
        current: u16,
    },
    /// An idempotent produce's first sequence number does not follow the producer's last
    /// batch on the partition (and is no retry of one of its latest batches).
    #[error("producer {producer_id} sent sequence {got} where {expected} was expected")]
    OutOfOrderSequence {
        /// The producer id.
        producer_id: u64,
        /// The sequence number that would follow.
        expected: u32,
        /// The sequence number given.
        got: u32,
    },
    /// The request is malformed (empty batch, record too large, zero `max_records`, ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Another request with the same id is still in flight.
    #[error("request id {0} is already in flight")]
    DuplicateRequestId(u64),
    /// The broker was started read-only ([`crate::Config::read_only`]): it serves
    /// list, describe and fetch, and refuses every command that writes.
    #[error("{0} is refused: the data was opened read-only (for reading on a read-only or full disk); open it for writing to change anything")]
    ReadOnly(String),
    /// The broker or cluster node does not serve this request now, for the reason given:
    /// it is recovering or has halted, the store did not answer within the request's
    /// deadline (nothing was written), or it refuses to serve on top of data it found
    /// damaged.
    #[error("broker unavailable: {0}")]
    Unavailable(String),
    /// The broker halted while this request was in flight; it may or may not have taken effect.
    #[error("broker halted while the request was in flight; its outcome is unknown: {0}")]
    Halted(String),
    /// A cluster node cannot tell whether this write took effect: its topic was deleted
    /// while it was in flight (it may have landed, and been read, before the deletion,
    /// or not at all), or its deadline passed while its write to the store was under way
    /// (it may still land).
    #[error("the outcome is unknown: {0}")]
    OutcomeUnknown(String),
    /// A stored record failed its checksum; it is reported, never served.
    #[error("{}: {detail}", damaged_records(*.offset, *.end, .log))]
    CorruptRecord {
        /// The file name ([`LogId::file_name`]) of the log holding the record.
        log: String,
        /// The first offset that could not be read.
        offset: u64,
        /// One past the last offset the same damage makes unreadable (the rest of a
        /// damaged batch): a reader that skips the damage resumes here. `offset + 1`
        /// where the extent is unknown.
        end: u64,
        /// What the codec found.
        detail: String,
    },
    /// The storage failed to serve a read.
    #[error("storage error: {0}")]
    Storage(String),
}

/// How a storage operation failed, as a runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum StorageError {
    /// The file does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// No space left on the device.
    #[error("disk full: {0}")]
    DiskFull(String),
    /// The runtime may not touch the file.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// Any other I/O failure.
    #[error("I/O error: {0}")]
    Io(String),
    /// Stored bytes failed validation (checksum, header, framing).
    #[error("corrupt data in {file} at byte {position}: {detail}")]
    Corrupt {
        /// The file's name in the data directory.
        file: String,
        /// The byte position where validation failed.
        position: u64,
        /// The first record offset affected; `None` where no record is known (a log header).
        record_offset: Option<u64>,
        /// One past the last record offset the damage is known to cover (the end of a
        /// damaged batch, or of a hole found at open), where known.
        record_end: Option<u64>,
        /// What was wrong.
        detail: String,
    },
    /// The fsync of the data directory failed after an entry was created, renamed or
    /// removed. Whether that entry is durable is unknown, and a later fsync that
    /// succeeds proves nothing about it: the core halts on this, never retries.
    #[error("directory fsync failed {0}")]
    DirSyncFailed(String),
}

/// Why the broker stopped serving. After a halt the runtime drops the broker and
/// starts a new one, which recovers from what is durable.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum HaltReason {
    /// A journal write or sync failed: what is durable is unknown (fsyncgate).
    #[error("journal write failed: {0}")]
    JournalWriteFailed(StorageError),
    /// A log append or sync failed: the log's unsynced tail is in an unknown state.
    #[error("write to log {log} failed: {error}")]
    LogWriteFailed {
        /// The log whose append or sync failed.
        log: LogId,
        /// The error the runtime reported.
        error: StorageError,
    },
    /// The journal is corrupt before its tail; starting would drop acknowledged metadata.
    #[error("journal file {file} is corrupt at byte {offset}: {detail}; refusing to start")]
    CorruptJournal {
        /// The journal's file name in the data directory ([`crate::journal::JOURNAL_FILE`]).
        file: String,
        /// Where the damage begins, in bytes from the start of the file.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// The fsync of the data directory failed after a log was created or removed or the
    /// journal was replaced ([`StorageError::DirSyncFailed`]): whether that entry is
    /// durable is unknown, so the broker stops rather than retry the fsync and trust it.
    #[error(
        "directory fsync failed {0}; whether that directory entry is durable is unknown, so the broker halted \
         instead of retrying: restart it to recover from what is durable (if this recurs, check the disk and \
         the kernel log)"
    )]
    DirectorySyncFailed(String),
    /// The runtime broke the contract (unknown operation id, wrong kind of output).
    #[error("runtime contract violated: {0}")]
    ContractViolation(String),
}

impl HaltReason {
    pub(crate) fn unknown_op(op: OpId) -> HaltReason {
        HaltReason::ContractViolation(format!("completion for unknown operation {}", op.0))
    }

    pub(crate) fn wrong_output(op: OpId, expected: &str) -> HaltReason {
        HaltReason::ContractViolation(format!(
            "completion of operation {} returned the wrong output (expected {expected})",
            op.0
        ))
    }
}

/// A failure to decode a journal or log image, before recovery decides what it means.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The bytes end in the middle of something.
    #[error("truncated at byte {0}")]
    Truncated(u64),
    /// The bytes are not what the format allows.
    #[error("malformed at byte {position}: {detail}")]
    Malformed {
        /// The byte position in the file.
        position: u64,
        /// What is wrong there.
        detail: String,
    },
}

/// "record at offset 7 of LOG is corrupt", or for a damaged batch "records at offsets 7
/// to 9 of LOG are corrupt".
fn damaged_records(offset: u64, end: u64, log: &str) -> String {
    match end.saturating_sub(offset) {
        0 | 1 => format!("record at offset {offset} of {log} is corrupt"),
        _ => format!("records at offsets {offset} to {} of {log} are corrupt", end - 1),
    }
}
