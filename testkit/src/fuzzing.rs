//! Fuzz-target bodies.
//!
//! Each function takes the bytes a fuzzer produced and panics only when it finds a bug:
//! a decoder that panics, a round trip that does not give back the same bytes, or a
//! broker that breaks one of its invariants. The cargo-fuzz targets in `fuzz/` are
//! one-line wrappers around them, and `tests/fuzz_corpus.rs` runs each over its
//! checked-in corpus under a plain `cargo test`, so CI exercises them without nightly.
//!
//! | cargo-fuzz target | body |
//! |---|---|
//! | `journal_decode` | [`fuzz_journal_decode`] |
//! | `log_decode` | [`fuzz_log_decode`] |
//! | `core_commands` | [`fuzz_core_commands`] |
//! | `cluster_objects` | [`fuzz_cluster_objects`] (in [`cluster_objects`]) |
//!
//! The simulator's target (`sim_seed`) belongs to `broker-sim`, which depends on this
//! crate; it follows the same shape: a plain `pub fn(&[u8])` with a corpus directory.

pub mod cluster_objects;
mod node_fed;
mod objects_input;

pub use cluster_objects::fuzz_cluster_objects;

use crate::hand::Hand;
use crate::ledger::Ledger;
use arbitrary::Unstructured;
use broker_core::broker::Phase;
use broker_core::effect::{AppendRecord, Effect, OpOutput, StorageOp};
use broker_core::executor::Executor;
use broker_core::fs::FileSystem;
use broker_core::{
    damaged_ranges, decode_journal, decode_records, encode_compacted, encode_header, encode_log_header, encode_records,
    open_log, partition_for_key, sequence_after, BrokerError, Command, CommittedOffset, Config, JournalRecord, LogId,
    LogImage, MemFs, MetaState, OpId, ProduceRecord, ProducerBatch, Reply, RequestId, StorageError, StoredRecord,
    TopicId, TopicSettings, JOURNAL_FILE, JOURNAL_FIRST_FRAME, LOG_HEADER_LEN, MAX_SEQUENCE,
};
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------------
// Corpora
// ---------------------------------------------------------------------------------------

/// Runs `body` over every file of the checked-in corpus of cargo-fuzz target `target`
/// (`fuzz/corpus/<target>/` at the repository root), in name order, and fails naming
/// the first file it fails on. The corpus must hold at least `min_seeds` files.
pub fn run_corpus(target: &str, body: fn(&[u8]), min_seeds: usize) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= min_seeds, "corpus {} holds only {} seeds", dir.display(), files.len());
    for file in files {
        let data = std::fs::read(&file).expect("read seed");
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "target {target} fails on {}", file.display());
    }
}

// ---------------------------------------------------------------------------------------
// journal_decode
// ---------------------------------------------------------------------------------------

/// Target `journal_decode`: decodes `data` as a journal image.
///
/// Checks: decoding returns a typed result and never panics; a decoded image re-encodes
/// (header and records) to exactly the bytes before its torn tail; cutting the torn tail
/// off leaves an image that decodes to the same records with no tail; the replayed
/// metadata's snapshot survives a compaction round trip.
pub fn fuzz_journal_decode(data: &[u8]) {
    let Ok(decoded) = decode_journal(data) else { return };
    // Re-encode commit by commit (records of one commit share its position): the image
    // decodes to the same records, with nothing to repair.
    let mut again = encode_header(decoded.epoch);
    assert_eq!(again.len(), JOURNAL_FIRST_FRAME);
    let mut commits: Vec<(u64, Vec<JournalRecord>)> = Vec::new();
    for (position, record) in &decoded.records {
        match commits.last_mut() {
            Some((p, recs)) if p == position => recs.push(record.clone()),
            _ => commits.push((*position, vec![record.clone()])),
        }
    }
    for (_, records) in &commits {
        JournalRecord::encode_batch(records, decoded.epoch, &mut again);
    }
    let redecoded = decode_journal(&again).expect("a re-encoded journal decodes");
    let records = |d: &broker_core::DecodedJournal| d.records.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>();
    assert_eq!(records(&redecoded), records(&decoded), "re-encoding keeps every record");
    assert!(redecoded.repaired.is_empty() && redecoded.torn_tail.is_none());
    let end = match &decoded.torn_tail {
        Some((start, _)) => usize::try_from(*start).expect("torn tail starts inside the image"),
        None => data.len(),
    };
    assert!(end <= data.len());
    if decoded.torn_tail.is_some() {
        let cut = decode_journal(&data[..end]).expect("a journal cut at its torn tail decodes");
        assert_eq!(cut.records, decoded.records);
        assert_eq!(cut.torn_tail, None);
    }

    let state = MetaState::replay(decoded.records.iter().map(|(_, r)| r));
    let snapshot = state.snapshot();
    let replayed = MetaState::replay([&JournalRecord::Snapshot(snapshot.clone())]);
    assert_eq!(replayed.snapshot(), snapshot, "a snapshot replays to itself");
    let compacted = encode_compacted(decoded.epoch.wrapping_add(1), snapshot.clone());
    let back = decode_journal(&compacted).expect("a compacted journal decodes");
    assert_eq!(back.records.len(), 1);
    assert_eq!(back.records[0].1, JournalRecord::Snapshot(snapshot));

    // Recovery from the image (small metadata only: a checksum-valid record may name
    // billions of partitions, and each is allocated).
    let small = state.topics.len() <= 16 && state.topics.values().all(|t| t.meta.partitions <= 8);
    if small && decoded.records.is_empty() {
        // Every journal the broker writes begins with a snapshot written atomically, so
        // one without a single valid record is damage, not a torn write: refused.
        refuses_to_recover(data);
    } else if small {
        recover_from_journal(data, &state);
    }
}

/// A broker started over `journal` halts with a corrupt-journal error and touches nothing.
fn refuses_to_recover(journal: &[u8]) {
    let mut fs = MemFs::new();
    fs.create(JOURNAL_FILE).expect("memfs create");
    fs.write_at(JOURNAL_FILE, 0, journal).expect("memfs write");
    let before = fs.clone();
    let d = broker_core::SyncDriver::start(Config::default(), fs);
    assert!(matches!(d.halted(), Some(broker_core::HaltReason::CorruptJournal { .. })), "{:?}", d.halted());
    assert_eq!(d.fs(), &before, "a refused start changes nothing");
}

/// A broker started over `journal` recovers it: it serves, keeps every live topic,
/// finishes every deletion, creates a topic under a fresh id, and a restart agrees.
fn recover_from_journal(journal: &[u8], state: &MetaState) {
    let mut fs = MemFs::new();
    fs.create(JOURNAL_FILE).expect("memfs create");
    fs.write_at(JOURNAL_FILE, 0, journal).expect("memfs write");
    let mut d = broker_core::SyncDriver::start(Config::default(), fs);
    d.settle(10_000);
    assert_eq!(d.halted(), None, "a decodable journal recovers");
    assert_eq!(d.phase(), Phase::Serving);
    assert!(d.broker().pending_deletions().is_empty(), "deletions finish");
    let live: BTreeSet<TopicId> = d.broker().live_topics().iter().map(|t| t.id).collect();
    for (id, t) in &state.topics {
        if !t.deleting && broker_core::validate_topic_name(&t.meta.name).is_ok() {
            // Several live incarnations may share a name; the newest answers for it.
            let newest = state.topics.values().rev().find(|o| !o.deleting && o.meta.name == t.meta.name);
            if newest.map(|o| o.meta.id) == Some(*id) {
                assert!(live.contains(id), "live topic {id} survives recovery");
            }
        }
    }
    let created = d.request(Command::CreateTopic {
        name: "fuzz-fresh-topic".into(),
        partitions: 1,
        settings: TopicSettings::default(),
    });
    match created {
        Ok(Reply::Created { topic }) => {
            assert!(!state.topics.contains_key(&topic), "a new topic reuses id {topic}");
            assert!(topic.0 >= state.next_topic_id, "a new topic's id {topic} is below the journal's next id");
        }
        Ok(other) => panic!("create answered {other:?}"),
        Err(e) => assert!(
            matches!(e, BrokerError::TopicAlreadyExists { .. } | BrokerError::Unavailable(_)),
            "create failed: {e}"
        ),
    }
    let before = d.broker().live_topics();
    let mut again = broker_core::SyncDriver::start(Config::default(), d.crash());
    again.settle(10_000);
    assert_eq!(again.halted(), None, "the recovered journal recovers again");
    let after = again.broker().live_topics();
    let ids = |v: &[broker_core::TopicDescription]| v.iter().map(|t| (t.id, t.name.clone())).collect::<Vec<_>>();
    assert_eq!(ids(&before), ids(&after), "a restart keeps the live topics");
}

