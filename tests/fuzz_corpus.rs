//! Runs every cargo-fuzz target body over its checked-in corpus (`fuzz/corpus/<target>/`),
//! so a plain `cargo test` exercises the fuzz targets without nightly or cargo-fuzz.
//!
//! The hand-made seeds are written by `write_seed_corpus` (ignored; run it with
//! `cargo test --test fuzz_corpus -- --ignored write_seed_corpus` after a format change).
//! Crashes found by fuzzing are added next to them once fixed, named `crash-*`.
//!
//! The binary's allocator reports every allocation to `broker_testkit::alloc_probe`, so
//! the bodies that check how much a decoder allocates (`cluster_objects`) can.

use broker_core::cluster::catalog::Catalog;
use broker_core::cluster::entry::{self, Entry, EntryKind, EntryWriter};
use broker_core::cluster::{segment, snapshot, topic_object};
use broker_core::effect::AppendRecord;
use broker_core::{
    encode_compacted, encode_header, encode_log_header, encode_records, CommittedOffset, GroupOffsets, JournalRecord,
    LogId, MetaState, PendingDeletion, ProduceRecord, ProducerBatch, ProducerState, SequencedBatch, Snapshot, Time,
    TopicId, TopicMeta, TopicSettings, FRAME_HEADER_LEN,
};
use broker_testkit::commands::topic_meta;
use broker_testkit::fuzzing::cluster_objects::{run_cluster_objects, Objects, ObjectsInput};
use broker_testkit::fuzzing::{
    describe_core_commands, fuzz_cluster_objects, fuzz_core_commands, fuzz_journal_decode, fuzz_log_decode,
    run_core_commands, run_corpus,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};

/// The system allocator, telling `broker_testkit::alloc_probe` the size of each
/// allocation before it serves it.
struct Reporting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged;
// `record` neither allocates nor panics.
unsafe impl GlobalAlloc for Reporting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        broker_testkit::alloc_probe::record(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        broker_testkit::alloc_probe::record(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        broker_testkit::alloc_probe::record(new_size);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Reporting = Reporting;

/// A fuzz target's body.
type Body = fn(&[u8]);

/// Every target with a corpus in this crate, and its body. The simulator's `sim_seed`
/// target runs over its corpus in broker-sim's own tests.
const TARGETS: &[(&str, Body)] = &[
    ("journal_decode", fuzz_journal_decode),
    ("log_decode", fuzz_log_decode),
    ("core_commands", fuzz_core_commands),
    ("cluster_objects", fuzz_cluster_objects),
];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join("corpus").join(target)
}

#[test]
fn every_target_passes_its_corpus() {
    for &(target, body) in TARGETS {
        run_corpus(target, body, 3);
    }
}

// ----------------------------------------------------------------------------------
// Seed generation
// ----------------------------------------------------------------------------------

fn journal(epoch: u64, records: &[JournalRecord]) -> Vec<u8> {
    let mut out = encode_header(epoch);
    for r in records {
        r.encode(epoch, &mut out);
    }
    out
}

fn journal_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let history = vec![
        JournalRecord::TopicCreated(topic_meta(0, "orders", 3, 0)),
        JournalRecord::TopicCreated(topic_meta(1, "audit", 1, 500)),
        JournalRecord::TopicDeleted { id: TopicId(0), remove_after: Time(2_500) },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 1 },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 0 },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 2 },
        JournalRecord::DeletionCompleted { id: TopicId(0) },
        JournalRecord::OffsetsCommitted {
            group: "billing".into(),
            topic: TopicId(1),
            offsets: vec![CommittedOffset { partition: 0, offset: 0, metadata: String::new() }],
        },
        JournalRecord::GroupDeleted { group: "billing".into() },
        JournalRecord::ProducerIdAllocated { id: 0 },
        JournalRecord::ProducerAppended {
            log: LogId { topic: TopicId(1), partition: 0 },
            batch: ProducerBatch { producer_id: 0, epoch: 0, first_sequence: 0 },
            records: 1,
            first_offset: 0,
        },
    ];
    let snapshot = Snapshot {
        next_topic_id: 9,
        offset_floor: 40,
        live: vec![
            TopicMeta { offset_base: 30, ..topic_meta(3, "orders", 2, 0) },
            TopicMeta { offset_base: 40, ..topic_meta(7, "audit", 1, 5) },
        ],
        deleting: vec![PendingDeletion {
            topic: topic_meta(5, "orders", 4, 0),
            remove_after: Time::ZERO,
            removed: vec![0, 3],
        }],
        ends: vec![(LogId { topic: TopicId(3), partition: 1 }, 42)],
        groups: vec![GroupOffsets {
            group: "billing".into(),
            topic: TopicId(3),
            offsets: vec![CommittedOffset { partition: 1, offset: 41, metadata: "m".into() }],
        }],
        next_producer_id: 3,
        producers: vec![ProducerState {
            log: LogId { topic: TopicId(3), partition: 1 },
            producer_id: 2,
            epoch: 1,
            batches: vec![SequencedBatch { first_sequence: 4, last_sequence: 5, first_offset: 40 }],
        }],
    };
    let mut torn = journal(1, &history);
    torn.truncate(torn.len() - 5);
    let mut compacted_then_appended = encode_compacted(2, MetaState::replay(&history).snapshot());
    JournalRecord::TopicCreated(topic_meta(2, "c", 1, 0)).encode(2, &mut compacted_then_appended);
    // A topic with the largest id: creating another one once overflowed the next id.
    let largest_id = journal(3, &[JournalRecord::TopicCreated(topic_meta(u64::MAX, "last", 1, 0))]);
    // Rot in copy A of the second commit: decoded from copy B.
    let mut one_copy_rotted = journal(1, &history);
    let second = journal(1, &history[..1]).len();
    one_copy_rotted[second + 12] ^= 0x40;
    vec![
        ("header-only", encode_header(0)),
        ("one-copy-rotted", one_copy_rotted),
        ("largest-topic-id", largest_id),
        ("history", journal(1, &history)),
        ("torn-tail", torn),
        ("snapshot", encode_compacted(4, snapshot)),
        ("compacted-then-appended", compacted_then_appended),
    ]
}

