//! Bad input from clients and from runtimes: invalid names and counts change nothing;
//! malformed, failed, duplicate and unknown completions and timers never panic the
//! broker, which answers with errors, retries, or halts.

use broker_core::{
    BrokerError, Command, Config, Effect, HaltReason, LogId, MemFs, OpId, OpOutput, Phase, Reply, RequestId,
    StorageError, StorageOp, StoredRecord, SyncDriver, Time, TopicId, TopicSettings, JOURNAL_FILE,
};
use broker_testkit::*;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

fn serving() -> SyncDriver<MemFs> {
    let mut d = SyncDriver::start(Config { max_partitions: 8, ..Default::default() }, MemFs::new());
    created(d.request(create("existing", 2)));
    produced(d.request(produce("existing", &["a"])));
    d
}

// ---------------------------------------------------------------------------------
// Client input
// ---------------------------------------------------------------------------------

#[test]
fn invalid_topic_names_are_rejected_and_change_nothing() {
    let mut d = serving();
    let long = "a".repeat(250);
    let bad: Vec<&str> = vec![
        "a/b",
        "/",
        "/etc/passwd",
        "..",
        ".",
        "../x",
        "x/..",
        "",
        &long,
        "tópico",
        "with space",
        " ",
        "nul\0byte",
        "\0",
        "back\\slash",
        "tab\t",
        "new\nline",
        "emoji😀",
        "colon:x",
        "star*",
    ];
    let fs_before = d.fs().clone();
    let topics_before = d.broker().live_topics();
    for name in bad {
        match d.request(create(name, 1)) {
            Err(BrokerError::InvalidTopicName { name: reported, reason }) => {
                assert_eq!(reported, name.chars().take(64).collect::<String>());
                assert!(!reason.is_empty());
            }
            other => panic!("{name:?}: expected InvalidTopicName, got {other:?}"),
        }
        // Other commands naming it find nothing and change nothing either.
        assert_eq!(d.request(delete(name)), Err(BrokerError::TopicNotFound { name: name.into() }));
        assert_eq!(d.request(produce(name, &["x"])), Err(BrokerError::TopicNotFound { name: name.into() }));
        assert_eq!(d.request(fetch(name, 0, 0, 1)), Err(BrokerError::TopicNotFound { name: name.into() }));
        assert_eq!(d.fs(), &fs_before, "{name:?} changed the disk (journal or logs)");
        assert_eq!(d.broker().live_topics(), topics_before, "{name:?}");
        assert_eq!(d.request(Command::ListTopics), Ok(Reply::Topics(topics_before.clone())));
    }
    // No id was consumed by the rejected creates.
    assert_eq!(created(d.request(create("next", 1))), TopicId(1));
}

#[test]
fn names_at_the_limits_are_accepted() {
    let mut d = serving();
    let longest = "b".repeat(249);
    for name in [longest.as_str(), "a", "...", "-", "_", "A.b_C-9"] {
        let id = created(d.request(create(name, 1)));
        assert_eq!(produced(d.request(produce(name, &["v"]))), vec![(0, 0)], "{name}");
        let (records, _) = fetched(d.request(fetch(name, 0, 0, 1)));
        assert_eq!(values(&records), vec!["v"]);
        // Storage is keyed by id: the name never becomes a file name.
        assert!(d.fs().names().iter().all(|f| !f.contains(name) || name.len() < 3), "{name}");
        assert!(d.fs().file(&LogId { topic: id, partition: 0 }.file_name()).is_some());
    }
}

#[test]
fn invalid_partition_counts_and_settings_are_rejected_and_change_nothing() {
    let mut d = serving();
    let fs_before = d.fs().clone();
    for partitions in [0, 9, u32::MAX] {
        assert_eq!(
            d.request(create("t", partitions)),
            Err(BrokerError::InvalidPartitionCount { requested: partitions, max: 8 })
        );
    }
    let too_slow = Command::CreateTopic {
        name: "t".into(),
        partitions: 1,
        settings: TopicSettings { deletion_grace_ms: Config::default().max_grace_ms + 1 },
    };
    assert!(matches!(d.request(too_slow), Err(BrokerError::InvalidSettings(_))));
    assert_eq!(d.request(create("existing", 1)), Err(BrokerError::TopicAlreadyExists { name: "existing".into() }));
    assert_eq!(d.fs(), &fs_before);
    assert_eq!(d.broker().live_topics().len(), 1);
    // The limit itself is accepted.
    created(d.request(create("t", 8)));
    assert_eq!(log_files(d.fs()).len(), 2 + 8);
}

#[test]
fn a_duplicate_request_id_is_refused_while_the_first_is_in_flight() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let now = h.now;
    h.broker.handle_command(now, RequestId(7), create("t", 1));
    h.broker.handle_command(now, RequestId(7), create("u", 1));
    h.collect();
    assert_eq!(h.take_reply(RequestId(7)), Some(Err(BrokerError::DuplicateRequestId(7))));
    h.run();
    assert!(matches!(h.take_reply(RequestId(7)), Some(Ok(Reply::Created { .. }))));
    let names: Vec<String> = h.broker.live_topics().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["t"], "the refused command changed nothing");
}