// ---------------------------------------------------------------------------------------
// log_decode
// ---------------------------------------------------------------------------------------

/// Target `log_decode`: decodes `data` as a partition log image.
///
/// The log is the one the image's header names (or log 0/0 if it has no header). Checks:
/// opening returns a typed result and never panics; every indexed record re-encodes to
/// exactly its bytes; without holes, the header and records re-encode to the whole image
/// before its torn tail; another log's id never validates the header; and the storage
/// executor opens the image, serves every indexed record, appends after it and reopens
/// it consistently.
pub fn fuzz_log_decode(data: &[u8]) {
    let log = if data.len() >= LOG_HEADER_LEN {
        LogId {
            topic: TopicId(u64::from_le_bytes(data[6..14].try_into().expect("8 bytes"))),
            partition: u32::from_le_bytes(data[14..18].try_into().expect("4 bytes")),
        }
    } else {
        LogId { topic: TopicId(0), partition: 0 }
    };
    let other = LogId { topic: TopicId(log.topic.0 ^ 1), partition: log.partition };
    match open_log(other, data, 0, None) {
        Ok(img) => assert!(img.needs_header, "another log's header never validates"),
        Err(e) => assert!(matches!(e, StorageError::Corrupt { .. }), "{e:?}"),
    }
    let img = match open_log(log, data, 0, None) {
        Ok(img) => img,
        Err(e) => {
            assert!(matches!(e, StorageError::Corrupt { .. }), "open fails only as corruption: {e:?}");
            return;
        }
    };
    check_log_image(log, data, &img);
    check_log_through_executor(log, data, &img);
}

fn check_log_image(log: LogId, data: &[u8], img: &LogImage) {
    if img.needs_header {
        assert!(data.len() < LOG_HEADER_LEN && img.index.is_empty() && img.next_offset == 0);
        return;
    }
    assert_eq!(&data[..LOG_HEADER_LEN], &encode_log_header(log)[..]);
    assert!(img.valid_len <= data.len() as u64);
    let mut rebuilt = encode_log_header(log);
    let mut records = Vec::new();
    let mut prev_end = LOG_HEADER_LEN as u64;
    for (i, e) in img.index.iter().enumerate() {
        assert!(e.position >= prev_end, "index entries are ordered and disjoint");
        if i > 0 {
            assert!(e.offset > img.index[i - 1].offset, "offsets ascend");
        }
        let end = e.position + u64::from(e.len);
        assert!(end <= img.valid_len);
        let bytes = &data[e.position as usize..end as usize];
        let got = decode_records(log, &broker_core::Bytes::copy_from_slice(bytes), e.position, e.offset, usize::MAX)
            .expect("an indexed batch decodes");
        assert_eq!(got.len() as u64, u64::from(e.count), "a batch holds the records its index entry counts");
        let appended: Vec<AppendRecord> = got.iter().map(append_record).collect();
        let again = encode_records(log, &appended);
        assert_eq!(again, bytes, "re-encoding batch {} gives the same bytes", e.offset);
        rebuilt.extend_from_slice(&again);
        records.extend(got);
        prev_end = end;
    }
    assert_eq!(img.valid_len, prev_end, "the valid length ends at the last whole record");
    assert_eq!(img.next_offset, img.index.last().map_or(0, |e| e.end()));
    for h in &img.holes {
        assert!(h.from <= h.to && h.to <= img.next_offset);
    }
    if img.holes.is_empty() {
        assert_eq!(rebuilt, &data[..img.valid_len as usize], "header and records re-encode to the image");
        if let Some(first) = img.index.first() {
            let all = decode_records(
                log,
                &broker_core::Bytes::copy_from_slice(&data[LOG_HEADER_LEN..img.valid_len as usize]),
                LOG_HEADER_LEN as u64,
                first.offset,
                usize::MAX,
            )
            .expect("a clean run of records decodes");
            assert_eq!(all, records);
        }
    }
}

fn append_record(r: &StoredRecord) -> AppendRecord {
    AppendRecord { offset: r.offset, record: ProduceRecord { key: r.key.clone(), value: r.value.clone() } }
}

