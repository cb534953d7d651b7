//! Compressed and multi-record batches on the wire, against a running `broker-fs serve
//! --kafka`: a batch is stored whole and served back byte for byte, from its first
//! offset and from inside it; compressed bytes that do not decompress are refused with
//! `CORRUPT_MESSAGE`, a codec that does not exist or zstd before produce v7 with
//! `UNSUPPORTED_COMPRESSION_TYPE`, a batch that decompresses past the bound with
//! `MESSAGE_TOO_LARGE`, none of them changing the log; zstd is not served to a fetch
//! older than v10; and a record produced elsewhere that looks like a continuation is
//! served as the record it is.

mod common;

use bytes::Bytes;
use common::wire::{
    batch, compressed, connect, create_t, frame, gzip, high_watermarks, name, produce_to_t, record, response, start,
};
use common::{Server, TempDir};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError as E;
use std::io::Write;
use std::net::TcpStream;

/// `n` records from `tag`-0 on, as one uncompressed batch.
fn plain(tag: &str, n: i64) -> Vec<u8> {
    let records: Vec<_> = (0..n).map(|i| record(i, None, format!("{tag}-{i}").repeat(4))).collect();
    batch(&records).to_vec()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

/// Produce (version `v`) of `records` to partition 0 of "t", acks=-1: error, message and
/// base offset.
fn produce(s: &mut TcpStream, v: i16, records: Vec<u8>) -> (i16, String, i64) {
    produce_to_t(s, v, Bytes::from(records))
}

/// Fetch (version `v`) of partition 0 of "t" from `offset`: error and the records bytes.
fn fetch(s: &mut TcpStream, v: i16, offset: i64) -> (i16, Vec<u8>) {
    let request =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    s.write_all(&frame(ApiKey::Fetch, v, 4, &request)).unwrap();
    let (_, r) = response::<FetchResponse>(s, v);
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.records.as_ref().map_or(Vec::new(), |b| b.to_vec()))
}

/// The offsets and values of the records in fetched batches, decompressed with the
/// listener's own codecs (each batch rebuilt uncompressed for the crate's decoder).
fn records_of(bytes: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut plain = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let end = at + 12 + i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let batch = &bytes[at..end];
        let bits = i16::from_be_bytes([batch[21], batch[22]]) & 0b111;
        match broker_kafka::compression::Codec::from_bits(bits) {
            None => plain.extend_from_slice(batch),
            Some(codec) => {
                let body = broker_kafka::compression::decompress(codec, &batch[61..], 64 << 20).unwrap();
                let mut rebuilt = batch[..61].to_vec();
                rebuilt[22] &= !0b111;
                rebuilt.extend(body);
                let length = (rebuilt.len() - 12) as i32;
                rebuilt[8..12].copy_from_slice(&length.to_be_bytes());
                let crc = crc32c::crc32c(&rebuilt[21..]);
                rebuilt[17..21].copy_from_slice(&crc.to_be_bytes());
                plain.extend(rebuilt);
            }
        }
        at = end;
    }
    let mut buf = Bytes::from(plain);
    let sets = RecordBatchDecoder::decode_all(&mut buf).unwrap();
    sets.into_iter().flat_map(|s| s.records).map(|r| (r.offset, r.value.unwrap().to_vec())).collect()
}

#[test]
fn batches_are_kept_whole_and_served_from_inside() {
    let tmp = TempDir::new("kafka-batches");
    let server = start(&tmp);
    let mut s = connect(&server);
    create_t(&mut s);
    let first = plain("a", 5);
    let second = compressed(&plain("b", 4), 1, gzip);
    assert_eq!(produce(&mut s, 9, first.clone()), (0, String::new(), 0));
    assert_eq!(produce(&mut s, 9, second.clone()), (0, String::new(), 5));
    assert_eq!(high_watermarks(&mut s, 1), vec![9]);
    let all: Vec<(i64, Vec<u8>)> = (0..5)
        .map(|i| (i, format!("a-{i}").repeat(4).into_bytes()))
        .chain((0..4).map(|i| (5 + i, format!("b-{i}").repeat(4).into_bytes())))
        .collect();
    // From the first offset: both batches, byte for byte past the base offset and epoch.
    let (error, bytes) = fetch(&mut s, 12, 0);
    assert_eq!(error, 0);
    assert_eq!(bytes.len(), first.len() + second.len());
    assert_eq!(&bytes[16..first.len()], &first[16..], "the first batch as it came");
    assert_eq!(&bytes[first.len() + 16..], &second[16..], "the compressed batch as it came, still compressed");
    assert_eq!(records_of(&bytes), all);
    // From inside each batch: the whole batch, from its first offset, as Kafka serves it.
    for (from, batch_start) in [(3, 0), (7, 5), (8, 5)] {
        let (error, bytes) = fetch(&mut s, 12, from);
        assert_eq!(error, 0);
        assert_eq!(records_of(&bytes), all[batch_start as usize..], "fetch from {from}");
    }
    drop(s);
    server.terminate();
}

