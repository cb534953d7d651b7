//! The topic lifecycle: partitioning, offsets, fetch bounds, acknowledgement after
//! sync, deletion racing in-flight I/O, re-creation during deletion, repeated deletes
//! and removal retries.

use broker_core::{
    partition_for_key, BrokerError, Command, Config, Effect, JournalRecord, LogId, MemFs, Phase, ProduceRecord, Reply,
    StorageOp, SyncDriver, TopicId,
};
use broker_testkit::*;

fn start() -> SyncDriver<MemFs> {
    SyncDriver::start(Config::default(), MemFs::new())
}

fn storage_ops(trace: &[Effect]) -> Vec<StorageOp> {
    trace
        .iter()
        .filter_map(|e| match e {
            Effect::Storage { op, .. } => Some(op.clone()),
            _ => None,
        })
        .collect()
}

fn names(d: &SyncDriver<MemFs>) -> Vec<(String, TopicId)> {
    d.broker().live_topics().into_iter().map(|t| (t.name, t.id)).collect()
}

// ---------------------------------------------------------------------------------
// Produce and fetch
// ---------------------------------------------------------------------------------

#[test]
fn keyed_records_land_on_their_murmur2_partition_with_dense_offsets() {
    let mut d = start();
    created(d.request(create("t", 5)));
    let keys: Vec<String> = (0..40).map(|i| format!("customer-{i}")).collect();
    let mut next = [0u64; 5];
    for chunk in keys.chunks(7) {
        let records: Vec<(&str, &str)> = chunk.iter().map(|k| (k.as_str(), "v")).collect();
        let positions = produced(d.request(produce_keyed("t", &records)));
        for (key, (partition, offset)) in chunk.iter().zip(positions) {
            assert_eq!(partition, partition_for_key(key.as_bytes(), 5), "key {key}");
            assert_eq!(offset, next[partition as usize], "offsets are dense per partition");
            next[partition as usize] += 1;
        }
    }
    assert!(next.iter().all(|&n| n > 0), "40 keys spread over every partition: {next:?}");
    // Known Kafka values: murmur2("21") -> partition 3 of 7.
    created(d.request(create("seven", 7)));
    assert_eq!(produced(d.request(produce_keyed("seven", &[("21", "x")]))), vec![(3, 0)]);
    // Every record reads back at its position, under its key.
    for p in 0..5u32 {
        let (records, hw) = fetched(d.request(fetch("t", p, 0, 100)));
        assert_eq!(hw, next[p as usize]);
        assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..hw).collect::<Vec<_>>());
        for r in records {
            assert_eq!(partition_for_key(r.key.as_ref().unwrap(), 5), p);
        }
    }
}

#[test]
fn keyless_records_round_robin_across_produces() {
    let mut d = start();
    created(d.request(create("t", 3)));
    let first = produced(d.request(produce("t", &["a", "b", "c", "d"])));
    assert_eq!(first, vec![(0, 0), (1, 0), (2, 0), (0, 1)]);
    // The cursor carries over to the next produce; keyed records do not move it.
    let key = "k";
    let kp = partition_for_key(key.as_bytes(), 3);
    let mixed = Command::Produce {
        topic: "t".into(),
        partition: None,
        records: vec![rec(None, "e"), rec(Some(key), "f"), rec(None, "g")],
    };
    let positions = produced(d.request(mixed));
    assert_eq!(positions[0].0, 1);
    assert_eq!(positions[1].0, kp);
    assert_eq!(positions[2].0, 2);
    let (records, hw) = fetched(d.request(fetch("t", 0, 0, 10)));
    assert_eq!(values(&records)[..2], ["a".to_string(), "d".to_string()]);
    assert_eq!(hw, records.len() as u64);
}

