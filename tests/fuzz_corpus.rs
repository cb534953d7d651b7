//! Runs every cargo-fuzz target body over its checked-in corpus (`fuzz/corpus/<target>/`),
//! so a plain `cargo test` exercises the fuzz targets without nightly or cargo-fuzz.
//!
//! The hand-made seeds are written by `write_seed_corpus` (ignored; run it with
//! `cargo test --test fuzz_corpus -- --ignored write_seed_corpus` after a format change).
//! Crashes found by fuzzing are added next to them once fixed, named `crash-*`.

use broker_core::command::{ProduceRecord, TopicSettings};
use broker_core::effect::AppendRecord;
use broker_core::ids::{LogId, TopicId};
use broker_core::journal::{
    encode_compacted, encode_header, JournalRecord, MetaState, PendingDeletion, Snapshot, TopicMeta,
};
use broker_core::logcodec::{encode_log_header, encode_records};
use broker_core::Time;
use broker_testkit::fuzzing::{
    describe_core_commands, fuzz_core_commands, fuzz_journal_decode, fuzz_log_decode, run_core_commands,
};
use std::path::{Path, PathBuf};

/// A fuzz target's body.
type Body = fn(&[u8]);

/// Every target with a corpus in this crate, and its body. The simulator's `sim_seed`
/// target runs over its corpus in broker-sim's own tests.
const TARGETS: &[(&str, Body)] =
    &[("journal_decode", fuzz_journal_decode), ("log_decode", fuzz_log_decode), ("core_commands", fuzz_core_commands)];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join("corpus").join(target)
}

#[test]
fn every_target_passes_its_corpus() {
    for (target, body) in TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "corpus {} holds only {} seeds", dir.display(), files.len());
        for file in files {
            let data = std::fs::read(&file).expect("read seed");
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "target {target} fails on {}", file.display());
        }
    }
}

// ----------------------------------------------------------------------------------
// Seed generation
// ----------------------------------------------------------------------------------

fn meta(id: u64, name: &str, partitions: u32, grace: u64) -> TopicMeta {
    TopicMeta {
        id: TopicId(id),
        name: name.into(),
        partitions,
        settings: TopicSettings { deletion_grace_ms: grace },
        offset_base: 0,
    }
}

fn journal(epoch: u64, records: &[JournalRecord]) -> Vec<u8> {
    let mut out = encode_header(epoch);
    for r in records {
        r.encode(epoch, &mut out);
    }
    out
}

fn journal_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let history = vec![
        JournalRecord::TopicCreated(meta(0, "orders", 3, 0)),
        JournalRecord::TopicCreated(meta(1, "audit", 1, 500)),
        JournalRecord::TopicDeleted { id: TopicId(0), remove_after: Time(2_500) },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 1 },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 0 },
        JournalRecord::PartitionRemoved { id: TopicId(0), partition: 2 },
        JournalRecord::DeletionCompleted { id: TopicId(0) },
    ];
    let snapshot = Snapshot {
        next_topic_id: 9,
        offset_floor: 40,
        live: vec![
            TopicMeta { offset_base: 30, ..meta(3, "orders", 2, 0) },
            TopicMeta { offset_base: 40, ..meta(7, "audit", 1, 5) },
        ],
        deleting: vec![PendingDeletion {
            topic: meta(5, "orders", 4, 0),
            remove_after: Time::ZERO,
            removed: vec![0, 3],
        }],
        ends: vec![(LogId { topic: TopicId(3), partition: 1 }, 42)],
    };
    let mut torn = journal(1, &history);
    torn.truncate(torn.len() - 5);
    let mut compacted_then_appended = encode_compacted(2, MetaState::replay(&history).snapshot());
    JournalRecord::TopicCreated(meta(2, "c", 1, 0)).encode(2, &mut compacted_then_appended);
    // A topic with the largest id: creating another one once overflowed the next id.
    let largest_id = journal(3, &[JournalRecord::TopicCreated(meta(u64::MAX, "last", 1, 0))]);
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
            record: ProduceRecord { key: (o % 2 == 0).then(|| format!("k{o}").into_bytes()), value: vec![o as u8; 3] },
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

    vec![
        ("produce-fetch", produce_fetch.0),
        ("delete-crash-recover", delete_crash.0),
        ("recreate-while-deleting", recreate.0),
        ("faults", faults.0),
        ("invalid-commands", invalid.0),
        ("fetch-bounded-by-bytes", bounded.0),
        ("corrupt-read-at-last-offset", corrupt_read.0),
    ]
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
    for (target, seeds) in
        [("journal_decode", journal_seeds()), ("log_decode", log_seeds()), ("core_commands", core_seeds())]
    {
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
            other => panic!("no expectation for seed {other}"),
        };
        assert_eq!((run.created, run.deleted, run.acked_records, run.halts.len()), expect, "{name}: {run:#?}");
    }
}