fn log_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let log = LogId { topic: TopicId(3), partition: 1 };
    let recs: Vec<AppendRecord> = (0..4u64)
        .map(|o| AppendRecord {
            offset: o,
            record: ProduceRecord {
                key: (o % 2 == 0).then(|| format!("k{o}").into_bytes()),
                value: vec![o as u8; 3].into(),
            },
        })
        .collect();
    // Two appends: two batches of two records.
    let mut full = encode_log_header(log);
    full.extend(encode_records(log, &recs[..2]));
    let first_batch_end = full.len();
    full.extend(encode_records(log, &recs[2..]));
    let mut torn = full.clone();
    torn.truncate(torn.len() - 4);
    let mut rotten = full.clone();
    rotten[first_batch_end - 3] ^= 0x20; // inside the first batch: a hole before the second
                                         // A valid record after damage that claims the last possible offset (once a panic).
    let mut jump = encode_log_header(log);
    jump.extend(encode_records(log, &recs[..1]));
    jump.extend([0xee; 3]);
    jump.extend(encode_records(log, &[AppendRecord { offset: u64::MAX, record: recs[1].record.clone() }]));
    vec![
        ("header-only", encode_log_header(log)),
        ("four-records", full),
        ("offset-jump-to-max", jump),
        ("torn-tail", torn),
        ("bit-rot", rotten),
        ("short-header", encode_log_header(log)[..7].to_vec()),
    ]
}

/// Writes the bytes that `broker_testkit::fuzzing::fuzz_core_commands` decodes into steps.
/// Every choice is one byte (`value % choices`), times and ids two.
#[derive(Default)]
struct Steps(Vec<u8>);

