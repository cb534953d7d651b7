//! Snapshots of the on-disk formats and of every user-facing error message, so that any
//! change to either shows up in review (`cargo insta review`).
//!
//! Each format snapshot is an annotated hex dump. The field list of each dump is written
//! from the documented layout (`src/frame.rs`, `src/journal.rs`, `src/logcodec.rs`), not
//! read from the encoder: the dump fails if the encoder writes a different number of
//! bytes than the layout says, and every frame checksum is recomputed here from its
//! documented definition.

use broker_core::effect::{AppendRecord, OpOutput, StorageOp};
use broker_core::{
    encode_header, encode_log_header, encode_records, Broker, BrokerError, Command, CommittedOffset, Config,
    DecodeError, Effect, HaltReason, JournalRecord, LogId, MemFs, OpId, PendingDeletion, ProduceRecord, ProducerBatch,
    ProducerState, RequestId, SequencedBatch, Snapshot, StorageError, SyncDriver, Time, TopicId, TopicMeta,
    TopicSettings, JOURNAL_COPY_ALIGN, JOURNAL_FILE, JOURNAL_FIRST_FRAME,
};
use broker_testkit::commands::topic_meta;
use std::fmt::Write;

/// One field of a documented layout.
#[derive(Clone, Copy)]
enum F {
    /// Literal bytes (a magic number).
    Magic(usize),
    U8,
    U16,
    U32,
    U64,
    /// A CRC32C, shown in hex.
    Crc,
    /// Bytes whose length is the previous field's value, shown as text.
    Text,
}

/// Renders `bytes` as `offset  hex  field = value` lines following `layout`, and checks
/// that the layout covers the bytes exactly.
fn annotate(bytes: &[u8], layout: &[(&str, F)]) -> String {
    let mut out = String::new();
    let mut pos = 0usize;
    let mut last = 0u64;
    for &(name, field) in layout {
        let width = match field {
            F::Magic(n) => n,
            F::U8 => 1,
            F::U16 => 2,
            F::U32 | F::Crc => 4,
            F::U64 => 8,
            F::Text => last as usize,
        };
        assert!(pos + width <= bytes.len(), "layout runs past the {} bytes at {name}", bytes.len());
        let b = &bytes[pos..pos + width];
        let mut le = [0u8; 8];
        le[..width.min(8)].copy_from_slice(&b[..width.min(8)]);
        let n = u64::from_le_bytes(le);
        let value = match field {
            F::Magic(_) | F::Text => format!("{:?}", String::from_utf8_lossy(b)),
            F::Crc => format!("0x{n:08x}"),
            _ => n.to_string(),
        };
        if !matches!(field, F::Magic(_) | F::Text | F::Crc) {
            last = n;
        }
        let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
        let hex = if hex.is_empty() { "-".to_string() } else { hex.join(" ") };
        writeln!(out, "{pos:04}  {hex:<29} {name} = {value}").unwrap();
        pos += width;
    }
    assert_eq!(pos, bytes.len(), "the layout covers {pos} of {} bytes", bytes.len());
    out
}

/// The frame header: `len:u32 kind:u8 crc:u32`, all little-endian.
const FRAME: [(&str, F); 3] = [("frame.len", F::U32), ("frame.kind", F::U8), ("frame.crc32c", F::Crc)];

/// Checks a single frame's CRC32C: over the salt (u64 LE), the length, the kind and the payload.
fn check_frame_crc(frame: &[u8], salt: u64) {
    let mut covered = salt.to_le_bytes().to_vec();
    covered.extend_from_slice(&frame[0..5]);
    covered.extend_from_slice(&frame[9..]);
    let crc = u32::from_le_bytes(frame[5..9].try_into().unwrap());
    assert_eq!(crc32c::crc32c(&covered), crc, "frame crc covers salt, len, kind, payload");
    assert_eq!(u32::from_le_bytes(frame[0..4].try_into().unwrap()) as usize, frame.len() - 9, "len is the payload's");
}

