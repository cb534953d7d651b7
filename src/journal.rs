//! The metadata journal: topic creations, tombstones, deletion progress and snapshots.
//!
//! File layout (format versions 3 to 5; 4 and 5 differ only in record kinds):
//!
//! ```text
//! 0      header: "BRKJ", version u16, epoch u64, CRC32C u32 of the 14 bytes before it
//! 18     zeros up to JOURNAL_COPY_ALIGN (4096)
//! 4096   the header again
//! 4114   commits, each written by one append:
//!          copy A: a frame (see crate::frame) salted with the epoch, at position p
//!          zeros up to the next multiple of JOURNAL_COPY_ALIGN
//!          copy B: the same kind and payload, salted with mirror_salt(epoch, p)
//!        the next commit's copy A follows copy B directly
//! ```
//!
//! Compaction writes a new file with the next epoch, so records of an older file never
//! validate in a newer one.
//!
//! Who builds what: the core decides what each commit holds, and hands the records to
//! the storage executor ([`crate::StorageOp::AppendJournal`]), which lays out both
//! copies and the zeros between them at the journal's end
//! ([`JournalRecord::encode_commit_into`]). The core only counts a commit's length
//! ([`JournalRecord::commit_len`], arithmetic, no bytes built), to know how long the
//! file grows. A whole file (a snapshot, by compaction or at start) is still encoded by
//! the core ([`encode_compacted`]).
//!
//! Why two copies: a torn write can only damage a commit that was never acknowledged,
//! but bit rot can damage one that was, and the two look alike when they hit the last
//! commit. Every commit (a tombstone, an acknowledged log end) is therefore written
//! twice, in different 4 KiB pages, and recovery uses whichever copy is intact; a
//! damaged copy is reported and the journal rewritten. Only when both copies of a commit
//! are bad is it lost: in the middle of the file that is corruption (recovery refuses to
//! start); at the end it is taken for a torn write. Copy B's salt names copy A's
//! position, so a copy can never be mistaken for another commit's. The cost: each
//! commit takes two frames plus padding up to 4 KiB more bytes in the same append and
//! the same fsync, and a journal file is at least 8 KiB.

use crate::bytes::{Reader, Writer};
use crate::command::TopicSettings;
use crate::error::DecodeError;
use crate::frame::{frame_at, scan, seal_frame, valid_frame_at, Frame, FRAME_HEADER_LEN};
use crate::ids::{LogId, TopicId};
use crate::offsets::{CommittedOffsets, GroupOffsets};
use crate::producers::{ProducerBatch, ProducerState, ProducerStates, SequencedBatch};
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The name of the journal file in byte-oriented runtimes.
pub const JOURNAL_FILE: &str = "journal";
/// The on-disk format version this build writes.
/// Version 2 added acknowledged log ends ([`JournalRecord::LogEnd`], and in snapshots);
/// version 3 writes the header and every commit twice; version 4 gives each topic the
/// first offset of its partitions ([`TopicMeta::offset_base`]) and snapshots the
/// [`MetaState::offset_floor`]; version 5 keeps consumer groups' committed offsets
/// ([`JournalRecord::OffsetsCommitted`], [`JournalRecord::GroupDeleted`], and in
/// snapshots), and idempotent producers' ids and states ([`JournalRecord::ProducerIdAllocated`],
/// [`JournalRecord::ProducerAppended`], and in snapshots). Versions 2 to 5 are read (topics of 2 and 3 start at 0).
pub const JOURNAL_FORMAT_VERSION: u16 = 5;
const MAGIC: &[u8; 4] = b"BRKJ";
/// Bytes in the journal header.
pub const JOURNAL_HEADER_LEN: usize = 18;
/// The two copies of the header, and of each commit, never share an aligned block of
/// this many bytes: damage confined to one such block spares one copy.
pub const JOURNAL_COPY_ALIGN: usize = 4096;
/// Where the first commit of a journal file starts: after the header's second copy.
pub const JOURNAL_FIRST_FRAME: usize = JOURNAL_COPY_ALIGN + JOURNAL_HEADER_LEN;
/// The largest frame payload the journal accepts (a snapshot of many topics).
pub const MAX_JOURNAL_FRAME: usize = 256 << 20;

/// A topic's durable metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// The incarnation's id, never reused ([`MetaState::next_topic_id`]).
    pub id: TopicId,
    /// The topic name; a later incarnation may have it too.
    pub name: String,
    /// The partition count, at most [`crate::MAX_PARTITIONS_EVER`] (more is corruption).
    pub partitions: u32,
    /// The settings chosen at creation (stored as `deletion_grace_ms`, a u64).
    pub settings: TopicSettings,
    /// The first offset of each of its partitions: past every offset any incarnation
    /// deleted before it was created had acknowledged ([`MetaState::offset_floor`]), so
    /// that a reader still at a position of a deleted incarnation of its name is never at
    /// a position of this one (it is told the offset is out of range, not served records
    /// from the middle).
    pub offset_base: u64,
}

/// A pending deletion as a snapshot records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDeletion {
    /// The deleted incarnation's metadata.
    pub topic: TopicMeta,
    /// When its grace delay ends: removal starts no earlier.
    pub remove_after: Time,
    /// Partitions whose logs are already removed.
    pub removed: Vec<u32>,
}

/// The whole metadata state, as a compaction snapshot holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The next topic id to hand out.
    pub next_topic_id: u64,
    /// Live topics, by id.
    pub live: Vec<TopicMeta>,
    /// Pending deletions, by id.
    pub deleting: Vec<PendingDeletion>,
    /// Each live log's acknowledged end (logs with none acknowledged are left out).
    pub ends: Vec<(LogId, u64)>,
    /// [`MetaState::offset_floor`].
    pub offset_floor: u64,
    /// Consumer groups' committed offsets, by group then incarnation.
    pub groups: Vec<GroupOffsets>,
    /// [`MetaState::next_producer_id`].
    pub next_producer_id: u64,
    /// Idempotent producers' states, least recently touched first.
    pub producers: Vec<ProducerState>,
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JournalRecord {
    /// A topic was created (the intent, journaled before its logs exist).
    TopicCreated(TopicMeta),
    /// The tombstone: the topic is deleted; its logs are to be removed.
    TopicDeleted {
        /// The incarnation deleted.
        id: TopicId,
        /// When its grace delay ends, in the runtime's clock: removal starts no earlier,
        /// whatever restarts happen in between.
        remove_after: Time,
    },
    /// One partition's log of a deleted topic is removed (progress).
    PartitionRemoved {
        /// The deleted incarnation.
        id: TopicId,
        /// The partition whose log is now removed.
        partition: u32,
    },
    /// Every log of a deleted topic is removed; the topic is forgotten.
    DeletionCompleted {
        /// The deleted incarnation, forgotten from here on.
        id: TopicId,
    },
    /// The whole state, written first in a compacted journal.
    Snapshot(Snapshot),
    /// Every record of `log` below `end` is acknowledged: written and synced before this
    /// record was. Recovery serves exactly those, reports damage among them as
    /// corruption (a torn write cannot touch them), and cuts whatever follows them.
    LogEnd {
        /// A live log (replay ignores one of a deleted or unknown topic).
        log: LogId,
        /// One past its last acknowledged offset.
        end: u64,
    },
    /// A consumer group's positions in partitions of an incarnation, replacing its
    /// earlier ones there (replay ignores those of a deleted or unknown incarnation).
    OffsetsCommitted {
        /// The group.
        group: String,
        /// The incarnation.
        topic: TopicId,
        /// The positions.
        offsets: Vec<crate::command::CommittedOffset>,
    },
    /// Every position of a consumer group is forgotten.
    GroupDeleted {
        /// The group.
        group: String,
    },
    /// A producer id was handed out: none at or below it is handed out again.
    ProducerIdAllocated {
        /// The id.
        id: u64,
    },
    /// An idempotent producer's batch was appended to a live log (replay ignores one
    /// of a deleted or unknown topic).
    ProducerAppended {
        /// The log.
        log: LogId,
        /// The producer, its epoch and the batch's first sequence number.
        batch: ProducerBatch,
        /// How many records it holds (one sequence number each).
        records: u32,
        /// Its first record's offset.
        first_offset: u64,
    },
}

