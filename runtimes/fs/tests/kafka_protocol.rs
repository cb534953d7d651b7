//! The Kafka listener at the protocol level, against a running `broker-fs serve --kafka`:
//! malformed frames, unknown APIs and versions, huge declared lengths and truncated
//! requests each get an error response or a closed connection with the reason logged;
//! the server keeps serving its other connections; and nothing is written.

mod common;

use bytes::Bytes;
use common::wire::{batch, closed, connect, frame, high_watermarks, name, record, response, rotten_batch, start};
use common::TempDir;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Creates topic "t" with CreateTopics `version`, which must succeed; its result.
fn create_t(s: &mut TcpStream, version: i16, partitions: i32, replication_factor: i16) -> CreatableTopicResult {
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("t"))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)]);
    s.write_all(&frame(ApiKey::CreateTopics, version, 1, &create)).unwrap();
    let (_, mut created) = response::<CreateTopicsResponse>(s, version);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    created.topics.remove(0)
}

fn metadata(s: &mut TcpStream, correlation_id: i32) -> MetadataResponse {
    s.write_all(&frame(ApiKey::Metadata, 12, correlation_id, &MetadataRequest::default().with_topics(None))).unwrap();
    let (id, r) = response::<MetadataResponse>(s, 12);
    assert_eq!(id, correlation_id);
    r
}

#[test]
fn bad_frames_close_their_connection_with_a_reason_and_write_nothing() {
    let dir = TempDir::new("kafka-protocol");
    let server = start(&dir);
    let mut good = connect(&server);
    create_t(&mut good, 7, 2, 1);

    // Each case: bytes sent, then the reason the log must give.
    let short_header = [&3i32.to_be_bytes()[..], &[0, 0, 0]].concat();
    let unknown_api =
        [&8i32.to_be_bytes()[..], &999i16.to_be_bytes(), &0i16.to_be_bytes(), &7i32.to_be_bytes()].concat();
    let describe_acls = frame(ApiKey::DescribeAcls, 1, 8, &DescribeAclsRequest::default());
    let old_produce = {
        let mut f = frame(ApiKey::Produce, 3, 9, &ProduceRequest::default());
        f[6..8].copy_from_slice(&2i16.to_be_bytes()); // Produce v2, below the served v3
        f
    };
    let huge_array = {
        let mut f = frame(ApiKey::Metadata, 1, 10, &MetadataRequest::default().with_topics(Some(vec![])));
        let at = f.len() - 4;
        f[at..].copy_from_slice(&i32::MAX.to_be_bytes());
        f
    };
    let garbage_body = [
        &12i32.to_be_bytes()[..],
        &3i16.to_be_bytes(),
        &1i16.to_be_bytes(),
        &11i32.to_be_bytes(),
        &(-2i32).to_be_bytes(),
    ]
    .concat();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("negative size", (-1i32).to_be_bytes().to_vec(), "a frame declares -1 bytes"),
        ("huge size", i32::MAX.to_be_bytes().to_vec(), "over the limit"),
        ("short header", short_header, "too short for a request header"),
        ("unknown API", unknown_api, "API key 999 is unknown"),
        ("unserved API", describe_acls, "DescribeAcls (API key 29) is not served here"),
        ("old version", old_produce, "Produce version 2 is not supported"),
        ("huge array", huge_array, "malformed Metadata v1 request"),
        ("garbage body", garbage_body, "malformed Metadata v1 request"),
    ];
    for (what, bytes, reason) in &cases {
        let mut s = connect(&server);
        s.write_all(bytes).unwrap();
        assert!(closed(&mut s), "{what}: the connection stays open");
        // The server goes on serving the good connection.
        assert_eq!(metadata(&mut good, 2).topics.len(), 1, "{what}");
        assert!(server.stderr().contains(reason), "{what}: no {reason:?} in the log:\n{}", server.stderr());
    }

    // A request cut short by the client closing its side.
    let mut s = connect(&server);
    let whole = frame(ApiKey::Metadata, 12, 12, &MetadataRequest::default().with_topics(None));
    s.write_all(&whole[..whole.len() - 3]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(closed(&mut s));
    assert!(metadata(&mut good, 3).topics.len() == 1);
    assert!(server.stderr().contains("the connection ended inside a request"), "{}", server.stderr());

    // A newer ApiVersions than served gets UNSUPPORTED_VERSION in a version 0 answer.
    let mut s = connect(&server);
    let mut newer = frame(ApiKey::ApiVersions, 3, 13, &ApiVersionsRequest::default());
    newer[6..8].copy_from_slice(&99i16.to_be_bytes());
    s.write_all(&newer).unwrap();
    let (id, versions) = response::<ApiVersionsResponse>(&mut s, 0);
    assert_eq!((id, versions.error_code), (13, 35));
    assert!(versions.api_keys.iter().any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version == 12));

    // A produce whose batch fails its CRC is refused with CORRUPT_MESSAGE.
    let produce = ProduceRequest::default().with_acks(-1).with_topic_data(vec![TopicProduceData::default()
        .with_name(name("t"))
        .with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(Bytes::from(rotten_batch())))])]);
    good.write_all(&frame(ApiKey::Produce, 9, 14, &produce)).unwrap();
    let (_, produced) = response::<ProduceResponse>(&mut good, 9);
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 2, "{p:?}");
    assert!(p.error_message.as_deref().unwrap_or("").contains("CRC"), "{p:?}");

    // Nothing reached the broker: one topic, nothing in it.
    assert_eq!(metadata(&mut good, 15).topics.len(), 1);
    assert_eq!(high_watermarks(&mut good, 2), vec![0, 0]);
    // And the server is still up, and stops cleanly on SIGTERM.
    server.terminate();
}