#[test]
fn commands_are_refused_while_recovering() {
    let mut h = Hand::new(Config::default(), MemFs::new());
    assert_eq!(h.broker.phase(), Phase::Recovering);
    assert!(matches!(h.ask(Command::ListTopics), Some(Err(BrokerError::Unavailable(_)))));
    assert!(matches!(h.ask(create("t", 1)), Some(Err(BrokerError::Unavailable(_)))));
    h.run();
    assert_eq!(h.broker.phase(), Phase::Serving);
    assert_eq!(h.ask(Command::ListTopics), Some(Ok(Reply::Topics(vec![]))));
}

// ---------------------------------------------------------------------------------
// Deterministic malformed completions
// ---------------------------------------------------------------------------------

fn io(what: &str) -> StorageError {
    StorageError::Io(what.into())
}

#[track_caller]
fn assert_halted_with(h: &Hand, reason: &HaltReason) {
    assert_eq!(h.broker.phase(), Phase::Halted);
    assert_eq!(h.halts, vec![reason.clone()]);
    assert!(matches!(h.trace.last(), Some(Effect::Halt(_))), "the halt is the last effect");
}

/// After a halt: commands are refused, completions and timers do nothing.
#[track_caller]
fn assert_stays_halted(h: &mut Hand) {
    assert!(matches!(h.ask(create("after", 1)), Some(Err(BrokerError::Unavailable(_)))));
    assert!(matches!(h.ask(Command::ListTopics), Some(Err(BrokerError::Unavailable(_)))));
    let mark = h.trace.len();
    for id in h.pending.keys().copied().collect::<Vec<_>>() {
        h.complete_with(id, done());
    }
    h.complete_with(OpId(9_999), done());
    let later = h.now.plus_millis(3_600_000);
    assert_eq!(h.broker.poll_timeout(), None, "a halted broker arms no timer");
    h.broker.handle_timeout(later);
    h.collect();
    assert_eq!(h.trace.len(), mark, "a halted broker emits nothing: {:?}", &h.trace[mark..]);
    assert_eq!(h.halts.len(), 1);
}

#[test]
fn failed_journal_sync_halts_and_the_inflight_create_learns_it() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let c = h.submit(create("t", 1));
    h.complete(h.first_pending(|op| matches!(op, StorageOp::AppendJournal { .. })));
    let sync = h.first_pending(|op| matches!(op, StorageOp::SyncJournal));
    h.complete_with(sync, Err(io("fsync failed")));
    assert_halted_with(&h, &HaltReason::JournalWriteFailed(io("fsync failed")));
    assert!(matches!(h.take_reply(c), Some(Err(BrokerError::Halted(_)))));
    assert!(h.ops_since(0, |op| matches!(op, StorageOp::CreateLog { .. })).is_empty(), "no log without intent");
    assert_stays_halted(&mut h);
    // Recovery from what is durable: the append reached MemFs, so the topic exists.
    let mut d = SyncDriver::start(Config::default(), h.crash());
    assert_eq!(d.phase(), Phase::Serving);
    created(d.request(create("u", 1)));
}

#[test]
fn unknown_operation_id_is_a_contract_violation() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let c = h.submit(create("t", 1));
    h.complete_with(OpId(1_000), done());
    assert_eq!(h.broker.phase(), Phase::Halted);
    assert!(matches!(&h.halts[..], [HaltReason::ContractViolation(m)] if m.contains("unknown operation 1000")));
    assert!(matches!(h.take_reply(c), Some(Err(BrokerError::Halted(_)))));
    assert_stays_halted(&mut h);
}

/// A topic with a produce in flight, its append pending: the harness and the append.
fn produce_with_append_pending() -> (Hand, RequestId, OpId) {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    let p = h.submit(produce("t", &["a"]));
    let append = h.first_pending(|op| matches!(op, StorageOp::Append { .. }));
    (h, p, append)
}

#[test]
fn duplicate_completion_is_a_contract_violation() {
    let (mut h, p, append) = produce_with_append_pending();
    h.complete(append);
    h.complete_with(append, done());
    assert!(matches!(&h.halts[..], [HaltReason::ContractViolation(_)]));
    assert!(matches!(h.take_reply(p), Some(Err(BrokerError::Halted(_)))), "it was never acknowledged");
    assert_stays_halted(&mut h);
}

#[test]
fn wrong_output_kind_is_a_contract_violation() {
    let (mut h, p, append) = produce_with_append_pending();
    h.complete_with(append, Ok(OpOutput::Logs(vec![])));
    assert!(
        matches!(&h.halts[..], [HaltReason::ContractViolation(m)] if m.contains("wrong output (expected done)")),
        "{:?}",
        h.halts
    );
    assert!(matches!(h.take_reply(p), Some(Err(BrokerError::Halted(_)))));
    assert_stays_halted(&mut h);
}