const KIND_CREATED: u8 = 1;
const KIND_DELETED: u8 = 2;
const KIND_PARTITION_REMOVED: u8 = 3;
const KIND_COMPLETED: u8 = 4;
const KIND_SNAPSHOT: u8 = 5;
/// A group commit: several records in one frame, so a torn group is always a torn tail.
const KIND_BATCH: u8 = 6;
const KIND_LOG_END: u8 = 7;
/// [`KIND_CREATED`] with the topic's offset base (format 4).
const KIND_CREATED_BASED: u8 = 8;
/// [`KIND_SNAPSHOT`] with offset bases and the offset floor (format 4).
const KIND_SNAPSHOT_BASED: u8 = 9;
/// [`KIND_SNAPSHOT_BASED`] with consumer groups' committed offsets (format 5).
const KIND_SNAPSHOT_GROUPS: u8 = 10;
const KIND_OFFSETS_COMMITTED: u8 = 11;
const KIND_GROUP_DELETED: u8 = 12;
const KIND_PRODUCER_ID: u8 = 13;
const KIND_PRODUCER_APPENDED: u8 = 14;

fn put_meta(w: &mut Writer, m: &TopicMeta) {
    w.u64(m.id.0);
    w.bytes(m.name.as_bytes());
    w.u32(m.partitions);
    w.u64(m.settings.deletion_grace_ms);
    w.u64(m.offset_base);
}

/// A topic's metadata, with its offset base when `based` (format 4), else base 0.
fn get_meta(r: &mut Reader<'_>, based: bool) -> Result<TopicMeta, DecodeError> {
    Ok(TopicMeta {
        id: TopicId(r.u64()?),
        name: r.string()?,
        partitions: r.u32()?,
        settings: TopicSettings { deletion_grace_ms: r.u64()? },
        offset_base: if based { r.u64()? } else { 0 },
    })
}

/// The length of [`put_meta`]'s bytes.
fn meta_len(m: &TopicMeta) -> usize {
    8 + 4 + m.name.len() + 4 + 8 + 8
}

/// The length of [`put_log_end`]'s bytes.
const LOG_END_LEN: usize = 8 + 4 + 8;

fn put_log_end(w: &mut Writer, log: LogId, end: u64) {
    w.u64(log.topic.0);
    w.u32(log.partition);
    w.u64(end);
}

fn get_log_end(r: &mut Reader<'_>) -> Result<(LogId, u64), DecodeError> {
    Ok((LogId { topic: TopicId(r.u64()?), partition: r.u32()? }, r.u64()?))
}

/// A group, an incarnation and positions: the payload of a commit, and an entry of a
/// snapshot.
fn put_offsets(w: &mut Writer, group: &str, topic: TopicId, offsets: &[crate::command::CommittedOffset]) {
    w.bytes(group.as_bytes());
    w.u64(topic.0);
    w.u32(offsets.len() as u32);
    for o in offsets {
        w.u32(o.partition);
        w.u64(o.offset);
        w.bytes(o.metadata.as_bytes());
    }
}

fn get_offsets(r: &mut Reader<'_>) -> Result<GroupOffsets, DecodeError> {
    let group = r.string()?;
    let topic = TopicId(r.u64()?);
    let n = r.u32()?;
    let mut offsets = Vec::new();
    for _ in 0..n {
        offsets.push(crate::command::CommittedOffset { partition: r.u32()?, offset: r.u64()?, metadata: r.string()? });
    }
    Ok(GroupOffsets { group, topic, offsets })
}

/// The length of [`put_producer_appended`]'s bytes.
const PRODUCER_APPENDED_LEN: usize = 8 + 4 + 8 + 2 + 4 + 4 + 8;

fn put_producer_appended(w: &mut Writer, log: LogId, batch: &ProducerBatch, records: u32, first_offset: u64) {
    w.u64(log.topic.0);
    w.u32(log.partition);
    w.u64(batch.producer_id);
    w.u16(batch.epoch);
    w.u32(batch.first_sequence);
    w.u32(records);
    w.u64(first_offset);
}

/// One producer's state in a snapshot: log, producer id, epoch, then its batches.
fn put_producer_state(w: &mut Writer, s: &ProducerState) {
    w.u64(s.log.topic.0);
    w.u32(s.log.partition);
    w.u64(s.producer_id);
    w.u16(s.epoch);
    w.u32(s.batches.len() as u32);
    for b in &s.batches {
        w.u32(b.first_sequence);
        w.u32(b.last_sequence);
        w.u64(b.first_offset);
    }
}

fn get_producer_state(r: &mut Reader<'_>) -> Result<ProducerState, DecodeError> {
    let log = LogId { topic: TopicId(r.u64()?), partition: r.u32()? };
    let (producer_id, epoch) = (r.u64()?, r.u16()?);
    let mut batches = Vec::new();
    for _ in 0..r.u32()? {
        batches.push(SequencedBatch { first_sequence: r.u32()?, last_sequence: r.u32()?, first_offset: r.u64()? });
    }
    Ok(ProducerState { log, producer_id, epoch, batches })
}

fn producer_state_len(s: &ProducerState) -> usize {
    8 + 4 + 8 + 2 + 4 + s.batches.len() * (4 + 4 + 8)
}

/// The length of [`put_offsets`]'s bytes.
fn offsets_len(group: &str, offsets: &[crate::command::CommittedOffset]) -> usize {
    4 + group.len() + 8 + 4 + offsets.iter().map(|o| 4 + 8 + 4 + o.metadata.len()).sum::<usize>()
}