fn layout(parts: &[&[(&'static str, F)]]) -> Vec<(&'static str, F)> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

const META: [(&str, F); 6] = [
    ("id", F::U64),
    ("name.len", F::U32),
    ("name", F::Text),
    ("partitions", F::U32),
    ("settings.deletion_grace_ms", F::U64),
    ("offset_base", F::U64),
];

const EPOCH: u64 = 7;

/// Checks one commit of a journal as documented (copy A salted with the epoch, zeros up
/// to the next 4 KiB boundary, copy B with the same kind and payload salted with
/// `!(epoch ^ position * 0x9e3779b97f4a7c15)`) and returns copy A.
fn journal_commit(commit: &[u8], position: u64) -> Vec<u8> {
    let a_len = 9 + u32::from_le_bytes(commit[0..4].try_into().unwrap()) as usize;
    let b_at = (position as usize + a_len).next_multiple_of(4096) - position as usize;
    let (a, rest) = commit.split_at(a_len);
    let (pad, b) = rest.split_at(b_at - a_len);
    check_frame_crc(a, EPOCH);
    assert!(pad.iter().all(|x| *x == 0), "zeros between the copies");
    check_frame_crc(b, !(EPOCH ^ position.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    assert_eq!((&a[0..5], &a[9..]), (&b[0..5], &b[9..]), "copy B holds copy A's kind and payload");
    a.to_vec()
}

fn journal_frame(rec: &JournalRecord) -> Vec<u8> {
    let position = JOURNAL_FIRST_FRAME as u64;
    journal_commit(&JournalRecord::encode_commit(std::slice::from_ref(rec), EPOCH, position), position)
}

#[test]
fn journal_header() {
    let start = encode_header(EPOCH);
    assert_eq!(start.len(), 4096 + 18, "the header, zeros to 4 KiB, the header again");
    let header = &start[..18];
    assert_eq!(crc32c::crc32c(&header[..14]).to_le_bytes(), header[14..18], "header crc covers the first 14 bytes");
    assert!(start[18..4096].iter().all(|x| *x == 0));
    assert_eq!(&start[4096..], header, "the second copy at 4096");
    let dump = annotate(header, &[("magic", F::Magic(4)), ("version", F::U16), ("epoch", F::U64), ("crc32c", F::Crc)]);
    insta::assert_snapshot!(dump);
}

#[test]
fn journal_topic_created() {
    let f = journal_frame(&JournalRecord::TopicCreated(TopicMeta {
        offset_base: 1_000,
        ..topic_meta(42, "orders", 3, 250)
    }));
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &META])));
}

#[test]
fn journal_topic_deleted() {
    let f = journal_frame(&JournalRecord::TopicDeleted { id: TopicId(42), remove_after: Time(1_000_000) });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &[("id", F::U64), ("remove_after_us", F::U64)]])));
}

#[test]
fn journal_partition_removed() {
    let f = journal_frame(&JournalRecord::PartitionRemoved { id: TopicId(42), partition: 2 });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &[("id", F::U64), ("partition", F::U32)]])));
}

#[test]
fn journal_log_end() {
    let f = journal_frame(&JournalRecord::LogEnd { log: LogId { topic: TopicId(42), partition: 2 }, end: 1_000 });
    let l = layout(&[&FRAME, &[("log.topic", F::U64), ("log.partition", F::U32), ("end", F::U64)]]);
    insta::assert_snapshot!(annotate(&f, &l));
}

/// A group, an incarnation and one position with its metadata.
const GROUP_OFFSETS: [(&str, F); 8] = [
    ("group.len", F::U32),
    ("group", F::Text),
    ("topic", F::U64),
    ("offsets.count", F::U32),
    ("offsets[0].partition", F::U32),
    ("offsets[0].offset", F::U64),
    ("offsets[0].metadata.len", F::U32),
    ("offsets[0].metadata", F::Text),
];

#[test]
fn journal_offsets_committed() {
    let f = journal_frame(&JournalRecord::OffsetsCommitted {
        group: "billing".into(),
        topic: TopicId(43),
        offsets: vec![CommittedOffset { partition: 0, offset: 1_030, metadata: "m".into() }],
    });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &GROUP_OFFSETS])));
}

#[test]
fn journal_producer_id_allocated() {
    let f = journal_frame(&JournalRecord::ProducerIdAllocated { id: 7 });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &[("id", F::U64)]])));
}

#[test]
fn journal_producer_appended() {
    let f = journal_frame(&JournalRecord::ProducerAppended {
        log: LogId { topic: TopicId(43), partition: 0 },
        batch: ProducerBatch { producer_id: 7, epoch: 2, first_sequence: 10 },
        records: 3,
        first_offset: 1_031,
    });
    let l = layout(&[
        &FRAME,
        &[("log.topic", F::U64), ("log.partition", F::U32), ("producer_id", F::U64), ("epoch", F::U16)],
        &[("first_sequence", F::U32), ("records", F::U32), ("first_offset", F::U64)],
    ]);
    insta::assert_snapshot!(annotate(&f, &l));
}