fn check_log_through_executor(log: LogId, data: &[u8], img: &LogImage) {
    let mut fs = MemFs::new();
    let name = log.file_name();
    fs.create(&name).expect("memfs create");
    fs.write_at(&name, 0, data).expect("memfs write");
    // The executor scans a log a chunk at a time: with tiny chunks too, it must agree
    // with the whole-image codec, byte for byte.
    for chunk in [1, 7, 64] {
        let mut small = Executor::new(fs.clone());
        small.set_scan_chunk(chunk);
        let opened = small.execute(&StorageOp::OpenLog {
            log,
            acked_end: img.next_offset,
            first_offset: 0,
            keep_whole_tail: false,
        });
        assert_eq!(
            opened,
            Ok(OpOutput::Opened { next_offset: img.next_offset, damaged: damaged_ranges(&img.holes), tail_cut: None }),
            "chunk {chunk}"
        );
        let expected_len = if img.needs_header { LOG_HEADER_LEN as u64 } else { img.valid_len };
        assert_eq!(small.fs_mut().len(&name), Ok(expected_len), "chunk {chunk}");
        for h in &img.holes {
            if h.from < h.to {
                let r = small.execute(&StorageOp::Read { log, offset: h.from, max_records: 1, max_bytes: u64::MAX });
                assert!(matches!(r, Err(StorageError::Corrupt { .. })), "chunk {chunk}: {r:?}");
            }
        }
    }
    let mut ex = Executor::new(fs);
    // With the acknowledged end where the codec alone puts the next offset, the
    // executor keeps and cuts exactly what the codec does.
    let opened =
        ex.execute(&StorageOp::OpenLog { log, acked_end: img.next_offset, first_offset: 0, keep_whole_tail: false });
    assert_eq!(
        opened,
        Ok(OpOutput::Opened { next_offset: img.next_offset, damaged: damaged_ranges(&img.holes), tail_cut: None })
    );
    let expected_len = if img.needs_header { LOG_HEADER_LEN as u64 } else { img.valid_len };
    assert_eq!(ex.fs_mut().len(&name), Ok(expected_len), "open cuts the torn tail");
    for e in &img.index {
        match ex.execute(&StorageOp::Read { log, offset: e.offset, max_records: 3, max_bytes: u64::MAX }) {
            Ok(OpOutput::Records(rs)) => {
                assert!(!rs.is_empty() && rs.len() <= 3);
                for (i, r) in rs.iter().enumerate() {
                    assert_eq!(r.offset, e.offset + i as u64);
                }
            }
            other => panic!("read of indexed offset {} failed: {other:?}", e.offset),
        }
    }
    for h in &img.holes {
        if h.from < h.to {
            let r = ex.execute(&StorageOp::Read { log, offset: h.from, max_records: 1, max_bytes: u64::MAX });
            assert!(matches!(r, Err(StorageError::Corrupt { .. })), "a hole reads as corruption: {r:?}");
        }
    }
    let Some(next) = img.next_offset.checked_add(1) else { return };
    let rec =
        AppendRecord { offset: img.next_offset, record: ProduceRecord { key: None, value: b"x".to_vec().into() } };
    assert_eq!(ex.execute(&StorageOp::Append { log, records: vec![rec] }), Ok(OpOutput::Done));
    let mut reopened = Executor::new(ex.into_fs());
    let opened =
        reopened.execute(&StorageOp::OpenLog { log, acked_end: next, first_offset: 0, keep_whole_tail: false });
    let Ok(OpOutput::Opened { next_offset, damaged, .. }) = opened else { panic!("reopening failed: {opened:?}") };
    assert_eq!(next_offset, next);
    // The same offsets are damaged; the words may differ, as they say which check the
    // damaged bytes failed, and the append changed what follows them (the input
    // `crash-38c9bc80`: "checksum mismatch (byte 22)" before the append, "length 278
    // runs past the end of the file (byte 22)" after, the torn tail having been cut).
    let spans = |d: &[broker_core::DamagedRange]| d.iter().map(|r| (r.from, r.to)).collect::<Vec<_>>();
    assert_eq!(spans(&damaged), spans(&damaged_ranges(&img.holes)), "{damaged:?}");
    assert!(damaged.iter().all(|r| r.detail.contains("(byte ")), "each damage names its byte: {damaged:?}");
    match reopened.execute(&StorageOp::Read { log, offset: img.next_offset, max_records: 1, max_bytes: u64::MAX }) {
        Ok(OpOutput::Records(rs)) => assert_eq!(rs[0].value, &b"x"[..]),
        other => panic!("the appended record does not read back: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// core_commands
// ---------------------------------------------------------------------------------------

/// Target `core_commands`: an arbitrary run of the broker over the in-memory disk.
///
/// The bytes choose a small configuration, then up to [`MAX_CORE_STEPS`] steps: client
/// commands (bounded fields, valid and invalid), duplicate request ids, completions of
/// pending storage operations (the oldest, newest or any operation that may run next
/// on its target, carried out by the [`Executor`] over [`MemFs`]), failures (reported
/// without running, or after running), completions of the wrong kind or for unknown
/// operations, timer firings (armed or stale), time advances, crashes (the broker and
/// executor are dropped, the disk kept, and a new broker recovers), and settles.
///
/// Checks, besides never panicking:
/// - at every step, every log on disk belongs to a topic (live or deleting) of the
///   journal on disk, and the journal decodes cleanly;
/// - every reply agrees with what was acknowledged before: ids of created topics are
///   never handed out twice, an acknowledged record's offset is never reused, a fetch
///   serves the bytes that were acknowledged (or served before) at that offset, keyed
///   records land on Kafka's partition, an acknowledged deletion's id never shows again;
/// - after a settle (and at the end, after a crash and recovery), driven with honest
///   completions: the broker serves, no deletion is pending, the logs on disk are
///   exactly those of live topics, every acknowledged topic not deleted since is live,
///   and every acknowledged record of a live topic reads back with the same bytes.
///
/// A completion that claims success without having run (a lie the core cannot detect)
/// switches the semantic checks off for the rest of the run; the run still must not panic.
pub fn fuzz_core_commands(data: &[u8]) {
    run_core_commands(data);
}

/// What one `core_commands` run did: to see what an input exercises.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreRun {
    /// Each step as decoded, in order.
    pub steps: Vec<String>,
    /// Creates acknowledged.
    pub created: usize,
    /// Deletions acknowledged.
    pub deleted: usize,
    /// Records acknowledged.
    pub acked_records: usize,
    /// Group commits acknowledged.
    pub commits_acked: usize,
    /// Committed positions read back (in replies to reads of a group's offsets).
    pub positions_read: usize,
    /// Producer ids handed out.
    pub producer_ids: usize,
    /// Idempotent batches acknowledged (each once, at its first positions).
    pub idempotent_acked: usize,
    /// Retries of idempotent batches answered with their first positions.
    pub duplicates: usize,
    /// Restarts: crashes and halts.
    pub restarts: usize,
    /// Halts, with their reasons.
    pub halts: Vec<String>,
    /// Whether every check ran (no completion lied).
    pub checked: bool,
}

/// The configuration and steps `core_commands` decodes from `data`, one per line, without
/// running them: to read a crashing input.
pub fn describe_core_commands(data: &[u8]) -> Vec<String> {
    let mut u = Unstructured::new(data);
    let mut out = vec![format!("{:?}", fuzz_config(&mut u))];
    while !u.is_empty() && out.len() <= MAX_CORE_STEPS {
        let Ok(step) = Step::decode(&mut u) else { break };
        out.push(format!("{step:?}"));
    }
    out
}

/// Runs `core_commands` on `data` with every check, and reports what the run did.
pub fn run_core_commands(data: &[u8]) -> CoreRun {
    let mut u = Unstructured::new(data);
    let config = fuzz_config(&mut u);
    let mut h = Harness::new(config);
    while !u.is_empty() && h.run.steps.len() < MAX_CORE_STEPS {
        let Ok(step) = Step::decode(&mut u) else { break };
        h.run.steps.push(format!("{step:?}"));
        h.step(step);
    }
    h.crash();
    h.settle_and_check();
    let mut run = h.run;
    run.created = h.oracle.created.len();
    run.deleted = h.oracle.deleted.len();
    run.acked_records = h.oracle.records.acked.len();
    run.commits_acked = h.oracle.commits_acked;
    run.positions_read = h.oracle.positions_read;
    run.producer_ids = h.oracle.producer_ids.len();
    run.idempotent_acked = h.oracle.idempotent.len();
    run.duplicates = h.oracle.duplicates;
    run.checked = h.oracle.trusted;
    run
}

/// The most steps one `core_commands` input runs.
pub const MAX_CORE_STEPS: usize = 256;

const NAMES: [&str; 3] = ["a", "b", "c"];
const GROUPS: [&str; 2] = ["g", "h"];
const KEYS: [&[u8]; 3] = [b"k1", b"k2", b"key-3"];

/// Small limits, so the fuzzer reaches every boundary. (The fields read from `u` are
/// evaluated in the order written, so the corpora decode as they always did.)
fn fuzz_config(u: &mut Unstructured<'_>) -> Config {
    Config {
        max_partitions: 4,
        max_batch_records: 6,
        max_record_bytes: 32,
        max_fetch_records: 6,
        max_grace_ms: 500,
        retry_base_ms: 10,
        retry_max_ms: 80,
        compaction_min_records: *u.choose(&[3u64, 6, 20, 1000]).unwrap_or(&1000),
        compaction_ratio: u.int_in_range(1..=4).unwrap_or(1),
        removal_concurrency: u.int_in_range(1..=3).unwrap_or(1),
        // Small enough that commits reach both bounds.
        max_offset_metadata_bytes: 8,
        max_committed_offsets_bytes: 512,
        ..Config::default()
    }
}

/// Which pending operation a completion step picks.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Oldest,
    Newest,
    Nth(usize),
}

/// An idempotent producer's batch as drawn, resolved when it runs against what the
/// harness was told (the producer ids handed out, the sequences each producer sent).
#[derive(Debug, Clone)]
enum Idempotent {
    /// A new batch of `records` to `topic`/`partition`.
    Batch {
        producer: Producer,
        epoch: u16,
        sequence: Sequence,
        topic: String,
        partition: u32,
        records: Vec<ProduceRecord>,
    },
    /// The `n`-th latest idempotent batch sent (0: the last), sent again.
    Retry(usize),
}

/// The producer of a drawn batch.
#[derive(Debug, Clone, Copy)]
enum Producer {
    /// The `n`-th of the ids handed out (modulo how many were), or 0 if none was.
    HandedOut(usize),
    /// This id, whether or not it was handed out.
    Id(u64),
}

/// The first sequence number of a drawn batch.
#[derive(Debug, Clone, Copy)]
enum Sequence {
    /// Where the producer's last batch there (at that epoch) ended: in sequence.
    Next,
    /// That many past it: a gap.
    Gap(u32),
    /// The first sequence of the producer's last batch there: a retry if the records
    /// are as many, else an overlap.
    Last,
    /// This number (0, around `i32::MAX`, past it).
    At(u32),
}

#[derive(Debug, Clone)]
enum Step {
    Command(Command),
    /// An idempotent producer's batch.
    Idempotent(Idempotent),
    Duplicate(usize),
    Complete(Pick),
    CompleteAll,
    FailUnrun(Pick, StorageError),
    RunThenFail(Pick, StorageError),
    Output(Pick, OpOutput),
    UnknownOp(u64),
    /// `None`: the clock jumps to the next deadline; `Some(n)`: `7n` ms pass.
    FireTimer(Option<usize>),
    /// The runtime reports the time again without it having moved.
    TimeUnchanged,
    Advance(u64),
    Crash,
    Settle,
}

impl Step {
    fn decode(u: &mut Unstructured<'_>) -> arbitrary::Result<Step> {
        let tag: u8 = u.int_in_range(0..=99)?;
        Ok(match tag {
            0..=29 => command_step(u)?,
            30..=31 => Step::Duplicate(u.int_in_range(0..=7)?),
            32..=54 => Step::Complete(pick(u)?),
            55..=62 => Step::CompleteAll,
            63..=66 => Step::FailUnrun(pick(u)?, storage_error(u)?),
            67..=69 => Step::RunThenFail(pick(u)?, storage_error(u)?),
            70..=72 => Step::Output(pick(u)?, op_output(u)?),
            73 => Step::UnknownOp(u.int_in_range(0..=300)?),
            74..=81 => Step::FireTimer(if u.ratio(1, 2)? { None } else { Some(u.int_in_range(0..=7)?) }),
            82 => {
                // Consumes the byte it always did, so the corpora decode as before.
                u.int_in_range(0..=300u64)?;
                Step::TimeUnchanged
            }
            83..=86 => Step::Advance(u.int_in_range(0..=600)?),
            87..=92 => Step::Crash,
            _ => Step::Settle,
        })
    }
}

fn pick(u: &mut Unstructured<'_>) -> arbitrary::Result<Pick> {
    Ok(match u.int_in_range(0..=3)? {
        0 | 1 => Pick::Oldest,
        2 => Pick::Newest,
        _ => Pick::Nth(u.int_in_range(0..=15)?),
    })
}

fn small_string(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let n = u.int_in_range(0..=6)?;
    let bytes = u.bytes(n.min(u.len()))?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

fn small_bytes(u: &mut Unstructured<'_>, max: usize) -> arbitrary::Result<Vec<u8>> {
    let n = u.int_in_range(0..=max)?;
    Ok(u.bytes(n.min(u.len()))?.to_vec())
}

fn topic_name(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0u8..=19)? {
        0 => small_string(u)?,
        1 => u.choose(&["", ".", "..", "a/b", "a b"])?.to_string(),
        2 => "x".repeat(u.int_in_range(249..=250)?),
        i => NAMES[usize::from(i) % NAMES.len()].to_string(),
    })
}