#[test]
fn offsets_at_the_end_of_the_range_are_refused_not_overflowed() {
    // A runtime reports logs whose next offset is at the very end of the offset range.
    let mut h = Hand::new(Config::default(), disk_with_topic());
    h.complete(h.first_pending(|op| matches!(op, StorageOp::ReadJournal)));
    h.complete(h.first_pending(|op| matches!(op, StorageOp::ReplaceJournal { .. })));
    let opens = h.pending_where(|op| matches!(op, StorageOp::OpenLog { .. }));
    h.complete_with(opens[0], Ok(OpOutput::Opened { next_offset: u64::MAX, damaged: vec![], tail_cut: None }));
    h.complete_with(opens[1], Ok(OpOutput::Opened { next_offset: u64::MAX - 1, damaged: vec![], tail_cut: None }));
    h.run();
    assert_eq!(h.broker.phase(), Phase::Serving);
    let before = h.exec.fs().clone();
    // Partition 0 has no offset left, partition 1 has one: a produce that needs more is refused whole.
    let reply = h.ask(produce("t", &["x"]));
    assert!(matches!(reply, Some(Err(BrokerError::Storage(_)))), "{reply:?}");
    let reply = h.ask(produce_keyed("t", &[("k1", "x"), ("k1", "y"), ("k1", "z")]));
    assert!(matches!(reply, Some(Err(BrokerError::Storage(_)))), "{reply:?}");
    assert_eq!(h.exec.fs(), &before, "a refused produce changes nothing");
    assert_eq!(h.broker.ops_in_flight(), 0);
    // A read near the end whose result claims more records than exist is an error, not a panic.
    let f = h.submit(fetch("t", 0, u64::MAX - 1, 10));
    let read = h.first_pending(|op| matches!(op, StorageOp::Read { .. }));
    let records =
        (0..3).map(|i| StoredRecord { offset: (u64::MAX - 1).wrapping_add(i), key: None, value: vec![].into() });
    h.complete_with(read, Ok(OpOutput::Records(records.collect())));
    assert!(matches!(h.take_reply(f), Some(Err(BrokerError::Storage(_)))));
    assert_eq!(h.broker.phase(), Phase::Serving);
}

#[test]
fn a_log_record_claiming_the_last_offset_does_not_panic_recovery() {
    // Damage followed by a well-formed record at offset u64::MAX: the disk, not the core, is wrong.
    let mut fs = disk_with_topic();
    let log = LogId { topic: TopicId(0), partition: 0 };
    let absurd =
        broker_core::encode_records(log, &[broker_core::AppendRecord { offset: u64::MAX, record: rec(None, "z") }]);
    let file = fs.file_mut(&log.file_name()).unwrap();
    file.extend_from_slice(&[0xff; 12]);
    file.extend_from_slice(&absurd);
    let mut d = SyncDriver::start(Config::default(), fs);
    assert_eq!(d.phase(), Phase::Serving, "{:?}", d.halted());
    // A batch whose offsets run past the last one is malformed: it is never accepted,
    // so the damage is a torn tail and the partition keeps its one record.
    let (records, hw) = fetched(d.request(fetch("t", 0, 0, 10)));
    assert_eq!((values(&records), hw), (vec!["a".to_string()], 1));
    let (records, _) = fetched(d.request(fetch("t", 1, 0, 10)));
    assert_eq!(values(&records), vec!["b"]);
}

#[test]
fn time_passing_with_no_timer_due_does_nothing() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    assert_eq!(h.broker.poll_timeout(), None);
    let mark = h.trace.len();
    for ms in [0, 1, 2, 99, 86_400_000] {
        let at = h.now.plus_millis(ms);
        h.broker.handle_timeout(at);
    }
    // And time going back is taken as no time passing.
    h.broker.handle_timeout(Time::ZERO);
    h.collect();
    assert_eq!(h.trace.len(), mark);
    assert_eq!(h.broker.phase(), Phase::Serving);
    assert_eq!(produced(h.request(produce("t", &["a"]))), vec![(0, 0)]);
}

#[test]
fn a_timer_fires_once_at_its_deadline() {
    let fs = FlakyRemoveFs { fail_removes: 1, ..Default::default() };
    let mut h = Hand::start_on(Config::default(), fs);
    created(h.request(create("t", 1)));
    h.request(delete("t")).unwrap();
    let deadline = h.broker.poll_timeout().expect("a retry is armed");
    assert!(deadline > h.now, "the retry backs off");
    // Just before the deadline: nothing fires.
    let mark = h.trace.len();
    h.broker.handle_timeout(Time(deadline.0 - 1));
    h.collect();
    assert_eq!(h.trace.len(), mark);
    assert!(h.fire_next_timer());
    let mark = h.trace.len();
    h.broker.handle_timeout(deadline);
    h.collect();
    assert_eq!(h.trace.len(), mark);
    assert!(h.broker.pending_deletions().is_empty());
}