#[test]
fn a_named_partition_overrides_keys_and_the_round_robin() {
    let mut d = start();
    created(d.request(create("t", 3)));
    let key = "k";
    // Neither the key's partition nor the round-robin's next (0).
    let elsewhere = if partition_for_key(key.as_bytes(), 3) == 1 { 2 } else { 1 };
    let to = |partition: u32| Command::Produce {
        topic: "t".into(),
        partition: Some(partition),
        records: vec![rec(None, "a"), rec(Some(key), "b")],
    };
    assert_eq!(produced(d.request(to(elsewhere))), vec![(elsewhere, 0), (elsewhere, 1)]);
    // The round-robin cursor did not move: the next keyless record goes to partition 0.
    assert_eq!(produced(d.request(produce("t", &["c"]))), vec![(0, 0)]);
    // A partition the topic does not have is refused, and nothing is written.
    let e = d.request(to(3)).expect_err("partition 3 of 3");
    assert_eq!(e, BrokerError::PartitionNotFound { name: "t".into(), partition: 3, partitions: 3 });
    let hws = (0..3).map(|p| fetched(d.request(fetch("t", p, 0, 10))).1).collect::<Vec<_>>();
    let mut want = vec![0; 3];
    want[elsewhere as usize] = 2;
    want[0] += 1;
    assert_eq!(hws, want);
}

#[test]
fn fetch_bounds() {
    let mut d = start();
    created(d.request(create("t", 2)));
    produced(d.request(produce("t", &["a", "b", "c", "d", "e"]))); // p0: a c e, p1: b d
    let (records, hw) = fetched(d.request(fetch("t", 0, 1, 10)));
    assert_eq!((values(&records), hw), (vec!["c".into(), "e".into()], 3));
    let (records, _) = fetched(d.request(fetch("t", 0, 0, 2)));
    assert_eq!(values(&records), vec!["a", "c"], "max_records is honoured");
    assert_eq!(fetched(d.request(fetch("t", 0, 3, 10))), (vec![], 3));
    assert_eq!(d.request(fetch("t", 0, 4, 10)), Err(BrokerError::OffsetOutOfRange { offset: 4, high_watermark: 3 }));
    assert_eq!(
        d.request(fetch("t", 0, u64::MAX, 10)),
        Err(BrokerError::OffsetOutOfRange { offset: u64::MAX, high_watermark: 3 })
    );
    assert_eq!(
        d.request(fetch("t", 2, 0, 10)),
        Err(BrokerError::PartitionNotFound { name: "t".into(), partition: 2, partitions: 2 })
    );
    assert!(matches!(d.request(fetch("t", 0, 0, 0)), Err(BrokerError::InvalidRequest(_))));
    assert_eq!(d.request(fetch("nope", 0, 0, 1)), Err(BrokerError::TopicNotFound { name: "nope".into() }));
    // Empty partition: offset 0 is the high watermark.
    created(d.request(create("empty", 1)));
    assert_eq!(fetched(d.request(fetch("empty", 0, 0, 1))), (vec![], 0));
}

#[test]
fn produce_is_acknowledged_only_after_the_log_sync_completes() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 2)));
    let r = h.submit(produce("t", &["a", "b"]));
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    let syncs = h.pending_where(|op| matches!(op, StorageOp::SyncLog { .. }));
    assert_eq!(syncs.len(), 2, "one sync per partition written");
    assert_eq!(h.take_reply(r), None, "appended but not synced: no ack");
    // Unacknowledged records are not visible either.
    assert_eq!(h.ask(fetch("t", 0, 0, 10)).map(fetched), Some((vec![], 0)));
    assert_eq!(h.ask(fetch("t", 0, 1, 10)), Some(Err(BrokerError::OffsetOutOfRange { offset: 1, high_watermark: 0 })));
    h.complete(syncs[0]);
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    assert_eq!(h.take_reply(r), None, "one partition synced of two: still no ack");
    h.complete(syncs[1]);
    assert_eq!(h.take_reply(r), None, "synced, but the acknowledged end is not yet journaled");
    let journal_sync = h.first_pending(|op| matches!(op, StorageOp::SyncJournal));
    h.run_holding(|op| matches!(op, StorageOp::SyncJournal));
    assert_eq!(h.take_reply(r), None, "journaled, not yet durable");
    h.complete(journal_sync);
    assert_eq!(produced(h.take_reply(r).unwrap()), vec![(0, 0), (1, 0)]);
    let (records, hw) = fetched(h.request(fetch("t", 0, 0, 10)));
    assert_eq!((values(&records), hw), (vec!["a".into()], 1));
}

