//! Requests that are well formed on the wire and odd in meaning, against a running
//! `broker-fs serve --kafka`: names and partitions given twice, creates that only
//! validate, Kafka's internal topic names, incremental fetch sessions, failed produces
//! with `acks=0`, batches past the limits by count and by bytes, invalid records behind a
//! good CRC, and authorized operations. Each gets the answer a Kafka broker gives, or
//! one this project documents, and nothing half done.

mod common;

use bytes::Bytes;
use common::wire::{batch, closed, connect, frame, high_watermarks, name, record, response, start};
use common::TempDir;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;
use std::io::Write;
use std::net::TcpStream;

fn topic(n: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default().with_name(name(n)).with_num_partitions(partitions).with_replication_factor(-1)
}

/// CreateTopics v7 of `topics`; the response's (name, error, partitions) in order.
fn create(s: &mut TcpStream, validate_only: bool, topics: Vec<CreatableTopic>) -> Vec<(String, i16, i32)> {
    let request = CreateTopicsRequest::default().with_validate_only(validate_only).with_topics(topics);
    s.write_all(&frame(ApiKey::CreateTopics, 7, 1, &request)).unwrap();
    let (_, r) = response::<CreateTopicsResponse>(s, 7);
    r.topics.into_iter().map(|t| (t.name.0.to_string(), t.error_code, t.num_partitions)).collect()
}

/// The live topics' names, by Metadata v12 (every topic).
fn live(s: &mut TcpStream) -> Vec<String> {
    s.write_all(&frame(ApiKey::Metadata, 12, 2, &MetadataRequest::default().with_topics(None))).unwrap();
    let (_, r) = response::<MetadataResponse>(s, 12);
    let mut names: Vec<String> = r.topics.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect();
    names.sort();
    names
}

fn produce_to(partitions: &[(i32, Bytes)], acks: i16) -> ProduceRequest {
    let data = partitions
        .iter()
        .map(|(p, records)| PartitionProduceData::default().with_index(*p).with_records(Some(records.clone())))
        .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default().with_name(name("t")).with_partition_data(data)])
}

/// Produce v9 to "t" with acks=-1; each partition's (index, error).
fn produce(s: &mut TcpStream, partitions: &[(i32, Bytes)]) -> Vec<(i32, i16)> {
    s.write_all(&frame(ApiKey::Produce, 9, 3, &produce_to(partitions, -1))).unwrap();
    let (_, r) = response::<ProduceResponse>(s, 9);
    r.responses[0].partition_responses.iter().map(|p| (p.index, p.error_code)).collect()
}

fn small_batch(tag: &str) -> Bytes {
    batch(&[record(0, None, tag.to_string())])
}

#[test]
fn names_and_partitions_given_twice() {
    let dir = TempDir::new("kafka-twice");
    let server = start(&dir);
    let mut s = connect(&server);
    let created = create(&mut s, false, vec![topic("t", 2), topic("u", 1), topic("t", 2)]);
    let code = |n: &str| created.iter().find(|c| c.0 == n).unwrap().1;
    assert_eq!(code("t"), E::InvalidRequest.code(), "{created:?}");
    assert_eq!(code("u"), 0);
    assert_eq!(live(&mut s), ["u"], "a name given twice is not created");
    assert!(create(&mut s, false, vec![topic("t", 2)]).iter().all(|c| c.1 == 0));

    // Produce: a partition given twice is refused, and neither of its batches appended;
    // the other partition of the request is appended.
    let answers = produce(&mut s, &[(0, small_batch("a")), (1, small_batch("b")), (0, small_batch("c"))]);
    assert_eq!(answers, [(0, E::InvalidRequest.code()), (1, 0), (0, E::InvalidRequest.code())]);
    assert_eq!(high_watermarks(&mut s, 2), [0, 1]);

    // ListOffsets: each mention of a partition given twice is refused.
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("t"))
        .with_partitions(
            [0, 1, 0]
                .iter()
                .map(|p| ListOffsetsPartition::default().with_partition_index(*p).with_timestamp(-1))
                .collect(),
        )]);
    s.write_all(&frame(ApiKey::ListOffsets, 6, 4, &request)).unwrap();
    let (_, r) = response::<ListOffsetsResponse>(&mut s, 6);
    let got: Vec<(i32, i16, i64)> =
        r.topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code, p.offset)).collect();
    assert_eq!(got, [(0, E::InvalidRequest.code(), -1), (1, 0, 1), (0, E::InvalidRequest.code(), -1)]);

    // Metadata: a topic asked for twice is described once.
    let asked = vec![MetadataRequestTopic::default().with_name(Some(name("t"))); 2];
    s.write_all(&frame(ApiKey::Metadata, 12, 5, &MetadataRequest::default().with_topics(Some(asked)))).unwrap();
    let (_, r) = response::<MetadataResponse>(&mut s, 12);
    assert_eq!(r.topics.len(), 1, "{r:?}");

    // DeleteTopics: a name given twice gets one INVALID_REQUEST and stays; the rest go.
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("t"), name("u"), name("t")]);
    s.write_all(&frame(ApiKey::DeleteTopics, 5, 6, &delete)).unwrap();
    let (_, r) = response::<DeleteTopicsResponse>(&mut s, 5);
    let got: Vec<(String, i16)> =
        r.responses.iter().map(|d| (d.name.as_ref().unwrap().0.to_string(), d.error_code)).collect();
    assert_eq!(got, [("t".to_string(), E::InvalidRequest.code()), ("u".to_string(), 0)]);
    assert_eq!(live(&mut s), ["t"]);
}