#[test]
fn malformed_read_results_fail_the_fetch_without_halting() {
    let record = |offset: u64| StoredRecord { offset, key: None, value: b"v".to_vec().into() };
    let cases: Vec<(OpResult, &str)> = vec![
        (Ok(OpOutput::Done), "Storage"),
        (Ok(OpOutput::Records(vec![])), "Storage"),
        (Ok(OpOutput::Records(vec![record(1), record(0)])), "Storage"),
        (Ok(OpOutput::Records(vec![record(5)])), "Storage"),
        (Ok(OpOutput::Records(vec![record(0), record(1), record(2)])), "Storage"),
        (Err(io("read failed")), "Storage"),
        (
            Err(StorageError::Corrupt {
                file: "x".into(),
                position: 40,
                record_offset: Some(1),
                record_end: Some(2),
                detail: "checksum mismatch".into(),
            }),
            "CorruptRecord",
        ),
        (Ok(OpOutput::Records(vec![record(0)])), "Fetched"),
    ];
    for (result, expected) in cases {
        let mut h = Hand::start(Config::default(), MemFs::new());
        created(h.request(create("t", 1)));
        produced(h.request(produce("t", &["a", "b"])));
        let f = h.submit(fetch("t", 0, 0, 10));
        let read = h.first_pending(|op| matches!(op, StorageOp::Read { .. }));
        let shown = format!("{result:?}");
        h.complete_with(read, result);
        let reply = h.take_reply(f).expect("the fetch is answered");
        let kind = match &reply {
            Err(BrokerError::Storage(_)) => "Storage",
            Err(BrokerError::CorruptRecord { offset, .. }) => {
                assert_eq!(*offset, 1);
                "CorruptRecord"
            }
            Ok(Reply::Fetched { .. }) => "Fetched",
            _ => "other",
        };
        assert_eq!(kind, expected, "{shown} gave {reply:?}");
        assert_eq!(h.broker.phase(), Phase::Serving, "{shown}");
        // The log is still usable, and deletable (its read is no longer in flight).
        let (records, _) = fetched(h.request(fetch("t", 0, 0, 10)));
        assert_eq!(values(&records), vec!["a", "b"]);
        h.request(delete("t")).unwrap();
        h.settle(10);
        assert!(log_files(h.exec.fs()).is_empty(), "{shown}");
    }
}

use broker_core::OpResult;

/// The kinds of storage operation, and how to bring a broker to where one is pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ReadJournal,
    ListLogs,
    ReplaceJournal,
    OpenLog,
    AppendJournal,
    SyncJournal,
    CreateLog,
    Append,
    SyncLog,
    Read,
    RemoveLog,
    RemoveStray,
}

const KINDS: [Kind; 12] = [
    Kind::ReadJournal,
    Kind::ListLogs,
    Kind::ReplaceJournal,
    Kind::OpenLog,
    Kind::AppendJournal,
    Kind::SyncJournal,
    Kind::CreateLog,
    Kind::Append,
    Kind::SyncLog,
    Kind::Read,
    Kind::RemoveLog,
    Kind::RemoveStray,
];

fn errors() -> Vec<StorageError> {
    vec![
        StorageError::NotFound("x".into()),
        StorageError::DiskFull("x".into()),
        StorageError::PermissionDenied("x".into()),
        StorageError::Io("x".into()),
        StorageError::Corrupt {
            file: "x".into(),
            position: 3,
            record_offset: Some(0),
            record_end: None,
            detail: "bad".into(),
        },
        StorageError::DirSyncFailed("x".into()),
    ]
}

/// A disk with topic `t` (2 partitions, a record in each) and a stray log.
fn disk_with_topic() -> MemFs {
    let mut d = SyncDriver::start(Config::default(), MemFs::new());
    created(d.request(create("t", 2)));
    produced(d.request(produce("t", &["a", "b"])));
    let mut fs = d.crash();
    let stray = LogId { topic: TopicId(40), partition: 0 };
    use broker_core::FileSystem;
    fs.create(&stray.file_name()).unwrap();
    fs.write_at(&stray.file_name(), 0, &broker_core::encode_log_header(stray)).unwrap();
    fs
}