#[test]
fn journal_group_deleted() {
    let f = journal_frame(&JournalRecord::GroupDeleted { group: "billing".into() });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &[("group.len", F::U32), ("group", F::Text)]])));
}

#[test]
fn journal_deletion_completed() {
    let f = journal_frame(&JournalRecord::DeletionCompleted { id: TopicId(42) });
    insta::assert_snapshot!(annotate(&f, &layout(&[&FRAME, &[("id", F::U64)]])));
}

#[test]
fn journal_snapshot() {
    let snapshot = Snapshot {
        next_topic_id: 44,
        offset_floor: 1_017,
        live: vec![TopicMeta { offset_base: 1_017, ..topic_meta(43, "audit", 1, 0) }],
        deleting: vec![PendingDeletion {
            topic: TopicMeta { offset_base: 1_000, ..topic_meta(42, "orders", 3, 250) },
            remove_after: Time(250_000),
            removed: vec![0, 2],
        }],
        ends: vec![(LogId { topic: TopicId(43), partition: 0 }, 1_034)],
        groups: vec![broker_core::GroupOffsets {
            group: "billing".into(),
            topic: TopicId(43),
            offsets: vec![CommittedOffset { partition: 0, offset: 1_030, metadata: "m".into() }],
        }],
        next_producer_id: 8,
        producers: vec![ProducerState {
            log: LogId { topic: TopicId(43), partition: 0 },
            producer_id: 7,
            epoch: 2,
            batches: vec![SequencedBatch { first_sequence: 10, last_sequence: 12, first_offset: 1_031 }],
        }],
    };
    let f = journal_frame(&JournalRecord::Snapshot(snapshot));
    let l = layout(&[
        &FRAME,
        &[("next_topic_id", F::U64), ("offset_floor", F::U64), ("live.count", F::U32)],
        &META,
        &[("deleting.count", F::U32)],
        &META,
        &[("remove_after_us", F::U64), ("removed.count", F::U32), ("removed[0]", F::U32), ("removed[1]", F::U32)],
        &[("ends.count", F::U32), ("ends[0].topic", F::U64), ("ends[0].partition", F::U32), ("ends[0].end", F::U64)],
        &[("groups.count", F::U32)],
        &GROUP_OFFSETS,
        &[("next_producer_id", F::U64), ("producers.count", F::U32)],
        &[("log.topic", F::U64), ("log.partition", F::U32), ("producer_id", F::U64), ("epoch", F::U16)],
        &[("batches.count", F::U32), ("first_sequence", F::U32), ("last_sequence", F::U32), ("first_offset", F::U64)],
    ]);
    insta::assert_snapshot!(annotate(&f, &l));
}

const LOG: LogId = LogId { topic: TopicId(42), partition: 2 };

/// The log frame salt, as `src/logcodec.rs` defines it.
fn log_salt(log: LogId) -> u64 {
    log.topic.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(log.partition) ^ 0x4c4f_4753
}

#[test]
fn log_header() {
    let header = encode_log_header(LOG);
    assert_eq!(crc32c::crc32c(&header[..18]).to_le_bytes(), header[18..22], "header crc covers the first 18 bytes");
    let dump = annotate(
        &header,
        &[("magic", F::Magic(4)), ("version", F::U16), ("topic", F::U64), ("partition", F::U32), ("crc32c", F::Crc)],
    );
    insta::assert_snapshot!(dump);
}

#[test]
fn log_batch_of_one_keyed_record() {
    let rec = AppendRecord {
        offset: 17,
        record: ProduceRecord { key: Some(b"customer-7".to_vec()), value: b"paid".to_vec().into() },
    };
    let f = encode_records(LOG, &[rec]);
    check_frame_crc(&f, log_salt(LOG));
    let l = layout(&[
        &FRAME,
        &[
            ("batch.base_offset", F::U64),
            ("batch.count", F::U32),
            ("key.present", F::U8),
            ("key.len", F::U32),
            ("key", F::Text),
            ("value.len", F::U32),
            ("value", F::Text),
        ],
    ]);
    insta::assert_snapshot!(annotate(&f, &l));
}