impl Steps {
    /// Config: compaction threshold index (3, 6, 20, 1000), ratio - 1, concurrency - 1.
    fn config(compaction: u8, ratio: u8, concurrency: u8) -> Steps {
        Steps(vec![compaction, ratio - 1, concurrency - 1])
    }
    fn name(&mut self, name: &str) {
        self.0.push(match name {
            "a" => 3,
            "b" => 4,
            "c" => 5,
            "." => 1, // then a choice among "", ".", "..", ...
            _ => 2,   // 250 'x': one too many
        });
        if name == "." {
            self.0.push(1);
        }
        if name != "a" && name != "b" && name != "c" && name != "." {
            self.0.push(1);
        }
    }
    /// partitions: index into [1, 1, 2, 3, 4, 0, 5]; grace: index into [0, 0, 0, 5, 100, 500, 501].
    fn create(&mut self, name: &str, partitions_idx: u8, grace_idx: u8) -> &mut Self {
        self.0.extend([0, 0]);
        self.name(name);
        self.0.extend([partitions_idx, grace_idx]);
        self
    }
    fn delete(&mut self, name: &str) -> &mut Self {
        self.0.extend([0, 2]);
        self.name(name);
        self
    }
    /// Records: (key: 0 none, 2 "key-3", 3 "k1"; value bytes up to 6).
    fn produce(&mut self, name: &str, records: &[(u8, &[u8])]) -> &mut Self {
        let count_idx = match records.len() {
            1 => 0,
            2 => 2,
            3 => 3,
            _ => panic!("1..=3 records"),
        };
        self.0.extend([0, 4, count_idx]);
        for (key, value) in records {
            self.0.extend([*key, 1, value.len() as u8]);
            self.0.extend_from_slice(value);
        }
        self.name(name);
        self.0.push(0); // the keys choose the partitions
        self
    }
    /// A fetch with no byte bound of its own (the broker's).
    fn fetch(&mut self, name: &str, partition: u8, offset: u8, max: u8) -> &mut Self {
        self.0.extend([0, 8]);
        self.name(name);
        self.0.extend([partition, offset, max, 2]);
        self
    }
    /// A fetch bounded to `max_bytes` bytes of keys and values.
    fn fetch_bytes(&mut self, name: &str, partition: u8, offset: u8, max: u8, max_bytes: u8) -> &mut Self {
        self.0.extend([0, 8]);
        self.name(name);
        self.0.extend([partition, offset, max, 0, max_bytes]);
        self
    }
    fn list(&mut self) -> &mut Self {
        self.0.extend([0, 10]);
        self
    }
    /// A group: "g", "h" or the empty id.
    fn group(&mut self, group: &str) {
        self.0.push(match group {
            "g" => 4,
            "h" => 3,
            "" => 0,
            _ => panic!("g, h or the empty id"),
        });
    }
    /// A commit of `group` in `name` naming no incarnation, no metadata, 1 to 3 positions
    /// (partition, offset below 15).
    fn commit(&mut self, group: &str, name: &str, positions: &[(u8, u8)]) -> &mut Self {
        let count_idx = match positions.len() {
            1 => 0,
            2 => 2,
            3 => 3,
            _ => panic!("1..=3 positions"),
        };
        self.0.extend([0, 12]);
        self.group(group);
        self.name(name);
        self.0.extend([1, count_idx]);
        for (partition, offset) in positions {
            self.0.extend([*partition, 1, *offset, 2]);
        }
        self
    }
    fn fetch_offsets(&mut self, group: &str, name: &str) -> &mut Self {
        self.0.extend([0, 14]);
        self.group(group);
        self.name(name);
        self
    }
    fn list_groups(&mut self) -> &mut Self {
        self.0.extend([0, 15, 0]);
        self
    }
    fn delete_group(&mut self, group: &str) -> &mut Self {
        self.0.extend([0, 15, 1]);
        self.group(group);
        self
    }
    fn init_producer(&mut self) -> &mut Self {
        self.0.extend([0, 16]);
        self
    }
    /// A batch of the first producer handed out, at epoch 0 or 1, to partition 0 of
    /// `name`: its first sequence `sequence` (as [`Seq`] says), values up to 6 bytes.
    fn idempotent(&mut self, name: &str, epoch: u16, sequence: Seq, values: &[&[u8]]) -> &mut Self {
        let count_idx = match values.len() {
            0 => 4,
            1 => 0,
            2 => 2,
            3 => 3,
            _ => panic!("0..=3 records"),
        };
        let epoch_idx = match epoch {
            0 => 0,
            1 => 3,
            _ => panic!("epoch 0 or 1"),
        };
        // Not a retry; producer: the first id handed out.
        self.0.extend([0, 17, 1, 3, epoch_idx]);
        match sequence {
            Seq::Next => self.0.push(0),
            Seq::Gap(n) => self.0.extend([6, n - 1]),
            Seq::Last => self.0.push(7),
        }
        self.name(name);
        self.0.extend([0, count_idx]);
        for value in values {
            self.0.extend([1, value.len() as u8]);
            self.0.extend_from_slice(value);
        }
        self
    }
    /// The `n`-th latest idempotent batch sent (0: the last), sent again.
    fn retry(&mut self, n: u8) -> &mut Self {
        self.0.extend([0, 17, 0, n]);
        self
    }
    fn complete_oldest(&mut self) -> &mut Self {
        self.0.extend([32, 0]);
        self
    }
    fn complete_all(&mut self) -> &mut Self {
        self.0.push(55);
        self
    }
    /// Fails the oldest pending operation with an I/O error, without running it.
    fn fail_oldest(&mut self) -> &mut Self {
        self.0.extend([63, 0, 0, 0]);
        self
    }
    /// Fails the oldest pending operation, without running it, as corrupt at the last
    /// offset of the range (a hostile runtime's report).
    fn fail_oldest_corrupt_at_last_offset(&mut self) -> &mut Self {
        // Tag, pick (oldest), empty file name, kind (corrupt), byte 8, an offset, the top one.
        self.0.extend([63, 0, 0, 5, 8, 0, 10]);
        self
    }
    /// Runs the newest runnable operation, then reports an I/O error.
    fn run_newest_then_fail(&mut self) -> &mut Self {
        self.0.extend([67, 2, 0, 0]);
        self
    }
    fn fire_earliest_timer(&mut self) -> &mut Self {
        self.0.extend([74, 0]);
        self
    }
    fn crash(&mut self) -> &mut Self {
        self.0.push(87);
        self
    }
    fn settle(&mut self) -> &mut Self {
        self.0.push(93);
        self
    }
}