/// Requests sent back to back on one connection are answered in the order sent.
#[test]
fn pipelined_requests_are_answered_in_order() {
    let dir = TempDir::new("kafka-pipeline");
    let server = start(&dir);
    let mut s = connect(&server);
    let mut burst = Vec::new();
    for id in 0..40 {
        if id % 2 == 0 {
            burst.extend(frame(ApiKey::ApiVersions, 3, id, &ApiVersionsRequest::default()));
        } else {
            burst.extend(frame(ApiKey::Metadata, 12, id, &MetadataRequest::default().with_topics(None)));
        }
    }
    s.write_all(&burst).unwrap();
    for id in 0..40 {
        let got = if id % 2 == 0 {
            response::<ApiVersionsResponse>(&mut s, 3).0
        } else {
            response::<MetadataResponse>(&mut s, 12).0
        };
        assert_eq!(got, id);
    }
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{} bytes more than 40 responses", rest.len());
}

fn fetch_error(s: &mut TcpStream, correlation_id: i32, leader_epoch: i32) -> i16 {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let request =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_current_leader_epoch(leader_epoch)
                .with_partition_max_bytes(1 << 20)])]);
    s.write_all(&frame(ApiKey::Fetch, 12, correlation_id, &request)).unwrap();
    let (_, r) = response::<FetchResponse>(s, 12);
    r.responses[0].partitions[0].error_code
}