impl JournalRecord {
    /// Appends this record's payload to `w`; returns its frame kind.
    fn put_payload(&self, w: &mut Writer) -> u8 {
        match self {
            JournalRecord::TopicCreated(m) => {
                put_meta(w, m);
                KIND_CREATED_BASED
            }
            JournalRecord::TopicDeleted { id, remove_after } => {
                w.u64(id.0);
                w.u64(remove_after.0);
                KIND_DELETED
            }
            JournalRecord::PartitionRemoved { id, partition } => {
                w.u64(id.0);
                w.u32(*partition);
                KIND_PARTITION_REMOVED
            }
            JournalRecord::DeletionCompleted { id } => {
                w.u64(id.0);
                KIND_COMPLETED
            }
            JournalRecord::Snapshot(s) => {
                w.u64(s.next_topic_id);
                w.u64(s.offset_floor);
                w.u32(s.live.len() as u32);
                for m in &s.live {
                    put_meta(w, m);
                }
                w.u32(s.deleting.len() as u32);
                for d in &s.deleting {
                    put_meta(w, &d.topic);
                    w.u64(d.remove_after.0);
                    w.u32(d.removed.len() as u32);
                    for p in &d.removed {
                        w.u32(*p);
                    }
                }
                w.u32(s.ends.len() as u32);
                for (log, end) in &s.ends {
                    put_log_end(w, *log, *end);
                }
                w.u32(s.groups.len() as u32);
                for g in &s.groups {
                    put_offsets(w, &g.group, g.topic, &g.offsets);
                }
                w.u64(s.next_producer_id);
                w.u32(s.producers.len() as u32);
                for p in &s.producers {
                    put_producer_state(w, p);
                }
                KIND_SNAPSHOT_GROUPS
            }
            JournalRecord::LogEnd { log, end } => {
                put_log_end(w, *log, *end);
                KIND_LOG_END
            }
            JournalRecord::OffsetsCommitted { group, topic, offsets } => {
                put_offsets(w, group, *topic, offsets);
                KIND_OFFSETS_COMMITTED
            }
            JournalRecord::GroupDeleted { group } => {
                w.bytes(group.as_bytes());
                KIND_GROUP_DELETED
            }
            JournalRecord::ProducerIdAllocated { id } => {
                w.u64(*id);
                KIND_PRODUCER_ID
            }
            JournalRecord::ProducerAppended { log, batch, records, first_offset } => {
                put_producer_appended(w, *log, batch, *records, *first_offset);
                KIND_PRODUCER_APPENDED
            }
        }
    }

    /// The length of the payload [`JournalRecord::put_payload`] writes, counted without
    /// writing it.
    fn payload_len(&self) -> usize {
        match self {
            JournalRecord::TopicCreated(m) => meta_len(m),
            JournalRecord::TopicDeleted { .. } => 8 + 8,
            JournalRecord::PartitionRemoved { .. } => 8 + 4,
            JournalRecord::DeletionCompleted { .. } => 8,
            JournalRecord::Snapshot(s) => {
                let live: usize = s.live.iter().map(meta_len).sum();
                let deleting: usize = s.deleting.iter().map(|d| meta_len(&d.topic) + 8 + 4 + 4 * d.removed.len()).sum();
                let groups: usize = s.groups.iter().map(|g| offsets_len(&g.group, &g.offsets)).sum();
                let producers: usize = s.producers.iter().map(producer_state_len).sum();
                8 + 8 + 4 + live + 4 + deleting + 4 + LOG_END_LEN * s.ends.len() + 4 + groups + 8 + 4 + producers
            }
            JournalRecord::LogEnd { .. } => LOG_END_LEN,
            JournalRecord::OffsetsCommitted { group, offsets, .. } => offsets_len(group, offsets),
            JournalRecord::GroupDeleted { group } => 4 + group.len(),
            JournalRecord::ProducerIdAllocated { .. } => 8,
            JournalRecord::ProducerAppended { .. } => PRODUCER_APPENDED_LEN,
        }
    }

    /// Appends this record as one commit (both copies) to `image`, a journal file of
    /// `epoch` from its first byte.
    pub fn encode(&self, epoch: u64, image: &mut Vec<u8>) {
        JournalRecord::encode_batch(std::slice::from_ref(self), epoch, image);
    }

    /// Appends `records` as one commit to `image`, a journal file of `epoch` from its
    /// first byte: both copies of one frame (a batch frame if there are several). One
    /// write of one commit can only tear into a bad tail, never into damage followed by
    /// valid records, which recovery would have to call corruption.
    pub fn encode_batch(records: &[JournalRecord], epoch: u64, image: &mut Vec<u8>) {
        let position = image.len() as u64;
        JournalRecord::encode_commit_into(records, epoch, position, image);
    }

    /// The bytes of one commit of `records` that starts at byte `position` of a journal
    /// file of `epoch`: copy A, zeros up to the next [`JOURNAL_COPY_ALIGN`], copy B.
    /// [`JournalRecord::commit_len`] of them long.
    pub fn encode_commit(records: &[JournalRecord], epoch: u64, position: u64) -> Vec<u8> {
        let mut out = Vec::new();
        JournalRecord::encode_commit_into(records, epoch, position, &mut out);
        out
    }

    /// Appends to `out` the bytes of [`JournalRecord::encode_commit`]: the commit that
    /// starts at byte `position` of the journal file (wherever the bytes go in `out`).
    /// The payload is written once, in place, and copied for copy B.
    pub fn encode_commit_into(records: &[JournalRecord], epoch: u64, position: u64, out: &mut Vec<u8>) {
        let start = out.len();
        let mut w = Writer { buf: std::mem::take(out) };
        w.buf.reserve(JournalRecord::commit_len(records, position) as usize);
        w.buf.resize(start + FRAME_HEADER_LEN, 0);
        let kind = match records {
            [only] => only.put_payload(&mut w),
            _ => {
                for r in records {
                    // kind u8, payload length u32, payload: the kind and length are
                    // filled in once the payload is written.
                    let at = w.buf.len();
                    w.buf.resize(at + 5, 0);
                    let kind = r.put_payload(&mut w);
                    let len = (w.buf.len() - at - 5) as u32;
                    w.buf[at] = kind;
                    w.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
                }
                KIND_BATCH
            }
        };
        let mut out_buf = w.buf;
        let a_end = out_buf.len();
        seal_frame(&mut out_buf[start..], epoch, kind);
        let copy_b = align_up(position + (a_end - start) as u64);
        out_buf.resize(start + (copy_b - position) as usize, 0);
        let b_start = out_buf.len();
        out_buf.extend_from_within(start..a_end);
        seal_frame(&mut out_buf[b_start..], mirror_salt(epoch, position), kind);
        *out = out_buf;
    }

    /// The length of the commit of `records` that starts at byte `position` of a journal
    /// file (the length of [`JournalRecord::encode_commit`]'s bytes), counted without
    /// encoding it: two frames and the zeros between them.
    pub fn commit_len(records: &[JournalRecord], position: u64) -> u64 {
        let payload = match records {
            [only] => only.payload_len(),
            _ => records.iter().map(|r| 1 + 4 + r.payload_len()).sum(),
        };
        let frame = (FRAME_HEADER_LEN + payload) as u64;
        align_up(position + frame) - position + frame
    }

    /// Decodes a frame's records: one, or several for a batch frame.
    pub fn decode_frame(kind: u8, payload: &[u8], position: u64) -> Result<Vec<JournalRecord>, DecodeError> {
        if kind != KIND_BATCH {
            return Ok(vec![JournalRecord::decode(kind, payload, position)?]);
        }
        let mut r = Reader::new(payload, position);
        let mut out = Vec::new();
        while r.position() < position + payload.len() as u64 {
            let kind = r.u8()?;
            if kind == KIND_BATCH {
                return Err(r.malformed("a batch nested in a batch".into()));
            }
            let at = r.position();
            let inner = r.bytes()?;
            out.push(JournalRecord::decode(kind, &inner, at + 4)?);
        }
        Ok(out)
    }