/// Where an idempotent batch's sequence begins, from where the producer's last batch
/// there (at that epoch) ended.
enum Seq {
    Next,
    Gap(u8),
    Last,
}

fn core_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut produce_fetch = Steps::config(3, 4, 1);
    produce_fetch
        .complete_all()
        .create("a", 2, 0)
        .complete_all()
        .produce("a", &[(3, b"v1"), (0, b"v2"), (2, b"v3")])
        .complete_all()
        .fetch("a", 0, 0, 5)
        .complete_all()
        .list()
        .settle();

    let mut delete_crash = Steps::config(3, 4, 2);
    delete_crash
        .complete_all()
        .create("a", 3, 3)
        .create("b", 0, 0)
        .complete_all()
        .produce("a", &[(0, b"x"), (0, b"y")])
        .complete_all()
        .delete("a")
        .complete_oldest()
        .complete_oldest()
        .crash()
        .complete_all()
        .fire_earliest_timer()
        .complete_all()
        .create("a", 0, 0)
        .complete_all()
        .settle();

    let mut recreate = Steps::config(0, 2, 1);
    recreate
        .complete_all()
        .create("a", 2, 0)
        .delete("a")
        .create("a", 0, 0)
        .complete_all()
        .create("c", 4, 0)
        .delete("c")
        .complete_all()
        .delete("a")
        .delete("a")
        .complete_all()
        .crash()
        .settle();

    let mut faults = Steps::config(1, 1, 3);
    faults
        .complete_all()
        .create("a", 0, 0)
        .complete_oldest()
        .complete_oldest()
        .fail_oldest()
        .fire_earliest_timer()
        .complete_all()
        .produce("a", &[(0, b"z")])
        .run_newest_then_fail()
        .complete_all()
        .delete("a")
        .fail_oldest()
        .complete_all()
        .settle();

    let mut invalid = Steps::config(3, 1, 1);
    invalid
        .complete_all()
        .create(".", 0, 0)
        .create("x", 0, 0)
        .create("b", 5, 0)
        .create("b", 6, 0)
        .create("b", 0, 6)
        .produce("c", &[(0, b"")])
        .fetch("c", 0, 0, 0)
        .create("b", 0, 0)
        .complete_all()
        .fetch("b", 4, 0, 1)
        .fetch("b", 0, 9, 1)
        .fetch("b", 0, 0, 0)
        .settle();

    // Three records of 2, 3 and 4 bytes: a bound of 6 bytes returns the first two, a bound
    // of 0 still the first (a reader always makes progress).
    let mut bounded = Steps::config(3, 4, 1);
    bounded
        .complete_all()
        .create("a", 0, 0)
        .complete_all()
        .produce("a", &[(0, b"ab"), (0, b"cde"), (0, b"fghi")])
        .complete_all()
        .fetch_bytes("a", 0, 0, 5, 6)
        .complete_all()
        .fetch_bytes("a", 0, 0, 5, 0)
        .complete_all()
        .settle();

    let mut corrupt_read = Steps::config(3, 4, 1);
    corrupt_read
        .complete_all()
        .create("a", 0, 0)
        .complete_all()
        .produce("a", &[(0, b"v")])
        .complete_all()
        .fetch("a", 0, 0, 5)
        .fail_oldest_corrupt_at_last_offset()
        .settle();

    // A group commits in both partitions, reads them back before and after a crash; a
    // commit past the high watermark and one of an empty group are refused; the topic
    // is deleted and created again, and the group holds nothing in the new incarnation,
    // nor anywhere (its deletion finds no group).
    let mut groups = Steps::config(3, 4, 1);
    groups
        .complete_all()
        .create("a", 2, 0)
        .complete_all()
        .produce("a", &[(0, b"x"), (0, b"y"), (0, b"z")])
        .complete_all()
        .commit("g", "a", &[(0, 0), (1, 0)])
        .complete_all()
        .fetch_offsets("g", "a")
        .complete_all()
        .crash()
        .complete_all()
        .fetch_offsets("g", "a")
        .complete_all()
        .commit("g", "a", &[(0, 9)])
        .commit("", "a", &[(0, 0)])
        .list_groups()
        .complete_all()
        .delete("a")
        .complete_all()
        .create("a", 0, 0)
        .complete_all()
        .fetch_offsets("g", "a")
        .delete_group("g")
        .complete_all()
        .settle();

    // A producer's first batch, a retry of it while it is in flight, the next batch
    // pipelined behind them; the first retried once all are answered, the second after
    // a crash (both answered with their first positions); a gap refused; a new epoch
    // from 0 taken, after which the old one is fenced; a batch of no record refused.
    let mut producer = Steps::config(3, 4, 1);
    producer
        .complete_all()
        .create("a", 0, 0)
        .complete_all()
        .init_producer()
        .complete_all()
        .idempotent("a", 0, Seq::Next, &[b"x", b"y"])
        .retry(0)
        .idempotent("a", 0, Seq::Next, &[b"z"])
        .complete_all()
        .retry(1)
        .complete_all()
        .crash()
        .complete_all()
        .retry(1)
        .complete_all()
        .idempotent("a", 0, Seq::Gap(2), &[b"w"])
        .idempotent("a", 1, Seq::Next, &[b"v"])
        .complete_all()
        .idempotent("a", 0, Seq::Next, &[b"u"])
        .idempotent("a", 1, Seq::Last, &[])
        .complete_all()
        .settle();

    vec![
        ("produce-fetch", produce_fetch.0),
        ("delete-crash-recover", delete_crash.0),
        ("recreate-while-deleting", recreate.0),
        ("faults", faults.0),
        ("invalid-commands", invalid.0),
        ("fetch-bounded-by-bytes", bounded.0),
        ("corrupt-read-at-last-offset", corrupt_read.0),
        ("group-offsets", groups.0),
        ("idempotent-producer", producer.0),
    ]
}