/// A group id: mostly one of two, at times empty, a byte too long, or any short string.
fn group(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0u8..=9)? {
        0 => String::new(),
        1 => "g".repeat(250),
        2 => small_string(u)?,
        i => GROUPS[usize::from(i) % GROUPS.len()].to_string(),
    })
}

/// A commit: a few positions (at times none, or a partition twice), offsets around
/// the few the harness's topics hold, metadata up to past the limit (8 bytes), and now
/// and then an incarnation named.
fn commit(u: &mut Unstructured<'_>) -> arbitrary::Result<Command> {
    let group = group(u)?;
    let topic = topic_name(u)?;
    let incarnation = match u.int_in_range(0u8..=3)? {
        0 => Some(TopicId(u.int_in_range(0..=7)?)),
        _ => None,
    };
    let n = *u.choose(&[1usize, 1, 2, 3, 0])?;
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let partition = u.int_in_range(0..=4)?;
        let offset = match u.int_in_range(0u8..=7)? {
            0 => u64::MAX,
            _ => u.int_in_range(0..=14)?,
        };
        let metadata = match u.int_in_range(0u8..=3)? {
            0 => "m".repeat(u.int_in_range(8..=9)?),
            1 => small_string(u)?,
            _ => String::new(),
        };
        offsets.push(CommittedOffset { partition, offset, metadata });
    }
    Ok(Command::CommitOffsets { group, topic, incarnation, offsets })
}

/// A command step: a client command, or an idempotent producer's batch (whose producer
/// and sequence the harness resolves).
fn command_step(u: &mut Unstructured<'_>) -> arbitrary::Result<Step> {
    // A byte below 16 chooses as it did before the idempotent producers (16: a new
    // producer id, 17: a batch), so the corpora decode as they did: the one input the
    // fuzzer found whose byte here was 16 or more (the last command of
    // `crash-settle-after-false-corrupt-open`) holds it modulo 16 now, which the draw
    // of 0..=15 read the same.
    let choice: u8 = u.int_in_range(0..=17)?;
    Ok(match choice {
        17 => Step::Idempotent(idempotent(u)?),
        c => Step::Command(command(u, c)?),
    })
}

/// An idempotent batch: mostly a new one in sequence from a producer handed out, now
/// and then a retry of one sent, a gap, an overlap, an older or newer epoch, an id
/// never handed out, a sequence around `i32::MAX` or past it, no record or too many.
fn idempotent(u: &mut Unstructured<'_>) -> arbitrary::Result<Idempotent> {
    if u.ratio(1, 4)? {
        return Ok(Idempotent::Retry(u.int_in_range(0..=7)?));
    }
    let producer = match u.int_in_range(0u8..=7)? {
        0 => Producer::Id(*u.choose(&[7, 1 << 40, u64::MAX])?),
        i => Producer::HandedOut(usize::from(i) % 3),
    };
    let epoch = *u.choose(&[0u16, 0, 0, 1, 2])?;
    let sequence = match u.int_in_range(0u8..=9)? {
        0..=5 => Sequence::Next,
        6 => Sequence::Gap(u.int_in_range(1..=3)?),
        7 => Sequence::Last,
        _ => Sequence::At(*u.choose(&[0, MAX_SEQUENCE - 1, MAX_SEQUENCE, MAX_SEQUENCE + 1])?),
    };
    let topic = topic_name(u)?;
    let partition = u.int_in_range(0..=4)?;
    let n = *u.choose(&[1usize, 1, 2, 3, 0, 7])?;
    let mut records = Vec::with_capacity(n);
    for _ in 0..n {
        let value = if u.ratio(1, 30)? { vec![7; 33] } else { small_bytes(u, 6)? };
        records.push(ProduceRecord { key: None, value: value.into() });
    }
    Ok(Idempotent::Batch { producer, epoch, sequence, topic, partition, records })
}

fn command(u: &mut Unstructured<'_>, choice: u8) -> arbitrary::Result<Command> {
    // A byte below 12 chooses as it did before the group commands, so the corpora
    // decode as they did: the two inputs the fuzzer found whose byte here was 12 or
    // more hold it modulo 12 now, which the draw of 0..=11 read the same.
    Ok(match choice {
        0..=1 => Command::CreateTopic {
            name: topic_name(u)?,
            partitions: *u.choose(&[1, 1, 2, 3, 4, 0, 5])?,
            settings: TopicSettings { deletion_grace_ms: *u.choose(&[0, 0, 0, 5, 100, 500, 501])? },
        },
        2..=3 => Command::DeleteTopic { name: topic_name(u)? },
        4..=7 => {
            let n = *u.choose(&[1usize, 1, 2, 3, 0, 7])?;
            let mut records = Vec::with_capacity(n);
            for _ in 0..n {
                let key = match u.int_in_range(0u8..=3)? {
                    0 => None,
                    1 => Some(small_bytes(u, 4)?),
                    i => Some(KEYS[usize::from(i) % KEYS.len()].to_vec()),
                };
                let value = if u.ratio(1, 30)? { vec![7; 33] } else { small_bytes(u, 6)? };
                records.push(ProduceRecord { key, value: value.into() });
            }
            let topic = topic_name(u)?;
            // Mostly the keys decide; sometimes the client names a partition, at times
            // one the topic does not have.
            let partition = match u.int_in_range(0u8..=7)? {
                0..=5 => None,
                i => Some(u32::from(i - 6) * 3),
            };
            Command::Produce { topic, partition, records }
        }
        8..=9 => Command::Fetch {
            topic: topic_name(u)?,
            partition: u.int_in_range(0..=4)?,
            offset: u.int_in_range(0..=12)?,
            max_records: u.int_in_range(0..=7)?,
            max_bytes: match u.int_in_range(0u8..=3)? {
                0 => Some(u.int_in_range(0..=64)?),
                1 => Some(u64::MAX),
                _ => None,
            },
        },
        10 => Command::ListTopics,
        11 => Command::DescribeTopic { name: topic_name(u)? },
        12..=13 => commit(u)?,
        14 => Command::FetchOffsets { group: group(u)?, topic: topic_name(u)? },
        15 => match u.int_in_range(0u8..=2)? {
            0 => Command::ListGroups,
            _ => Command::DeleteGroup { group: group(u)? },
        },
        _ => Command::InitProducer,
    })
}

