//! Idempotent producers on the wire, against a running `broker-fs serve --kafka`: an id
//! from InitProducerId, then batches carrying it, judged by their epoch and sequence as
//! Kafka judges them. A retried batch is answered with its first offsets and appended
//! once, before and after a restart; a gap in the sequence, an old epoch and an id never
//! handed out are refused with Kafka's errors, and so is a transactional batch; nothing
//! refused changes the log. A transactional producer is refused at InitProducerId and
//! FindCoordinator.

mod common;

use bytes::Bytes;
use common::wire::{batch, connect, create_t, frame, high_watermarks, produce_to_t, response, start};
use common::{KafkaServer, TempDir};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, TimestampType};
use kafka_protocol::ResponseError as E;
use std::io::Write;
use std::net::TcpStream;

/// `n` records of an idempotent producer, from sequence `first`, as one batch.
fn idempotent(producer_id: i64, epoch: i16, first: i32, n: i32, tag: &str) -> Bytes {
    records(producer_id, epoch, first, n, tag, false)
}

/// The same, as a transactional producer's batch (its attribute bit set).
fn records(producer_id: i64, epoch: i16, first: i32, n: i32, tag: &str, transactional: bool) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            // The encoder keeps records in one batch while offset minus sequence holds.
            offset: i64::from(i),
            sequence: first + i,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    batch(&records)
}

/// InitProducerId v4 (`transactional_id` if given): error, producer id, epoch.
fn init(s: &mut TcpStream, transactional_id: Option<&str>) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))))
        .with_transaction_timeout_ms(60_000);
    s.write_all(&frame(ApiKey::InitProducerId, 4, 2, &request)).unwrap();
    let (_, r) = response::<InitProducerIdResponse>(s, 4);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// Produce v9 of `records` to partition 0 of "t", acks=-1: error and base offset.
fn produce(s: &mut TcpStream, records: Bytes) -> (i16, i64) {
    let (error, _, base) = produce_to_t(s, 9, records);
    (error, base)
}

/// A retried batch gets the first answer and is appended once; a sequence gap, an old
/// epoch and an unknown producer id get Kafka's errors and change nothing.
#[test]
fn idempotent_batches_are_judged_by_epoch_and_sequence() {
    let dir = TempDir::new("kafka-producers");
    let server = start(&dir);
    let mut s = connect(&server);
    create_t(&mut s);
    let (error, id, epoch) = init(&mut s, None);
    assert_eq!((error, epoch), (0, 0), "a producer id at epoch 0");
    assert!(id >= 0);
    let (_, other, _) = init(&mut s, None);
    assert_ne!(other, id, "each InitProducerId hands out a new id");

    let first = idempotent(id, 0, 0, 3, "a");
    assert_eq!(produce(&mut s, first.clone()), (0, 0));
    assert_eq!(produce(&mut s, first), (0, 0), "a retry is answered with the first base offset");
    assert_eq!(high_watermarks(&mut s, 1), [3], "and appended once");
    assert_eq!(produce(&mut s, idempotent(id, 0, 3, 2, "b")), (0, 3), "the next sequence");
    // A retry of an earlier batch (one of the last five) still gets its first answer.
    assert_eq!(produce(&mut s, idempotent(id, 0, 0, 3, "a")), (0, 0));
    assert_eq!(high_watermarks(&mut s, 1), [5]);

    let refused = [
        (idempotent(id, 0, 9, 1, "gap"), E::OutOfOrderSequenceNumber, "a gap in the sequence"),
        (idempotent(id, 0, 4, 2, "overlap"), E::OutOfOrderSequenceNumber, "a batch overlapping the last"),
        (idempotent(id + 1_000, 0, 0, 1, "stranger"), E::UnknownProducerId, "an id never handed out"),
        (records(id, 0, 5, 1, "txn", true), E::InvalidRecord, "a transactional batch"),
    ];
    for (records, error, case) in refused {
        assert_eq!(produce(&mut s, records), (error.code(), -1), "{case}");
        assert_eq!(high_watermarks(&mut s, 1), [5], "{case}: nothing appended");
    }

    // A newer epoch starts again at 0; the old one is then fenced.
    assert_eq!(produce(&mut s, idempotent(id, 1, 0, 1, "c")), (0, 5), "epoch 1 from sequence 0");
    assert_eq!(produce(&mut s, idempotent(id, 0, 5, 1, "old")), (E::InvalidProducerEpoch.code(), -1), "epoch 0");
    assert_eq!(high_watermarks(&mut s, 1), [6], "the fenced batch is not appended");
    server.terminate();
}