/// Bytes of a cluster object before its frame's payload: magic, format version, frame header.
const OBJECT_PAYLOAD_START: usize = 4 + 2 + FRAME_HEADER_LEN;

/// The entry, segment and snapshot codecs' kind bytes for the frames of the seeds that
/// are payloads (`src/cluster/entry.rs` etc.).
const KIND_CREATE: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_REMOVED: u8 = 3;
const KIND_SEGMENT: u8 = 1;
const KIND_SNAPSHOT: u8 = 1;

fn writer(node: u32, nonce: u64) -> EntryWriter {
    EntryWriter { node, boot: 0x0b00_7000 + u64::from(node), nonce }
}

/// Live, being deleted and removed incarnations, a name used again, and an entry the
/// catalog ignored: `gone` removed as 2, `orders` deleted as 1 (tombstone 5) and live
/// again as 6, `pending` live as 7 (created again at 8: ignored); position 8.
fn seed_catalog() -> Catalog {
    let create = |name: &str, partitions: u32, grace: u64| EntryKind::Create {
        name: name.into(),
        partitions,
        settings: TopicSettings { deletion_grace_ms: grace },
    };
    let mut c = Catalog::default();
    for (i, kind) in [
        create("orders", 12, 5_000),
        create("gone", 1, 0),
        EntryKind::Delete { name: "gone".into(), topic: TopicId(2) },
        EntryKind::Removed { topic: TopicId(2) },
        EntryKind::Delete { name: "orders".into(), topic: TopicId(1) },
        create("orders", 3, 0),
        create("pending", 4, 60_000),
        create("pending", 2, 1),
    ]
    .into_iter()
    .enumerate()
    {
        c.fold(&Entry { writer: writer(i as u32 % 3, i as u64), kind });
    }
    assert_eq!(c.live("orders").map(|(id, _)| id), Some(TopicId(6)));
    assert_eq!(c.deleting().map(|(id, _)| id).collect::<Vec<_>>(), [TopicId(1)]);
    c
}