fn storage_error(u: &mut Unstructured<'_>) -> arbitrary::Result<StorageError> {
    let what = small_string(u)?;
    Ok(match u.int_in_range(0..=5)? {
        0 | 1 => StorageError::Io(what),
        2 => StorageError::DiskFull(what),
        3 => StorageError::PermissionDenied(what),
        4 => StorageError::NotFound(what),
        _ => {
            let position = u.int_in_range(0..=100)?;
            // The top of the draw stands for the last offset of the range (a hostile
            // runtime's), with the bytes consumed as always, so the corpora decode as before.
            let record_offset = if u.ratio(1, 2)? {
                Some(match u.int_in_range(0..=10)? {
                    10 => u64::MAX,
                    n => n,
                })
            } else {
                None
            };
            // The damage's extent comes from bytes already drawn (so again the corpora
            // decode as before): none, an empty or backward range, one past the offset,
            // a few records, or every offset to the top.
            let record_end = record_offset.map(|o| match position % 6 {
                0 => o.saturating_sub(1),
                1 => o,
                2 => o.saturating_add(1),
                3 | 4 => o.saturating_add(position),
                _ => u64::MAX,
            });
            StorageError::Corrupt { file: what, position, record_offset, record_end, detail: "fuzz".into() }
        }
    })
}

fn op_output(u: &mut Unstructured<'_>) -> arbitrary::Result<OpOutput> {
    Ok(match u.int_in_range(0..=5)? {
        0 | 1 => OpOutput::Done,
        2 => OpOutput::Journal(if u.ratio(1, 2)? { None } else { Some(small_bytes(u, 24)?) }),
        3 => {
            let n = u.int_in_range(0..=3)?;
            let mut logs = Vec::new();
            for _ in 0..n {
                logs.push(LogId { topic: TopicId(u.int_in_range(0..=5)?), partition: u.int_in_range(0..=4)? });
            }
            OpOutput::Logs(logs)
        }
        4 => OpOutput::Opened { next_offset: *u.choose(&[0, 1, 5, u64::MAX])?, damaged: vec![], tail_cut: None },
        _ => {
            let n = u.int_in_range(0..=3)?;
            let first: u64 = u.int_in_range(0..=10)?;
            let mut records = Vec::new();
            for i in 0..n {
                records.push(StoredRecord { offset: first + i, key: None, value: small_bytes(u, 4)?.into() });
            }
            OpOutput::Records(records)
        }
    })
}

/// Whether `output` is the kind of output `op` produces on success.
fn right_kind(op: &StorageOp, output: &OpOutput) -> bool {
    matches!(
        (op, output),
        (StorageOp::ReadJournal, OpOutput::Journal(_))
            | (StorageOp::ListLogs, OpOutput::Logs(_))
            | (StorageOp::OpenLog { .. }, OpOutput::Opened { .. })
            | (StorageOp::Read { .. }, OpOutput::Records(_))
            | (
                StorageOp::AppendJournal { .. }
                    | StorageOp::SyncJournal
                    | StorageOp::ReplaceJournal { .. }
                    | StorageOp::CreateLog { .. }
                    | StorageOp::Append { .. }
                    | StorageOp::SyncLog { .. }
                    | StorageOp::RemoveLog { .. },
                OpOutput::Done
            )
    )
}

/// Operations on the same target take effect in issue order (the runtime contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Journal,
    Listing,
    Log(LogId),
}

fn target(op: &StorageOp) -> Target {
    match op.log() {
        Some(log) => Target::Log(log),
        None if matches!(op, StorageOp::ListLogs) => Target::Listing,
        None => Target::Journal,
    }
}

/// What a request in flight asked, to judge its reply.
#[derive(Debug, Clone)]
enum Sent {
    Create {
        name: String,
        partitions: u32,
        delete_epoch: u64,
    },
    Delete,
    Produce {
        topic: Option<(TopicId, u32)>,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    },
    Fetch {
        topic: Option<TopicId>,
        partition: u32,
        offset: u64,
        max_records: u32,
        max_bytes: u64,
    },
    List,
    Describe {
        topic: Option<TopicId>,
    },
    /// A commit of `group`'s positions; `topic`: the live incarnation when it was sent.
    Commit {
        topic: Option<TopicId>,
    },
    FetchOffsets {
        group: String,
        topic: Option<TopicId>,
    },
    ListGroups,
    DeleteGroup,
    InitProducer,
    /// An idempotent produce: the batch (incarnation, partition, producer, epoch, first
    /// sequence, records), and the plain produce it is judged as the first time.
    ProduceIdempotent {
        batch: Option<IdempotentBatch>,
        produce: Box<Sent>,
    },
}

/// What names an idempotent batch: a retry of it has the same.
type IdempotentBatch = (TopicId, u32, u64, u16, u32, usize);

/// What the clients were told, across crashes.
#[derive(Debug, Default)]
struct Oracle {
    /// False once a completion lied (claimed success without running).
    trusted: bool,
    /// Acknowledged creates: id → (name, partitions).
    created: BTreeMap<TopicId, (String, u32)>,
    /// Topics a delete may have hit (a delete of their name was sent after their create).
    maybe_deleted: BTreeSet<TopicId>,
    /// Acknowledged deletions.
    deleted: BTreeSet<TopicId>,
    /// How many deletes of each name were sent.
    delete_epochs: BTreeMap<String, u64>,
    /// Records acknowledged or served, by (topic, partition, offset).
    records: Ledger<ProduceRecord>,
    /// Requests of the current broker not yet answered.
    inflight: BTreeMap<RequestId, Sent>,
    /// Replies of this step, for requests the harness itself waits for.
    replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    /// Every position a commit sent for a group and incarnation, by partition: whatever
    /// a group reads back for an incarnation was sent for that incarnation.
    commits_sent: BTreeMap<(String, TopicId), BTreeMap<u32, BTreeSet<u64>>>,
    /// Commits acknowledged.
    commits_acked: usize,
    /// Positions shown by reads of a group's offsets.
    positions_read: usize,
    /// Producer ids handed out.
    producer_ids: BTreeSet<u64>,
    /// The positions each idempotent batch was first answered with.
    idempotent: BTreeMap<IdempotentBatch, Vec<(u32, u64)>>,
    /// Retries answered with their batch's first positions.
    duplicates: usize,
}

impl Oracle {
    fn reply(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let Some(sent) = self.inflight.remove(&request) else {
            // Replies to requests never admitted (unavailable, duplicate id) are errors.
            assert!(reply.is_err(), "a request that was not in flight got {reply:?}");
            return;
        };
        if self.trusted {
            self.judge(&sent, &reply);
        }
        self.replies.insert(request, reply);
    }