#[test]
fn bad_compressed_batches_are_refused_and_change_nothing() {
    let tmp = TempDir::new("kafka-bad-compressed");
    let server = start(&tmp);
    let mut s = connect(&server);
    create_t(&mut s);
    let records = plain("c", 3);
    // Not gzip at all, behind a CRC that holds.
    let garbage = compressed(&records, 1, |b| b.iter().map(|x| x ^ 0x5a).collect());
    let (error, message, _) = produce(&mut s, 9, garbage);
    assert_eq!(error, E::CorruptMessage.code(), "{message}");
    assert!(message.contains("gzip"), "{message}");
    // Truncated zstd.
    let cut = compressed(&records, 4, |b| {
        let z = zstd(b);
        z[..z.len() - 3].to_vec()
    });
    let (error, message, _) = produce(&mut s, 9, cut);
    assert_eq!(error, E::CorruptMessage.code(), "{message}");
    // Codec 6 does not exist; zstd needs produce v7.
    let (error, message, _) = produce(&mut s, 9, compressed(&records, 6, |b| b.to_vec()));
    assert_eq!(error, E::UnsupportedCompressionType.code(), "{message}");
    let (error, message, _) = produce(&mut s, 6, compressed(&records, 4, zstd));
    // (Produce responses carry a message from v8 on.)
    assert_eq!((error, message.as_str()), (E::UnsupportedCompressionType.code(), ""));
    // 100 MiB of zeros in one record's worth of gzip: past the bound, refused before it
    // is all decompressed.
    let mut bomb = records[..61].to_vec();
    bomb[57..61].copy_from_slice(&1i32.to_be_bytes());
    bomb[23..27].copy_from_slice(&0i32.to_be_bytes());
    bomb.extend(vec![0; 100 << 20]);
    let (error, message, _) = produce(&mut s, 9, compressed(&bomb, 1, gzip));
    assert_eq!(error, E::MessageTooLarge.code(), "{message}");
    // Nothing refused was stored, and the connection still serves.
    assert_eq!(high_watermarks(&mut s, 1), vec![0]);
    assert_eq!(produce(&mut s, 9, compressed(&records, 4, zstd)), (0, String::new(), 0));
    assert_eq!(high_watermarks(&mut s, 1), vec![3]);
    drop(s);
    server.terminate();
}

#[test]
fn zstd_is_served_only_from_fetch_v10() {
    let tmp = TempDir::new("kafka-zstd-fetch");
    let server = start(&tmp);
    let mut s = connect(&server);
    create_t(&mut s);
    assert_eq!(produce(&mut s, 9, plain("p", 2)).0, 0);
    assert_eq!(produce(&mut s, 9, compressed(&plain("z", 2), 4, zstd)).0, 0);
    // v9: the plain batch, then a stop before the zstd one; from it, the error.
    let (error, bytes) = fetch(&mut s, 9, 0);
    assert_eq!((error, records_of(&bytes).len()), (0, 2));
    assert_eq!(fetch(&mut s, 9, 2).0, E::UnsupportedCompressionType.code());
    assert_eq!(fetch(&mut s, 9, 3).0, E::UnsupportedCompressionType.code(), "from inside the zstd batch");
    let (error, bytes) = fetch(&mut s, 10, 0);
    assert_eq!((error, records_of(&bytes).len()), (0, 4));
    drop(s);
    server.terminate();
}

/// A record produced through the JSON protocol with the bytes of a continuation is no
/// continuation: it is served to Kafka clients as the record it is.
#[test]
fn a_record_that_looks_like_a_continuation_is_served_as_itself() {
    let tmp = TempDir::new("kafka-lookalike");
    let data = tmp.path().join("data");
    let mut json = Server::start(&data, &tmp.path().join("json.stderr"));
    json.call(
        serde_json::json!({ "CreateTopic": { "name": "t", "partitions": 1, "settings": { "deletion_grace_ms": 0 } } }),
    );
    // A continuation one back, at offset 1: the record before it is no batch.
    let lookalike = [0xff, b'k', 0, 0, 0, 1];
    let produced = json.call(serde_json::json!({ "Produce": { "topic": "t", "records": [
        { "key": null, "value": "first" },
        { "key": null, "value": { "base64": "/2sAAAAB" } },
    ] } }));
    assert_eq!(produced["Produced"]["positions"].as_array().map(Vec::len), Some(2), "{produced}");
    json.close();
    let server = start(&tmp);
    let mut s = connect(&server);
    for from in [0, 1] {
        let (error, bytes) = fetch(&mut s, 12, from);
        assert_eq!(error, 0);
        let got = records_of(&bytes);
        assert_eq!(got.last().unwrap(), &(1, lookalike.to_vec()), "fetch from {from}");
    }
    drop(s);
    server.terminate();
}
