//! Idempotent producers in the core: ids handed out once, a retried batch answered with
//! its first positions (in flight, after a restart, after a compaction), batches out of
//! sequence or from a fenced epoch refused, and a deleted topic's producers forgotten.

use broker_core::{
    BrokerError, Command, Config, Durability, MemFs, ProduceRecord, ProducerBatch, Reply, StorageOp, SyncDriver,
};
use broker_testkit::*;

fn init(reply: Result<Reply, BrokerError>) -> u64 {
    match reply {
        Ok(Reply::ProducerInitialized { producer_id, epoch: 0 }) => producer_id,
        other => panic!("expected ProducerInitialized, got {other:?}"),
    }
}

fn send(topic: &str, partition: u32, producer_id: u64, epoch: u16, first_sequence: u32, values: &[&str]) -> Command {
    Command::ProduceIdempotent {
        topic: topic.into(),
        partition,
        producer: ProducerBatch { producer_id, epoch, first_sequence },
        records: values.iter().map(|v| ProduceRecord { key: None, value: v.to_string().into() }).collect(),
    }
}

fn offsets(reply: Result<Reply, BrokerError>) -> Vec<u64> {
    produced(reply).into_iter().map(|(_, o)| o).collect()
}

fn high_watermark(d: &mut SyncDriver<MemFs>, topic: &str, partition: u32) -> u64 {
    fetched(d.request(fetch(topic, partition, 0, 1))).1
}

fn start(config: Config) -> SyncDriver<MemFs> {
    let mut d = SyncDriver::start(config, MemFs::new());
    created(d.request(create("t", 2)));
    d
}

#[test]
fn producer_ids_are_never_handed_out_twice_across_restarts() {
    let mut d = start(Config::default());
    let a = init(d.request(Command::InitProducer));
    let b = init(d.request(Command::InitProducer));
    assert_ne!(a, b);
    let mut d = SyncDriver::start(Config::default(), d.crash());
    let c = init(d.request(Command::InitProducer));
    assert!(c > a && c > b, "{c} after {a} and {b}");
}

#[test]
fn a_retried_batch_is_answered_with_its_first_positions_and_appended_once() {
    let mut d = start(Config::default());
    let p = init(d.request(Command::InitProducer));
    assert_eq!(offsets(d.request(send("t", 1, p, 0, 0, &["a", "b"]))), vec![0, 1]);
    assert_eq!(offsets(d.request(send("t", 1, p, 0, 0, &["a", "b"]))), vec![0, 1], "the retry");
    assert_eq!(high_watermark(&mut d, "t", 1), 2, "appended once");
    assert_eq!(offsets(d.request(send("t", 1, p, 0, 2, &["c"]))), vec![2]);
    // Out of sequence: a gap, a batch overlapping the last, a sequence past the largest.
    for (seq, values) in [(4, &["x"][..]), (2, &["c", "d"][..])] {
        let refused = d.request(send("t", 1, p, 0, seq, values));
        assert!(matches!(refused, Err(BrokerError::OutOfOrderSequence { expected: 3, .. })), "{refused:?}");
    }
    let refused = d.request(send("t", 1, p, 0, 1 << 31, &["x"]));
    assert!(matches!(refused, Err(BrokerError::InvalidRequest(_))), "{refused:?}");
    // A new epoch starts at 0; the old one is fenced from then on.
    let refused = d.request(send("t", 1, p, 1, 3, &["x"]));
    assert!(matches!(refused, Err(BrokerError::OutOfOrderSequence { expected: 0, .. })), "{refused:?}");
    assert_eq!(offsets(d.request(send("t", 1, p, 1, 0, &["e"]))), vec![3]);
    let refused = d.request(send("t", 1, p, 0, 3, &["x"]));
    assert!(matches!(refused, Err(BrokerError::ProducerFenced { epoch: 0, current: 1, .. })), "{refused:?}");
    // An id never handed out is refused: it could be handed out later to another.
    let refused = d.request(send("t", 1, p + 1, 0, 0, &["x"]));
    assert!(matches!(refused, Err(BrokerError::UnknownProducer { .. })), "{refused:?}");
    assert_eq!(high_watermark(&mut d, "t", 1), 4, "refusals appended nothing");
    // Partitions keep their own sequences.
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 77, &["f"]))), vec![0]);
}

#[test]
fn a_retry_of_a_batch_in_flight_is_answered_with_it() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    let p = init(h.request(Command::InitProducer));
    let is_sync = |op: &StorageOp| matches!(op, StorageOp::SyncLog { .. });
    // Pipelined, as Kafka producers send: the second batch follows the first in flight.
    let first = h.submit(send("t", 0, p, 0, 0, &["a", "b"]));
    let second = h.submit(send("t", 0, p, 0, 2, &["c"]));
    let retry = h.submit(send("t", 0, p, 0, 0, &["a", "b"]));
    h.run_holding(is_sync);
    assert!(h.take_reply(retry).is_none(), "the retry waits for the first send");
    h.run();
    assert_eq!(offsets(h.take_reply(first).unwrap()), vec![0, 1]);
    assert_eq!(offsets(h.take_reply(second).unwrap()), vec![2]);
    assert_eq!(offsets(h.take_reply(retry).unwrap()), vec![0, 1]);
    assert_eq!(fetched(h.request(fetch("t", 0, 0, 10))).1, 3);
}