    /// Decodes a record from a frame's kind and payload; `position` names it in errors.
    pub fn decode(kind: u8, payload: &[u8], position: u64) -> Result<JournalRecord, DecodeError> {
        let mut r = Reader::new(payload, position);
        let rec = match kind {
            KIND_CREATED | KIND_CREATED_BASED => {
                JournalRecord::TopicCreated(get_meta(&mut r, kind == KIND_CREATED_BASED)?)
            }
            KIND_DELETED => JournalRecord::TopicDeleted { id: TopicId(r.u64()?), remove_after: Time(r.u64()?) },
            KIND_PARTITION_REMOVED => JournalRecord::PartitionRemoved { id: TopicId(r.u64()?), partition: r.u32()? },
            KIND_COMPLETED => JournalRecord::DeletionCompleted { id: TopicId(r.u64()?) },
            KIND_SNAPSHOT | KIND_SNAPSHOT_BASED | KIND_SNAPSHOT_GROUPS => {
                let based = kind != KIND_SNAPSHOT;
                let next_topic_id = r.u64()?;
                let offset_floor = if based { r.u64()? } else { 0 };
                let n = r.u32()?;
                let mut live = Vec::new();
                for _ in 0..n {
                    live.push(get_meta(&mut r, based)?);
                }
                let n = r.u32()?;
                let mut deleting = Vec::new();
                for _ in 0..n {
                    let topic = get_meta(&mut r, based)?;
                    let remove_after = Time(r.u64()?);
                    let k = r.u32()?;
                    let mut removed = Vec::new();
                    for _ in 0..k {
                        removed.push(r.u32()?);
                    }
                    deleting.push(PendingDeletion { topic, remove_after, removed });
                }
                let n = r.u32()?;
                let mut ends = Vec::new();
                for _ in 0..n {
                    ends.push(get_log_end(&mut r)?);
                }
                let (mut groups, mut next_producer_id, mut producers) = (Vec::new(), 0, Vec::new());
                if kind == KIND_SNAPSHOT_GROUPS {
                    for _ in 0..r.u32()? {
                        groups.push(get_offsets(&mut r)?);
                    }
                    next_producer_id = r.u64()?;
                    for _ in 0..r.u32()? {
                        producers.push(get_producer_state(&mut r)?);
                    }
                }
                JournalRecord::Snapshot(Snapshot {
                    next_topic_id,
                    live,
                    deleting,
                    ends,
                    offset_floor,
                    groups,
                    next_producer_id,
                    producers,
                })
            }
            KIND_LOG_END => {
                let (log, end) = get_log_end(&mut r)?;
                JournalRecord::LogEnd { log, end }
            }
            KIND_OFFSETS_COMMITTED => {
                let GroupOffsets { group, topic, offsets } = get_offsets(&mut r)?;
                JournalRecord::OffsetsCommitted { group, topic, offsets }
            }
            KIND_GROUP_DELETED => JournalRecord::GroupDeleted { group: r.string()? },
            KIND_PRODUCER_ID => JournalRecord::ProducerIdAllocated { id: r.u64()? },
            KIND_PRODUCER_APPENDED => JournalRecord::ProducerAppended {
                log: LogId { topic: TopicId(r.u64()?), partition: r.u32()? },
                batch: ProducerBatch { producer_id: r.u64()?, epoch: r.u16()?, first_sequence: r.u32()? },
                records: r.u32()?,
                first_offset: r.u64()?,
            },
            other => return Err(r.malformed(format!("unknown journal record kind {other}"))),
        };
        r.finish()?;
        Ok(rec)
    }
}

/// The salt of copy B of the commit whose copy A starts at byte `position` of a journal
/// of `epoch`: `!(epoch ^ position * 0x9e3779b97f4a7c15)` (wrapping). Never the epoch
/// itself (copy A's salt) for any position inside a file, and different for every
/// position, so a copy B validates only where its own copy A began.
pub fn mirror_salt(epoch: u64, position: u64) -> u64 {
    !(epoch ^ position.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn align_up(position: u64) -> u64 {
    position.div_ceil(JOURNAL_COPY_ALIGN as u64) * JOURNAL_COPY_ALIGN as u64
}

/// Encodes the start of a journal file of `epoch`: the header, zeros, and the header's
/// second copy; [`JOURNAL_FIRST_FRAME`] bytes.
pub fn encode_header(epoch: u64) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.extend_from_slice(MAGIC);
    w.u16(JOURNAL_FORMAT_VERSION);
    w.u64(epoch);
    let crc = crc32c::crc32c(&w.buf);
    w.u32(crc);
    let header = w.buf;
    let mut out = header.clone();
    out.resize(JOURNAL_COPY_ALIGN, 0);
    out.extend_from_slice(&header);
    out
}

/// A whole journal file holding one snapshot: what compaction and first start write.
pub fn encode_compacted(epoch: u64, snapshot: Snapshot) -> Vec<u8> {
    let mut out = encode_header(epoch);
    JournalRecord::Snapshot(snapshot).encode(epoch, &mut out);
    out
}

/// Why a journal image cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalCorruption {
    /// The byte offset of the first bad byte.
    pub offset: u64,
    /// What was wrong.
    pub detail: String,
}

/// A journal image read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedJournal {
    /// The file's epoch.
    pub epoch: u64,
    /// Every valid record with the byte position of its commit.
    pub records: Vec<(u64, JournalRecord)>,
    /// A torn tail found at the end: its start (the length to truncate to) and why.
    pub torn_tail: Option<(u64, String)>,
    /// Damaged copies whose other copy was intact and used: where each began and why it
    /// is bad. The data is whole, but the file must be rewritten to be redundant again.
    pub repaired: Repaired,
}

/// Decodes a journal image. A commit with both copies bad and a valid commit after it is
/// corruption; at the end it is a torn tail, reported for truncation. One bad copy is
/// repaired from the other and reported in [`DecodedJournal::repaired`].
pub fn decode_journal(data: &[u8]) -> Result<DecodedJournal, JournalCorruption> {
    let (epoch, version, mut repaired) = decode_headers(data)?;
    let (frames, torn_tail) = if version == 2 {
        let s = scan(data, JOURNAL_HEADER_LEN, epoch, MAX_JOURNAL_FRAME);
        if let Some(bad) = s.corrupt.first() {
            return Err(JournalCorruption {
                offset: bad.start,
                detail: format!("{} (a valid record follows at byte {})", bad.detail, bad.end),
            });
        }
        (s.frames, s.torn_tail.map(|t| (t.start, t.detail)))
    } else {
        let m = scan_commits(data, epoch)?;
        repaired.extend(m.repaired);
        (m.frames, m.torn_tail)
    };
    let mut records = Vec::with_capacity(frames.len());
    for f in &frames {
        let recs = JournalRecord::decode_frame(f.kind, f.payload, f.position + FRAME_HEADER_LEN as u64)
            .map_err(|e| JournalCorruption { offset: f.position, detail: format!("undecodable record: {e}") })?;
        records.extend(recs.into_iter().map(|r| (f.position, r)));
    }
    Ok(DecodedJournal { epoch, records, torn_tail, repaired })
}

/// What [`scan_commits`] found.
struct Commits<'a> {
    frames: Vec<Frame<'a>>,
    torn_tail: Option<(u64, String)>,
    repaired: Repaired,
}

