//! The metadata journal: topic creations, tombstones, deletion progress and snapshots.
//!
//! File layout: a header (`BRKJ`, format version, epoch, header CRC32C) and then
//! frames (see [`crate::frame`]) salted with the epoch. Compaction writes a new file
//! with the next epoch, so records of an older file never validate in a newer one.

use crate::bytes::{Reader, Writer};
use crate::command::TopicSettings;
use crate::error::DecodeError;
use crate::frame::{encode_frame, scan};
use crate::ids::{LogId, TopicId};
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};

/// The name of the journal file in byte-oriented runtimes.
pub const JOURNAL_FILE: &str = "journal";
/// The on-disk format version this build writes and reads.
/// Version 2 added acknowledged log ends ([`JournalRecord::LogEnd`], and in snapshots).
pub const JOURNAL_FORMAT_VERSION: u16 = 2;
const MAGIC: &[u8; 4] = b"BRKJ";
/// Bytes in the journal header.
pub const JOURNAL_HEADER_LEN: usize = 18;
/// No topic may have more partitions than this, whatever the configuration: a journal
/// naming more is corrupt (recovery allocates per partition).
pub const MAX_PARTITIONS_EVER: u32 = 1 << 20;
/// The largest frame payload the journal accepts (a snapshot of many topics).
pub const MAX_JOURNAL_FRAME: usize = 256 << 20;

/// A topic's durable metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    /// The incarnation.
    pub id: TopicId,
    /// The name.
    pub name: String,
    /// The partition count.
    pub partitions: u32,
    /// The settings.
    pub settings: TopicSettings,
}

/// A pending deletion as a snapshot records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingDeletion {
    /// The topic being removed.
    pub topic: TopicMeta,
    /// When its grace delay ends: removal starts no earlier.
    pub remove_after: Time,
    /// Partitions whose logs are already removed.
    pub removed: Vec<u32>,
}