fn cluster_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let input = |objects, frame_kind, seq, partition, base, bytes: Vec<u8>| {
        ObjectsInput { objects, frame_kind, seq, partition, base, bytes }.to_bytes()
    };
    let payload = |object: &[u8]| object[OBJECT_PAYLOAD_START..].to_vec();
    let grace = TopicSettings { deletion_grace_ms: 500 };
    let entries = [
        (
            "entry-create",
            "framed-entry-create",
            KIND_CREATE,
            EntryKind::Create { name: "orders".into(), partitions: 3, settings: grace },
        ),
        (
            "entry-delete",
            "framed-entry-delete",
            KIND_DELETE,
            EntryKind::Delete { name: "orders".into(), topic: TopicId(1) },
        ),
        ("entry-removed", "framed-entry-removed", KIND_REMOVED, EntryKind::Removed { topic: TopicId(2) }),
    ];
    let mut seeds = Vec::new();
    for (name, framed, kind, entry_kind) in entries {
        let seq = 7;
        let object = entry::encode(seq, &Entry { writer: writer(1, 42), kind: entry_kind });
        seeds.push((name, input(Objects::Entry, None, seq, 0, 0, object.clone())));
        seeds.push((framed, input(Objects::Entry, Some(kind), seq, 0, 0, payload(&object))));
    }
    let records = vec![
        ProduceRecord { key: Some(b"k1".to_vec()), value: b"v1".to_vec().into() },
        ProduceRecord { key: None, value: vec![].into() },
        ProduceRecord { key: Some(vec![]), value: vec![0xab; 40].into() },
    ];
    let (topic, partition, base) = (5, 1, 40);
    let segment = segment::encode(TopicId(topic), partition, base, writer(2, 9), &records);
    seeds.push(("segment", input(Objects::Segment, None, topic, partition, base, segment.clone())));
    seeds.push((
        "framed-segment",
        input(Objects::Segment, Some(KIND_SEGMENT), topic, partition, base, payload(&segment)),
    ));
    // A record count far past what the payload holds: refused before allocating by it.
    let mut past = payload(&segment);
    past[20..24].copy_from_slice(&1_000_000u32.to_le_bytes());
    seeds.push((
        "framed-segment-count-past-its-bytes",
        input(Objects::Segment, Some(KIND_SEGMENT), topic, partition, base, past),
    ));
    // The segment's payload framed as each object: only the segment parses.
    seeds.push(("framed-each", input(Objects::Each, Some(1), topic, partition, base, payload(&segment))));
    let catalog = seed_catalog();
    let object = snapshot::encode(&catalog);
    seeds.push(("snapshot", input(Objects::Snapshot, None, catalog.position(), 0, 0, object.clone())));
    seeds.push((
        "framed-snapshot",
        input(Objects::Snapshot, Some(KIND_SNAPSHOT), catalog.position(), 0, 0, payload(&object)),
    ));
    seeds.push(("empty-snapshot", input(Objects::Snapshot, None, 0, 0, 0, snapshot::encode(&Catalog::default()))));
    // A topic object holding two partitions of four: decoded as each object, only it parses.
    let n = 12;
    let parts: [(u32, &[ProduceRecord]); 2] = [(0, &records[..2]), (2, &records[2..])];
    let object = topic_object::encode(TopicId(topic), n, writer(3, 4), &[7, 0, 30, 1], &parts).expect("encodes");
    seeds.push(("each-topic-object", input(Objects::Each, None, topic, 0, n, object.clone())));
    // Framed: the header's length, its payload, then the records' payload.
    let (header, records_at) = topic_object::decode_header(TopicId(topic), n, &object).expect("header");
    let mut framed = ((records_at - OBJECT_PAYLOAD_START) as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(&object[OBJECT_PAYLOAD_START..records_at]);
    framed.extend_from_slice(&object[records_at + FRAME_HEADER_LEN..]);
    assert_eq!(header.ends, vec![9, 0, 31, 1], "the seed's ends");
    seeds.push(("framed-each-topic-object", input(Objects::Each, Some(1), topic, 0, n, framed)));
    seeds
}

