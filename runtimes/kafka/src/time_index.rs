//! The listener's time index: where in a partition the records of a given time begin,
//! for ListOffsets by timestamp (Kafka's `offsets_for_times`).
//!
//! Kafka's rule (`UnifiedLog.fetchOffsetByTimestamp`, `LogSegment.findOffsetByTimestamp`
//! and `FileRecords.searchForTimestamp`): for a timestamp `T >= 0`, the earliest offset
//! whose record's timestamp is at least `T`, with that timestamp; none if no record
//! qualifies. Its own time index only narrows where the search begins; then it walks the
//! batches from there, skipping each whose max timestamp is below `T` and reading the
//! records of the first that is not. Timestamps need not grow with offsets, so the answer
//! is the first record at least `T`, not the first after every earlier one is below it.
//! For [`MAX_TIMESTAMP`] (ListOffsets 7), it answers the first record that holds the
//! largest timestamp of the partition.
//!
//! Here the index is held in memory only, per partition of a topic incarnation: a sparse
//! list of (the first offset of a stored batch, the largest timestamp of every record up
//! to the end of that batch), built by reading the partition through the core's
//! `Command::Fetch` from where it was last extended to the high watermark. It is rebuilt
//! from the log after a restart and extended on each lookup, so there is nothing on disk
//! to damage. A lookup finds by binary search the first entry whose running maximum is
//! at least `T`; every record before the entry preceding it is below `T`, so the search
//! walks the log from there as Kafka walks its segment, decoding (and decompressing)
//! only the batches whose max timestamp reaches `T`.
//!
//! Timestamps are a batch's, as stored: the max timestamp of its header, and each
//! record's base timestamp plus delta (the header's max for a log-append-time batch). A
//! record stored some other way (the CLI, the JSON protocol: [`Kept::Other`]) has no
//! timestamp, as Kafka's records without one (-1), so it never answers a `T >= 0`.
//!
//! Bounds: at most [`IndexLimits::entries`] entries per partition (one per batch at
//! first; when full, every other entry is dropped and from then on only every second
//! batch is indexed, then every fourth, ...: a coarser index only makes a search walk
//! further), and at most [`IndexLimits::partitions`] partitions, the least recently
//! looked up dropped first (its index is rebuilt from the log if it is asked again). An
//! entry is 16 bytes, so the defaults hold at most 16 MiB. A walk reads the log
//! [`READ_BYTES`] at a time, and decompresses one batch at a time within
//! [`crate::batches::MAX_DECOMPRESSED`].
//!
//! Nothing read from the core can make it panic. A stored batch whose records the walk
//! must read but cannot (they do not decompress, or do not parse: only a batch written
//! by other means than a Kafka produce could be so, since a produce checks every record)
//! answers `CORRUPT_MESSAGE`, as Kafka answers a read that meets a corrupt record.

use crate::batches::first_record_at_least;
use crate::errors::code;
use crate::stored::{kept, Kept};
use crate::Core;
use broker_core::{Command, Reply, StoredRecord, TopicId};
use kafka_protocol::ResponseError as E;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// ListOffsets' timestamp for the record with the largest timestamp (version 7 on).
pub const MAX_TIMESTAMP: i64 = -3;
/// The most bytes one read of the log asks the core for (the first record whatever its
/// size).
pub const READ_BYTES: u64 = 1 << 20;

/// The index's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexLimits {
    /// The most entries one partition's index holds (at least 2).
    pub entries: usize,
    /// The most partitions indexed at once (at least 1).
    pub partitions: usize,
}

impl Default for IndexLimits {
    /// 4096 entries (64 KiB) a partition, 256 partitions.
    fn default() -> IndexLimits {
        IndexLimits { entries: 4096, partitions: 256 }
    }
}

/// A record a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp.
    pub timestamp: i64,
}

/// A partition to look in, as a DescribeTopic just showed it.
#[derive(Clone, Copy, Debug)]
pub struct Partition<'a> {
    /// The topic's name.
    pub topic: &'a str,
    /// Its incarnation.
    pub id: TopicId,
    /// The partition.
    pub partition: u32,
    /// The partition's first offset.
    pub log_start: u64,
    /// Its high watermark.
    pub high_watermark: u64,
}

/// The time indexes of the partitions looked up, shared by every connection of a
/// listener (cloning shares them).
#[derive(Clone, Debug)]
pub struct TimeIndex {
    limits: IndexLimits,
    /// The most core records one read asks for.
    read_records: u32,
    shared: Arc<Mutex<Indexes>>,
}

