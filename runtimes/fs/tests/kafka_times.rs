//! ListOffsets by timestamp against a running `broker-fs serve --kafka`: the first
//! offset whose record's timestamp is at least the one asked, at every version served
//! (1-7), for times exact, between batches, inside a batch, before and after every
//! record, in a gzip batch and among timestamps that do not grow; the largest timestamp
//! (-3, version 7); a re-created topic, whose index starts afresh; and a restarted
//! server, whose index is rebuilt from the log. Then real clients: kafka-python's,
//! confluent-kafka's and aiokafka's `offsets_for_times` (`tests/kafka/times.py`) and
//! kcat's `-o s@TIMESTAMP`, under the rules of `kafka_clients.rs` (the Python from
//! `BROKER_KAFKA_PYTHON`, one `skipped:` line without the clients unless
//! `BROKER_REQUIRE_KAFKA_CLIENTS=1`).

mod common;

use bytes::Bytes;
use common::clients::{installed, python, required, run};
use common::wire::{
    batch, compressed, connect, create_t, delete_t, frame, gzip, name, produce_to_t, record, response, start,
};
use common::{KafkaServer, TempDir};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError as E;
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::process::Command;

/// One batch of records with these timestamps, gzip-compressed if `gz`.
fn timed(timestamps: &[i64], gz: bool) -> Vec<u8> {
    let records: Vec<_> = timestamps
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut r = record(i as i64, None, format!("at-{t}"));
            r.timestamp = *t;
            r
        })
        .collect();
    let plain = batch(&records).to_vec();
    if gz {
        compressed(&plain, 1, gzip)
    } else {
        plain
    }
}

/// Produces `records` to partition 0 of "t": the base offset.
fn produce(s: &mut TcpStream, records: Vec<u8>) -> i64 {
    let (error, message, base) = produce_to_t(s, 9, Bytes::from(records));
    assert_eq!(error, 0, "{message}");
    base
}

/// What ListOffsets (version `v`) answers for partition 0 of "t" at `timestamp`: error,
/// offset, timestamp, leader epoch.
fn list(s: &mut TcpStream, v: i16, timestamp: i64) -> (i16, i64, i64, i32) {
    let request =
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(timestamp)])]);
    s.write_all(&frame(ApiKey::ListOffsets, v, 4, &request)).unwrap();
    let (_, r) = response::<ListOffsetsResponse>(s, v);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp, p.leader_epoch)
}

/// Kafka's rule over the timestamps of offsets `base..`: the first at least `t`, or -1/-1.
fn rule(base: i64, timestamps: &[i64], t: i64) -> (i64, i64) {
    timestamps.iter().enumerate().find(|(_, ts)| **ts >= t).map_or((-1, -1), |(i, ts)| (base + i as i64, *ts))
}

/// Times around every timestamp of `timestamps`, and before and after them all.
fn probes(timestamps: &[i64]) -> Vec<i64> {
    let mut out = vec![0, 1];
    for t in timestamps {
        out.extend([t - 1, *t, t + 1]);
    }
    out.push(i64::MAX);
    out
}

/// Checks every probe at every version against the rule; at -3 (version 7) the first
/// record of the largest timestamp.
fn check_all(s: &mut TcpStream, base: i64, timestamps: &[i64]) {
    for v in 1..=7 {
        for t in probes(timestamps) {
            let (error, offset, ts, epoch) = list(s, v, t);
            assert_eq!(error, 0, "v{v} at {t}");
            assert_eq!((offset, ts), rule(base, timestamps, t), "v{v} at {t}");
            if v >= 4 && offset >= 0 {
                assert!(epoch >= 0, "v{v} at {t}: a found record's leader epoch");
            } else {
                assert_eq!(epoch, -1, "v{v} at {t}");
            }
        }
        let max = timestamps.iter().copied().max().unwrap();
        let first_max = base + timestamps.iter().position(|t| *t == max).unwrap() as i64;
        let (error, offset, ts, _) = list(s, v, -3);
        if v >= 7 {
            assert_eq!((error, offset, ts), (0, first_max, max), "v{v}: the largest timestamp");
        } else {
            assert_eq!((error, offset), (E::UnsupportedVersion.code(), -1), "v{v}: -3 before v7");
        }
        // A timestamp no version knows.
        assert_eq!(list(s, v, -4).0, E::UnsupportedVersion.code(), "v{v} at -4");
    }
}

/// Batches: three growing records, one, a gzip batch whose records go back in time, a
/// lone earlier record, and a batch of equal timestamps.
const TIMESTAMPS: [&[i64]; 5] = [&[1_000, 1_010, 1_020], &[2_000], &[3_000, 2_500, 3_500], &[1_500], &[4_000, 4_000]];

fn produce_all(s: &mut TcpStream, batches: &[&[i64]], shift: i64) -> (i64, Vec<i64>) {
    let mut all = Vec::new();
    let mut base = None;
    for (i, b) in batches.iter().enumerate() {
        let b: Vec<i64> = b.iter().map(|t| t + shift).collect();
        let at = produce(s, timed(&b, i == 2));
        base.get_or_insert(at);
        all.extend(b);
    }
    (base.unwrap(), all)
}