/// A broker with an operation of `kind` pending (and the request waiting on it, if any).
fn pending(kind: Kind) -> (Hand, OpId, Option<RequestId>) {
    let matches_kind = move |op: &StorageOp| {
        matches!(
            (kind, op),
            (Kind::ReadJournal, StorageOp::ReadJournal)
                | (Kind::ListLogs, StorageOp::ListLogs)
                | (Kind::ReplaceJournal, StorageOp::ReplaceJournal { .. })
                | (Kind::OpenLog, StorageOp::OpenLog { .. })
                | (Kind::AppendJournal, StorageOp::AppendJournal { .. })
                | (Kind::SyncJournal, StorageOp::SyncJournal)
                | (Kind::CreateLog, StorageOp::CreateLog { .. })
                | (Kind::Append, StorageOp::Append { .. })
                | (Kind::SyncLog, StorageOp::SyncLog { .. })
                | (Kind::Read, StorageOp::Read { .. })
                | (Kind::RemoveLog | Kind::RemoveStray, StorageOp::RemoveLog { .. })
        )
    };
    let mut request = None;
    let mut h = match kind {
        Kind::ReadJournal | Kind::ListLogs | Kind::OpenLog | Kind::RemoveStray => {
            Hand::new(Config::default(), disk_with_topic())
        }
        Kind::ReplaceJournal => Hand::new(Config::default(), MemFs::new()),
        _ => {
            let mut h = Hand::start(Config::default(), disk_with_topic());
            h.settle(10);
            request = Some(match kind {
                Kind::AppendJournal | Kind::SyncJournal | Kind::CreateLog => h.submit(create("u", 1)),
                Kind::Append | Kind::SyncLog => h.submit(produce("t", &["c"])),
                Kind::Read => h.submit(fetch("t", 0, 0, 10)),
                _ => h.submit(delete("t")),
            });
            h
        }
    };
    h.run_holding(matches_kind);
    let id = h.first_pending(matches_kind);
    (h, id, request)
}

#[test]
fn every_error_of_every_operation_kind_is_handled() {
    for kind in KINDS {
        for error in errors() {
            let (mut h, id, request) = pending(kind);
            let what = format!("{kind:?} failing with {error:?}");
            h.complete_with(id, Err(error.clone()));
            if let StorageError::DirSyncFailed(detail) = &error {
                // Whatever the operation (only creations, removals and journal
                // replacements sync the directory), its durability is unknown: halt.
                assert_halted_with(&h, &HaltReason::DirectorySyncFailed(detail.clone()));
                // A delete is acknowledged once its tombstone is durable, before any removal.
                if let Some(r) = request.filter(|_| kind != Kind::RemoveLog) {
                    assert!(matches!(h.take_reply(r), Some(Err(BrokerError::Halted(_)))), "{what}");
                }
                assert_stays_halted(&mut h);
                continue;
            }
            match kind {
                Kind::AppendJournal | Kind::SyncJournal | Kind::ReplaceJournal => {
                    assert_halted_with(&h, &HaltReason::JournalWriteFailed(error.clone()));
                    if let Some(r) = request {
                        assert!(matches!(h.take_reply(r), Some(Err(BrokerError::Halted(_)))), "{what}");
                    }
                    assert_stays_halted(&mut h);
                    continue;
                }
                Kind::Append | Kind::SyncLog => {
                    let log = LogId { topic: TopicId(0), partition: 0 };
                    assert_halted_with(&h, &HaltReason::LogWriteFailed { log, error: error.clone() });
                    assert!(matches!(h.take_reply(request.unwrap()), Some(Err(BrokerError::Halted(_)))), "{what}");
                    assert_stays_halted(&mut h);
                    continue;
                }
                Kind::Read => {
                    let reply = h.take_reply(request.unwrap());
                    match error {
                        StorageError::Corrupt { .. } => {
                            assert!(matches!(reply, Some(Err(BrokerError::CorruptRecord { offset: 0, .. }))), "{what}")
                        }
                        _ => assert!(matches!(reply, Some(Err(BrokerError::Storage(_)))), "{what}: {reply:?}"),
                    }
                }
                Kind::OpenLog if matches!(error, StorageError::NotFound(_)) => {
                    let log = match &h.done[&id] {
                        StorageOp::OpenLog { log, .. } => *log,
                        other => panic!("{other:?}"),
                    };
                    assert!(
                        h.pending
                            .values()
                            .any(|op| *op == StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false }),
                        "{what}: recreated"
                    );
                }
                Kind::OpenLog if matches!(error, StorageError::Corrupt { .. }) => {
                    h.settle(10);
                    assert_eq!(h.broker.phase(), Phase::Serving, "{what}");
                    // The damaged partition refuses service; the other one serves.
                    let reply = h.request(fetch("t", 0, 0, 10));
                    assert!(matches!(reply, Err(BrokerError::Storage(_))), "{what}: {reply:?}");
                    let reply = h.request(produce("t", &["x"]));
                    assert!(matches!(reply, Err(BrokerError::Storage(_))), "{what}: {reply:?}");
                    let (records, _) = fetched(h.request(fetch("t", 1, 0, 10)));
                    assert_eq!(values(&records), vec!["b"]);
                    continue;
                }
                // Background work (recovery reads, log creation, opening, removal): retried later.
                _ => assert_eq!(h.broker.timers_armed(), 1, "{what}: a retry is armed"),
            }
            // Everything else recovers: let the retries run and check the broker serves.
            h.settle(20);
            assert!(h.halts.is_empty(), "{what}: {:?}", h.halts);
            assert_eq!(h.broker.phase(), Phase::Serving, "{what}");
            match kind {
                Kind::CreateLog => assert!(matches!(h.take_reply(request.unwrap()), Some(Ok(Reply::Created { .. })))),
                Kind::RemoveLog => {
                    assert!(matches!(h.take_reply(request.unwrap()), Some(Ok(Reply::DeleteAccepted { .. }))));
                    assert!(h.broker.pending_deletions().is_empty(), "{what}");
                }
                _ => {}
            }
            assert_eq!(log_files(h.exec.fs()), h.live_logs(), "{what}: the logs on disk are the live topics' logs");
        }
    }
}