/// One partition's index, locked while a lookup extends it and walks the log.
type Shared = Arc<tokio::sync::Mutex<Index>>;

#[derive(Debug, Default)]
struct Indexes {
    /// Each partition's index, and when it was last looked up.
    partitions: HashMap<(TopicId, u32), (Shared, u64)>,
    clock: u64,
}

/// One entry: a stored batch's first offset, and the largest timestamp of every record
/// up to the end of that batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    offset: u64,
    running: i64,
}

/// One partition's index.
#[derive(Debug)]
struct Index {
    /// The offset indexing began at (the partition's first).
    start: u64,
    /// The first offset not yet read.
    next: u64,
    /// The first offset past the last stored batch read (a batch covers its offsets).
    covered: u64,
    entries: Vec<Entry>,
    /// One batch in `stride` is indexed; `skipped` since the last entry.
    stride: u64,
    skipped: u64,
    /// The largest timestamp read so far, and the first offset (of a stored batch, or of
    /// a record without one) that holds it; None before any record.
    newest: Option<(i64, u64)>,
}

/// What one core record is to the index.
enum Seen<'a> {
    /// A stored batch: its first offset, record count, max timestamp and bytes.
    Batch { offset: u64, records: u32, max: i64, value: &'a [u8] },
    /// A record without a timestamp.
    Untimed { offset: u64 },
    /// A record covered by the batch before it.
    Covered,
}

/// The big-endian i64 at `at` of `value`, which is at least [`BATCH_HEADER`] long.
fn be64(value: &[u8], at: usize) -> i64 {
    let mut b = [0; 8];
    b.copy_from_slice(&value[at..at + 8]);
    i64::from_be_bytes(b)
}

/// What `r` is, `covered` being the first offset past the last batch seen; moves
/// `covered` past a batch.
fn see<'a>(r: &'a StoredRecord, covered: &mut u64) -> Seen<'a> {
    if r.offset < *covered {
        return Seen::Covered;
    }
    match kept(r.key.as_deref(), &r.value) {
        Kept::Batch { records, .. } => {
            *covered = r.offset.saturating_add(u64::from(records));
            Seen::Batch { offset: r.offset, records, max: be64(&r.value, 35), value: &r.value }
        }
        // A continuation whose batch was not read is a record produced some other way.
        Kept::Continuation { .. } | Kept::Other => Seen::Untimed { offset: r.offset },
    }
}

impl Index {
    fn new(start: u64) -> Index {
        Index { start, next: start, covered: start, entries: Vec::new(), stride: 1, skipped: 0, newest: None }
    }

    /// Takes in the next core records read (dense from `self.next`).
    fn take(&mut self, records: &[StoredRecord], limit: usize) {
        for r in records {
            let (offset, max) = match see(r, &mut self.covered) {
                Seen::Covered => continue,
                Seen::Untimed { offset } => (offset, -1),
                Seen::Batch { offset, max, .. } => {
                    let running = self.newest.map_or(max, |(n, _)| n.max(max));
                    self.skipped += 1;
                    if self.skipped >= self.stride {
                        self.push(Entry { offset, running }, limit);
                    }
                    (offset, max)
                }
            };
            if self.newest.is_none_or(|(n, _)| max > n) {
                self.newest = Some((max, offset));
            }
        }
        if let Some(last) = records.last() {
            self.next = self.next.max(last.offset.saturating_add(1));
        }
    }

    /// Adds `entry`, first dropping every other entry if the index is full.
    fn push(&mut self, entry: Entry, limit: usize) {
        if self.entries.len() >= limit.max(2) {
            let mut i = 0;
            self.entries.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = self.stride.saturating_mul(2);
        }
        self.entries.push(entry);
        self.skipped = 0;
    }

    /// Where a walk for the first record at least `t` begins, if any record may be: the
    /// entry before the first whose running maximum reaches `t`, or the start.
    fn walk_from(&self, t: i64) -> Option<u64> {
        if self.newest.is_none_or(|(n, _)| n < t) {
            return None;
        }
        let first = self.entries.partition_point(|e| e.running < t);
        Some(first.checked_sub(1).map_or(self.start, |i| self.entries[i].offset))
    }
}

/// Why a lookup has no answer: the error code for the partition.
pub type Failure = i16;

impl TimeIndex {
    /// No partition indexed yet; reads ask the core for at most `read_records` records.
    pub fn new(limits: IndexLimits, read_records: u32) -> TimeIndex {
        TimeIndex { limits, read_records: read_records.max(1), shared: Arc::default() }
    }