#[test]
fn offsets_by_time_at_every_version() {
    let tmp = TempDir::new("kafka-times");
    let server = start(&tmp);
    let mut s = connect(&server);
    create_t(&mut s);
    // An empty partition: no record qualifies, nor holds a largest timestamp.
    assert_eq!(list(&mut s, 7, 0), (0, -1, -1, -1));
    assert_eq!(list(&mut s, 7, -3), (0, -1, -1, -1));
    assert_eq!(list(&mut s, 1, 0), (0, -1, -1, -1));
    let (base, timestamps) = produce_all(&mut s, &TIMESTAMPS, 0);
    assert_eq!(base, 0);
    check_all(&mut s, base, &timestamps);
    // Latest and earliest are as before, timestamp -1.
    assert_eq!(list(&mut s, 7, -1).1, timestamps.len() as i64);
    assert_eq!(list(&mut s, 7, -2).1, 0);
    // Records produced since are found: the index is extended on each lookup.
    let at = produce(&mut s, timed(&[5_000], false));
    assert_eq!(list(&mut s, 6, 4_001), (0, at, 5_000, list(&mut s, 6, 0).3));
    assert_eq!(list(&mut s, 7, -3).1, at);
    server.terminate();
}

#[test]
fn a_recreated_topic_is_indexed_afresh() {
    let tmp = TempDir::new("kafka-times-recreate");
    let server = start(&tmp);
    let mut s = connect(&server);
    create_t(&mut s);
    let (_, old) = produce_all(&mut s, &TIMESTAMPS, 0);
    assert_eq!(list(&mut s, 7, 0).1, 0);
    delete_t(&mut s);
    create_t(&mut s);
    // Nothing yet in the new incarnation, whatever the old one held.
    assert_eq!(list(&mut s, 7, 0), (0, -1, -1, -1));
    assert_eq!(list(&mut s, 7, -3), (0, -1, -1, -1));
    let (base, timestamps) = produce_all(&mut s, &TIMESTAMPS, 100);
    assert!(base >= old.len() as i64, "the new incarnation's offsets begin past the old one's: {base}");
    check_all(&mut s, base, &timestamps);
    server.terminate();
}

#[test]
fn the_index_is_rebuilt_after_a_restart() {
    let tmp = TempDir::new("kafka-times-restart");
    let (data, log) = (tmp.path().join("data"), tmp.path().join("stderr"));
    let server = KafkaServer::start(&data, &log);
    let mut s = connect(&server);
    create_t(&mut s);
    let (base, mut timestamps) = produce_all(&mut s, &TIMESTAMPS, 0);
    check_all(&mut s, base, &timestamps);
    server.terminate();
    let server = KafkaServer::start(&data, &log);
    let mut s = connect(&server);
    check_all(&mut s, base, &timestamps);
    produce(&mut s, timed(&[900, 6_000], true));
    timestamps.extend([900, 6_000]);
    check_all(&mut s, base, &timestamps);
    server.terminate();
}

// --- real clients ------------------------------------------------------------------------

const TIMES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/times.py");

/// The timestamps `times.py` produces to its topic, one record each (in that order,
/// from offset 0): growing, then one back in time.
const PRODUCED: [i64; 6] = [1_000_000, 2_000_000, 3_000_000, 2_500_000, 4_000_000, 5_000_000];

/// kafka-python, confluent-kafka and aiokafka each produce `PRODUCED` with explicit
/// timestamps to a topic of their own and ask `offsets_for_times` around them; then kcat
/// consumes the confluent-kafka topic from a timestamp (`-o s@TIMESTAMP`).
#[test]
fn clients_find_offsets_by_time() {
    let Some(_lock) = installed(TIMES) else { return };
    let tmp = TempDir::new("kafka-times-clients");
    let mut server = start(&tmp);
    let address = server.address.clone();
    for client in ["kafka-python", "confluent-kafka", "aiokafka"] {
        let topic = format!("times-{client}");
        let stdout = run(&mut server, &python(), &[TIMES, client, "--bootstrap", &address, "--topic", &topic]);
        let got: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{client}: {e}: {stdout}"));
        assert_eq!(got["produced"], serde_json::json!(PRODUCED.iter().enumerate().map(|(i, _)| i).collect::<Vec<_>>()));
        // Each asked time, and what the client answered: [offset, timestamp], or null.
        let answers = got["answers"].as_array().unwrap_or_else(|| panic!("{client}: {got}"));
        assert!(!answers.is_empty());
        for a in answers {
            let t = a[0].as_i64().unwrap();
            let want = rule(0, &PRODUCED, t);
            let want = if want.0 < 0 { Value::Null } else { serde_json::json!([want.0, want.1]) };
            assert_eq!(a[1], want, "{client} offsets_for_times at {t}");
        }
    }
    // kcat, from a timestamp: Debian's kcat (librdkafka) as its users run it.
    let kcat = Command::new("kcat").arg("-V").output();
    if !kcat.is_ok_and(|o| o.status.success()) {
        assert!(!required(), "BROKER_REQUIRE_KAFKA_CLIENTS=1 but kcat is not installed (apt-get install kcat)");
        println!("skipped: kcat is not installed");
    } else {
        for (t, want) in [
            (2_200_000i64, vec![2, 3, 4, 5]),
            (3_000_001, vec![4, 5]),
            (1, vec![0, 1, 2, 3, 4, 5]),
            // After everything: none found, so kcat starts at the end.
            (5_000_001, vec![]),
        ] {
            let from = format!("s@{t}");
            let args =
                ["-b", &address, "-t", "times-confluent-kafka", "-p", "0", "-C", "-o", &from, "-e", "-f", "%o %T\\n"];
            let out = run(&mut server, "kcat", &args);
            let offsets: Vec<i64> = out
                .lines()
                .map(|l| l.split(' ').next().unwrap().parse().unwrap_or_else(|e| panic!("{l:?}: {e}")))
                .collect();
            assert_eq!(offsets, want, "kcat -o {from}: {out}");
        }
    }
    server.terminate();
}