/// Walks the commits of a version 3 journal from [`JOURNAL_FIRST_FRAME`].
fn scan_commits(data: &[u8], epoch: u64) -> Result<Commits<'_>, JournalCorruption> {
    let any = &|_: u8, _: &[u8]| true;
    let mut out = Commits { frames: Vec::new(), torn_tail: None, repaired: Vec::new() };
    let mut pos = JOURNAL_FIRST_FRAME.min(data.len());
    while pos < data.len() {
        let salt_b = mirror_salt(epoch, pos as u64);
        match frame_at(data, pos, epoch, MAX_JOURNAL_FRAME, any) {
            Ok(a) => {
                let b_at = align_up(a.end()) as usize;
                let b_end = b_at + (a.end() - a.position) as usize;
                match frame_at(data, b_at.min(data.len()), salt_b, MAX_JOURNAL_FRAME, any) {
                    Ok(b) if b.kind == a.kind && b.payload == a.payload => {}
                    Ok(_) => out.repaired.push((b_at as u64, "copy B differs from copy A".into())),
                    // Copy B cut off by the end of the file: the append was torn, so
                    // the commit was never acknowledged, and it is dropped whole.
                    Err(why) if b_end > data.len() => {
                        out.torn_tail = Some((pos as u64, format!("copy B: {why}")));
                        return Ok(out);
                    }
                    Err(why) => out.repaired.push((b_at as u64, format!("copy B: {why}"))),
                }
                out.frames.push(a);
                pos = b_end;
            }
            Err(why_a) => match find_copy_b(data, pos, salt_b) {
                Some(b) => {
                    out.repaired.push((pos as u64, format!("copy A: {why_a}")));
                    let next = b.end() as usize;
                    // Named by its copy A's position, as every commit is.
                    out.frames.push(Frame { position: pos as u64, ..b });
                    pos = next;
                }
                None => {
                    // Both copies are bad. A valid commit after them means they were
                    // written and synced before it: damage, not a torn write.
                    let next = (pos + 1..data.len())
                        .find(|&q| valid_frame_at(data, q, epoch, MAX_JOURNAL_FRAME, any).is_some());
                    if let Some(q) = next {
                        return Err(JournalCorruption {
                            offset: pos as u64,
                            detail: format!(
                                "both copies of a commit are damaged ({why_a}; a valid commit follows at byte {q})"
                            ),
                        });
                    }
                    out.torn_tail = Some((pos as u64, why_a));
                    return Ok(out);
                }
            },
        }
    }
    Ok(out)
}

/// Copy B of the commit whose copy A (unreadable) began at `pos`: a frame salted with
/// `salt_b` at an aligned position that its own length places right after copy A.
fn find_copy_b(data: &[u8], pos: usize, salt_b: u64) -> Option<Frame<'_>> {
    let mut q = align_up((pos + FRAME_HEADER_LEN) as u64) as usize;
    while q < data.len() {
        if let Some(b) = valid_frame_at(data, q, salt_b, MAX_JOURNAL_FRAME, &|_, _| true) {
            if align_up((pos + FRAME_HEADER_LEN + b.payload.len()) as u64) as usize == q {
                return Some(b);
            }
        }
        q += JOURNAL_COPY_ALIGN;
    }
    None
}

/// Decodes one copy of the header at `at`: the epoch and version, or why not.
fn header_at(data: &[u8], at: usize) -> Result<(u64, u16), String> {
    let Some(h) = data.get(at..at + JOURNAL_HEADER_LEN) else {
        return Err("file is shorter than the journal header".to_string());
    };
    if &h[0..4] != MAGIC {
        return Err("bad magic: not a broker-core journal".to_string());
    }
    let crc = u32::from_le_bytes([h[14], h[15], h[16], h[17]]);
    if crc32c::crc32c(&h[..14]) != crc {
        return Err("header checksum mismatch".to_string());
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if !(2..=JOURNAL_FORMAT_VERSION).contains(&version) {
        return Err(format!("unsupported format version {version} (this build reads 2 to {JOURNAL_FORMAT_VERSION})"));
    }
    let mut e = [0u8; 8];
    e.copy_from_slice(&h[6..14]);
    Ok((u64::from_le_bytes(e), version))
}

/// Damaged copies that were repaired: where each began and why it is bad.
type Repaired = Vec<(u64, String)>;

/// The epoch and version from the first intact header copy (version 2 files have one),
/// with the damaged copy reported.
fn decode_headers(data: &[u8]) -> Result<(u64, u16, Repaired), JournalCorruption> {
    let bad = |detail: String| JournalCorruption { offset: 0, detail };
    match header_at(data, 0) {
        Ok((epoch, 2)) => Ok((epoch, 2, Vec::new())),
        Ok((epoch, v)) => match header_at(data, JOURNAL_COPY_ALIGN) {
            Ok(second) if second == (epoch, v) => Ok((epoch, v, Vec::new())),
            Ok(_) => Err(bad("the two copies of the header disagree".to_string())),
            Err(why) => Ok((epoch, v, vec![(JOURNAL_COPY_ALIGN as u64, format!("header copy: {why}"))])),
        },
        Err(first) => match header_at(data, JOURNAL_COPY_ALIGN) {
            Ok((epoch, v)) if v != 2 => Ok((epoch, v, vec![(0, format!("header: {first}"))])),
            _ => Err(bad(first)),
        },
    }
}

/// One topic in the replayed metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaTopic {
    /// Its metadata.
    pub meta: TopicMeta,
    /// Whether its tombstone is journaled.
    pub deleting: bool,
    /// Partitions whose removal is journaled.
    pub removed: BTreeSet<u32>,
    /// When its grace delay ends (meaningful once `deleting`).
    pub remove_after: Time,
}

/// Metadata as the journal describes it: what replay produces and compaction writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaState {
    /// The next topic id to hand out; never reused.
    pub next_topic_id: u64,
    /// Every live or deleting topic, by id.
    pub topics: BTreeMap<TopicId, MetaTopic>,
    /// The acknowledged end of each live log that has acknowledged records.
    pub ends: BTreeMap<LogId, u64>,
    /// Past every offset an incarnation deleted so far had acknowledged (the largest
    /// acknowledged end of its logs when its tombstone was written): where the
    /// partitions of the next topic created begin ([`TopicMeta::offset_base`]).
    pub offset_floor: u64,
    /// Consumer groups' committed offsets, of live incarnations only.
    pub offsets: CommittedOffsets,
    /// The next producer id to hand out; never reused.
    pub next_producer_id: u64,
    /// Idempotent producers' states on live logs.
    pub producers: ProducerStates,
}