/// The whole metadata state, as a compaction snapshot holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The next topic id to hand out.
    pub next_topic_id: u64,
    /// Live topics, by id.
    pub live: Vec<TopicMeta>,
    /// Pending deletions, by id.
    pub deleting: Vec<PendingDeletion>,
    /// Each live log's acknowledged end (logs with none acknowledged are left out).
    pub ends: Vec<(LogId, u64)>,
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalRecord {
    /// A topic was created (the intent, journaled before its logs exist).
    TopicCreated(TopicMeta),
    /// The tombstone: the topic is deleted; its logs are to be removed.
    TopicDeleted {
        /// The topic.
        id: TopicId,
        /// When its grace delay ends, in the runtime's clock: removal starts no earlier,
        /// whatever restarts happen in between.
        remove_after: Time,
    },
    /// One partition's log of a deleted topic is removed (progress).
    PartitionRemoved {
        /// The topic.
        id: TopicId,
        /// The partition.
        partition: u32,
    },
    /// Every log of a deleted topic is removed; the topic is forgotten.
    DeletionCompleted {
        /// The topic.
        id: TopicId,
    },
    /// The whole state, written first in a compacted journal.
    Snapshot(Snapshot),
    /// Every record of `log` below `end` is acknowledged: written and synced before this
    /// record was. Recovery serves exactly those, reports damage among them as
    /// corruption (a torn write cannot touch them), and cuts whatever follows them.
    LogEnd {
        /// The log.
        log: LogId,
        /// One past its last acknowledged offset.
        end: u64,
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

fn put_meta(w: &mut Writer, m: &TopicMeta) {
    w.u64(m.id.0);
    w.bytes(m.name.as_bytes());
    w.u32(m.partitions);
    w.u64(m.settings.deletion_grace_ms);
}

fn get_meta(r: &mut Reader<'_>) -> Result<TopicMeta, DecodeError> {
    Ok(TopicMeta {
        id: TopicId(r.u64()?),
        name: r.string()?,
        partitions: r.u32()?,
        settings: TopicSettings { deletion_grace_ms: r.u64()? },
    })
}

fn put_log_end(w: &mut Writer, log: LogId, end: u64) {
    w.u64(log.topic.0);
    w.u32(log.partition);
    w.u64(end);
}

fn get_log_end(r: &mut Reader<'_>) -> Result<(LogId, u64), DecodeError> {
    Ok((LogId { topic: TopicId(r.u64()?), partition: r.u32()? }, r.u64()?))
}

impl JournalRecord {
    /// The frame kind and payload of this record.
    fn encode_payload(&self) -> (u8, Vec<u8>) {
        let mut w = Writer::default();
        let kind = match self {
            JournalRecord::TopicCreated(m) => {
                put_meta(&mut w, m);
                KIND_CREATED
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
                w.u32(s.live.len() as u32);
                for m in &s.live {
                    put_meta(&mut w, m);
                }
                w.u32(s.deleting.len() as u32);
                for d in &s.deleting {
                    put_meta(&mut w, &d.topic);
                    w.u64(d.remove_after.0);
                    w.u32(d.removed.len() as u32);
                    for p in &d.removed {
                        w.u32(*p);
                    }
                }
                w.u32(s.ends.len() as u32);
                for (log, end) in &s.ends {
                    put_log_end(&mut w, *log, *end);
                }
                KIND_SNAPSHOT
            }
            JournalRecord::LogEnd { log, end } => {
                put_log_end(&mut w, *log, *end);
                KIND_LOG_END
            }
        };
        (kind, w.buf)
    }

    /// Appends this record, framed for a journal of `epoch`, to `out`.
    pub fn encode(&self, epoch: u64, out: &mut Vec<u8>) {
        let (kind, payload) = self.encode_payload();
        encode_frame(out, epoch, kind, &payload);
    }

    /// Appends `records` as one frame (a batch frame if there are several). One write of
    /// one frame can only tear into a bad tail, never into damage followed by valid
    /// records, which recovery would have to call corruption.
    pub fn encode_batch(records: &[JournalRecord], epoch: u64, out: &mut Vec<u8>) {
        if let [only] = records {
            return only.encode(epoch, out);
        }
        let mut w = Writer::default();
        for r in records {
            let (kind, payload) = r.encode_payload();
            w.u8(kind);
            w.bytes(&payload);
        }
        encode_frame(out, epoch, KIND_BATCH, &w.buf);
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
            KIND_CREATED => JournalRecord::TopicCreated(get_meta(&mut r)?),
            KIND_DELETED => JournalRecord::TopicDeleted { id: TopicId(r.u64()?), remove_after: Time(r.u64()?) },
            KIND_PARTITION_REMOVED => JournalRecord::PartitionRemoved { id: TopicId(r.u64()?), partition: r.u32()? },
            KIND_COMPLETED => JournalRecord::DeletionCompleted { id: TopicId(r.u64()?) },
            KIND_SNAPSHOT => {
                let next_topic_id = r.u64()?;
                let n = r.u32()?;
                let mut live = Vec::new();
                for _ in 0..n {
                    live.push(get_meta(&mut r)?);
                }
                let n = r.u32()?;
                let mut deleting = Vec::new();
                for _ in 0..n {
                    let topic = get_meta(&mut r)?;
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
                JournalRecord::Snapshot(Snapshot { next_topic_id, live, deleting, ends })
            }
            KIND_LOG_END => {
                let (log, end) = get_log_end(&mut r)?;
                JournalRecord::LogEnd { log, end }
            }
            other => return Err(r.malformed(format!("unknown journal record kind {other}"))),
        };
        r.finish()?;
        Ok(rec)
    }
}

/// Encodes a journal header for `epoch`.
pub fn encode_header(epoch: u64) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.extend_from_slice(MAGIC);
    w.u16(JOURNAL_FORMAT_VERSION);
    w.u64(epoch);
    let crc = crc32c::crc32c(&w.buf);
    w.u32(crc);
    w.buf
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
    /// Every valid record with its byte position.
    pub records: Vec<(u64, JournalRecord)>,
    /// A torn tail found at the end: its start (the length to truncate to) and why.
    pub torn_tail: Option<(u64, String)>,
}

/// Decodes a journal image. A bad record with a valid one after it is corruption; a
/// bad record at the end is a torn tail, reported for truncation.
pub fn decode_journal(data: &[u8]) -> Result<DecodedJournal, JournalCorruption> {
    let epoch = decode_header(data)?;
    let s = scan(data, JOURNAL_HEADER_LEN, epoch, MAX_JOURNAL_FRAME);
    if let Some(bad) = s.corrupt.first() {
        return Err(JournalCorruption {
            offset: bad.start,
            detail: format!("{} (a valid record follows at byte {})", bad.detail, bad.end),
        });
    }
    let mut records = Vec::with_capacity(s.frames.len());
    for f in &s.frames {
        let recs = JournalRecord::decode_frame(f.kind, f.payload, f.position + crate::frame::FRAME_HEADER_LEN as u64)
            .map_err(|e| JournalCorruption { offset: f.position, detail: format!("undecodable record: {e}") })?;
        records.extend(recs.into_iter().map(|r| (f.position, r)));
    }
    Ok(DecodedJournal { epoch, records, torn_tail: s.torn_tail.map(|t| (t.start, t.detail)) })
}

fn decode_header(data: &[u8]) -> Result<u64, JournalCorruption> {
    let bad = |detail: &str| JournalCorruption { offset: 0, detail: detail.to_string() };
    if data.len() < JOURNAL_HEADER_LEN {
        return Err(bad("file is shorter than the journal header"));
    }
    if &data[0..4] != MAGIC {
        return Err(bad("bad magic: not a broker-core journal"));
    }
    let crc = u32::from_le_bytes([data[14], data[15], data[16], data[17]]);
    if crc32c::crc32c(&data[..14]) != crc {
        return Err(bad("header checksum mismatch"));
    }
    let version = u16::from_le_bytes([data[4], data[5]]);
    if version != JOURNAL_FORMAT_VERSION {
        return Err(bad(&format!("unsupported format version {version} (this build reads {JOURNAL_FORMAT_VERSION})")));
    }
    let mut e = [0u8; 8];
    e.copy_from_slice(&data[6..14]);
    Ok(u64::from_le_bytes(e))
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
                // A deleted topic's logs are never served again: their ends are moot.
                self.ends.retain(|log, _| log.topic != *id);
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
            JournalRecord::Snapshot(s) => {
                self.topics.clear();
                self.ends = s.ends.iter().copied().collect();
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
        let mut snap = Snapshot { next_topic_id: self.next_topic_id, ..Snapshot::default() };
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
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: u64, name: &str, partitions: u32) -> TopicMeta {
        TopicMeta { id: TopicId(id), name: name.into(), partitions, settings: TopicSettings { deletion_grace_ms: 5 } }
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
        assert!(d.records.iter().all(|(p, _)| *p == JOURNAL_HEADER_LEN as u64), "one frame holds them all");
        // Any cut of the batch is a torn tail, never corruption.
        for cut in 1..(img.len() - JOURNAL_HEADER_LEN) {
            let d = decode_journal(&img[..img.len() - cut]).unwrap();
            assert!(d.records.is_empty() && d.torn_tail.is_some(), "cut {cut}");
        }
        // A single record is written as itself.
        let mut one = encode_header(2);
        JournalRecord::encode_batch(&recs[..1], 2, &mut one);
        assert_eq!(one, image(2, &recs[..1]));
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
        let err = decode_journal(&img).unwrap_err();
        assert_eq!(err.offset, second as u64);
        assert!(err.detail.contains("checksum mismatch"), "{}", err.detail);
    }

    #[test]
    fn records_of_an_older_epoch_do_not_validate() {
        let mut img = image(4, &[]);
        let old = image(3, &sample());
        img.extend_from_slice(&old[JOURNAL_HEADER_LEN..]);
        let d = decode_journal(&img).unwrap();
        assert!(d.records.is_empty());
        assert_eq!(d.torn_tail.map(|t| t.0), Some(JOURNAL_HEADER_LEN as u64));
    }

    #[test]
    fn bad_header_is_corruption() {
        let mut img = image(3, &sample());
        img[7] ^= 1;
        assert_eq!(decode_journal(&img).unwrap_err().detail, "header checksum mismatch");
        assert!(decode_journal(b"BRK").is_err());
        assert!(decode_journal(b"").is_err());
    }

    #[test]
    fn valid_checksum_but_garbage_payload_is_corruption() {
        let mut img = encode_header(1);
        encode_frame(&mut img, 1, KIND_DELETED, b"short");
        let err = decode_journal(&img).unwrap_err();
        assert!(err.detail.contains("undecodable"), "{}", err.detail);
        let mut img = encode_header(1);
        encode_frame(&mut img, 1, 77, b"");
        assert!(decode_journal(&img).unwrap_err().detail.contains("unknown journal record kind 77"));
    }
}