#[test]
fn produces_are_acknowledged_in_offset_order() {
    // A later produce whose sync completes first waits for the earlier one.
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    let first = h.submit(produce("t", &["a"]));
    let second = h.submit(produce("t", &["b"]));
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    let syncs = h.pending_where(|op| matches!(op, StorageOp::SyncLog { .. }));
    assert_eq!(syncs.len(), 2);
    h.complete(syncs[1]);
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    assert_eq!((h.take_reply(first), h.take_reply(second)), (None, None));
    h.complete(syncs[0]);
    h.run();
    assert_eq!(produced(h.take_reply(first).unwrap()), vec![(0, 0)]);
    assert_eq!(produced(h.take_reply(second).unwrap()), vec![(0, 1)]);
}

// ---------------------------------------------------------------------------------
// Deletion racing in-flight I/O
// ---------------------------------------------------------------------------------

#[test]
fn delete_while_a_fetch_is_in_flight_waits_for_the_read() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let t = created(h.request(create("t", 2)));
    produced(h.request(produce("t", &["a", "b", "c"])));
    let busy = LogId { topic: t, partition: 0 };
    let f = h.submit(fetch("t", 0, 0, 10));
    let read = h.first_pending(|op| matches!(op, StorageOp::Read { .. }));
    let del = h.submit(delete("t"));
    h.run_holding(|op| matches!(op, StorageOp::Read { .. }));
    // The tombstone is durable, but the incarnation still owes the fetch its reply:
    // no reply for it may follow `DeleteAccepted`, so the acknowledgement waits.
    assert_eq!(h.take_reply(del), None, "the delete is acknowledged only once the read is answered");
    assert_eq!(h.broker.pending_deletions().first().map(|d| d.tombstone_durable), Some(true));
    assert_eq!(h.ask(fetch("t", 0, 0, 10)), Some(Err(BrokerError::TopicNotFound { name: "t".into() })));
    let removed = removed_logs(&h.ops_since(0, is_remove));
    assert!(!removed.contains(&busy), "no RemoveLog for a log with a read in flight");
    assert!(removed.contains(&LogId { topic: t, partition: 1 }), "the idle partition goes");
    assert!(h.exec.fs().file(&busy.file_name()).is_some());
    assert_eq!(h.broker.pending_deletions().len(), 1);

    let mark = h.trace.len();
    h.complete(read);
    let (records, hw) = fetched(h.take_reply(f).unwrap());
    assert_eq!((values(&records), hw), (vec!["a".into(), "c".into()], 2), "the fetch succeeds with its data");
    assert_eq!(h.take_reply(del), Some(Ok(Reply::DeleteAccepted { topic: t })), "then the delete is acknowledged");
    assert_eq!(h.ops_since(mark, is_remove), vec![StorageOp::RemoveLog { log: busy }], "removed after the read");
    h.settle(10);
    assert!(log_files(h.exec.fs()).is_empty());
    assert!(h.broker.pending_deletions().is_empty());
    assert!(journal_records(h.exec.fs()).contains(&JournalRecord::DeletionCompleted { id: t }));
}

#[test]
fn delete_while_a_produce_is_in_flight_waits_for_its_writes_and_never_acks_it_after_the_delete() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let t = created(h.request(create("t", 1)));
    let p = h.submit(produce("t", &["a"]));
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    let del = h.submit(delete("t"));
    h.run_holding(|op| matches!(op, StorageOp::SyncLog { .. }));
    assert_eq!(h.take_reply(del), None, "no produce may be acknowledged after the delete: the delete waits");
    assert!(h.ops_since(0, is_remove).is_empty(), "a sync is outstanding on the only log");
    let mark = h.trace.len();
    h.complete(h.first_pending(|op| matches!(op, StorageOp::SyncLog { .. })));
    // Its topic's deletion was invoked first and its records will never be served: the
    // produce is answered that the topic is gone, and only then the delete.
    assert_eq!(h.take_reply(p), Some(Err(BrokerError::TopicNotFound { name: "t".into() })));
    assert_eq!(h.take_reply(del), Some(Ok(Reply::DeleteAccepted { topic: t })), "then the delete is acknowledged");
    assert_eq!(h.ops_since(mark, is_remove).len(), 1);
    h.settle(10);
    assert!(log_files(h.exec.fs()).is_empty());
}