impl MetaState {
    /// Applies one record. Records that name an unknown topic change nothing.
    pub fn apply(&mut self, rec: &JournalRecord) {
        match rec {
            JournalRecord::TopicCreated(m) => {
                self.next_topic_id = self.next_topic_id.max(m.id.0.saturating_add(1));
                self.topics.insert(
                    m.id,
                    MetaTopic { meta: m.clone(), deleting: false, removed: BTreeSet::new(), remove_after: Time::ZERO },
                );
            }
            JournalRecord::TopicDeleted { id, remove_after } => {
                if let Some(t) = self.topics.get_mut(id) {
                    t.deleting = true;
                    t.remove_after = *remove_after;
                }
                // A deleted topic's logs are never served again: their ends are moot, but
                // no later incarnation's offsets may begin below them.
                let deleted_end = self.ends.iter().filter(|(log, _)| log.topic == *id).map(|(_, end)| *end).max();
                self.offset_floor = self.offset_floor.max(deleted_end.unwrap_or(0));
                self.ends.retain(|log, _| log.topic != *id);
                // A group's positions, and its producers' states, die with the incarnation.
                self.offsets.drop_topic(*id);
                self.producers.drop_topic(*id);
            }
            JournalRecord::PartitionRemoved { id, partition } => {
                if let Some(t) = self.topics.get_mut(id) {
                    t.removed.insert(*partition);
                }
            }
            JournalRecord::DeletionCompleted { id } => {
                self.topics.remove(id);
            }
            JournalRecord::LogEnd { log, end } => {
                let live =
                    self.topics.get(&log.topic).is_some_and(|t| !t.deleting && log.partition < t.meta.partitions);
                if live {
                    let e = self.ends.entry(*log).or_insert(0);
                    *e = (*e).max(*end);
                }
            }
            JournalRecord::OffsetsCommitted { group, topic, offsets } => {
                if self.topics.get(topic).is_some_and(|t| !t.deleting) {
                    self.offsets.commit(group, *topic, offsets);
                }
            }
            JournalRecord::GroupDeleted { group } => {
                self.offsets.delete_group(group);
            }
            JournalRecord::ProducerIdAllocated { id } => {
                self.next_producer_id = self.next_producer_id.max(id.saturating_add(1));
            }
            JournalRecord::ProducerAppended { log, batch, records, first_offset } => {
                let live =
                    self.topics.get(&log.topic).is_some_and(|t| !t.deleting && log.partition < t.meta.partitions);
                if live {
                    self.producers.append(*log, *batch, *records, *first_offset);
                }
            }
            JournalRecord::Snapshot(s) => {
                self.topics.clear();
                self.ends = s.ends.iter().copied().collect();
                self.offset_floor = s.offset_floor;
                self.offsets = CommittedOffsets::from_snapshot(&s.groups);
                self.next_producer_id = s.next_producer_id;
                self.producers = ProducerStates::default();
                for p in &s.producers {
                    self.producers.restore(p);
                }
                for m in &s.live {
                    self.topics.insert(
                        m.id,
                        MetaTopic {
                            meta: m.clone(),
                            deleting: false,
                            removed: BTreeSet::new(),
                            remove_after: Time::ZERO,
                        },
                    );
                }
                for d in &s.deleting {
                    let removed = d.removed.iter().copied().collect();
                    let t = MetaTopic { meta: d.topic.clone(), deleting: true, removed, remove_after: d.remove_after };
                    self.topics.insert(d.topic.id, t);
                }
                let max_seen = self.topics.keys().next_back().map_or(0, |id| id.0.saturating_add(1));
                self.next_topic_id = s.next_topic_id.max(max_seen);
            }
        }
    }