#[test]
fn log_batch_of_two_records_one_without_key() {
    let recs = [
        AppendRecord { offset: 18, record: ProduceRecord { key: None, value: b"refunded".to_vec().into() } },
        AppendRecord { offset: 19, record: ProduceRecord { key: Some(b"k".to_vec()), value: b"v".to_vec().into() } },
    ];
    let f = encode_records(LOG, &recs);
    check_frame_crc(&f, log_salt(LOG));
    let l = layout(&[
        &FRAME,
        &[("batch.base_offset", F::U64), ("batch.count", F::U32)],
        &[("[0].key.present", F::U8), ("[0].value.len", F::U32), ("[0].value", F::Text)],
        &[("[1].key.present", F::U8), ("[1].key.len", F::U32), ("[1].key", F::Text)],
        &[("[1].value.len", F::U32), ("[1].value", F::Text)],
    ]);
    insta::assert_snapshot!(annotate(&f, &l));
}

#[test]
fn journal_group_commit_batch() {
    let recs = [
        JournalRecord::TopicDeleted { id: TopicId(3), remove_after: Time(5_000) },
        JournalRecord::DeletionCompleted { id: TopicId(3) },
    ];
    let position = 5000;
    let f = journal_commit(&JournalRecord::encode_commit(&recs, EPOCH, position), position);
    let l = layout(&[
        &FRAME,
        &[("[0].kind", F::U8), ("[0].len", F::U32), ("[0].id", F::U64), ("[0].remove_after_us", F::U64)],
        &[("[1].kind", F::U8), ("[1].len", F::U32), ("[1].id", F::U64)],
    ]);
    insta::assert_snapshot!(annotate(&f, &l));
}

// ----------------------------------------------------------------------------------
// Error messages
// ----------------------------------------------------------------------------------

fn corrupt(file: &str) -> StorageError {
    StorageError::Corrupt {
        file: file.into(),
        position: 4096,
        record_offset: Some(17),
        record_end: Some(20),
        detail: "checksum mismatch".into(),
    }
}

/// Every variant's message, with representative values.
#[test]
fn error_messages_of_every_variant() {
    let log = LogId { topic: TopicId(42), partition: 2 };
    let broker = [
        BrokerError::InvalidTopicName {
            name: "a/b".into(),
            reason: "may only contain ASCII letters, digits, `.`, `_` and `-`".into(),
        },
        BrokerError::InvalidPartitionCount { requested: 0, max: 1024 },
        BrokerError::InvalidSettings("deletion grace 9 ms exceeds the limit of 5 ms".into()),
        BrokerError::TopicAlreadyExists { name: "orders".into() },
        BrokerError::TopicNotFound { name: "orders".into() },
        BrokerError::PartitionNotFound { name: "orders".into(), partition: 3, partitions: 3 },
        BrokerError::OffsetOutOfRange { offset: 9, high_watermark: 4 },
        BrokerError::InvalidRequest("a produce needs at least one record".into()),
        BrokerError::DuplicateRequestId(7),
        BrokerError::Unavailable("the broker is recovering".into()),
        BrokerError::Halted("journal write failed: I/O error: EIO".into()),
        BrokerError::OutcomeUnknown("topic \"orders\" was deleted while the produce was in flight".into()),
        BrokerError::CorruptRecord {
            log: log.file_name(),
            offset: 17,
            end: 20,
            detail: "checksum mismatch (byte 4096)".into(),
        },
        BrokerError::Storage("I/O error: EIO".into()),
    ];
    let storage = [
        StorageError::NotFound("000000000000002a-00000002.log".into()),
        StorageError::DiskFull("journal".into()),
        StorageError::PermissionDenied("journal".into()),
        StorageError::Io("EIO".into()),
        StorageError::DirSyncFailed("after creating 000000000000002a-00000002.log: I/O error: EIO".into()),
        corrupt("000000000000002a-00000002.log"),
    ];
    let halts = [
        HaltReason::JournalWriteFailed(StorageError::Io("EIO".into())),
        HaltReason::LogWriteFailed { log, error: StorageError::DiskFull("no space".into()) },
        HaltReason::CorruptJournal { file: "journal".into(), offset: 118, detail: "checksum mismatch".into() },
        HaltReason::ContractViolation("completion for unknown operation 9".into()),
        HaltReason::DirectorySyncFailed("after removing 000000000000002a-00000002.log: I/O error: EIO".into()),
    ];
    let decode = [DecodeError::Truncated(31), DecodeError::Malformed { position: 12, detail: "option flag 2".into() }];
    let mut out = String::new();
    for e in &broker {
        writeln!(out, "BrokerError::{e:?}\n  {e}").unwrap();
    }
    for e in &storage {
        writeln!(out, "StorageError::{e:?}\n  {e}").unwrap();
    }
    for e in &halts {
        writeln!(out, "HaltReason::{e:?}\n  {e}").unwrap();
    }
    for e in &decode {
        writeln!(out, "DecodeError::{e:?}\n  {e}").unwrap();
    }
    insta::assert_snapshot!(out);
}

