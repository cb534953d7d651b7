//! Kafka on the wire for the tests that speak it raw: request frames, responses, record
//! batches, through the `kafka-protocol` crate's own codecs (the client side).

use super::{KafkaServer, TempDir};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Starts `serve --kafka` on a fresh directory under `dir`.
pub fn start(dir: &TempDir) -> KafkaServer {
    KafkaServer::start(&dir.path().join("data"), &dir.path().join("stderr"))
}

pub fn connect(server: &KafkaServer) -> TcpStream {
    let s = TcpStream::connect(&server.address).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

/// The high watermark of each of `partitions` partitions of "t", by ListOffsets.
pub fn high_watermarks(s: &mut TcpStream, partitions: i32) -> Vec<i64> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let latest = (0..partitions).map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1));
    let request = ListOffsetsRequest::default()
        .with_topics(vec![ListOffsetsTopic::default().with_name(name("t")).with_partitions(latest.collect())]);
    s.write_all(&frame(ApiKey::ListOffsets, 6, 99, &request)).unwrap();
    let (_, r) = response::<ListOffsetsResponse>(s, 6);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| if p.error_code == 0 { p.offset } else { -1 - i64::from(p.error_code) })
        .collect()
}

/// A request frame: size, header, body.
pub fn frame<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("protocol-test")));
    header.encode(&mut buf, R::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Reads one response frame: its correlation id and body (after the header).
pub fn response<R: Decodable + HeaderVersion>(s: &mut TcpStream, version: i16) -> (i32, R) {
    let mut size = [0; 4];
    s.read_exact(&mut size).expect("a response");
    let mut body = vec![0; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut buf = Bytes::from(body);
    let header = ResponseHeader::decode(&mut buf, R::header_version(version)).unwrap();
    let r = R::decode(&mut buf, version).unwrap();
    assert!(!buf.has_remaining(), "bytes after the response");
    (header.correlation_id, r)
}

/// Whether the server closed the connection (end of stream, or reset) without a response.
pub fn closed(s: &mut TcpStream) -> bool {
    let mut byte = [0; 1];
    match s.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut,
    }
}

/// A record as a producer with idempotence off makes it.
pub fn record(offset: i64, key: Option<String>, value: String) -> kafka_protocol::records::Record {
    kafka_protocol::records::Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: kafka_protocol::records::TimestampType::Creation,
        offset,
        // The crate's encoder starts a new batch wherever offset minus sequence changes:
        // this keeps a run of records from 0 in one batch, whose base sequence is then
        // -1, as a producer without idempotence writes it.
        sequence: offset as i32 - 1,
        timestamp: 1_000 + offset,
        key: key.map(Bytes::from),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
    }
}

/// `records` as one v2 batch.
pub fn batch(records: &[kafka_protocol::records::Record]) -> Bytes {
    use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
    buf.freeze()
}

/// A record batch, as a producer encodes it, with one byte of its value flipped.
pub fn rotten_batch() -> Vec<u8> {
    let mut bytes = batch(&[record(0, None, "value".into())]).to_vec();
    *bytes.last_mut().unwrap() ^= 0x20;
    bytes
}

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates the topic "t" with one partition (CreateTopics v7); it must succeed.
pub fn create_t(s: &mut TcpStream) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let request = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatableTopic::default()
        .with_name(name("t"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    s.write_all(&frame(ApiKey::CreateTopics, 7, 1, &request)).unwrap();
    let (_, r) = response::<CreateTopicsResponse>(s, 7);
    assert_eq!(r.topics[0].error_code, 0);
}

/// Deletes the topic "t" (DeleteTopics v5); it must succeed.
pub fn delete_t(s: &mut TcpStream) {
    let request = DeleteTopicsRequest::default().with_timeout_ms(30_000).with_topic_names(vec![name("t")]);
    s.write_all(&frame(ApiKey::DeleteTopics, 5, 2, &request)).unwrap();
    let (_, r) = response::<DeleteTopicsResponse>(s, 5);
    assert_eq!(r.responses[0].error_code, 0);
}

/// Produce (version `v`, acks=-1) of `records` to partition 0 of "t": its error, message
/// and base offset.
pub fn produce_to_t(s: &mut TcpStream, v: i16, records: Bytes) -> (i16, String, i64) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(name("t"))
            .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(records))]),
    ]);
    s.write_all(&frame(ApiKey::Produce, v, 3, &request)).unwrap();
    let (_, r) = response::<ProduceResponse>(s, v);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.error_message.as_deref().unwrap_or("").to_string(), p.base_offset)
}

/// `batch` (uncompressed) with its records compressed by `compress` under codec `bits`,
/// its length and CRC made right again.
pub fn compressed(batch: &[u8], bits: i16, compress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = batch[..61].to_vec();
    out.extend(compress(&batch[61..]));
    let attributes = i16::from_be_bytes([out[21], out[22]]) | bits;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// `bytes` as one gzip member.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}
