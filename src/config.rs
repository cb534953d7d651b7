//! Broker limits and tuning, with defaults a deployment can start from.

use crate::command::TopicSettings;
use crate::error::BrokerError;

/// No topic may have more partitions than this, whatever the configuration: a journal,
/// cluster entry or snapshot naming more is corrupt (recovery allocates per partition).
pub const MAX_PARTITIONS_EVER: u32 = 1 << 20;

/// When a produce is acknowledged, and what damage to a disk may then cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledged once its log is synced and then the journal holds its end: two
    /// serial fsyncs. Damage to any acknowledged record is reported and the record's
    /// offset is never reused (DESIGN.md, section 5).
    #[default]
    Journaled,
    /// Acknowledged once its log is synced: one fsync. The journal learns each
    /// partition's end at most `journal_ends_ms` later (and before any delete of its
    /// topic). A crash keeps every record synced whole; a record damaged on disk before
    /// the journal held its end is cut with the rest of its log's tail at the next
    /// start, and the cut is reported ([`crate::Notice::TailCut`]); its offset may be
    /// reused. This is the rule of Kafka and PostgreSQL for a torn tail.
    LogSync {
        /// The longest a partition's acknowledged end waits for the journal, in
        /// milliseconds of the runtime's clock.
        journal_ends_ms: u64,
    },
}

impl Durability {
    /// The default interval of [`Durability::LogSync`]: one second.
    pub const LOG_SYNC: Durability = Durability::LogSync { journal_ends_ms: 1_000 };

    /// The setting's name, as `broker-fs` spells it: `journaled` or `log-sync`.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Journaled => "journaled",
            Durability::LogSync { .. } => "log-sync",
        }
    }
}

/// Limits and tuning of one broker. Every field has a sensible default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The most partitions a topic may have (never more than
    /// [`MAX_PARTITIONS_EVER`], whatever this says).
    pub max_partitions: u32,
    /// The most records one produce may carry.
    pub max_batch_records: usize,
    /// The largest key plus value of one record, in bytes.
    pub max_record_bytes: usize,
    /// The largest produce, in bytes as stored ([`crate::logcodec::batch_bytes`]). Capped at
    /// [`crate::logcodec::MAX_LOG_FRAME`], what one log frame holds, so that every batch
    /// written can be read back.
    pub max_batch_bytes: u64,
    /// The most records one fetch may ask for.
    pub max_fetch_records: u32,
    /// The most key and value bytes one fetch returns (it returns at least one record,
    /// whatever its size): a fetch's memory is bounded in bytes as well as in records.
    pub max_fetch_bytes: u64,
    /// The longest deletion grace delay a topic may ask for, in milliseconds.
    pub max_grace_ms: u64,
    /// How many log removals may be in flight at once, across all deletions and the
    /// removal of stray logs at the start.
    pub removal_concurrency: usize,
    /// The first retry delay after a failed background operation, in milliseconds.
    pub retry_base_ms: u64,
    /// The longest retry delay, in milliseconds.
    pub retry_max_ms: u64,
    /// Compact once the journal holds at least this many records since the last compaction...
    pub compaction_min_records: u64,
    /// ...and more than this many times the live metadata (topics plus pending deletions).
    /// Also compact once the journal file holds at least `compaction_min_bytes` and more
    /// than this many times the size of the last snapshot written: every commit takes
    /// about 4 KiB (two copies a block apart), so counting records alone would let a
    /// journal of many live topics grow large between compactions.
    pub compaction_ratio: u64,
    /// The least journal size, in bytes, at which compaction by size is considered.
    pub compaction_min_bytes: u64,
    /// The longest metadata a committed offset may carry, in bytes (Kafka's default
    /// `offset.metadata.max.bytes`).
    pub max_offset_metadata_bytes: usize,
    /// The most bytes all committed offsets may take, counted as
    /// [`crate::committed_bytes`] counts them: they are held in memory and in every
    /// journal snapshot, so their total is bounded (a snapshot frame holds at most
    /// 256 MiB).
    pub max_committed_offsets_bytes: u64,
    /// The most (partition, idempotent producer) states kept: past it, the one touched
    /// least recently is forgotten, and that producer's next batch on that partition is
    /// taken as new whatever its sequence.
    pub max_producer_states: usize,
    /// Start without writing anything: recovery reads the journal and opens the logs
    /// but rewrites, cuts, creates and removes nothing, pending deletions stay pending,
    /// and only list, describe and fetch are served (others get
    /// [`crate::BrokerError::ReadOnly`]). For a read-only data directory or a full disk.
    /// Only acknowledged records are served, as always; a torn journal tail is ignored.
    pub read_only: bool,
    /// When a produce is acknowledged: [`Durability::Journaled`] unless set.
    pub durability: Durability,
    /// Bugs planted on purpose, to prove that the simulator's checkers catch them.
    /// Test support, not part of the API (only with the `planted-bugs` feature).
    #[cfg(feature = "planted-bugs")]
    #[doc(hidden)]
    pub bugs: crate::planted::PlantedBugs,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_partitions: 1024,
            max_batch_records: 10_000,
            max_record_bytes: 1 << 20,
            max_batch_bytes: crate::logcodec::MAX_LOG_FRAME as u64,
            max_fetch_records: 10_000,
            max_fetch_bytes: 16 << 20,
            max_grace_ms: 7 * 24 * 3600 * 1000,
            removal_concurrency: 4,
            retry_base_ms: 10,
            retry_max_ms: 5_000,
            compaction_min_records: 1_000,
            compaction_ratio: 4,
            compaction_min_bytes: 4 << 20,
            max_offset_metadata_bytes: 4096,
            max_committed_offsets_bytes: 64 << 20,
            max_producer_states: 100_000,
            read_only: false,
            durability: Durability::Journaled,
            #[cfg(feature = "planted-bugs")]
            bugs: crate::planted::PlantedBugs::default(),
        }
    }
}

impl Config {
    /// Whether a topic named `name` with `partitions` partitions and `settings` may be
    /// created under these limits, before looking at the names already taken: the
    /// checks of a create that depend on nothing else, for a front end that validates a
    /// create without making it.
    pub fn check_new_topic(&self, name: &str, partitions: u32, settings: &TopicSettings) -> Result<(), BrokerError> {
        crate::name::validate_topic_name(name)?;
        let max = self.max_partitions.min(MAX_PARTITIONS_EVER);
        if partitions == 0 || partitions > max {
            return Err(BrokerError::InvalidPartitionCount { requested: partitions, max });
        }
        if settings.deletion_grace_ms > self.max_grace_ms {
            return Err(BrokerError::InvalidSettings(format!(
                "deletion grace {} ms exceeds the limit of {} ms",
                settings.deletion_grace_ms, self.max_grace_ms
            )));
        }
        Ok(())
    }

    /// The largest produce in bytes as stored: the configured limit, capped at one log frame.
    pub fn batch_bytes_limit(&self) -> u64 {
        self.max_batch_bytes.min(crate::logcodec::MAX_LOG_FRAME as u64)
    }

    /// The delay before retry number `attempt` (0-based): exponential, capped.
    pub fn backoff_ms(&self, attempt: u32) -> u64 {
        let factor = 1u64.checked_shl(attempt.min(32)).unwrap_or(u64::MAX);
        self.retry_base_ms.saturating_mul(factor).min(self.retry_max_ms)
    }
}