/// A re-created topic has a new id and a higher leader epoch: a consumer still at the
/// old incarnation's epoch is told its offset is out of range (and applies its reset
/// policy) instead of reading the new incarnation at its old position.
#[test]
fn a_recreated_topic_puts_the_old_incarnations_readers_out_of_range() {
    let dir = TempDir::new("kafka-recreate");
    let server = start(&dir);
    let mut s = connect(&server);
    let mut ids = Vec::new();
    for round in 0..2 {
        let created = create_t(&mut s, 7, 1, 1);
        ids.push(created.topic_id);
        let md = metadata(&mut s, 10 * round + 1);
        let epoch = md.topics[0].partitions[0].leader_epoch;
        assert_eq!(md.topics[0].topic_id, created.topic_id);
        assert_eq!(fetch_error(&mut s, 10 * round + 2, epoch), 0);
        assert_eq!(fetch_error(&mut s, 10 * round + 3, -1), 0, "no epoch given: no check");
        if round == 0 {
            let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("t")]);
            s.write_all(&frame(ApiKey::DeleteTopics, 5, 10 * round + 4, &delete)).unwrap();
            let (_, deleted) = response::<DeleteTopicsResponse>(&mut s, 5);
            assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
            assert!(metadata(&mut s, 10 * round + 5).topics.is_empty(), "a deleted topic is gone from Metadata");
            assert_eq!(fetch_error(&mut s, 10 * round + 6, epoch), 3, "UNKNOWN_TOPIC_OR_PARTITION");
        } else {
            assert_eq!(
                fetch_error(&mut s, 17, epoch - 1),
                1,
                "OFFSET_OUT_OF_RANGE: a position in a deleted incarnation"
            );
            assert_eq!(fetch_error(&mut s, 18, epoch + 1), 75, "UNKNOWN_LEADER_EPOCH");
        }
    }
    assert_ne!(ids[0], ids[1], "a re-created topic has a new id");
}

/// A produce request of `count` records to one partition, values `"{tag}-{i}"`.
fn produce_request(partition: i32, tag: &str, count: usize) -> ProduceRequest {
    let records: Vec<_> =
        (0..count as i64).map(|i| record(i, Some(format!("{tag}-{i}")), format!("{tag}-{i}"))).collect();
    ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![TopicProduceData::default()
        .with_name(name("t"))
        .with_partition_data(vec![PartitionProduceData::default()
            .with_index(partition)
            .with_records(Some(batch(&records)))])])
}

/// Many connections at once, each with many produce requests in flight: every record
/// is acknowledged at its own offset, each connection's in the order it sent them, and
/// the partitions hold exactly the records acknowledged.
#[test]
fn many_connections_pipelining_produces() {
    const CONNECTIONS: usize = 24;
    const PARTITIONS: usize = 6;
    const REQUESTS: usize = 25;
    const RECORDS: usize = 4;
    let dir = TempDir::new("kafka-many");
    let server = start(&dir);
    let mut admin = connect(&server);
    create_t(&mut admin, 5, PARTITIONS as i32, -1);
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let mut s = connect(&server);
            std::thread::spawn(move || {
                let partition = (c % PARTITIONS) as i32;
                let mut burst = Vec::new();
                for r in 0..REQUESTS {
                    let request = produce_request(partition, &format!("c{c}r{r}"), RECORDS);
                    burst.extend(frame(ApiKey::Produce, 7, r as i32, &request));
                }
                s.write_all(&burst).unwrap();
                let mut bases = Vec::new();
                for r in 0..REQUESTS {
                    let (id, produced) = response::<ProduceResponse>(&mut s, 7);
                    assert_eq!(id, r as i32, "responses in request order");
                    let p = &produced.responses[0].partition_responses[0];
                    assert_eq!((p.index, p.error_code), (partition, 0), "{p:?}");
                    bases.push(p.base_offset);
                }
                assert!(bases.windows(2).all(|w| w[0] < w[1]), "one connection's produces land in order: {bases:?}");
                (partition, bases)
            })
        })
        .collect();
    let mut bases: Vec<Vec<i64>> = vec![Vec::new(); PARTITIONS];
    for client in clients {
        let (partition, b) = client.join().unwrap();
        bases[partition as usize].extend(b);
    }
    let per_partition = (CONNECTIONS / PARTITIONS * REQUESTS * RECORDS) as i64;
    for (p, mut b) in bases.into_iter().enumerate() {
        b.sort_unstable();
        let want: Vec<i64> = (0..per_partition).step_by(RECORDS).collect();
        assert_eq!(b, want, "partition {p}: every request got its own run of offsets");
    }
    assert_eq!(high_watermarks(&mut admin, PARTITIONS as i32), vec![per_partition; PARTITIONS]);
}