#[test]
fn a_create_that_only_validates_creates_nothing_and_judges_as_a_create_would() {
    let dir = TempDir::new("kafka-validate");
    let server = start(&dir);
    let mut s = connect(&server);
    assert_eq!(create(&mut s, false, vec![topic("a_b", 1)])[0].1, 0);
    let grace = |ms: &str| {
        topic("g", 1).with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("deletion.grace.ms"))
            .with_value(Some(StrBytes::from_string(ms.to_string())))])
    };
    let judged = create(
        &mut s,
        true,
        vec![
            topic("fresh", 3),
            topic("a_b", 1),
            topic("a.b", 1),
            topic("zero", 0),
            topic("bad/name", 1),
            topic("__consumer_offsets", 1),
            grace("1000"),
        ],
    );
    let want = [
        ("fresh", 0, 3),
        ("a_b", E::TopicAlreadyExists.code(), 0),
        ("a.b", E::InvalidTopicException.code(), 0),
        ("zero", E::InvalidPartitions.code(), 0),
        ("bad/name", E::InvalidTopicException.code(), 0),
        ("__consumer_offsets", E::InvalidRequest.code(), 0),
        ("g", 0, 1),
    ];
    let want: Vec<(String, i16, i32)> = want.iter().map(|(n, e, p)| (n.to_string(), *e, *p)).collect();
    // A refused topic reports -1 partitions, as Kafka's default.
    let judged: Vec<(String, i16, i32)> =
        judged.into_iter().map(|(n, e, p)| (n, e, if e == 0 { p } else { 0 })).collect();
    assert_eq!(judged, want);
    assert_eq!(live(&mut s), ["a_b"], "validating created nothing");
    // What validated creates.
    let created = create(&mut s, false, vec![topic("fresh", 3)]);
    assert_eq!(created, [("fresh".to_string(), 0, 3)]);
    // Kafka's internal names are refused for real creates too.
    assert_eq!(create(&mut s, false, vec![topic("__transaction_state", 1)])[0].1, E::InvalidRequest.code());
    assert_eq!(live(&mut s), ["a_b", "fresh"]);
}

fn fetch_request(session_id: i32, session_epoch: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(session_epoch)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default().with_partition_max_bytes(1 << 20)])])
}

#[test]
fn fetches_are_sessionless_and_an_incremental_one_is_told_its_session_is_unknown() {
    let dir = TempDir::new("kafka-sessions");
    let server = start(&dir);
    let mut s = connect(&server);
    create(&mut s, false, vec![topic("t", 1)]);
    assert_eq!(produce(&mut s, &[(0, small_batch("x"))]), [(0, 0)]);
    for epoch in [-1, 0] {
        s.write_all(&frame(ApiKey::Fetch, 12, 7, &fetch_request(0, epoch))).unwrap();
        let (_, r) = response::<FetchResponse>(&mut s, 12);
        assert_eq!((r.error_code, r.session_id), (0, 0), "a full fetch, and no session made");
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 1));
        assert!(!p.records.as_ref().unwrap().is_empty(), "the record is served");
    }
    s.write_all(&frame(ApiKey::Fetch, 12, 8, &fetch_request(12345, 1))).unwrap();
    let (_, r) = response::<FetchResponse>(&mut s, 12);
    assert_eq!(r.error_code, E::FetchSessionIdNotFound.code());
    assert!(r.responses.is_empty());
}

#[test]
fn a_failed_produce_with_acks_0_closes_the_connection() {
    let dir = TempDir::new("kafka-acks0");
    let server = start(&dir);
    let mut admin = connect(&server);
    create(&mut admin, false, vec![topic("t", 1)]);
    let mut s = connect(&server);
    // A produce with acks=0 that succeeds gets no response: the next response read is
    // the Metadata's.
    s.write_all(&frame(ApiKey::Produce, 9, 10, &produce_to(&[(0, small_batch("quiet"))], 0))).unwrap();
    s.write_all(&frame(ApiKey::Metadata, 12, 11, &MetadataRequest::default().with_topics(None))).unwrap();
    let (id, _) = response::<MetadataResponse>(&mut s, 12);
    assert_eq!(id, 11);
    assert_eq!(high_watermarks(&mut admin, 1), [1]);
    // One to a partition that does not exist fails, and the client can learn it only
    // by the connection closing.
    s.write_all(&frame(ApiKey::Produce, 9, 12, &produce_to(&[(5, small_batch("lost"))], 0))).unwrap();
    assert!(closed(&mut s), "the connection is closed, with nothing written");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains("acks=0 failed"), "the reason is logged:\n{log}");
    assert_eq!(high_watermarks(&mut admin, 1), [1], "the other connection is served");
}