#[test]
fn delete_racing_a_create_leaves_nothing_behind() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let c = h.submit(create("t", 2));
    // The intent is not durable yet; the topic is not visible yet either.
    assert_eq!(
        h.ask(Command::DescribeTopic { name: "t".into() }),
        Some(Err(BrokerError::TopicNotFound { name: "t".into() }))
    );
    let d = h.submit(delete("t"));
    h.settle(10);
    let t = created(h.take_reply(c).unwrap());
    assert_eq!(h.take_reply(d), Some(Ok(Reply::DeleteAccepted { topic: t })));
    assert!(log_files(h.exec.fs()).is_empty());
    assert!(h.broker.pending_deletions().is_empty());
    assert!(h.broker.live_topics().is_empty());
}

#[test]
fn a_deleting_topic_is_hidden_before_its_tombstone_is_durable() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let t = created(h.request(create("t", 1)));
    let d = h.submit(delete("t"));
    h.run_holding(|op| matches!(op, StorageOp::SyncJournal));
    assert_eq!(h.take_reply(d), None, "not accepted before the tombstone is durable");
    assert!(h.broker.live_topics().is_empty());
    assert_eq!(h.ask(Command::ListTopics), Some(Ok(Reply::Topics(vec![]))));
    assert_eq!(h.ask(produce("t", &["x"])), Some(Err(BrokerError::TopicNotFound { name: "t".into() })));
    assert_eq!(h.ask(fetch("t", 0, 0, 1)), Some(Err(BrokerError::TopicNotFound { name: "t".into() })));
    assert!(h.ops_since(0, is_remove).is_empty(), "nothing removed before the tombstone is durable");
    h.run();
    assert_eq!(h.take_reply(d), Some(Ok(Reply::DeleteAccepted { topic: t })));
}

// ---------------------------------------------------------------------------------
// Repeated deletes and re-creation
// ---------------------------------------------------------------------------------

#[test]
fn second_delete_of_a_deleting_topic_is_accepted_and_starts_no_second_pipeline() {
    let mut d = start();
    let t = created(d.request(create_grace("t", 3, 100)));
    d.record_trace();
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: t }));
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: t }));
    d.settle(100);
    assert_eq!(d.request(delete("t")), Err(BrokerError::TopicNotFound { name: "t".into() }), "once it is gone");
    let ops = storage_ops(&d.take_trace());
    let removes: Vec<&StorageOp> = ops.iter().filter(|op| is_remove(op)).collect();
    assert_eq!(removes.len(), 3, "one removal per partition: {removes:?}");
    let tombstones = ops
        .iter()
        .filter_map(|op| match op {
            StorageOp::AppendJournal { records, .. } => Some(records),
            _ => None,
        })
        .flatten()
        .filter(|r| matches!(r, JournalRecord::TopicDeleted { .. }))
        .count();
    assert_eq!(tombstones, 1, "one tombstone");
}

#[test]
fn second_delete_before_the_tombstone_is_durable_waits_for_it() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    let t = created(h.request(create("t", 2)));
    let first = h.submit(delete("t"));
    let second = h.submit(delete("t"));
    assert_eq!((h.take_reply(first), h.take_reply(second)), (None, None));
    h.settle(10);
    assert_eq!(h.take_reply(first), Some(Ok(Reply::DeleteAccepted { topic: t })));
    assert_eq!(h.take_reply(second), Some(Ok(Reply::DeleteAccepted { topic: t })));
    assert_eq!(h.ops_since(0, is_remove).len(), 2);
}