    fn judge(&mut self, sent: &Sent, reply: &Result<Reply, BrokerError>) {
        let Ok(reply) = reply else { return };
        match (sent, reply) {
            (Sent::Create { name, partitions, delete_epoch }, Reply::Created { topic }) => {
                assert!(!self.created.contains_key(topic), "topic id {topic} handed out twice");
                let delete_since = self.delete_epochs.get(name).copied().unwrap_or(0) != *delete_epoch;
                // A delete sent while the create was in flight may be acknowledged first.
                assert!(delete_since || !self.deleted.contains(topic), "topic id {topic} was deleted before");
                self.created.insert(*topic, (name.clone(), *partitions));
                if delete_since {
                    self.maybe_deleted.insert(*topic);
                }
            }
            (Sent::Delete, Reply::DeleteAccepted { topic }) => {
                self.deleted.insert(*topic);
                self.maybe_deleted.insert(*topic);
            }
            (Sent::Produce { topic, partition, records }, Reply::Produced { positions, .. }) => {
                let Some((id, partitions)) = topic else { panic!("produce to a hidden topic succeeded") };
                assert_eq!(positions.len(), records.len());
                for (record, pos) in records.iter().zip(positions) {
                    assert!(pos.partition < *partitions);
                    if let Some(p) = partition {
                        assert_eq!(pos.partition, *p, "the partition the produce named");
                    } else if let Some(key) = &record.key {
                        assert_eq!(pos.partition, partition_for_key(key, *partitions), "keyed record's partition");
                    }
                    let at = (*id, pos.partition, pos.offset);
                    // A re-created name never hands out a position of a deleted incarnation:
                    // a reader still there is told it is out of range, not served this one.
                    // (Judged where both creates were acknowledged: an incarnation whose
                    // create was cut off by a crash has no name the oracle knows.)
                    let name = self.created.get(id).map(|(n, _)| n);
                    let same_name = |d: &TopicId| name.is_some() && self.created.get(d).map(|(n, _)| n) == name;
                    for old in self.deleted.iter().filter(|d| **d < *id && same_name(d)) {
                        let last = self.records.acked.keys().filter(|(t, _, _)| t == old).map(|(_, _, o)| *o).max();
                        assert!(
                            last.is_none_or(|l| pos.offset > l),
                            "{at:?} reuses a position of deleted incarnation {old} of its name (acknowledged up to {last:?})"
                        );
                    }
                    if let Some(before) = self.records.served.get(&at) {
                        assert_eq!(before, record, "offset {at:?} served other bytes before it was acknowledged");
                    }
                    let again = self.records.acknowledge(at, record.clone());
                    assert!(again.is_none(), "offset {at:?} acknowledged twice");
                }
            }
            (
                Sent::Fetch { topic, partition, offset, max_records, max_bytes },
                Reply::Fetched { records, high_watermark, .. },
            ) => {
                let Some(id) = topic else { panic!("fetch from a hidden topic succeeded") };
                assert!(records.len() <= *max_records as usize);
                // The byte bound holds, but for the first record, which goes whatever its size.
                let bytes: u64 =
                    records.iter().skip(1).map(|r| (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64).sum();
                let first = records.first().map_or(0, |r| (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64);
                assert!(records.len() <= 1 || first + bytes <= *max_bytes, "a fetch passed its byte bound");
                assert!(*offset <= *high_watermark);
                for (i, r) in records.iter().enumerate() {
                    assert_eq!(r.offset, offset + i as u64, "fetched offsets are dense");
                    assert!(r.offset < *high_watermark, "fetched past the high watermark");
                    let got = ProduceRecord { key: r.key.clone(), value: r.value.clone() };
                    let at = (*id, *partition, r.offset);
                    match self.records.known(&at) {
                        Some(before) => assert_eq!(before, &got, "record {at:?} reads back with other bytes"),
                        None => self.records.serve(at, got),
                    }
                }
            }
            (Sent::List, Reply::Topics(list)) => {
                for w in list.windows(2) {
                    assert!(w[0].name < w[1].name, "list is ordered by name, names unique");
                }
                for t in list {
                    assert!(!self.deleted.contains(&t.id), "deleted topic {} is listed", t.id);
                    self.check_described(t);
                }
            }
            (Sent::Describe { topic }, Reply::Described(t)) => {
                assert_eq!(Some(t.id), *topic, "describe names the live incarnation");
                assert!(!self.deleted.contains(&t.id), "deleted topic {} is described", t.id);
                self.check_described(t);
            }
            (Sent::Commit { topic }, Reply::OffsetsCommitted { topic: id }) => {
                assert_eq!(Some(*id), *topic, "a commit is kept under the live incarnation");
                self.commits_acked += 1;
            }
            (Sent::FetchOffsets { group, topic }, Reply::Offsets { topic: id, offsets }) => {
                assert_eq!(Some(*id), *topic, "offsets are read from the live incarnation");
                let sent = self.commits_sent.get(&(group.clone(), *id));
                self.positions_read += offsets.len();
                for o in offsets {
                    let ok = sent.and_then(|s| s.get(&o.partition)).is_some_and(|s| s.contains(&o.offset));
                    assert!(
                        ok,
                        "group {group:?} reads position {} of partition {} in {id}, never committed there",
                        o.offset, o.partition
                    );
                }
            }
            (Sent::ListGroups, Reply::Groups(groups)) => {
                assert!(groups.windows(2).all(|w| w[0] < w[1]), "groups are listed by name, once each");
            }
            (Sent::DeleteGroup, Reply::GroupDeleted) => {}
            (Sent::InitProducer, Reply::ProducerInitialized { producer_id, .. }) => {
                assert!(self.producer_ids.insert(*producer_id), "producer id {producer_id} handed out twice");
            }
            (Sent::ProduceIdempotent { batch, produce }, Reply::Produced { positions, .. }) => {
                let got: Vec<(u32, u64)> = positions.iter().map(|p| (p.partition, p.offset)).collect();
                let Some(batch) = batch else { panic!("idempotent produce to a hidden topic succeeded") };
                match self.idempotent.get(batch) {
                    Some(first) => {
                        assert_eq!(first, &got, "a retried batch {batch:?} is answered as its first send");
                        self.duplicates += 1;
                    }
                    None => {
                        self.idempotent.insert(*batch, got);
                        self.judge(produce, &Ok(reply.clone()));
                    }
                }
            }
            (sent, reply) => panic!("reply {reply:?} does not answer {sent:?}"),
        }
    }

    fn check_described(&self, t: &broker_core::TopicDescription) {
        assert_eq!(t.high_watermarks.len(), t.partitions as usize);
        if let Some((name, partitions)) = self.created.get(&t.id) {
            assert_eq!((name, partitions), (&t.name, &t.partitions), "topic {} changed", t.id);
        }
    }
}

/// The hold-back harness with the oracle fed every reply as it comes out.
struct Harness {
    config: Config,
    hand: Hand<MemFs>,
    /// How many of `hand.answered` the oracle has seen.
    seen_replies: usize,
    /// A completion of this broker incarnation reported a log missing or corrupt that is
    /// not: its partitions may be unusable until the next restart.
    degraded: bool,
    oracle: Oracle,
    run: CoreRun,
    /// Each producer's last batch to a partition of a topic name at an epoch: its first
    /// sequence and the one after its last (what a batch in sequence begins with).
    sequences: BTreeMap<(String, u32, u64, u16), (u32, u32)>,
    /// The latest idempotent batches sent, oldest first: what a retry sends again.
    sent_batches: std::collections::VecDeque<Command>,
}

impl Harness {
    fn new(config: Config) -> Harness {
        let mut h = Harness {
            hand: Hand::new(config.clone(), MemFs::new()),
            config,
            seen_replies: 0,
            degraded: false,
            oracle: Oracle { trusted: true, ..Oracle::default() },
            run: CoreRun::default(),
            sequences: BTreeMap::new(),
            sent_batches: std::collections::VecDeque::new(),
        };
        h.drain();
        h
    }

    fn step(&mut self, step: Step) {
        match step {
            Step::Command(c) => {
                self.submit(c);
            }
            Step::Idempotent(i) => {
                if let Some(c) = self.idempotent_command(i) {
                    self.submit(c);
                }
            }
            Step::Duplicate(i) => {
                if let Some(&request) = self.oracle.inflight.keys().nth(i) {
                    let now = self.hand.now;
                    self.hand.broker.handle_command(now, request, Command::ListTopics);
                    match self.hand.broker.poll_effect() {
                        Some(Effect::Reply { request: r, reply: Err(BrokerError::DuplicateRequestId(id)) }) => {
                            assert_eq!((r, id), (request, request.0));
                        }
                        other => panic!("a duplicate request id got {other:?}"),
                    }
                    self.drain();
                }
            }
            Step::Complete(p) => {
                if let Some(id) = self.pick(p, true) {
                    self.hand.complete(id);
                    self.drain();
                }
            }
            Step::CompleteAll => self.run_ops(),
            Step::FailUnrun(p, error) => {
                if let Some(id) = self.pick(p, false) {
                    self.note_fake_error(&self.hand.pending[&id].clone(), &error);
                    self.hand.complete_with(id, Err(error));
                    self.drain();
                }
            }
            Step::RunThenFail(p, error) => {
                if let Some(id) = self.pick(p, true) {
                    let op = self.hand.pending[&id].clone();
                    let _ = self.hand.exec.execute(&op);
                    self.note_fake_error(&op, &error);
                    self.hand.complete_with(id, Err(error));
                    self.drain();
                }
            }
            Step::Output(p, output) => {
                if let Some(id) = self.pick(p, false) {
                    if right_kind(&self.hand.pending[&id], &output) {
                        // Success without running: the core cannot tell; checks are off.
                        self.oracle.trusted = false;
                    }
                    self.hand.complete_with(id, Ok(output));
                    self.drain();
                }
            }
            Step::UnknownOp(n) => {
                self.hand.complete_with(OpId(u64::MAX - n), Ok(OpOutput::Done));
                self.drain();
            }
            Step::FireTimer(None) => {
                self.hand.fire_next_timer_only();
                self.time_passes();
            }
            // Time passes by a few milliseconds: a timer may or may not fall due.
            Step::FireTimer(Some(i)) => {
                self.hand.now = self.hand.now.plus_millis(i as u64 * 7);
                self.time_passes();
            }
            // No time passes: nothing may be due that was not due before.
            Step::TimeUnchanged => self.time_passes(),
            Step::Advance(ms) => self.hand.now = self.hand.now.plus_millis(ms),
            Step::Crash => self.crash(),
            Step::Settle => self.settle_and_check(),
        }
        if let Some(reason) = self.hand.halts.first() {
            self.run.halts.push(reason.to_string());
            self.crash();
        }
        self.check_no_orphans();
    }

    /// The command a drawn idempotent batch stands for: its producer and sequence
    /// resolved against the ids handed out and the batches sent so far.
    fn idempotent_command(&mut self, drawn: Idempotent) -> Option<Command> {
        let command = match drawn {
            Idempotent::Retry(n) => self.sent_batches.iter().rev().nth(n % self.sent_batches.len().max(1)).cloned()?,
            Idempotent::Batch { producer, epoch, sequence, topic, partition, records } => {
                let ids = &self.oracle.producer_ids;
                let producer_id = match producer {
                    Producer::HandedOut(n) => ids.iter().nth(n % ids.len().max(1)).copied().unwrap_or(0),
                    Producer::Id(id) => id,
                };
                let key = (topic.clone(), partition, producer_id, epoch);
                let (last, next) = self.sequences.get(&key).copied().unwrap_or((0, 0));
                let first_sequence = match sequence {
                    Sequence::Next => next,
                    Sequence::Gap(n) => sequence_after(next, n),
                    Sequence::Last => last,
                    Sequence::At(s) => s,
                };
                if first_sequence <= MAX_SEQUENCE {
                    self.sequences.insert(key, (first_sequence, sequence_after(first_sequence, records.len() as u32)));
                }
                let producer = ProducerBatch { producer_id, epoch, first_sequence };
                Command::ProduceIdempotent { topic, partition, producer, records }
            }
        };
        self.sent_batches.push_back(command.clone());
        if self.sent_batches.len() > 8 {
            self.sent_batches.pop_front();
        }
        Some(command)
    }

    /// Picks a pending operation: with `in_order`, only one that may run now (the
    /// oldest pending operation of its target).
    fn pick(&self, p: Pick, in_order: bool) -> Option<OpId> {
        let pending = self.hand.pending.iter();
        let candidates: Vec<OpId> = if in_order {
            let mut seen = BTreeSet::new();
            pending.filter(|(_, op)| seen.insert(target(op))).map(|(id, _)| *id).collect()
        } else {
            pending.map(|(id, _)| *id).collect()
        };
        match p {
            Pick::Oldest => candidates.first().copied(),
            Pick::Newest => candidates.last().copied(),
            Pick::Nth(n) => (!candidates.is_empty()).then(|| candidates[n % candidates.len()]),
        }
    }

    fn note_fake_error(&mut self, op: &StorageOp, error: &StorageError) {
        if matches!(op, StorageOp::OpenLog { .. })
            && matches!(error, StorageError::NotFound(_) | StorageError::Corrupt { .. })
        {
            self.degraded = true;
        }
    }

    fn submit(&mut self, command: Command) -> RequestId {
        let visible = |name: &str| self.hand.broker.live_topics().into_iter().find(|t| t.name == name);
        let sent = match &command {
            Command::CreateTopic { name, partitions, .. } => Sent::Create {
                name: name.clone(),
                partitions: *partitions,
                delete_epoch: self.oracle.delete_epochs.get(name).copied().unwrap_or(0),
            },
            Command::DeleteTopic { name } => {
                *self.oracle.delete_epochs.entry(name.clone()).or_default() += 1;
                for (id, (n, _)) in &self.oracle.created {
                    if n == name {
                        self.oracle.maybe_deleted.insert(*id);
                    }
                }
                Sent::Delete
            }
            Command::Produce { topic, partition, records } => Sent::Produce {
                topic: visible(topic).map(|t| (t.id, t.partitions)),
                partition: *partition,
                records: records.clone(),
            },
            Command::Fetch { topic, partition, offset, max_records, max_bytes } => Sent::Fetch {
                topic: visible(topic).map(|t| t.id),
                partition: *partition,
                offset: *offset,
                max_records: *max_records,
                max_bytes: max_bytes.map_or(self.config.max_fetch_bytes, |b| b.min(self.config.max_fetch_bytes)),
            },
            Command::ListTopics => Sent::List,
            Command::DescribeTopic { name } => Sent::Describe { topic: visible(name).map(|t| t.id) },
            Command::CommitOffsets { group, topic, offsets, .. } => {
                let topic = visible(topic).map(|t| t.id);
                if let Some(id) = topic {
                    let sent = self.oracle.commits_sent.entry((group.clone(), id)).or_default();
                    for o in offsets {
                        sent.entry(o.partition).or_default().insert(o.offset);
                    }
                }
                Sent::Commit { topic }
            }
            Command::FetchOffsets { group, topic } => {
                Sent::FetchOffsets { group: group.clone(), topic: visible(topic).map(|t| t.id) }
            }
            Command::ListGroups => Sent::ListGroups,
            Command::DeleteGroup { .. } => Sent::DeleteGroup,
            Command::InitProducer => Sent::InitProducer,
            Command::ProduceIdempotent { topic, partition, producer, records } => {
                let live = visible(topic);
                Sent::ProduceIdempotent {
                    batch: live.as_ref().map(|t| {
                        (t.id, *partition, producer.producer_id, producer.epoch, producer.first_sequence, records.len())
                    }),
                    produce: Box::new(Sent::Produce {
                        topic: live.map(|t| (t.id, t.partitions)),
                        partition: Some(*partition),
                        records: records.clone(),
                    }),
                }
            }
        };
        let serving = self.hand.broker.phase() == Phase::Serving;
        let request = self.hand.submit_with(command, |request| {
            if serving {
                self.oracle.inflight.insert(request, sent);
            }
        });
        self.drain();
        request
    }

    /// Feeds the oracle every reply the harness received since the last call, in the
    /// order they came out; renders every notice, so its `Display` runs on whatever the
    /// fuzzer led to.
    fn drain(&mut self) {
        let new: Vec<RequestId> = self.hand.answered[self.seen_replies..].to_vec();
        self.seen_replies = self.hand.answered.len();
        for request in new {
            if let Some(reply) = self.hand.take_reply(request) {
                self.oracle.reply(request, reply);
            }
        }
        for notice in self.hand.notices.drain(..) {
            assert!(!notice.to_string().is_empty());
        }
    }

    fn complete_oldest(&mut self) {
        if let Some(&id) = self.hand.pending.keys().next() {
            self.hand.complete(id);
            self.drain();
        }
    }

    /// Completes every pending operation in issue order (no timers).
    fn run_ops(&mut self) {
        let mut budget = 10_000;
        while !self.hand.pending.is_empty() && self.hand.halts.is_empty() && budget > 0 {
            self.complete_oldest();
            budget -= 1;
        }
    }

    /// Tells the broker the time is the harness's `now`; every timer due by then fires.
    fn time_passes(&mut self) {
        let now = self.hand.now;
        self.hand.broker.handle_timeout(now);
        self.hand.collect();
        self.drain();
        if let Some(at) = self.hand.broker.poll_timeout() {
            assert!(at >= now, "a timer due at {at} is still armed at {now}");
        }
    }

    /// Drops the broker and the executor, keeps the disk, and starts a new broker.
    fn crash(&mut self) {
        self.run.restarts += 1;
        let old = std::mem::replace(&mut self.hand, Hand::new(self.config.clone(), MemFs::new()));
        self.hand = old.restart(self.config.clone());
        self.seen_replies = 0;
        self.degraded = false;
        self.oracle.inflight.clear();
        self.drain();
    }

    /// Runs with honest completions, firing timers, until nothing is left to do.
    fn settle(&mut self) {
        for _ in 0..20 {
            let mut budget = 2_000;
            loop {
                budget -= 1;
                if budget == 0 {
                    break;
                }
                if !self.hand.pending.is_empty() {
                    self.complete_oldest();
                } else if self.hand.fire_next_timer_only() {
                    self.drain();
                } else {
                    break;
                }
                if !self.hand.halts.is_empty() {
                    break;
                }
            }
            match self.hand.halts.first().cloned() {
                Some(reason) => {
                    self.run.halts.push(reason.to_string());
                    assert!(!self.oracle.trusted, "the broker halted with honest storage: {reason}");
                    self.crash();
                }
                None => return,
            }
        }
    }

    /// A command driven to its reply with honest completions.
    fn request(&mut self, command: Command) -> Result<Reply, BrokerError> {
        let request = self.submit(command);
        loop {
            if let Some(reply) = self.oracle.replies.remove(&request) {
                return reply;
            }
            if self.hand.pending.is_empty() || !self.hand.halts.is_empty() {
                return Err(BrokerError::Unavailable("no reply".into()));
            }
            self.complete_oldest();
        }
    }

    /// Every log on disk belongs to a topic of the journal on disk.
    fn check_no_orphans(&mut self) {
        if !self.oracle.trusted {
            return;
        }
        let fs = self.hand.exec.fs();
        let logs: Vec<LogId> = fs.names().iter().filter_map(|n| LogId::parse_file_name(n)).collect();
        let Some(image) = fs.file(JOURNAL_FILE) else {
            assert!(logs.is_empty(), "logs {logs:?} exist without a journal");
            return;
        };
        let decoded = decode_journal(image).unwrap_or_else(|c| panic!("the journal on disk is corrupt: {c:?}"));
        assert_eq!(decoded.torn_tail, None, "the in-memory disk never tears");
        let meta = MetaState::replay(decoded.records.iter().map(|(_, r)| r));
        for log in logs {
            let owned = meta.topics.get(&log.topic).is_some_and(|t| log.partition < t.meta.partitions);
            assert!(owned, "log {log} on disk belongs to no topic of the journal");
        }
    }

    /// Settles with honest completions, then checks the settled state.
    fn settle_and_check(&mut self) {
        self.settle();
        if !self.oracle.trusted {
            return;
        }
        assert_eq!(self.hand.broker.phase(), Phase::Serving, "the broker serves once settled");
        assert!(self.hand.broker.pending_deletions().is_empty(), "deletions complete once settled");
        let live = self.hand.broker.live_topics();
        let live_ids: BTreeSet<TopicId> = live.iter().map(|t| t.id).collect();
        for t in &live {
            assert!(!self.oracle.deleted.contains(&t.id), "deleted topic {} is live again", t.id);
        }
        for (id, (name, partitions)) in &self.oracle.created {
            if self.oracle.maybe_deleted.contains(id) {
                continue;
            }
            let t = live.iter().find(|t| t.id == *id);
            let t = t.unwrap_or_else(|| panic!("acknowledged topic {id} ({name}) is gone"));
            assert_eq!((&t.name, t.partitions), (name, *partitions));
        }
        let mut expected: Vec<LogId> =
            live.iter().flat_map(|t| (0..t.partitions).map(move |p| LogId { topic: t.id, partition: p })).collect();
        expected.sort();
        let on_disk: Vec<LogId> =
            self.hand.exec.fs().names().iter().filter_map(|n| LogId::parse_file_name(n)).collect();
        if self.degraded {
            // A log reported missing or corrupt (falsely) is left alone until a restart.
            assert!(on_disk.iter().all(|l| expected.contains(l)), "logs {on_disk:?} of no live topic");
            return;
        }
        assert_eq!(on_disk, expected, "once settled, the logs on disk are exactly the live topics' logs");
        for &(id, partition, offset) in self.oracle.records.acked.keys() {
            if !live_ids.contains(&id) {
                continue;
            }
            let t = live.iter().find(|t| t.id == id).expect("live");
            let hw = t.high_watermarks[partition as usize];
            assert!(offset < hw, "acknowledged record {id}/{partition}@{offset} is above the high watermark {hw}");
        }
        for t in &live {
            for (partition, &hw) in t.high_watermarks.iter().enumerate() {
                let mut offset = t.log_start;
                while offset < hw {
                    let fetch = Command::Fetch {
                        topic: t.name.clone(),
                        partition: partition as u32,
                        offset,
                        max_records: self.config.max_fetch_records,
                        max_bytes: None,
                    };
                    // The oracle compares every record served with what was acknowledged.
                    match self.request(fetch) {
                        Ok(Reply::Fetched { records, .. }) if !records.is_empty() => offset += records.len() as u64,
                        other => panic!("reading back {}/{partition}@{offset} gave {other:?}", t.id),
                    }
                }
            }
        }
        // Every group's positions in every live incarnation a commit was sent to read
        // back: the oracle holds each position shown to those sent for that incarnation.
        let reads: Vec<(String, String)> = self
            .oracle
            .commits_sent
            .keys()
            .filter(|(group, _)| broker_core::check_group(group).is_ok())
            .filter_map(|(group, id)| live.iter().find(|t| t.id == *id).map(|t| (group.clone(), t.name.clone())))
            .collect();
        for (group, topic) in reads {
            match self.request(Command::FetchOffsets { group: group.clone(), topic: topic.clone() }) {
                Ok(Reply::Offsets { .. }) => {}
                other => panic!("reading back group {group:?}'s positions in {topic} gave {other:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_inputs_pass() {
        fuzz_journal_decode(&[]);
        fuzz_log_decode(&[]);
        fuzz_core_commands(&[]);
    }

    #[test]
    fn arbitrary_byte_patterns_pass() {
        for seed in 0u32..64 {
            let data: Vec<u8> =
                (0..512u32).map(|i| (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(97)) as u8).collect();
            fuzz_core_commands(&data);
            fuzz_journal_decode(&data);
            fuzz_log_decode(&data);
        }
    }
}