// ---------------------------------------------------------------------------------
// Random sequences (proptest)
// ---------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Step {
    /// A client command: (kind, topic name index, parameter).
    Command(u8, u8, u8),
    /// Carry out the n-th pending operation for real.
    Complete(usize),
    /// Fail the n-th pending operation with an error.
    Fail(usize, u8),
    /// Complete the n-th pending operation with an arbitrary output.
    Output(usize, u8, u64),
    /// A completion for an id never issued.
    Unknown(u64),
    /// A second completion of the n-th completed operation.
    Duplicate(usize),
    /// Time passes by this many milliseconds (a timer may or may not fall due).
    Timer(u64),
    /// Fire the earliest armed timer.
    FireDue,
}

/// Random steps; with `violations`, also completions that break the runtime contract
/// (arbitrary outputs, unknown and duplicate ids), which halt the broker.
fn step(violations: bool) -> impl Strategy<Value = Step> {
    let v = u32::from(violations);
    prop_oneof![
        8 => (0u8..6, 0u8..3, any::<u8>()).prop_map(|(k, n, p)| Step::Command(k, n, p)),
        16 => (0usize..64).prop_map(Step::Complete),
        2 => (0usize..64, 0u8..5).prop_map(|(i, e)| Step::Fail(i, e)),
        2 * v => (0usize..64, 0u8..8, prop_oneof![Just(0u64), Just(1), Just(u64::MAX), any::<u64>()])
            .prop_map(|(i, o, v)| Step::Output(i, o, v)),
        v => prop_oneof![Just(0u64), 1_000u64..2_000, Just(u64::MAX)].prop_map(Step::Unknown),
        v => (0usize..64).prop_map(Step::Duplicate),
        1 => (0u64..8).prop_map(Step::Timer),
        3 => Just(Step::FireDue),
    ]
}

fn command(kind: u8, name: u8, param: u8) -> Command {
    let name = ["a", "b", "c"][name as usize % 3];
    match kind {
        0 => create_grace(name, 1 + u32::from(param % 3), u64::from(param % 2) * 5),
        1 => delete(name),
        2 => Command::Produce {
            topic: name.into(),
            partition: None,
            records: (0..1 + param % 3).map(|i| rec((i % 2 == 0).then_some("k"), "v")).collect(),
        },
        3 => fetch(name, u32::from(param % 3), u64::from(param % 4), 1 + u32::from(param % 3)),
        4 => Command::ListTopics,
        _ => Command::DescribeTopic { name: name.into() },
    }
}

fn output(kind: u8, v: u64) -> OpOutput {
    match kind {
        0 => OpOutput::Done,
        1 => OpOutput::Journal(None),
        2 => OpOutput::Journal(Some(v.to_le_bytes().to_vec())),
        3 => OpOutput::Logs(vec![LogId { topic: TopicId(v % 5), partition: (v % 3) as u32 }]),
        4 => OpOutput::Logs(vec![LogId { topic: TopicId(v), partition: 0 }]),
        5 => OpOutput::Opened { next_offset: v, damaged: vec![], tail_cut: None },
        6 => OpOutput::Records(vec![StoredRecord { offset: v, key: None, value: vec![1].into() }]),
        _ => OpOutput::Records(vec![]),
    }
}

fn nth<K: Copy, V>(map: &std::collections::BTreeMap<K, V>, i: usize) -> Option<K> {
    if map.is_empty() {
        None
    } else {
        map.keys().nth(i % map.len()).copied()
    }
}

