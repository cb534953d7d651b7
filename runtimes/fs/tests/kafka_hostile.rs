//! One misbehaving Kafka connection can neither exhaust the broker's memory nor hold up
//! another connection's answers: a fetch that lists one partition twenty times with
//! byte limits of 2 GiB, sixteen such fetches pipelined and never read, five 60 MiB
//! frames sent and their answers never read. Meanwhile another connection's requests are
//! answered within a bound, the broker's peak memory stays bounded, and a peer that
//! stops reading is cut off after the write timeout. A request of millions of tiny
//! elements is refused for what they would decode to, not let through for its bytes.

mod common;

use bytes::Bytes;
use common::wire::{batch, connect, frame, name, record, response};
use common::{KafkaServer, TempDir};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long another connection's answer may take while one connection misbehaves.
const ANSWER_BOUND: Duration = Duration::from_secs(5);
/// The write timeout the server runs with here.
const WRITE_TIMEOUT_MS: u64 = 2_000;

/// The peak resident memory of process `pid`, in bytes (VmHWM).
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kib * 1024
}

/// A fetch of partition 0 of "t", listed `copies` times, with every byte limit at 2 GiB.
fn greedy_fetch(copies: usize) -> FetchRequest {
    let partition = FetchPartition::default().with_partition_max_bytes(i32::MAX).with_fetch_offset(0);
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default().with_topic(name("t")).with_partitions(vec![partition; copies])])
}

/// ApiVersions on `s`, timed.
fn api_versions_takes(s: &mut TcpStream, id: i32) -> Duration {
    let start = Instant::now();
    s.write_all(&frame(ApiKey::ApiVersions, 3, id, &ApiVersionsRequest::default())).unwrap();
    let (got, r) = response::<ApiVersionsResponse>(s, 3);
    assert_eq!((got, r.error_code), (id, 0));
    start.elapsed()
}

#[test]
fn one_connection_can_neither_exhaust_memory_nor_stall_the_others() {
    let dir = TempDir::new("kafka-hostile");
    let server = KafkaServer::start_with(
        &dir.path().join("data"),
        &dir.path().join("stderr"),
        &["--kafka-write-timeout-ms", &WRITE_TIMEOUT_MS.to_string()],
    );
    let mut admin = connect(&server);
    let create = CreateTopicsRequest::default().with_topics(vec![create_topics_request::CreatableTopic::default()
        .with_name(name("t"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    admin.write_all(&frame(ApiKey::CreateTopics, 7, 1, &create)).unwrap();
    let _ = response::<CreateTopicsResponse>(&mut admin, 7);
    // 20 records of 900 kB: 18 MB in the partition, more than one core read returns.
    for i in 0..20 {
        let value = "x".repeat(900_000);
        let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name("t")).with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch(&[record(0, None, value)])))]),
        ]);
        admin.write_all(&frame(ApiKey::Produce, 9, 10 + i, &produce)).unwrap();
        let (_, r) = response::<ProduceResponse>(&mut admin, 9);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    let pid = server.pid();
    let before = peak_memory(pid);

    // 1. Twenty copies of one partition: answered once, within the response cap.
    let mut greedy = connect(&server);
    greedy.write_all(&frame(ApiKey::Fetch, 12, 100, &greedy_fetch(20))).unwrap();
    let mut size = [0; 4];
    greedy.read_exact(&mut size).unwrap();
    let size = i32::from_be_bytes(size) as usize;
    let mut body = vec![0; size];
    greedy.read_exact(&mut body).unwrap();
    assert!(size <= 40 << 20, "a fetch answered with {size} bytes");
    {
        use kafka_protocol::protocol::{Decodable, HeaderVersion};
        let mut buf = Bytes::from(body);
        ResponseHeader::decode(&mut buf, FetchResponse::header_version(12)).unwrap();
        let r = FetchResponse::decode(&mut buf, 12).unwrap();
        let listed: usize = r.responses.iter().map(|t| t.partitions.len()).sum();
        assert_eq!(listed, 1, "a partition asked for twenty times is answered once");
    }

    // 2. Sixteen such fetches pipelined, never read.
    let mut hoarder = connect(&server);
    for i in 0..16 {
        hoarder.write_all(&frame(ApiKey::Fetch, 12, 200 + i, &greedy_fetch(20))).unwrap();
    }
    // 3. Five frames of 60 MiB, their answers never read.
    let mut flooder = connect(&server);
    let giant = {
        let value = "y".repeat(60 << 20);
        let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name("t")).with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(value)))]),
        ]);
        frame(ApiKey::Produce, 9, 300, &produce)
    };
    let flooding = std::thread::spawn(move || {
        for _ in 0..5 {
            if flooder.write_all(&giant).is_err() {
                break;
            }
        }
        flooder
    });

    // Meanwhile another connection is answered within the bound, again and again (once
    // the flood has filled what the listener lets one connection hold).
    std::thread::sleep(Duration::from_millis(1_500));
    let mut other = connect(&server);
    for i in 0..10 {
        let took = api_versions_takes(&mut other, 400 + i);
        eprintln!("ApiVersions answered in {took:?}");
        assert!(took < ANSWER_BOUND, "ApiVersions took {took:?} while one connection misbehaves");
        std::thread::sleep(Duration::from_millis(200));
    }
    let peak = peak_memory(pid);
    eprintln!(
        "the broker's peak memory: {} MiB before the misbehaving connections, {} MiB after",
        before >> 20,
        peak >> 20
    );
    assert!(
        peak < before + (600 << 20),
        "the broker's peak memory went from {} MiB to {} MiB",
        before >> 20,
        peak >> 20
    );

    // The peer that does not read is cut off after the write timeout.
    hoarder.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    std::thread::sleep(Duration::from_millis(WRITE_TIMEOUT_MS + 2_000));
    let mut drained = Vec::new();
    let end = hoarder.read_to_end(&mut drained);
    assert!(
        end.is_ok() || end.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the hoarder's connection is closed: {end:?}"
    );
    assert!(server.stderr().contains("stopped reading"), "{}", server.stderr());
    drop(flooding.join());
    assert!(api_versions_takes(&mut other, 500) < ANSWER_BOUND);
}