/// A batch acknowledged before the broker is killed (-9) and retried after its restart,
/// on the same directory, is answered with its first offsets and not appended again;
/// the producer's next batch follows it; the ids handed out before are not handed out
/// again.
#[test]
fn a_retry_after_a_restart_is_answered_with_the_first_offsets() {
    let dir = TempDir::new("kafka-producers-restart");
    let (data, log) = (dir.path().join("data"), dir.path().join("stderr"));
    let server = KafkaServer::start(&data, &log);
    let mut s = connect(&server);
    create_t(&mut s);
    let (_, id, _) = init(&mut s, None);
    assert_eq!(produce(&mut s, idempotent(id, 0, 0, 4, "a")), (0, 0));
    let second = idempotent(id, 0, 4, 2, "b");
    assert_eq!(produce(&mut s, second.clone()), (0, 4));
    server.kill9();

    let server = KafkaServer::start(&data, &log);
    let mut s = connect(&server);
    assert_eq!(produce(&mut s, second), (0, 4), "the retry gets the first base offset");
    assert_eq!(high_watermarks(&mut s, 1), [6], "and is not appended again");
    assert_eq!(produce(&mut s, idempotent(id, 0, 7, 1, "gap")).0, E::OutOfOrderSequenceNumber.code());
    assert_eq!(produce(&mut s, idempotent(id, 0, 6, 1, "c")), (0, 6), "the next batch follows");
    let (error, fresh, epoch) = init(&mut s, None);
    assert_eq!((error, epoch), (0, 0));
    assert!(fresh > id, "an id past those handed out before the restart: {fresh} after {id}");
    assert_eq!(high_watermarks(&mut s, 1), [7]);
    server.terminate();
}

/// A transactional producer is told at once: InitProducerId with a transactional id,
/// and FindCoordinator for a transaction coordinator, get
/// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, FindCoordinator with the reason; the
/// transaction APIs are not advertised.
#[test]
fn transactional_producers_are_refused() {
    let dir = TempDir::new("kafka-producers-txn");
    let server = start(&dir);
    let mut s = connect(&server);
    assert_eq!(init(&mut s, Some("txn")), (E::TransactionalIdAuthorizationFailed.code(), -1, -1));
    let request = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![StrBytes::from_static_str("txn")]);
    s.write_all(&frame(ApiKey::FindCoordinator, 4, 4, &request)).unwrap();
    let (_, r) = response::<FindCoordinatorResponse>(&mut s, 4);
    let c = &r.coordinators[0];
    assert_eq!(c.error_code, E::TransactionalIdAuthorizationFailed.code());
    let message = c.error_message.as_deref().unwrap_or_default();
    assert!(message.contains("does not support transactions"), "{message}");
    s.write_all(&frame(ApiKey::ApiVersions, 3, 5, &ApiVersionsRequest::default())).unwrap();
    let (_, r) = response::<ApiVersionsResponse>(&mut s, 3);
    let keys: Vec<i16> = r.api_keys.iter().map(|k| k.api_key).collect();
    assert!(keys.contains(&(ApiKey::InitProducerId as i16)));
    for txn in [ApiKey::AddPartitionsToTxn, ApiKey::AddOffsetsToTxn, ApiKey::EndTxn, ApiKey::TxnOffsetCommit] {
        assert!(!keys.contains(&(txn as i16)), "{txn:?} is advertised");
    }
    server.terminate();
}