    /// Replays records in order from an empty state.
    pub fn replay<'a>(records: impl IntoIterator<Item = &'a JournalRecord>) -> MetaState {
        let mut s = MetaState::default();
        for r in records {
            s.apply(r);
        }
        s
    }

    /// The snapshot that recreates this state.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap =
            Snapshot { next_topic_id: self.next_topic_id, offset_floor: self.offset_floor, ..Snapshot::default() };
        for t in self.topics.values() {
            if t.deleting {
                snap.deleting.push(PendingDeletion {
                    topic: t.meta.clone(),
                    remove_after: t.remove_after,
                    removed: t.removed.iter().copied().collect(),
                });
            } else {
                snap.live.push(t.meta.clone());
            }
        }
        snap.ends = self.ends.iter().filter(|(_, end)| **end > 0).map(|(log, end)| (*log, *end)).collect();
        snap.groups = self.offsets.to_snapshot();
        snap.next_producer_id = self.next_producer_id;
        snap.producers = self.producers.to_snapshot();
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::encode_frame;

    /// A record's frame kind and payload, as a commit holds them.
    fn encode_payload(r: &JournalRecord) -> (u8, Vec<u8>) {
        let mut w = Writer::default();
        let kind = r.put_payload(&mut w);
        (kind, w.buf)
    }

    fn meta(id: u64, name: &str, partitions: u32) -> TopicMeta {
        TopicMeta {
            id: TopicId(id),
            name: name.into(),
            partitions,
            settings: TopicSettings { deletion_grace_ms: 5 },
            offset_base: 0,
        }
    }

    fn sample() -> Vec<JournalRecord> {
        vec![
            JournalRecord::TopicCreated(meta(0, "a", 3)),
            JournalRecord::TopicCreated(meta(1, "b", 1)),
            JournalRecord::TopicDeleted { id: TopicId(0), remove_after: Time(7) },
            JournalRecord::PartitionRemoved { id: TopicId(0), partition: 1 },
        ]
    }

    fn image(epoch: u64, recs: &[JournalRecord]) -> Vec<u8> {
        let mut out = encode_header(epoch);
        for r in recs {
            r.encode(epoch, &mut out);
        }
        out
    }

    #[test]
    fn records_round_trip() {
        let mut recs = sample();
        recs.push(JournalRecord::DeletionCompleted { id: TopicId(0) });
        recs.push(JournalRecord::Snapshot(MetaState::replay(&sample()).snapshot()));
        let d = decode_journal(&image(9, &recs)).unwrap();
        assert_eq!(d.epoch, 9);
        assert_eq!(d.records.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), recs);
        assert!(d.torn_tail.is_none());
    }

    #[test]
    fn a_group_commit_is_one_frame_and_decodes_to_its_records() {
        let recs = sample();
        let mut img = encode_header(2);
        JournalRecord::encode_batch(&recs, 2, &mut img);
        let d = decode_journal(&img).unwrap();
        assert_eq!(d.records.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(), recs);
        assert!(d.records.iter().all(|(p, _)| *p == JOURNAL_FIRST_FRAME as u64), "one commit holds them all");
        assert!(d.repaired.is_empty() && d.torn_tail.is_none());
        // Any cut of the commit is a torn tail, never corruption, and drops it whole.
        for cut in 1..(img.len() - JOURNAL_FIRST_FRAME) {
            let d = decode_journal(&img[..img.len() - cut]).unwrap();
            assert!(d.records.is_empty() && d.torn_tail.is_some(), "cut {cut}");
            assert_eq!(d.torn_tail.unwrap().0, JOURNAL_FIRST_FRAME as u64);
        }
        // A single record is written as itself.
        let mut one = encode_header(2);
        JournalRecord::encode_batch(&recs[..1], 2, &mut one);
        assert_eq!(one, image(2, &recs[..1]));
    }

    /// One record of every kind, snapshots with and without deletions and ends.
    fn every_kind() -> Vec<JournalRecord> {
        let log = LogId { topic: TopicId(3), partition: 2 };
        let mut state = MetaState::replay(&sample());
        state.ends.insert(LogId { topic: TopicId(1), partition: 0 }, 40);
        let batch = ProducerBatch { producer_id: 4, epoch: 1, first_sequence: 9 };
        let offsets = vec![crate::command::CommittedOffset { partition: 0, offset: 3, metadata: "meta".into() }];
        state.offsets.commit("g", TopicId(1), &offsets);
        state.producers.append(LogId { topic: TopicId(1), partition: 0 }, batch, 2, 38);
        state.next_producer_id = 5;
        vec![
            JournalRecord::OffsetsCommitted { group: "g".into(), topic: TopicId(1), offsets },
            JournalRecord::GroupDeleted { group: "group".into() },
            JournalRecord::ProducerIdAllocated { id: 4 },
            JournalRecord::ProducerAppended { log, batch, records: 3, first_offset: 7 },
            JournalRecord::TopicCreated(meta(0, "a", 3)),
            JournalRecord::TopicCreated(TopicMeta { offset_base: 9, ..meta(7, "a-much-longer-name", 5) }),
            JournalRecord::TopicDeleted { id: TopicId(0), remove_after: Time(7) },
            JournalRecord::PartitionRemoved { id: TopicId(0), partition: 1 },
            JournalRecord::DeletionCompleted { id: TopicId(0) },
            JournalRecord::LogEnd { log, end: 1 << 40 },
            JournalRecord::Snapshot(Snapshot::default()),
            JournalRecord::Snapshot(state.snapshot()),
        ]
    }

    /// Positions around the 4 KiB boundaries, where copy B moves to the next block.
    fn positions() -> Vec<u64> {
        let mut out = vec![JOURNAL_FIRST_FRAME as u64, 0, 1, 5000];
        for block in [1u64, 2, 7] {
            let edge = block * JOURNAL_COPY_ALIGN as u64;
            out.extend((edge - 300..edge + 40).step_by(7));
            out.extend(edge - 40..=edge);
        }
        out
    }

    /// A commit as the format describes it, built from its frames: copy A, zeros up to
    /// the next 4 KiB boundary, copy B.
    fn reference_commit(records: &[JournalRecord], epoch: u64, position: u64) -> Vec<u8> {
        let (kind, payload) = match records {
            [only] => encode_payload(only),
            _ => {
                let mut w = Writer::default();
                for r in records {
                    let (kind, payload) = encode_payload(r);
                    w.u8(kind);
                    w.bytes(&payload);
                }
                (KIND_BATCH, w.buf)
            }
        };
        let mut out = Vec::new();
        encode_frame(&mut out, epoch, kind, &payload);
        out.resize((align_up(position + out.len() as u64) - position) as usize, 0);
        encode_frame(&mut out, mirror_salt(epoch, position), kind, &payload);
        out
    }

    #[test]
    fn commits_are_laid_out_as_documented_and_commit_len_counts_them() {
        let all = every_kind();
        let mut groups: Vec<&[JournalRecord]> = all.chunks(1).collect();
        groups.extend([&all[..], &all[2..4], &all[5..6], &[]]);
        for records in groups {
            for position in positions() {
                let bytes = JournalRecord::encode_commit(records, 11, position);
                assert_eq!(bytes, reference_commit(records, 11, position), "{records:?} at {position}");
                assert_eq!(
                    JournalRecord::commit_len(records, position),
                    bytes.len() as u64,
                    "{records:?} at {position}"
                );
                // Into a buffer that already holds other bytes, at any file position.
                let mut out = vec![0xee; 13];
                JournalRecord::encode_commit_into(records, 11, position, &mut out);
                assert_eq!((&out[..13], &out[13..]), (&[0xee; 13][..], &bytes[..]));
            }
        }
    }

    #[test]
    fn commit_len_is_the_encoded_length_near_a_block_boundary() {
        let end = [JournalRecord::LogEnd { log: LogId { topic: TopicId(1), partition: 0 }, end: 5 }];
        let frame = (FRAME_HEADER_LEN + LOG_END_LEN) as u64;
        let edge = 2 * JOURNAL_COPY_ALIGN as u64;
        // Copy A ends exactly on the boundary: copy B follows it with no zeros.
        assert_eq!(JournalRecord::commit_len(&end, edge - frame), 2 * frame);
        // One byte further: copy B goes to the next boundary.
        assert_eq!(JournalRecord::commit_len(&end, edge - frame + 1), JOURNAL_COPY_ALIGN as u64 - 1 + 2 * frame);
        for position in edge - frame - 2..=edge + 2 {
            let want = JournalRecord::encode_commit(&end, 3, position).len() as u64;
            assert_eq!(JournalRecord::commit_len(&end, position), want, "at {position}");
        }
    }

    #[test]
    fn each_commit_is_written_twice_in_different_blocks() {
        let img = image(5, &sample());
        let mut pos = JOURNAL_FIRST_FRAME;
        for rec in sample() {
            let len = JournalRecord::encode_commit(std::slice::from_ref(&rec), 5, pos as u64).len();
            let a = frame_at(&img, pos, 5, MAX_JOURNAL_FRAME, &|_, _| true).unwrap();
            let b_at = align_up(a.end()) as usize;
            let b = frame_at(&img, b_at, mirror_salt(5, pos as u64), MAX_JOURNAL_FRAME, &|_, _| true).unwrap();
            assert_eq!((a.kind, a.payload), (b.kind, b.payload));
            assert_ne!(pos / JOURNAL_COPY_ALIGN, b_at / JOURNAL_COPY_ALIGN, "the copies share no block");
            assert_eq!(b_at % JOURNAL_COPY_ALIGN, 0);
            assert_eq!(b.end() as usize, pos + len);
            // Copy B validates only where its own copy A began.
            assert!(frame_at(&img, b_at, mirror_salt(5, pos as u64 + 1), MAX_JOURNAL_FRAME, &|_, _| true).is_err());
            pos += len;
        }
        assert_eq!(pos, img.len());
        assert_ne!(mirror_salt(5, 0), 5);
    }

    /// XORs every byte of the `size`-byte block `n` of `img`, as bit rot does.
    fn rot(img: &[u8], n: usize, size: usize) -> Vec<u8> {
        let mut v = img.to_vec();
        let end = ((n + 1) * size).min(v.len());
        v[n * size..end].iter_mut().for_each(|b| *b ^= 0x5a);
        v
    }

    #[test]
    fn rot_of_any_one_block_loses_nothing_and_is_reported() {
        let mut recs = sample();
        recs.insert(0, JournalRecord::Snapshot(MetaState::replay(&sample()[..1]).snapshot()));
        let img = image(9, &recs);
        // Every 512-byte sector (the simulated disk's rot unit) and every 4 KiB block,
        // the header, the first and the last included.
        for size in [512, JOURNAL_COPY_ALIGN] {
            for n in 0..img.len().div_ceil(size) {
                let d = decode_journal(&rot(&img, n, size)).unwrap_or_else(|e| panic!("block {n} of {size}: {e:?}"));
                assert_eq!(d.records.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(), recs, "block {n} of {size}");
                assert!(d.torn_tail.is_none(), "block {n} of {size}");
                let all_padding = img[n * size..((n + 1) * size).min(img.len())].iter().all(|b| *b == 0);
                assert_eq!(d.repaired.is_empty(), all_padding, "block {n} of {size}: {:?}", d.repaired);
            }
        }
    }

    #[test]
    fn both_copies_bad_is_corruption_in_the_middle_and_a_torn_tail_at_the_end() {
        let img = image(3, &sample());
        let second = image(3, &sample()[..1]).len();
        let third = image(3, &sample()[..2]).len();
        let mut both = img.clone();
        both[second + 12] ^= 1; // copy A of the second commit
        both[align_up(second as u64 + 1) as usize + 12] ^= 1; // and its copy B
        let err = decode_journal(&both).unwrap_err();
        assert_eq!(err.offset, second as u64);
        assert!(err.detail.contains("both copies"), "{}", err.detail);

        let last = image(3, &sample()[..3]).len();
        let mut tail = img.clone();
        tail[last + 12] ^= 1;
        tail[align_up(last as u64 + 1) as usize + 12] ^= 1;
        let d = decode_journal(&tail).unwrap();
        assert_eq!(d.records.len(), 3);
        assert_eq!(d.torn_tail.map(|t| t.0), Some(last as u64));
        assert!(third < last);
    }

    #[test]
    fn version_2_journals_are_still_read() {
        let mut img = Vec::new();
        img.extend_from_slice(MAGIC);
        img.extend_from_slice(&2u16.to_le_bytes());
        img.extend_from_slice(&4u64.to_le_bytes());
        let crc = crc32c::crc32c(&img);
        img.extend_from_slice(&crc.to_le_bytes());
        for r in sample() {
            let (kind, payload) = encode_payload(&r);
            encode_frame(&mut img, 4, kind, &payload);
        }
        let d = decode_journal(&img).unwrap();
        assert_eq!(d.epoch, 4);
        assert_eq!(d.records.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), sample());
    }

    /// Records of formats 2 and 3 name no offset base: their topics begin at 0.
    #[test]
    fn format_3_records_read_with_offsets_beginning_at_0() {
        let mut w = Writer::default();
        w.u64(3);
        w.bytes(b"old");
        w.u32(2);
        w.u64(5);
        let created = JournalRecord::decode(KIND_CREATED, &w.buf, 0).unwrap();
        assert_eq!(created, JournalRecord::TopicCreated(meta(3, "old", 2)));
        let mut w = Writer::default();
        w.u64(4); // next topic id
        w.u32(1); // one live topic
        w.u64(3);
        w.bytes(b"old");
        w.u32(2);
        w.u64(5);
        w.u32(0); // no deletion
        w.u32(0); // no end
        let snap = JournalRecord::decode(KIND_SNAPSHOT, &w.buf, 0).unwrap();
        let want = Snapshot { next_topic_id: 4, live: vec![meta(3, "old", 2)], ..Snapshot::default() };
        assert_eq!(snap, JournalRecord::Snapshot(want));
    }

    /// The floor rises to the largest end a deleted topic journaled, survives snapshots,
    /// and is not lowered by anything later.
    #[test]
    fn the_offset_floor_is_past_every_end_a_deleted_topic_journaled() {
        let a = LogId { topic: TopicId(0), partition: 0 };
        let a1 = LogId { topic: TopicId(0), partition: 1 };
        let b = LogId { topic: TopicId(1), partition: 0 };
        let s = MetaState::replay(&[
            JournalRecord::TopicCreated(meta(0, "a", 2)),
            JournalRecord::TopicCreated(meta(1, "b", 1)),
            JournalRecord::LogEnd { log: a, end: 5 },
            JournalRecord::LogEnd { log: a1, end: 9 },
            JournalRecord::LogEnd { log: b, end: 30 },
            JournalRecord::TopicDeleted { id: TopicId(0), remove_after: Time(0) },
        ]);
        assert_eq!(s.offset_floor, 9, "the deleted topic's largest end; a live topic's does not count");
        let again = MetaState::replay(&[JournalRecord::Snapshot(s.snapshot())]);
        assert_eq!(again, s);
        let mut later = again.clone();
        later.apply(&JournalRecord::TopicCreated(TopicMeta { offset_base: 9, ..meta(2, "a", 1) }));
        later.apply(&JournalRecord::TopicDeleted { id: TopicId(2), remove_after: Time(0) });
        assert_eq!(later.offset_floor, 9, "a deleted topic with nothing acknowledged lowers nothing");
        later.apply(&JournalRecord::TopicDeleted { id: TopicId(1), remove_after: Time(0) });
        assert_eq!(later.offset_floor, 30);
        let bytes = encode_compacted(3, later.snapshot());
        let d = decode_journal(&bytes).unwrap();
        assert_eq!(MetaState::replay(d.records.iter().map(|(_, r)| r)).offset_floor, 30);
    }

    #[test]
    fn replay_tracks_deletions_and_ids() {
        let s = MetaState::replay(&sample());
        assert_eq!(s.next_topic_id, 2);
        assert!(s.topics[&TopicId(0)].deleting);
        assert_eq!(s.topics[&TopicId(0)].removed.iter().copied().collect::<Vec<_>>(), vec![1]);
        assert!(!s.topics[&TopicId(1)].deleting);
    }

    #[test]
    fn snapshot_replays_to_the_same_state() {
        let s = MetaState::replay(&sample());
        let again = MetaState::replay(&[JournalRecord::Snapshot(s.snapshot())]);
        assert_eq!(s, again);
    }

    #[test]
    fn snapshot_keeps_next_id_after_completed_deletions() {
        let mut recs = sample();
        recs.push(JournalRecord::DeletionCompleted { id: TopicId(0) });
        recs.push(JournalRecord::DeletionCompleted { id: TopicId(1) });
        let s = MetaState::replay(&recs);
        assert!(s.topics.is_empty());
        let again = MetaState::replay(&[JournalRecord::Snapshot(s.snapshot())]);
        assert_eq!(again.next_topic_id, 2);
    }

    #[test]
    fn torn_tail_is_reported_with_truncation_point() {
        let full = image(3, &sample());
        let three = image(3, &sample()[..3]).len();
        for cut in 1..(full.len() - three) {
            let d = decode_journal(&full[..full.len() - cut]).unwrap();
            assert_eq!(d.records.len(), 3);
            assert_eq!(d.torn_tail.as_ref().map(|t| t.0), Some(three as u64), "cut {cut}");
        }
    }

    #[test]
    fn corrupt_middle_record_is_refused_with_its_offset() {
        let mut img = image(3, &sample());
        let second = image(3, &sample()[..1]).len();
        img[second + 12] ^= 1;
        img[align_up(second as u64 + 1) as usize + 12] ^= 1;
        let err = decode_journal(&img).unwrap_err();
        assert_eq!(err.offset, second as u64);
        assert!(err.detail.contains("checksum mismatch"), "{}", err.detail);
    }

    #[test]
    fn records_of_an_older_epoch_do_not_validate() {
        let mut img = image(4, &[]);
        let old = image(3, &sample());
        img.extend_from_slice(&old[JOURNAL_FIRST_FRAME..]);
        let d = decode_journal(&img).unwrap();
        assert!(d.records.is_empty());
        assert_eq!(d.torn_tail.map(|t| t.0), Some(JOURNAL_FIRST_FRAME as u64));
    }

    #[test]
    fn bad_header_is_corruption() {
        let mut img = image(3, &sample());
        img[7] ^= 1;
        assert_eq!(decode_journal(&img).unwrap().repaired, vec![(0, "header: header checksum mismatch".to_string())]);
        img[JOURNAL_COPY_ALIGN + 7] ^= 1;
        assert_eq!(decode_journal(&img).unwrap_err().detail, "header checksum mismatch");
        assert!(decode_journal(b"BRK").is_err());
        assert!(decode_journal(b"").is_err());
    }

    #[test]
    fn valid_checksum_but_garbage_payload_is_corruption() {
        let commit = |kind: u8, payload: &[u8]| {
            let mut img = encode_header(1);
            let pos = img.len() as u64;
            encode_frame(&mut img, 1, kind, payload);
            img.resize(align_up(img.len() as u64) as usize, 0);
            encode_frame(&mut img, mirror_salt(1, pos), kind, payload);
            img
        };
        let err = decode_journal(&commit(KIND_DELETED, b"short")).unwrap_err();
        assert!(err.detail.contains("undecodable"), "{}", err.detail);
        let img = commit(77, b"");
        assert!(decode_journal(&img).unwrap_err().detail.contains("unknown journal record kind 77"));
    }
}