/// A DescribeGroups v0 frame of `n` group ids, correlation id `id`: empty ones (two
/// bytes an element on the wire), or `distinct` ones of 6 digits.
fn group_ids(n: usize, id: i32, distinct: bool) -> Vec<u8> {
    let each = if distinct { 8 } else { 2 };
    let mut body = Vec::with_capacity(14 + each * n);
    body.extend_from_slice(&((10 + 4 + each * n) as i32).to_be_bytes());
    body.extend_from_slice(&15i16.to_be_bytes()); // DescribeGroups
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    body.extend_from_slice(&(n as i32).to_be_bytes());
    for i in 0..n {
        if distinct {
            body.extend_from_slice(&6i16.to_be_bytes());
            body.extend_from_slice(format!("{i:06}").as_bytes());
        } else {
            body.extend_from_slice(&[0, 0]);
        }
    }
    body
}

/// A request is charged for what its elements decode to and ask of the response, not
/// only for its bytes: a DescribeGroups of 8 million empty group ids (16 MiB on the wire,
/// which decoded and answered took 3 GiB at the peak) is refused, its connection closed
/// with the reason in the log, while another connection is answered; one of 100,000
/// distinct ids is answered whole; the broker's peak memory grows by less than the listener's budget.
#[test]
fn requests_are_charged_for_what_their_elements_decode_to() {
    let dir = TempDir::new("kafka-elements");
    let server = KafkaServer::start(&dir.path().join("data"), &dir.path().join("stderr"));
    let pid = server.pid();
    let before = peak_memory(pid);

    let mut hoarder = connect(&server);
    hoarder.write_all(&group_ids(8_000_000, 1, false)).unwrap();
    let mut byte = [0; 1];
    assert!(matches!(hoarder.read(&mut byte), Ok(0) | Err(_)), "8 million group ids were answered");
    let mut other = connect(&server);
    assert!(api_versions_takes(&mut other, 2) < ANSWER_BOUND);

    let mut asker = connect(&server);
    asker.write_all(&group_ids(100_000, 3, true)).unwrap();
    let (id, r) = response::<DescribeGroupsResponse>(&mut asker, 0);
    assert_eq!((id, r.groups.len()), (3, 100_000));

    let grew = peak_memory(pid).saturating_sub(before);
    eprintln!("the broker's peak memory grew by {} MiB", grew >> 20);
    assert!(grew < 256 << 20, "the broker's peak memory grew by {} MiB", grew >> 20);
    let log = server.stderr();
    assert!(
        log.contains("a DescribeGroups request of 16000014 bytes holds 8000000 array elements"),
        "the reason is not in the log: {log}"
    );
}

/// A Fetch and a Metadata naming 90,000 topics that do not exist (as many as the
/// listener takes in one request: two elements each in the Fetch) are answered, each
/// topic once with UNKNOWN_TOPIC_OR_PARTITION, while another connection is answered too.
/// How long each took is printed: a handler that matches each name against every other
/// takes tens of seconds of a core here, and held up every connection on that thread.
#[test]
fn requests_naming_many_topics_are_answered() {
    let dir = TempDir::new("kafka-many-topics");
    let server = KafkaServer::start(&dir.path().join("data"), &dir.path().join("stderr"));
    let n = 90_000;
    let names: Vec<String> = (0..n).map(|i| format!("absent-{i:06}")).collect();

    let mut c = connect(&server);
    let fetch = FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(
        names
            .iter()
            .map(|t| {
                FetchTopic::default()
                    .with_topic(name(t))
                    .with_partitions(vec![FetchPartition::default().with_fetch_offset(0)])
            })
            .collect(),
    );
    let start = Instant::now();
    c.write_all(&frame(ApiKey::Fetch, 12, 1, &fetch)).unwrap();
    let (id, r) = response::<FetchResponse>(&mut c, 12);
    eprintln!("a fetch of {n} absent topics was answered in {:?}", start.elapsed());
    assert_eq!((id, r.responses.len()), (1, n));
    assert!(r.responses.iter().all(
        |t| t.partitions.len() == 1 && t.partitions[0].error_code == ResponseError::UnknownTopicOrPartition.code()
    ));

    let metadata = MetadataRequest::default().with_topics(Some(
        names.iter().map(|t| metadata_request::MetadataRequestTopic::default().with_name(Some(name(t)))).collect(),
    ));
    let start = Instant::now();
    c.write_all(&frame(ApiKey::Metadata, 12, 2, &metadata)).unwrap();
    let (id, r) = response::<MetadataResponse>(&mut c, 12);
    eprintln!("a metadata of {n} absent topics was answered in {:?}", start.elapsed());
    assert_eq!((id, r.topics.len()), (2, n));
    assert!(r.topics.iter().all(|t| t.error_code == ResponseError::UnknownTopicOrPartition.code()));
    let mut other = connect(&server);
    api_versions_takes(&mut other, 3);
}