fn small_config() -> Config {
    Config {
        max_partitions: 4,
        max_batch_records: 2,
        max_record_bytes: 8,
        max_fetch_records: 5,
        max_grace_ms: 1000,
        ..Config::default()
    }
}

fn create(name: &str, partitions: u32, grace: u64) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings { deletion_grace_ms: grace } }
}

fn produce(topic: &str, records: &[(&str, &str)]) -> Command {
    Command::Produce {
        topic: topic.into(),
        partition: None,
        records: records
            .iter()
            .map(|(k, v)| ProduceRecord {
                key: (!k.is_empty()).then(|| k.as_bytes().to_vec()),
                value: v.as_bytes().to_vec().into(),
            })
            .collect(),
    }
}

fn fetch(topic: &str, partition: u32, offset: u64, max_records: u32) -> Command {
    Command::Fetch { topic: topic.into(), partition, offset, max_records, max_bytes: None }
}

/// The messages clients actually get, each from a real command against a broker.
#[test]
fn error_messages_clients_get() {
    let mut out = String::new();
    let mut d = SyncDriver::start(small_config(), MemFs::new());
    d.request(create("orders", 2, 0)).unwrap();
    d.request(produce("orders", &[("", "v0"), ("", "v1")])).unwrap();
    let cases = vec![
        create("", 1, 0),
        create(".", 1, 0),
        create("..", 1, 0),
        create("a/b", 1, 0),
        create(&"x".repeat(250), 1, 0),
        create("ok", 0, 0),
        create("ok", 5, 0),
        create("ok", 1, 1001),
        create("orders", 1, 0),
        produce("nope", &[("", "v")]),
        produce("orders", &[]),
        produce("orders", &[("", "a"), ("", "b"), ("", "c")]),
        produce("orders", &[("", "ok"), ("key", "too-long")]),
        Command::Produce {
            topic: "orders".into(),
            partition: Some(2),
            records: vec![ProduceRecord { key: None, value: b"v".to_vec().into() }],
        },
        fetch("nope", 0, 0, 1),
        fetch("orders", 2, 0, 1),
        fetch("orders", 0, 0, 0),
        fetch("orders", 0, 0, 6),
        fetch("orders", 0, 2, 1),
        Command::DescribeTopic { name: "nope".into() },
        Command::DeleteTopic { name: "nope".into() },
    ];
    for cmd in cases {
        let reply = d.request(cmd.clone());
        let e = reply.expect_err("an invalid command is refused");
        let cmd = format!("{cmd:?}").replace(&"x".repeat(250), "x * 250");
        writeln!(out, "{cmd}\n  {e}").unwrap();
    }

    // A record that rots on disk is reported, never served.
    let mut d = SyncDriver::start(small_config(), MemFs::new());
    d.request(create("rot", 1, 0)).unwrap();
    // Two appends, two batches: damage in the first is revealed by the second.
    d.request(produce("rot", &[("", "v0")])).unwrap();
    d.request(produce("rot", &[("", "v1")])).unwrap();
    let name = LogId { topic: TopicId(0), partition: 0 }.file_name();
    let mut disk = d.crash();
    // Header 22 bytes, frame header 9, base offset 8, count 4, key flag 1, value length 4: "v0" at 48.
    disk.file_mut(&name).unwrap()[49] ^= 0x01;
    let mut d = SyncDriver::start(small_config(), disk);
    assert_eq!(d.request(fetch("rot", 0, 1, 1)).map(|_| ()), Ok(()), "the record after the hole is served");
    let e = d.request(fetch("rot", 0, 0, 1)).expect_err("corrupt");
    writeln!(out, "fetch of a rotten record\n  {e}").unwrap();

    // A log whose header rots: its partition is unavailable.
    let mut disk = d.crash();
    disk.file_mut(&name).unwrap()[6] ^= 0x01;
    let mut d = SyncDriver::start(small_config(), disk);
    let e = d.request(fetch("rot", 0, 0, 1)).expect_err("unavailable");
    writeln!(out, "fetch from a log with a rotten header\n  {e}").unwrap();
    let e = d.request(produce("rot", &[("", "v")])).expect_err("unavailable");
    writeln!(out, "produce to a log with a rotten header\n  {e}").unwrap();

    // A journal corrupt before its tail: the broker refuses to start.
    d.request(create("later", 1, 0)).unwrap();
    let mut disk = d.crash();
    let journal = disk.file_mut(JOURNAL_FILE).unwrap();
    // Inside both copies of the first commit, with valid commits after it.
    let first = JOURNAL_FIRST_FRAME;
    let len = u32::from_le_bytes(journal[first..first + 4].try_into().unwrap()) as usize;
    journal[first + 12] ^= 0x01;
    journal[(first + 9 + len).next_multiple_of(JOURNAL_COPY_ALIGN) + 12] ^= 0x01;
    let d = SyncDriver::start(small_config(), disk);
    writeln!(out, "start on a journal corrupt in its middle\n  {}", d.halted().expect("halts")).unwrap();

    // Broker-level refusals: recovering, duplicate ids, halts, runtime contract breaches.
    let mut b = Broker::start(small_config(), Time::ZERO);
    b.handle_command(Time::ZERO, RequestId(1), Command::ListTopics);
    writeln!(out, "command while recovering\n  {}", reply_error(&mut b)).unwrap();
    let mut b = serving_broker();
    b.handle_command(Time::ZERO, RequestId(1), create("t", 1, 0));
    let append = pending_op(&mut b);
    b.handle_command(Time::ZERO, RequestId(1), Command::ListTopics);
    writeln!(out, "a request id already in flight\n  {}", reply_error(&mut b)).unwrap();
    b.handle_completion(Time::ZERO, append, Err(StorageError::Io("EIO".into())));
    let effects = b.drain_effects();
    for e in &effects {
        match e {
            Effect::Reply { reply: Err(e), .. } => {
                writeln!(out, "in flight when the journal write failed\n  {e}").unwrap()
            }
            Effect::Halt(h) => writeln!(out, "halt on a failed journal write\n  {h}").unwrap(),
            _ => {}
        }
    }
    b.handle_command(Time::ZERO, RequestId(2), Command::ListTopics);
    writeln!(out, "command after a halt\n  {}", reply_error(&mut b)).unwrap();
    let mut b = serving_broker();
    b.handle_completion(Time::ZERO, OpId(999), Ok(OpOutput::Done));
    writeln!(out, "completion of an unknown operation\n  {}", halt_of(&mut b)).unwrap();
    let mut b = serving_broker();
    b.handle_command(Time::ZERO, RequestId(1), create("t", 1, 0));
    let append = pending_op(&mut b);
    b.handle_completion(Time::ZERO, append, Ok(OpOutput::Logs(vec![])));
    writeln!(out, "completion of the wrong kind\n  {}", halt_of(&mut b)).unwrap();
    insta::assert_snapshot!(out);
}

/// A broker over an empty disk, driven through its first start until it serves.
fn serving_broker() -> Broker {
    let mut b = Broker::start(small_config(), Time::ZERO);
    let mut ex = broker_core::Executor::new(MemFs::new());
    while let Some(e) = b.poll_effect() {
        if let Effect::Storage { id, op } = e {
            let r = ex.execute(&op);
            b.handle_completion(Time::ZERO, id, r);
        }
    }
    assert_eq!(b.phase(), broker_core::Phase::Serving);
    b
}

/// The first storage operation queued (the rest are dropped).
fn pending_op(b: &mut Broker) -> OpId {
    let effects = b.drain_effects();
    effects
        .iter()
        .find_map(|e| match e {
            Effect::Storage { id, op: StorageOp::AppendJournal { .. } } => Some(*id),
            _ => None,
        })
        .expect("a journal append")
}

fn reply_error(b: &mut Broker) -> BrokerError {
    b.drain_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Reply { reply: Err(e), .. } => Some(e),
            _ => None,
        })
        .expect("an error reply")
}

fn halt_of(b: &mut Broker) -> HaltReason {
    b.drain_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Halt(h) => Some(h),
            _ => None,
        })
        .expect("a halt")
}