#[test]
fn a_produce_is_bounded_by_its_bytes_not_its_record_count() {
    let dir = TempDir::new("kafka-batch-limits");
    let server = start(&dir);
    let mut s = connect(&server);
    create(&mut s, false, vec![topic("t", 1)]);
    // 20,000 small records in one batch: more than the core's default count limit
    // (10,000), far below the bytes one produce may carry.
    let many: Vec<_> = (0..20_000).map(|i| record(i, None, format!("{i}"))).collect();
    assert_eq!(produce(&mut s, &[(0, batch(&many))]), [(0, 0)]);
    assert_eq!(high_watermarks(&mut s, 1), [20_000]);
    // 300 records of 60,000 bytes: each within the record limit, 18 MB together, over
    // the 16 MiB one partition of one produce may carry. MESSAGE_TOO_LARGE, which the
    // Java producer answers by splitting the batch.
    let value = "v".repeat(60_000);
    let big: Vec<_> = (0..300).map(|i| record(i, None, value.clone())).collect();
    assert_eq!(produce(&mut s, &[(0, batch(&big))]), [(0, E::MessageTooLarge.code())]);
    assert_eq!(high_watermarks(&mut s, 1), [20_000], "nothing of it appended");
}

/// `bytes` with its CRC recomputed over what it now says.
fn recrc(mut bytes: Vec<u8>) -> Bytes {
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(bytes)
}

#[test]
fn records_that_do_not_add_up_behind_a_good_crc_are_invalid_not_corrupt() {
    let dir = TempDir::new("kafka-invalid-records");
    let server = start(&dir);
    let mut s = connect(&server);
    create(&mut s, false, vec![topic("t", 1)]);
    let good = batch(&[record(0, None, "a".into()), record(1, None, "b".into())]).to_vec();
    assert_eq!(good[57..61], 2i32.to_be_bytes(), "one batch of two records");
    // The record count says 3 where there are 2 (and the last offset delta agrees).
    let mut three = good.clone();
    three[57..61].copy_from_slice(&3i32.to_be_bytes());
    three[23..27].copy_from_slice(&2i32.to_be_bytes());
    // The second record's offset delta is 5: its length, attributes, timestamp delta,
    // then the offset delta (zigzag varints).
    let mut delta = good.clone();
    let second = 61 + 1 + usize::from(delta[61] >> 1);
    assert_eq!(delta[second + 3], 2, "record 1's offset delta, zigzag");
    delta[second + 3] = 10;
    for bad in [recrc(three), recrc(delta), Bytes::new()] {
        assert_eq!(produce(&mut s, &[(0, bad)]), [(0, E::InvalidRecord.code())]);
    }
    // A flipped byte behind the CRC is corrupt.
    let mut rotten = good.clone();
    *rotten.last_mut().unwrap() ^= 1;
    assert_eq!(produce(&mut s, &[(0, Bytes::from(rotten))]), [(0, E::CorruptMessage.code())]);
    assert_eq!(high_watermarks(&mut s, 1), [0], "nothing appended");
    assert_eq!(produce(&mut s, &[(0, Bytes::from(good))]), [(0, 0)]);
}

#[test]
fn authorized_operations_are_answered_when_asked() {
    let dir = TempDir::new("kafka-operations");
    let server = start(&dir);
    let mut s = connect(&server);
    create(&mut s, false, vec![topic("t", 1)]);
    for (asked, v) in [(false, 10), (true, 8), (true, 10), (true, 12)] {
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_include_cluster_authorized_operations(asked && v <= 10)
            .with_include_topic_authorized_operations(asked);
        s.write_all(&frame(ApiKey::Metadata, v, 13, &request)).unwrap();
        let (_, r) = response::<MetadataResponse>(&mut s, v);
        let topic_ops = r.topics[0].topic_authorized_operations;
        if !asked {
            assert_eq!(topic_ops, i32::MIN, "not asked: Kafka's 'unknown'");
            assert_eq!(r.cluster_authorized_operations, i32::MIN);
            continue;
        }
        // READ (3), WRITE (4), DELETE (6) and DESCRIBE (8) at least: no authorization.
        for op in [3, 4, 6, 8] {
            assert!(topic_ops & (1 << op) != 0, "v{v}: operation {op} in {topic_ops:#b}");
        }
        if v <= 10 {
            assert!(r.cluster_authorized_operations & (1 << 5) != 0, "v{v}: CREATE on the cluster");
        }
    }
}