/// Runs `steps` against a broker over a disk holding a topic; checks the broker's
/// promises after every step.
fn run_steps(steps: &[Step]) {
    let mut h = Hand::new(Config::default(), disk_with_topic());
    let mut halted_at = None;
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Command(k, n, p) => {
                h.submit(command(*k, *n, *p));
            }
            Step::Complete(i) => {
                if let Some(id) = nth(&h.pending, *i) {
                    h.complete(id);
                }
            }
            Step::Fail(i, e) => {
                if let Some(id) = nth(&h.pending, *i) {
                    h.complete_with(id, Err(errors()[*e as usize % 5].clone()));
                }
            }
            Step::Output(i, o, v) => {
                if let Some(id) = nth(&h.pending, *i) {
                    h.complete_with(id, Ok(output(*o, *v)));
                }
            }
            Step::Unknown(id) => h.complete_with(OpId(*id), done()),
            Step::Duplicate(i) => {
                if let Some(id) = nth(&h.done, *i) {
                    h.complete_with(id, done());
                }
            }
            Step::Timer(ms) => {
                h.now = h.now.plus_millis(*ms * 25);
                let now = h.now;
                h.broker.handle_timeout(now);
                h.collect();
            }
            Step::FireDue => {
                h.fire_next_timer_only();
            }
        }
        // Promises that hold after any input.
        let mut seen = std::collections::BTreeSet::new();
        assert!(h.answered.iter().all(|r| seen.insert(*r)), "a request was answered twice");
        assert!(h.halts.len() <= 1, "halted twice: {:?}", h.halts);
        assert_eq!(h.broker.phase() == Phase::Halted, !h.halts.is_empty());
        match (halted_at, h.halts.is_empty()) {
            (None, false) => {
                halted_at = Some(h.trace.iter().position(|e| matches!(e, Effect::Halt(_))).unwrap());
            }
            (Some(at), _) => {
                let after = &h.trace[at + 1..];
                assert!(
                    after.iter().all(|e| matches!(e, Effect::Reply { reply: Err(BrokerError::Unavailable(_)), .. })),
                    "after the halt only refusals: {after:?}"
                );
            }
            _ => {}
        }
        if h.broker.phase() == Phase::Halted {
            assert_eq!(h.broker.ops_in_flight(), 0, "step {i}");
            assert_eq!(h.broker.timers_armed(), 0, "step {i}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 384,
        rng_seed: RngSeed::Fixed(0x0b0c_e5ed),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_malformed_completions_never_panic(steps in prop::collection::vec(step(true), 1..80)) {
        run_steps(&steps);
    }

    #[test]
    fn random_failed_completions_never_panic(steps in prop::collection::vec(step(false), 1..150)) {
        run_steps(&steps);
    }
}

// ---------------------------------------------------------------------------------
// Random well-behaved runs: real completions in any order the contract allows
// ---------------------------------------------------------------------------------

/// What an operation targets: operations on one target take effect in issue order.
fn target(op: &StorageOp) -> String {
    match op.log() {
        Some(log) => log.to_string(),
        None if matches!(op, StorageOp::ListLogs) => "list".into(),
        None => "journal".into(),
    }
}

#[derive(Clone, Debug)]
enum Good {
    Command(u8, u8, u8),
    /// Complete the oldest pending operation of the n-th target.
    Complete(usize),
    FireDue,
    Crash,
}

fn good() -> impl Strategy<Value = Good> {
    prop_oneof![
        4 => (0u8..4, 0u8..3, any::<u8>()).prop_map(|(k, n, p)| Good::Command(k, n, p)),
        12 => (0usize..16).prop_map(Good::Complete),
        2 => Just(Good::FireDue),
        1 => Just(Good::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(0x600d_5eed),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// With a well-behaved runtime (completions reordered across targets, crashes
    /// anywhere), the broker never halts, answers every request, and once settled the
    /// logs on disk are exactly those of its live topics.
    #[test]
    fn reordered_completions_and_crashes_never_orphan_logs(steps in prop::collection::vec(good(), 1..120)) {
        let mut h = Hand::new(Config::default(), MemFs::new());
        let mut asked = Vec::new();
        for s in &steps {
            match s {
                Good::Command(k, n, p) => asked.push(h.submit(command(*k, *n, *p))),
                Good::Complete(i) => {
                    let mut heads: std::collections::BTreeMap<String, OpId> = Default::default();
                    for (id, op) in &h.pending {
                        heads.entry(target(op)).or_insert(*id);
                    }
                    if !heads.is_empty() {
                        let id = *heads.values().nth(i % heads.len()).unwrap();
                        h.complete(id);
                    }
                }
                Good::FireDue => {
                    h.fire_next_timer_only();
                }
                Good::Crash => {
                    let fs = std::mem::replace(&mut h, Hand::new(Config::default(), MemFs::new())).crash();
                    h = Hand::new(Config::default(), fs);
                    asked.clear();
                }
            }
            prop_assert!(h.halts.is_empty(), "halted: {:?}", h.halts);
        }
        h.settle(1_000);
        prop_assert!(h.halts.is_empty(), "halted: {:?}", h.halts);
        prop_assert_eq!(h.broker.phase(), Phase::Serving);
        for r in asked {
            prop_assert!(h.answered.contains(&r), "request {} never answered", r.0);
        }
        prop_assert!(h.broker.pending_deletions().is_empty());
        prop_assert_eq!(log_files(h.exec.fs()), h.live_logs());
        prop_assert!(h.exec.fs().file(JOURNAL_FILE).is_some());
    }
}

// ---------------------------------------------------------------------------------
// A failed directory fsync is never retried and trusted
// ---------------------------------------------------------------------------------

/// After a failed directory fsync the entry's durability is unknown: the broker must
/// halt (a new process recovers from what is durable), never retry the fsync and trust
/// its later success.
#[track_caller]
fn assert_halted_on_dir_sync(h: &Hand<FlakyDirSyncFs>, what: &str) {
    assert_eq!(h.broker.phase(), Phase::Halted, "{what}: the broker halts");
    assert_eq!(h.halts.len(), 1, "{what}: {:?}", h.halts);
    assert!(matches!(&h.halts[0], HaltReason::DirectorySyncFailed(d) if d.contains("injected")), "{what}");
    let message = h.halts[0].to_string();
    assert!(message.contains("directory fsync failed after") && message.contains("restart"), "{what}: {message}");
    assert_eq!(h.exec.fs().dir_syncs, 1, "{what}: the failed directory fsync is not retried");
}

#[test]
fn a_failed_directory_sync_after_creating_a_log_halts_instead_of_retrying() {
    let mut h = Hand::start_on(Config::default(), FlakyDirSyncFs::default());
    h.exec.fs_mut().fail_dir_syncs = 1;
    h.exec.fs_mut().dir_syncs = 0;
    let c = h.submit(create("t", 1));
    h.settle(20);
    assert_halted_on_dir_sync(&h, "create");
    assert_eq!(h.ops_since(0, |op| matches!(op, StorageOp::CreateLog { .. })).len(), 1, "no second CreateLog");
    assert!(matches!(h.take_reply(c), Some(Err(BrokerError::Halted(_)))), "the create's outcome is unknown");
}

#[test]
fn a_failed_directory_sync_after_removing_a_log_halts_instead_of_retrying() {
    let mut h = Hand::start_on(Config::default(), FlakyDirSyncFs::default());
    created(h.request(create("t", 1)));
    h.exec.fs_mut().fail_dir_syncs = 1;
    h.exec.fs_mut().dir_syncs = 0;
    let mark = h.trace.len();
    let _ = h.submit(delete("t"));
    h.settle(20);
    assert_halted_on_dir_sync(&h, "remove");
    assert_eq!(h.ops_since(mark, is_remove).len(), 1, "no second RemoveLog");
}

/// A read that a runtime reports corrupt at the last offset of the range: the fetch gets
/// a typed error naming it and the operator a notice, with no overflow.
#[test]
fn corruption_reported_at_the_last_offset_does_not_overflow() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    produced(h.request(produce("t", &["a"])));
    let f = h.submit(fetch("t", 0, 0, 10));
    let read = h.first_pending(|op| matches!(op, StorageOp::Read { .. }));
    let corrupt = broker_core::StorageError::Corrupt {
        file: "0000000000000000-00000000.log".into(),
        position: 8,
        record_offset: Some(u64::MAX),
        record_end: Some(u64::MAX),
        detail: "bad checksum".into(),
    };
    h.complete_with(read, Err(corrupt));
    assert!(
        matches!(h.take_reply(f), Some(Err(BrokerError::CorruptRecord { offset: u64::MAX, .. }))),
        "the fetch names the offset"
    );
    assert!(
        h.notices.iter().any(|n| matches!(n, broker_core::Notice::Corruption { from: u64::MAX, to: u64::MAX, .. })),
        "{:?}",
        h.notices
    );
    assert_eq!(h.broker.phase(), Phase::Serving);
}

/// The extent of damage a runtime reports is what a reader skips: the fetch's error and
/// the notice carry it, kept past the offset and within the high watermark, whatever
/// the runtime says.
#[test]
fn a_reported_extent_of_damage_stays_past_the_offset_and_within_the_high_watermark() {
    // (the runtime's end, the end the fetch reports) for damage at offset 1 of 5 records.
    let cases = [(None, 2), (Some(0), 2), (Some(1), 2), (Some(4), 4), (Some(5), 5), (Some(u64::MAX), 5)];
    for (record_end, want) in cases {
        let mut h = Hand::start(Config::default(), MemFs::new());
        created(h.request(create("t", 1)));
        produced(h.request(produce("t", &["a", "b", "c", "d", "e"])));
        let f = h.submit(fetch("t", 0, 1, 10));
        let read = h.first_pending(|op| matches!(op, StorageOp::Read { .. }));
        let corrupt = StorageError::Corrupt {
            file: "x".into(),
            position: 8,
            record_offset: Some(1),
            record_end,
            detail: "bad checksum".into(),
        };
        h.complete_with(read, Err(corrupt));
        let reply = h.take_reply(f);
        assert!(
            matches!(reply, Some(Err(BrokerError::CorruptRecord { offset: 1, end, .. })) if end == want),
            "{record_end:?}: {reply:?}"
        );
        let noticed =
            h.notices.iter().any(|n| matches!(n, broker_core::Notice::Corruption { from: 1, to, .. } if *to == want));
        assert!(noticed, "{record_end:?}: {:?}", h.notices);
        assert_eq!(h.broker.phase(), Phase::Serving);
    }
}