#[test]
fn recreating_a_name_during_its_deletion_gets_a_new_untouched_incarnation() {
    let mut d = start();
    let old = created(d.request(create_grace("t", 2, 1000)));
    produced(d.request(produce("t", &["old-a", "old-b", "old-c"])));
    d.record_trace();
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: old }));
    // The name is free at once, under a new id; the new topic is writable and readable.
    let new = created(d.request(create("t", 2)));
    assert_ne!(new, old);
    assert_eq!(names(&d), vec![("t".to_string(), new)]);
    // Its offsets begin past every offset the old one acknowledged (2, in partition 0):
    // a reader still at a position of the old incarnation is told it is out of range.
    assert_eq!(produced(d.request(produce("t", &["new-a", "new-b", "new-c"]))), vec![(0, 2), (1, 2), (0, 3)]);
    assert_eq!(d.request(fetch("t", 0, 1, 10)), Err(BrokerError::OffsetBeforeStart { offset: 1, log_start: 2 }));
    let (records, hw) = fetched(d.request(fetch("t", 0, 2, 10)));
    assert_eq!((values(&records), hw), (vec!["new-a".into(), "new-c".into()], 4));
    let pending = d.broker().pending_deletions();
    assert_eq!((pending.len(), pending[0].topic), (1, old));
    // The old incarnation's removal runs after its grace delay and never touches the new logs.
    d.advance_millis(1000);
    d.settle(100);
    let removed = removed_logs(&storage_ops(&d.take_trace()));
    let expected: std::collections::BTreeSet<LogId> = (0..2).map(|partition| LogId { topic: old, partition }).collect();
    assert_eq!(removed, expected);
    assert_eq!(log_files(d.fs()), vec![LogId { topic: new, partition: 0 }, LogId { topic: new, partition: 1 }]);
    assert!(d.broker().pending_deletions().is_empty());
    let (records, _) = fetched(d.request(fetch("t", 0, 2, 10)));
    assert_eq!(values(&records), vec!["new-a", "new-c"]);
    let (records, _) = fetched(d.request(fetch("t", 1, 2, 10)));
    assert_eq!(values(&records), vec!["new-b"]);
    // And so after a restart.
    let mut d = SyncDriver::start(Config::default(), d.crash());
    assert_eq!(names(&d), vec![("t".to_string(), new)]);
    let (records, _) = fetched(d.request(fetch("t", 0, 2, 10)));
    assert_eq!(values(&records), vec!["new-a", "new-c"]);
    // A topic created now begins past the deleted incarnation too, whatever its name.
    let other = created(d.request(create("u", 1)));
    let described = d.request(Command::DescribeTopic { name: "u".into() });
    assert!(matches!(&described, Ok(Reply::Described(t)) if t.log_start == 2 && t.id == other), "{described:?}");
}

#[test]
fn recreated_and_deleted_again_while_the_first_deletion_is_pending() {
    let mut d = start();
    let first = created(d.request(create_grace("t", 1, 1000)));
    d.request(delete("t")).unwrap();
    let second = created(d.request(create_grace("t", 1, 10)));
    produced(d.request(produce("t", &["x"])));
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: second }));
    let pending: Vec<TopicId> = d.broker().pending_deletions().iter().map(|p| p.topic).collect();
    assert_eq!(pending, vec![first, second]);
    // The second's shorter grace runs out first; the first's still waits.
    d.advance_millis(10);
    let pending: Vec<TopicId> = d.broker().pending_deletions().iter().map(|p| p.topic).collect();
    assert_eq!(pending, vec![first]);
    assert_eq!(log_files(d.fs()), vec![LogId { topic: first, partition: 0 }]);
    // A repeated delete of the name is accepted for the newest incarnation being deleted.
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: first }));
    d.settle(100);
    assert!(log_files(d.fs()).is_empty());
    assert!(d.broker().pending_deletions().is_empty());
}

#[test]
fn create_of_an_existing_name_is_refused() {
    let mut d = start();
    created(d.request(create("t", 1)));
    assert_eq!(d.request(create("t", 3)), Err(BrokerError::TopicAlreadyExists { name: "t".into() }));
    assert_eq!(d.broker().live_topics()[0].partitions, 1);
}

/// `a.b` beside a live `a_b` is refused (Kafka's rule: both are one metric name) and
/// changes nothing; once `a_b` is deleted, `a.b` may be created.
#[test]
fn create_of_a_name_colliding_with_a_live_one_is_refused_until_it_is_deleted() {
    let mut d = start();
    created(d.request(create("a_b", 1)));
    let refused = d.request(create("a.b", 2));
    assert!(matches!(&refused, Err(BrokerError::InvalidTopicName { name, .. }) if name == "a.b"), "{refused:?}");
    assert_eq!(names(&d).into_iter().map(|(n, _)| n).collect::<Vec<_>>(), ["a_b"]);
    created(d.request(create("a-b", 1)));
    assert!(matches!(d.request(Command::DeleteTopic { name: "a_b".into() }), Ok(Reply::DeleteAccepted { .. })));
    created(d.request(create("a.b", 2)));
}