/// Prints the steps of a `core_commands` input: `CORE_INPUT=path cargo test --test
/// fuzz_corpus -- --ignored --nocapture describe_core_input`.
#[test]
#[ignore = "a tool: reads the file named by CORE_INPUT"]
fn describe_core_input() {
    let path = std::env::var("CORE_INPUT").expect("CORE_INPUT names a core_commands input");
    let data = std::fs::read(&path).expect("read input");
    for line in describe_core_commands(&data) {
        println!("{line}");
    }
    fuzz_core_commands(&data);
}

/// Regenerates the hand-made seeds (`seed-*`) of every corpus.
#[test]
#[ignore = "writes into fuzz/corpus; run by hand after a format change"]
fn write_seed_corpus() {
    for (target, seeds) in [
        ("journal_decode", journal_seeds()),
        ("log_decode", log_seeds()),
        ("core_commands", core_seeds()),
        ("cluster_objects", cluster_seeds()),
    ] {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
        }
    }
}

/// The seeds written by hand stay valid inputs of the current build.
#[test]
fn seeds_still_decode_as_intended() {
    for (_, img) in journal_seeds() {
        fuzz_journal_decode(&img);
    }
    for (_, img) in log_seeds() {
        fuzz_log_decode(&img);
    }
    for (name, steps) in core_seeds() {
        let run = run_core_commands(&steps);
        assert!(run.checked, "{name}: every check ran");
        let expect = match name {
            "produce-fetch" => (1, 0, 3, 0),
            "delete-crash-recover" => (3, 1, 2, 0),
            "recreate-while-deleting" => (3, 3, 0, 0),
            // The append is run then failed, and so is the tombstone's journal write.
            "faults" => (1, 0, 0, 2),
            "invalid-commands" => (1, 0, 0, 0),
            "fetch-bounded-by-bytes" => (1, 0, 3, 0),
            "corrupt-read-at-last-offset" => (1, 0, 1, 0),
            "group-offsets" => (2, 1, 3, 0),
            "idempotent-producer" => (1, 0, 4, 0),
            other => panic!("no expectation for seed {other}"),
        };
        assert_eq!((run.created, run.deleted, run.acked_records, run.halts.len()), expect, "{name}: {run:#?}");
        // One commit acknowledged, its two positions read back twice, none in the new incarnation.
        let groups = if name == "group-offsets" { (1, 4) } else { (0, 0) };
        assert_eq!((run.commits_acked, run.positions_read), groups, "{name}: {run:#?}");
        // One producer id; three batches acknowledged, their retries answered with the
        // first positions three times (once after the crash).
        let producers = if name == "idempotent-producer" { (1, 3, 3) } else { (0, 0, 0) };
        assert_eq!((run.producer_ids, run.idempotent_acked, run.duplicates), producers, "{name}: {run:#?}");
    }
    for (name, input) in cluster_seeds() {
        let run = run_cluster_objects(&input);
        let decoded = |d: Option<bool>| d.map_or("-", |ok| if ok { "ok" } else { "error" });
        let got = [
            decoded(run.entry.as_ref().map(Result::is_ok)),
            decoded(run.segment.as_ref().map(Result::is_ok)),
            decoded(run.snapshot.as_ref().map(Result::is_ok)),
            decoded(run.topic_object.as_ref().map(Result::is_ok)),
        ];
        let expect = match name {
            n if n.contains("topic-object") => ["error", "error", "error", "ok"],
            n if n.contains("entry") => ["ok", "-", "-", "-"],
            "segment" | "framed-segment" => ["-", "ok", "-", "-"],
            "framed-segment-count-past-its-bytes" => ["-", "error", "-", "-"],
            n if n.contains("snapshot") => ["-", "-", "ok", "-"],
            "framed-each" => ["error", "ok", "error", "error"],
            other => panic!("no expectation for seed {other}"),
        };
        assert_eq!(got, expect, "{name}: {run:#?}");
    }
}