/// ListOffsets (latest) of partition `partition` of "t", at version 6, with the
/// client's current leader epoch: its error code and offset.
fn list_latest(s: &mut TcpStream, correlation_id: i32, partition: i32, current_epoch: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("t"))
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_current_leader_epoch(current_epoch)
            .with_timestamp(-1)])]);
    s.write_all(&frame(ApiKey::ListOffsets, 6, correlation_id, &request)).unwrap();
    let (_, r) = response::<ListOffsetsResponse>(s, 6);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// OffsetForLeaderEpoch of partition `partition` of "t", at version 4: its error code,
/// leader epoch and end offset.
fn epoch_end(s: &mut TcpStream, id: i32, partition: i32, current_epoch: i32, epoch: i32) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    let request = OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
        .with_topic(name("t"))
        .with_partitions(vec![OffsetForLeaderPartition::default()
            .with_partition(partition)
            .with_current_leader_epoch(current_epoch)
            .with_leader_epoch(epoch)])]);
    s.write_all(&frame(ApiKey::OffsetForLeaderEpoch, 4, id, &request)).unwrap();
    let (_, r) = response::<OffsetForLeaderEpochResponse>(s, 4);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// ListOffsets and OffsetForLeaderEpoch look a partition up alike: a partition the topic
/// does not have is UNKNOWN_TOPIC_OR_PARTITION, a current leader epoch older than the
/// incarnation's is FENCED_LEADER_EPOCH and a newer one UNKNOWN_LEADER_EPOCH; with the
/// right epoch (or none) each answers, and an epoch of the name's deleted incarnation
/// ends where this one begins.
#[test]
fn offset_lookups_check_the_partition_and_the_current_leader_epoch() {
    let dir = TempDir::new("kafka-offset-lookups");
    let server = start(&dir);
    let mut s = connect(&server);
    for _ in 0..2 {
        create_t(&mut s, 7, 1, 1);
        let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("t")]);
        s.write_all(&frame(ApiKey::DeleteTopics, 5, 2, &delete)).unwrap();
        assert_eq!(response::<DeleteTopicsResponse>(&mut s, 5).1.responses[0].error_code, 0);
    }
    create_t(&mut s, 7, 1, 1);
    let epoch = metadata(&mut s, 3).topics[0].partitions[0].leader_epoch;
    s.write_all(&frame(ApiKey::Produce, 8, 4, &produce_request(0, "v", 3))).unwrap();
    let (_, produced) = response::<ProduceResponse>(&mut s, 8);
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0, "{produced:?}");

    assert_eq!(list_latest(&mut s, 5, 0, epoch), (0, 3));
    assert_eq!(list_latest(&mut s, 6, 0, -1), (0, 3), "no epoch given: no check");
    assert_eq!(list_latest(&mut s, 7, 1, epoch), (3, -1), "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(list_latest(&mut s, 8, 0, epoch - 1), (74, -1), "FENCED_LEADER_EPOCH");
    assert_eq!(list_latest(&mut s, 9, 0, epoch + 1), (75, -1), "UNKNOWN_LEADER_EPOCH");

    assert_eq!(epoch_end(&mut s, 10, 0, epoch, epoch), (0, epoch, 3), "the current epoch ends at the end");
    assert_eq!(epoch_end(&mut s, 11, 0, -1, epoch), (0, epoch, 3));
    let (error, old, _) = epoch_end(&mut s, 12, 0, epoch, epoch - 1);
    assert_eq!((error, old), (0, epoch - 1), "an older incarnation's epoch ends where this one begins");
    assert_eq!(epoch_end(&mut s, 13, 1, epoch, epoch).0, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(epoch_end(&mut s, 14, 0, epoch - 1, epoch).0, 74, "FENCED_LEADER_EPOCH");
    assert_eq!(epoch_end(&mut s, 15, 0, epoch + 1, epoch).0, 75, "UNKNOWN_LEADER_EPOCH");
    assert_eq!(epoch_end(&mut s, 16, 0, epoch, epoch + 1), (0, -1, -1), "a newer epoch is unknown");
}