#[test]
fn producers_survive_a_restart_and_a_compaction() {
    for durability in [Durability::Journaled, Durability::LOG_SYNC] {
        let config = Config { durability, compaction_min_records: 10, compaction_ratio: 2, ..Config::default() };
        let mut d = start(config.clone());
        let p = init(d.request(Command::InitProducer));
        for seq in 0..30 {
            offsets(d.request(send("t", 0, p, 0, seq, &["v"])));
        }
        d.run_until_idle();
        let mut d = SyncDriver::start(config.clone(), d.crash());
        assert_eq!(offsets(d.request(send("t", 0, p, 0, 29, &["v"]))), vec![29], "{durability:?}: the retry");
        assert_eq!(offsets(d.request(send("t", 0, p, 0, 27, &["v"]))), vec![27], "{durability:?}: one of five kept");
        assert_eq!(high_watermark(&mut d, "t", 0), 30, "{durability:?}: appended once");
        assert_eq!(offsets(d.request(send("t", 0, p, 0, 30, &["w"]))), vec![30]);
        let refused = d.request(send("t", 0, p, 0, 32, &["x"]));
        assert!(matches!(refused, Err(BrokerError::OutOfOrderSequence { expected: 31, .. })), "{refused:?}");
    }
}

#[test]
fn a_deleted_topic_s_producers_go_with_it() {
    let mut d = start(Config::default());
    let p = init(d.request(Command::InitProducer));
    offsets(d.request(send("t", 0, p, 0, 0, &["a", "b", "c"])));
    d.request(delete("t")).unwrap();
    created(d.request(create("t", 2)));
    // The new incarnation knows no state of the producer: its next batch starts it,
    // at the new incarnation's own offsets.
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["a", "b", "c"]))), vec![3, 4, 5]);
    let mut d = SyncDriver::start(Config::default(), d.crash());
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["a", "b", "c"]))), vec![3, 4, 5], "a retry, after a restart");
}

#[test]
fn past_the_bound_the_least_recently_used_producer_is_forgotten() {
    let mut d = start(Config { max_producer_states: 2, ..Config::default() });
    let ids: Vec<u64> = (0..3).map(|_| init(d.request(Command::InitProducer))).collect();
    for &p in &ids {
        offsets(d.request(send("t", 0, p, 0, 0, &["v"])));
    }
    // The first producer's state was forgotten: its next batch is taken whatever its
    // sequence (as Kafka takes a producer it has no state for), so a retry is new.
    assert_eq!(offsets(d.request(send("t", 0, ids[0], 0, 0, &["v"]))), vec![3]);
    assert_eq!(offsets(d.request(send("t", 0, ids[2], 0, 0, &["v"]))), vec![2], "the newest is kept");
}

#[cfg(feature = "planted-bugs")]
#[test]
fn the_planted_bug_appends_a_retry_after_a_restart_twice() {
    use broker_core::planted::{Bug, PlantedBugs};
    let config = Config { bugs: PlantedBugs::only(Bug::ProducerStateNotRecovered), ..Config::default() };
    let mut d = start(config.clone());
    let p = init(d.request(Command::InitProducer));
    offsets(d.request(send("t", 0, p, 0, 0, &["v"])));
    let mut d = SyncDriver::start(config, d.crash());
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["v"]))), vec![1], "the retry is appended again");
}

#[test]
fn a_batch_past_a_limit_is_refused_even_at_a_retried_sequence() {
    let mut d = start(Config { max_record_bytes: 8, ..Config::default() });
    let p = init(d.request(Command::InitProducer));
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["a"]))), vec![0]);
    // The sequence of the batch just acknowledged, with no record, or with one too
    // large: refused as any produce would be, not answered as a retry of it.
    let empty = d.request(send("t", 0, p, 0, 0, &[]));
    assert!(matches!(empty, Err(BrokerError::InvalidRequest(_))), "{empty:?}");
    let large = d.request(send("t", 0, p, 0, 0, &["too large!"]));
    assert!(matches!(large, Err(BrokerError::InvalidRequest(_))), "{large:?}");
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["a"]))), vec![0], "the retry is answered");
    assert_eq!(high_watermark(&mut d, "t", 0), 1, "refusals appended nothing");
}

#[test]
fn a_retry_is_answered_when_the_log_of_its_first_send_no_longer_opens() {
    use broker_core::{FileSystem, LogId};
    // Under log-sync a batch's state is journaled with the next journal commit, its
    // log's end only within the interval: the state holds offsets past the journal's end.
    let config = Config { durability: Durability::LogSync { journal_ends_ms: 60_000 }, ..Config::default() };
    let mut d = start(config.clone());
    let topic = d.broker().live_topics()[0].id;
    let p = init(d.request(Command::InitProducer));
    assert_eq!(offsets(d.request(send("t", 0, p, 0, 0, &["a"]))), vec![0]);
    d.advance_millis(60_000);
    let second = d.submit(send("t", 0, p, 0, 1, &["b", "c"]));
    assert_eq!(offsets(d.take_reply(second).expect("acknowledged")), vec![1, 2]);
    // The log's header rots before the interval is over: the start cannot read the log,
    // and keeps nothing past the journal's end (offset 1).
    let mut fs = d.crash();
    fs.write_at(&LogId { topic, partition: 0 }.file_name(), 0, b"rot!").expect("memfs write");
    let mut d = SyncDriver::start(config, fs);
    // A retry is answered (the partition is unavailable), not left waiting for a first
    // send that no broker will acknowledge.
    let retry = d.request(send("t", 0, p, 0, 1, &["b", "c"]));
    assert!(matches!(retry, Err(BrokerError::Storage(_))), "{retry:?}");
}
