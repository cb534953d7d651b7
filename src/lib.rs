#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Whether planted bug `$bug` (a `planted::Bug` variant) is switched on in `$on`, which
/// has a `bugs` field (`Config`, the executor): `planted!(self.config, SkipDirSync)`.
#[cfg(feature = "planted-bugs")]
macro_rules! planted {
    ($on:expr, $bug:ident) => {
        $on.bugs.has($crate::planted::Bug::$bug)
    };
}

/// Without the `planted-bugs` feature no bug is ever planted: `false`, and `$on` is not
/// looked at.
#[cfg(not(feature = "planted-bugs"))]
macro_rules! planted {
    ($on:expr, $bug:ident) => {
        $crate::no_planted_bug(stringify!($bug))
    };
}

/// `false`, whatever the bug: a call rather than the literal, so that checks of two
/// different bugs do not read as one operand repeated (`planted!(c, A) || planted!(c, B)`).
#[cfg(not(feature = "planted-bugs"))]
#[inline]
const fn no_planted_bug(_bug: &str) -> bool {
    false
}

pub mod broker;
mod bytes;
pub mod cluster;
mod command;
mod config;
mod crc_range;
mod driver;
pub mod effect;
mod error;
pub mod executor;
mod frame;
pub mod fs;
mod ids;
mod journal;
mod logcodec;
mod memfs;
mod name;
mod notice;
mod offsets;
mod partitioner;
mod placement;
#[cfg(feature = "planted-bugs")]
#[doc(hidden)]
pub mod planted;
mod producers;
mod time;

/// The shared buffer record values are held in (the `bytes` crate's).
pub use ::bytes::Bytes;
pub use broker::{Broker, DamagedRecords, DeletionStatus, Phase, COMPLETED_KEPT};
pub use command::{
    Command, CommittedOffset, ProduceRecord, RecordPosition, Reply, StoredRecord, TopicDescription, TopicSettings,
};
pub use config::{Config, Durability, MAX_PARTITIONS_EVER};
pub use driver::SyncDriver;
pub use effect::{AppendRecord, DamagedRange, Effect, OpOutput, OpResult, StorageOp};
pub use error::{BrokerError, DecodeError, HaltReason, StorageError};
pub use executor::Executor;
pub use fs::FileSystem;
pub use ids::{LogId, OpId, RequestId, TopicId};
pub use memfs::MemFs;
pub use name::{check_collision, validate_topic_name};
pub use notice::{Notice, Operation};
pub use offsets::{check_group, committed_bytes, GroupOffsets, MAX_GROUP_BYTES};
pub use partitioner::partition_for_key;
pub use producers::{sequence_after, ProducerBatch, ProducerState, SequencedBatch, BATCHES_KEPT, MAX_SEQUENCE};
pub use time::Time;

/// A CRC32C carried past `len` appended bytes: `crc(A ‖ B) = crc32c_carry(crc(A), len(B)) ^ crc(B)`
/// (for whoever knows the checksums of parts, as the simulator's workload does).
pub use crc_range::carry as crc32c_carry;

// The on-disk formats, as far as the runtimes, the simulator, the testkit, the fuzz
// targets and the tests read or write them.
pub use frame::FRAME_HEADER_LEN;
pub use journal::{
    decode_journal, encode_compacted, encode_header, DecodedJournal, JournalRecord, MetaState, PendingDeletion,
    Snapshot, TopicMeta, JOURNAL_COPY_ALIGN, JOURNAL_FILE, JOURNAL_FIRST_FRAME,
};
pub use logcodec::{
    batch_bytes, damaged_ranges, decode_records, encode_log_header, encode_records, open_log, LogImage, LOG_HEADER_LEN,
    MAX_LOG_FRAME,
};