// ---------------------------------------------------------------------------------
// Removal retries
// ---------------------------------------------------------------------------------

/// Lets time pass from deadline to deadline until no timer is armed: the time of each, in
/// milliseconds.
fn deadlines<F: broker_core::FileSystem>(d: &mut SyncDriver<F>) -> Vec<u64> {
    let mut fired = Vec::new();
    for _ in 0..100 {
        let Some(at) = d.broker().poll_timeout() else { break };
        fired.push(at.as_micros() / 1000);
        d.fire_next_timer();
    }
    fired
}

#[test]
fn failed_removals_are_retried_with_backoff_until_they_succeed() {
    let fs = FlakyRemoveFs { fail_removes: 4, ..Default::default() };
    let mut d = SyncDriver::start(Config::default(), fs);
    let t = created(d.request(create("t", 1)));
    produced(d.request(produce("t", &["a"])));
    d.record_trace();
    assert_eq!(d.request(delete("t")), Ok(Reply::DeleteAccepted { topic: t }));
    // Exponential backoff from retry_base_ms = 10: 10, 20, 40, 80 ms after each failure.
    assert_eq!(deadlines(&mut d), vec![10, 30, 70, 150]);
    let trace = d.take_trace();
    assert_eq!(storage_ops(&trace).iter().filter(|op| is_remove(op)).count(), 5);
    assert_eq!((d.fs().failed, d.fs().removes), (4, 5));
    assert!(log_files(&d.fs().inner).is_empty());
    assert!(d.broker().pending_deletions().is_empty());
    assert!(journal_records(&d.fs().inner).contains(&JournalRecord::DeletionCompleted { id: t }));
    assert_eq!(d.phase(), Phase::Serving);
}

#[test]
fn backoff_is_capped() {
    let config = Config { retry_base_ms: 10, retry_max_ms: 50, ..Default::default() };
    let fs = FlakyRemoveFs { fail_removes: 6, ..Default::default() };
    let mut d = SyncDriver::start(config, fs);
    created(d.request(create("t", 1)));
    d.record_trace();
    d.request(delete("t")).unwrap();
    let mut previous = 0;
    let delays: Vec<u64> = deadlines(&mut d)
        .into_iter()
        .map(|ms| {
            let delay = ms - previous;
            previous = ms;
            delay
        })
        .collect();
    assert_eq!(delays, vec![10, 20, 40, 50, 50, 50]);
    assert!(log_files(&d.fs().inner).is_empty());
}

#[test]
fn records_too_large_or_batches_empty_are_refused_without_side_effects() {
    let config = Config { max_record_bytes: 8, max_batch_records: 3, ..Default::default() };
    let mut d = SyncDriver::start(config, MemFs::new());
    created(d.request(create("t", 2)));
    let before = d.fs().clone();
    let big = ProduceRecord { key: Some(b"1234".to_vec()), value: b"56789".to_vec().into() };
    assert!(matches!(
        d.request(Command::Produce { topic: "t".into(), partition: None, records: vec![rec(None, "a"), big] }),
        Err(BrokerError::InvalidRequest(_))
    ));
    assert!(matches!(d.request(produce("t", &[])), Err(BrokerError::InvalidRequest(_))));
    assert!(matches!(d.request(produce("t", &["a", "b", "c", "d"])), Err(BrokerError::InvalidRequest(_))));
    assert_eq!(d.fs(), &before);
    // The round-robin cursor did not move either.
    assert_eq!(produced(d.request(produce("t", &["a"]))), vec![(0, 0)]);
}