    /// The index of `p`, made if it is not held (dropping the least recently used if
    /// the partitions are at their bound).
    fn index(&self, p: &Partition<'_>) -> Shared {
        let mut shared = self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        shared.clock += 1;
        let now = shared.clock;
        let key = (p.id, p.partition);
        if let Some((index, used)) = shared.partitions.get_mut(&key) {
            *used = now;
            return index.clone();
        }
        while shared.partitions.len() >= self.limits.partitions.max(1) {
            let Some(oldest) = shared.partitions.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k) else {
                break;
            };
            shared.partitions.remove(&oldest);
        }
        let index = Arc::new(tokio::sync::Mutex::new(Index::new(p.log_start)));
        shared.partitions.insert(key, (index.clone(), now));
        index
    }

    /// Forgets `p`'s index (its topic is gone).
    fn forget(&self, p: &Partition<'_>) {
        let mut shared = self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        shared.partitions.remove(&(p.id, p.partition));
    }

    /// The first record of `p` whose timestamp is at least `t` (`t >= 0`), or the first
    /// holding the largest timestamp if `t` is [`MAX_TIMESTAMP`]; None if there is none
    /// below the high watermark.
    pub async fn lookup(&self, core: &Core, p: &Partition<'_>, t: i64) -> Result<Option<Found>, Failure> {
        let index = self.index(p);
        let mut index = index.lock().await;
        let result = self.lookup_in(&mut index, core, p, t).await;
        if result == Err(E::UnknownTopicOrPartition.code()) {
            drop(index);
            self.forget(p);
        }
        result
    }

    async fn lookup_in(
        &self,
        index: &mut Index,
        core: &Core,
        p: &Partition<'_>,
        t: i64,
    ) -> Result<Option<Found>, Failure> {
        // Extend the index to the high watermark.
        while index.next < p.high_watermark {
            let records = self.read(core, p, index.next).await?;
            if records.is_empty() {
                break;
            }
            index.take(&records, self.limits.entries);
        }
        let (from, t) = if t == MAX_TIMESTAMP {
            match index.newest {
                None => return Ok(None),
                // A record without a timestamp holds the largest (-1): it answers.
                Some((max, offset)) if max < 0 => {
                    return Ok((offset < p.high_watermark).then_some(Found { offset, timestamp: -1 }))
                }
                Some((max, offset)) => (offset, max),
            }
        } else {
            match index.walk_from(t) {
                None => return Ok(None),
                Some(from) => (from, t),
            }
        };
        self.walk(core, p, from, t).await
    }

    /// Reads `p` from `offset` on; an empty read if the topic is another incarnation now.
    async fn read(&self, core: &Core, p: &Partition<'_>, offset: u64) -> Result<Vec<StoredRecord>, Failure> {
        let command = Command::Fetch {
            topic: p.topic.to_string(),
            partition: p.partition,
            offset,
            max_records: self.read_records,
            max_bytes: Some(READ_BYTES),
        };
        match core.submit(command).get().await {
            Ok(Reply::Fetched { topic, .. }) if topic != p.id => Err(E::UnknownTopicOrPartition.code()),
            Ok(Reply::Fetched { records, .. }) => Ok(records),
            Ok(_) => Err(E::UnknownServerError.code()),
            Err(e) => Err(code(&e)),
        }
    }

    /// Walks `p` from `from` (a batch's first offset, or the partition's) for the first
    /// record whose timestamp is at least `t`, as Kafka's `searchForTimestamp` does.
    async fn walk(&self, core: &Core, p: &Partition<'_>, from: u64, t: i64) -> Result<Option<Found>, Failure> {
        let (mut next, mut covered) = (from, from);
        while next < p.high_watermark {
            let records = self.read(core, p, next).await?;
            let Some(last) = records.last() else { break };
            next = last.offset.saturating_add(1);
            for r in &records {
                if let Seen::Batch { offset, records, max, value } = see(r, &mut covered) {
                    if max >= t {
                        let found = first_at_least(value, offset, records, t)?;
                        if let Some(found) = found.filter(|f| f.offset < p.high_watermark) {
                            return Ok(Some(found));
                        }
                    }
                }
            }
        }
        Ok(None)
    }
}

