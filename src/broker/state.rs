//! The broker's in-memory picture of topics, partitions and deletions, and of how far
//! recovery has come.

use crate::ids::{LogId, RequestId};
use crate::journal::TopicMeta;
use crate::notice::Notice;
use std::collections::{BTreeSet, VecDeque};

/// One produce's write to one partition: acknowledged in offset order.
#[derive(Debug, Clone)]
pub(crate) struct PartitionWrite {
    pub request: RequestId,
    /// One past the last offset this write appends.
    pub end: u64,
    /// Storage operations (append, sync) still outstanding.
    pub ops_left: u8,
    /// An idempotent producer's batch: the state to journal once the write is synced.
    pub producer: Option<crate::journal::JournalRecord>,
}

/// One partition of a topic incarnation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Partition {
    /// The offset the next appended record gets.
    pub next_offset: u64,
    /// Records below this offset are durable and acknowledged.
    pub high_watermark: u64,
    /// Storage operations outstanding on this log (reads, writes, creation).
    pub inflight: u32,
    /// Writes not yet synced, in offset order.
    pub writes: VecDeque<PartitionWrite>,
    /// Synced writes whose end is being journaled; acknowledged once it is durable.
    pub journaling: VecDeque<PartitionWrite>,
    /// The acknowledged end the journal holds or will hold once its queue is written.
    pub journaled_end: u64,
    /// Why the log cannot be used (it failed validation on open), if it cannot.
    pub failed: Option<String>,
    /// Acknowledged records found damaged or missing when the log was opened.
    pub damaged: Vec<crate::effect::DamagedRange>,
    /// Whether the log exists (created or opened); false until then.
    pub ready: bool,
}

impl Partition {
    /// An empty partition whose first offset is `base`.
    pub(crate) fn at(base: u64) -> Partition {
        Partition { next_offset: base, high_watermark: base, journaled_end: base, ..Partition::default() }
    }
}

/// Where a deletion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeletionStage {
    /// The tombstone is queued or being written.
    AwaitTombstone,
    /// The tombstone is durable; waiting out the grace delay.
    Grace,
    /// Removing logs (each once its own I/O has drained).
    Removing,
}

/// A deletion in progress.
#[derive(Debug, Clone)]
pub(crate) struct Deletion {
    pub stage: DeletionStage,
    /// Journal sequence number of the tombstone.
    pub tombstone_seq: u64,
    /// Requests waiting for the tombstone to be durable.
    pub waiters: Vec<RequestId>,
    /// Partitions whose log is removed.
    pub removed: BTreeSet<u32>,
    /// Partitions whose removal is in flight.
    pub removing: BTreeSet<u32>,
    /// Partitions waiting for a retry timer, with their failure count.
    pub backing_off: BTreeSet<u32>,
    /// When the grace delay ends (journaled with the tombstone, so restarts keep it).
    pub remove_after: crate::time::Time,
    /// When this broker begins removal, once it has armed its grace timer: at
    /// `remove_after`, or sooner where the clock went back since the delete.
    pub removal_due: Option<crate::time::Time>,
}

/// One topic incarnation, live or being deleted.
#[derive(Debug, Clone)]
pub(crate) struct Topic {
    pub meta: TopicMeta,
    /// True once every log exists and the create is acknowledged (or after recovery).
    pub created: bool,
    pub partitions: Vec<Partition>,
    /// Round-robin cursor for keyless records.
    pub round_robin: u32,
    pub deletion: Option<Deletion>,
    /// Create requests waiting for the logs, with how many logs are still to create.
    pub create_waiter: Option<(RequestId, u32)>,
}

impl Topic {
    pub(crate) fn new(meta: TopicMeta, created: bool) -> Topic {
        let n = meta.partitions as usize;
        let partitions = vec![Partition::at(meta.offset_base); n];
        Topic { meta, created, partitions, round_robin: 0, deletion: None, create_waiter: None }
    }

    /// Visible to list, describe, produce and fetch.
    pub(crate) fn visible(&self) -> bool {
        self.created && self.deletion.is_none()
    }
}

/// Progress of recovery.
#[derive(Debug, Default)]
pub(crate) struct Recovery {
    /// Whether the journal was read and replayed.
    pub replayed: bool,
    /// Whether the logs to open (and the stray check) were issued, after the rewrite.
    pub logs_issued: bool,
    /// Live logs to open once the journal rewrite is durable.
    pub to_open: Vec<LogId>,
    /// Whether every log in storage was listed (so no new id can collide with one).
    pub listed: bool,
    /// Live logs still being opened or created.
    pub opening: BTreeSet<LogId>,
    /// What was wrong with the journal read (a torn tail, repaired copies): reported
    /// once the rewrite that keeps the old journal completes, with the copy's name.
    pub journal_damage: Vec<Notice>,
}