/// Hole: 17 values of 1 MiB - 100 bytes in one produce (17 MiB, over the 16 MiB log
/// frame) were acknowledged, then read back as nothing and cut on the next start, and
/// their offsets were handed out again. A produce either round-trips or is refused
/// before anything is written.
#[test]
fn a_batch_over_one_log_frame_is_refused_before_anything_is_written() {
    let mut d = start();
    created(d.request(create("t", 1)));
    let before = d.fs().clone();
    let value = vec![b'x'; (1 << 20) - 100];
    let big: Vec<ProduceRecord> = (0..17).map(|_| ProduceRecord { key: None, value: value.clone().into() }).collect();
    let reply = d.request(Command::Produce { topic: "t".into(), partition: None, records: big.clone() });
    let Err(BrokerError::BatchTooLarge { bytes, max }) = reply else { panic!("{reply:?}") };
    assert!(bytes > max, "{bytes} <= {max}");
    assert_eq!(d.fs(), &before, "nothing was written");
    // Under the limit, the largest batch round-trips and survives a restart.
    let fits = (max / (value.len() as u64 + 16)) as usize;
    let reply = d.request(Command::Produce { topic: "t".into(), partition: None, records: big[..fits].to_vec() });
    assert_eq!(produced(reply).len(), fits);
    let mut d = SyncDriver::start(Config::default(), d.crash());
    let Ok(Reply::Fetched { records, high_watermark, .. }) = d.request(fetch("t", 0, 0, 100)) else { panic!() };
    assert_eq!((records.len(), high_watermark), (fits, fits as u64));
    assert!(records.iter().all(|r| r.value == value));
}

/// The executor, too, refuses a batch that no reader would accept, before writing it.
#[test]
fn the_executor_never_writes_a_frame_that_readers_refuse() {
    let mut exec = broker_core::Executor::new(MemFs::new());
    let log = LogId { topic: TopicId(1), partition: 0 };
    exec.execute(&StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false }).unwrap();
    let before = exec.fs().clone();
    let record = ProduceRecord { key: None, value: vec![7; 1 << 20].into() };
    let records = (0..17).map(|offset| broker_core::AppendRecord { offset, record: record.clone() }).collect();
    let err = exec.execute(&StorageOp::Append { log, records }).unwrap_err();
    assert!(err.to_string().contains("frame limit"), "{err}");
    assert_eq!(exec.fs(), &before);
}

/// Memory stays bounded: a long-running broker remembers only its latest completed
/// deletions, and counts them all.
#[test]
fn completed_deletions_are_remembered_within_a_bound_and_all_counted() {
    let mut d = start();
    let n = broker_core::COMPLETED_KEPT as u64 + 6;
    for _ in 0..n {
        created(d.request(create("t", 1)));
        assert!(matches!(d.request(delete("t")), Ok(Reply::DeleteAccepted { .. })));
        d.settle(10);
    }
    assert_eq!(d.broker().completed_deletion_count(), n);
    let kept: Vec<TopicId> = d.broker().completed_deletions().collect();
    assert_eq!(kept.len(), broker_core::COMPLETED_KEPT);
    assert_eq!(kept.last(), Some(&TopicId(n - 1)), "the latest is kept");
    assert_eq!(kept.first(), Some(&TopicId(6)), "the oldest go first");
}

/// Memory stays bounded: a fetch returns at most `max_fetch_bytes` of keys and values
/// (one record, however large, always goes, so a consumer makes progress).
#[test]
fn a_fetch_is_bounded_in_bytes_as_well_as_in_records() {
    let config = Config { max_fetch_bytes: 10, ..Config::default() };
    let mut d = SyncDriver::start(config, MemFs::new());
    created(d.request(create("t", 1)));
    produced(d.request(produce("t", &["aaaa", "bbbb"])));
    produced(d.request(produce("t", &["cccc"])));
    produced(d.request(produce("t", &["a-record-over-the-bound"])));
    let (records, hw) = fetched(d.request(fetch("t", 0, 0, 100)));
    assert_eq!((values(&records), hw), (vec!["aaaa".to_string(), "bbbb".to_string()], 4));
    let (records, _) = fetched(d.request(fetch("t", 0, 2, 100)));
    assert_eq!(values(&records), vec!["cccc".to_string()], "the next batch would pass the bound");
    let (records, _) = fetched(d.request(fetch("t", 0, 3, 100)));
    assert_eq!(values(&records), vec!["a-record-over-the-bound".to_string()]);
}