/// The first record of the stored batch `value` (at `offset`, holding `count` records)
/// whose timestamp is at least `t`; `CORRUPT_MESSAGE` if its records cannot be read.
pub fn first_at_least(value: &[u8], offset: u64, count: u32, t: i64) -> Result<Option<Found>, Failure> {
    match first_record_at_least(value, t) {
        Ok(found) => Ok(found
            .filter(|(delta, _)| *delta < count)
            .map(|(delta, timestamp)| Found { offset: offset + u64::from(delta), timestamp })),
        Err(_) => Err(E::CorruptMessage.code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batches::tests::{compressed, encode, gzip, record};
    use crate::batches::{accept, Bounds};
    use crate::stored::core_records;
    use crate::Broker;
    use broker_core::BrokerError;
    use bytes::Bytes;
    use kafka_protocol::records::Compression;
    use tokio::sync::oneshot;

    const BOUNDS: Bounds = Bounds { batch_bytes: 1 << 20, records: 1000, zstd: true };
    const ID: TopicId = TopicId(7);

    /// A partition of one topic, in memory, answering fetches as the core does.
    #[derive(Clone, Default)]
    struct Log {
        records: Arc<Mutex<Vec<StoredRecord>>>,
    }

    impl Broker for Log {
        fn submit(&self, command: Command, reply: oneshot::Sender<Result<Reply, BrokerError>>) -> bool {
            let Command::Fetch { offset, max_records, max_bytes, .. } = command else { return false };
            let all = self.records.lock().unwrap();
            let (mut records, mut bytes) = (Vec::new(), 0u64);
            for r in all.iter().filter(|r| r.offset >= offset).take(max_records as usize) {
                bytes += r.value.len() as u64;
                if !records.is_empty() && max_bytes.is_some_and(|m| bytes > m) {
                    break;
                }
                records.push(r.clone());
            }
            let high_watermark = all.last().map_or(0, |r| r.offset + 1);
            let _ = reply.send(Ok(Reply::Fetched { topic: ID, records, high_watermark }));
            true
        }
    }

    impl Log {
        /// Appends a batch of records with these timestamps, compressed if `gz`.
        fn batch(&self, timestamps: &[i64], gz: bool) {
            let records: Vec<_> = timestamps
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut r = record(i as i64, None, Some("v"), &[]);
                    r.timestamp = *t;
                    r
                })
                .collect();
            let mut batch = encode(&records, Compression::None);
            if gz {
                batch = compressed(&batch, 1, gzip);
            }
            let accepted = accept(&Bytes::from(batch), BOUNDS).unwrap();
            for r in core_records(accepted.batches) {
                self.push(r.value);
            }
        }

        /// Appends a record produced some other way.
        fn push(&self, value: Bytes) {
            let mut all = self.records.lock().unwrap();
            let offset = all.len() as u64;
            all.push(StoredRecord { offset, key: None, value });
        }

        fn partition(&self) -> Partition<'static> {
            let hw = self.records.lock().unwrap().len() as u64;
            Partition { topic: "t", id: ID, partition: 0, log_start: 0, high_watermark: hw }
        }
    }

    fn index(limits: IndexLimits) -> TimeIndex {
        TimeIndex::new(limits, 3)
    }

    async fn find(times: &TimeIndex, log: &Log, t: i64) -> Option<(u64, i64)> {
        let core = Core::new(log.clone());
        times.lookup(&core, &log.partition(), t).await.unwrap().map(|f| (f.offset, f.timestamp))
    }

    /// Kafka's rule, by brute force over every record's timestamp.
    fn rule(timestamps: &[i64], t: i64) -> Option<(u64, i64)> {
        timestamps.iter().enumerate().find(|(_, ts)| **ts >= t).map(|(i, ts)| (i as u64, *ts))
    }

    #[tokio::test]
    async fn finds_the_first_record_at_or_after_a_time() {
        let log = Log::default();
        log.batch(&[100, 110, 120], false);
        log.batch(&[200], false);
        log.batch(&[300, 310], false);
        let times = index(IndexLimits::default());
        assert_eq!(find(&times, &log, 0).await, Some((0, 100)), "before everything");
        assert_eq!(find(&times, &log, 100).await, Some((0, 100)), "exact");
        assert_eq!(find(&times, &log, 105).await, Some((1, 110)), "inside a batch");
        assert_eq!(find(&times, &log, 150).await, Some((3, 200)), "between batches");
        assert_eq!(find(&times, &log, 310).await, Some((5, 310)));
        assert_eq!(find(&times, &log, 311).await, None, "after everything");
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, Some((5, 310)));
        // Extended on the next lookup.
        log.batch(&[400], false);
        assert_eq!(find(&times, &log, 311).await, Some((6, 400)));
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, Some((6, 400)));
    }

    #[tokio::test]
    async fn timestamps_need_not_grow() {
        let log = Log::default();
        log.batch(&[50], false);
        log.batch(&[300, 20], false);
        log.push(Bytes::from_static(b"from the CLI"));
        log.batch(&[200], false);
        log.batch(&[250, 400, 400], false);
        log.batch(&[100], false);
        let timestamps = [50, 300, 20, -1, 200, 250, 400, 400, 100];
        let times = index(IndexLimits::default());
        for t in [0, 49, 50, 51, 199, 200, 220, 250, 299, 300, 301, 399, 400, 401] {
            assert_eq!(find(&times, &log, t).await, rule(&timestamps, t), "at {t}");
        }
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, Some((6, 400)), "the first of the largest");
    }

    #[tokio::test]
    async fn records_without_timestamps_answer_no_time() {
        let log = Log::default();
        let times = index(IndexLimits::default());
        assert_eq!(find(&times, &log, 0).await, None, "an empty partition");
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, None);
        log.push(Bytes::from_static(b"one"));
        log.push(Bytes::from_static(&[0xff, b'k', 0, 0, 0, 1]));
        assert_eq!(find(&times, &log, 0).await, None);
        // As Kafka: the largest timestamp is none (-1), and the first record holds it.
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, Some((0, -1)));
    }

    #[tokio::test]
    async fn a_full_index_coarsens_and_still_answers_exactly() {
        let log = Log::default();
        let mut timestamps = Vec::new();
        // Mostly growing, with dips: pseudo-random, deterministic.
        let mut x: i64 = 12345;
        for i in 0..200i64 {
            x = (x * 1103515245 + 12345) % (1 << 31);
            let n = 1 + (x % 3) as usize;
            let batch: Vec<i64> = (0..n as i64).map(|j| i * 10 + ((x >> (4 + j)) % 40) - 20).collect();
            log.batch(&batch, i % 5 == 0);
            timestamps.extend(batch);
        }
        let limits = IndexLimits { entries: 8, partitions: 4 };
        let times = index(limits);
        for t in (0..2100).step_by(7) {
            assert_eq!(find(&times, &log, t).await, rule(&timestamps, t), "at {t}");
        }
        let p = log.partition();
        let held = times.index(&p);
        let held = held.lock().await;
        assert!(held.entries.len() <= 8, "{} entries", held.entries.len());
        assert!(held.stride >= 32, "stride {}", held.stride);
        assert!(held.entries.windows(2).all(|w| w[0].offset < w[1].offset && w[0].running <= w[1].running));
    }

    #[tokio::test]
    async fn compressed_batches_are_read_inside() {
        let log = Log::default();
        log.batch(&[10, 20], true);
        log.batch(&[40, 30, 50], true);
        let times = index(IndexLimits::default());
        assert_eq!(find(&times, &log, 15).await, Some((1, 20)));
        assert_eq!(find(&times, &log, 35).await, Some((2, 40)));
        assert_eq!(find(&times, &log, 45).await, Some((4, 50)));
        assert_eq!(find(&times, &log, MAX_TIMESTAMP).await, Some((4, 50)));
    }

    #[tokio::test]
    async fn unreadable_records_are_a_corrupt_message() {
        let log = Log::default();
        log.batch(&[10], false);
        // A batch whose CRC holds over bytes that are no gzip: only the CLI could store it.
        let plain = encode(&[record(0, None, Some("v"), &[])], Compression::None);
        log.push(Bytes::from(compressed(&plain, 1, |b| b.iter().map(|x| x ^ 0x5a).collect())));
        let times = index(IndexLimits::default());
        let core = Core::new(log.clone());
        assert_eq!(find(&times, &log, 5).await, Some((0, 10)), "found before it");
        let got = times.lookup(&core, &log.partition(), 20).await;
        assert_eq!(got, Err(E::CorruptMessage.code()));
        // Bytes of every kind never panic.
        for junk in [&b""[..], &[0; 61], &[0xff; 100]] {
            let _ = first_at_least(junk, 0, 3, 0);
        }
    }

    #[tokio::test]
    async fn the_least_recently_used_partition_goes_first() {
        let log = Log::default();
        log.batch(&[10], false);
        let times = index(IndexLimits { entries: 8, partitions: 2 });
        let core = Core::new(log.clone());
        let at = |partition| Partition { partition, ..log.partition() };
        for p in [0, 1, 0, 2] {
            assert_eq!(times.lookup(&core, &at(p), 0).await.unwrap().map(|f| f.offset), Some(0));
        }
        let shared = times.shared.lock().unwrap();
        let mut held: Vec<u32> = shared.partitions.keys().map(|(_, p)| *p).collect();
        held.sort();
        assert_eq!(held, vec![0, 2]);
    }
}
