//! How the Kafka listener keeps produced batches in the core, and serves them back.
//!
//! A batch of `n` records is stored whole, as it came, in the core record at its first
//! offset (no key, the batch as the value), followed by `n - 1` *continuations*: core
//! records holding only how far back their batch starts ([`CONTINUATION_LEN`] bytes).
//! So every Kafka offset is a core offset (idempotent sequences, committed offsets and
//! high watermarks mean the same on both sides), compressed batches stay compressed,
//! and a batch is served back byte for byte with its base offset set to its core
//! offset: the CRC covers only the bytes after it.
//!
//! A fetch that starts inside a batch is served the whole batch, as Kafka serves it: the
//! client skips the records before its position. A record stored some other way (the
//! CLI, the JSON protocol) is served as it is if it is a whole batch, and wrapped into a
//! batch of its own, with no timestamp, if it is not.

use crate::batches::{put_varlong, Batch, BATCH_HEADER, COMPRESSION_BITS, CRC_FROM, LOG_OVERHEAD, MAGIC};
use broker_core::ProduceRecord;
use bytes::Bytes;

/// The bytes of a continuation's value: a two-byte tag, then how many offsets back its
/// batch starts (u32, big-endian).
pub const CONTINUATION_LEN: usize = 6;
/// How a continuation's value begins. No batch begins so: a stored batch is at least
/// [`BATCH_HEADER`] bytes long, and a continuation is told apart by its length too.
const CONTINUATION_TAG: [u8; 2] = [0xff, b'k'];

/// The core records that keep `batches`: each batch, then its continuations.
pub fn core_records(batches: Vec<Batch>) -> Vec<ProduceRecord> {
    let offsets: usize = batches.iter().map(|b| b.records as usize).sum();
    let mut out = Vec::with_capacity(offsets);
    for batch in batches {
        let records = batch.records;
        out.push(ProduceRecord { key: None, value: batch.bytes });
        out.extend((1..records).map(|back| ProduceRecord { key: None, value: continuation(back) }));
    }
    out
}

/// The value of the continuation `back` offsets after its batch's first.
fn continuation(back: u32) -> Bytes {
    let mut value = [0; CONTINUATION_LEN];
    value[..2].copy_from_slice(&CONTINUATION_TAG);
    value[2..].copy_from_slice(&back.to_be_bytes());
    Bytes::copy_from_slice(&value)
}

/// What a core record is to the listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// A whole v2 batch: its length, magic, CRC, record count and last offset delta agree.
    Batch {
        /// How many records (and offsets) it holds.
        records: u32,
        /// Its compression codec (attribute bits 0-2; 0: none).
        codec: i16,
    },
    /// A continuation of the batch that starts `back` offsets before it.
    Continuation {
        /// At least 1.
        back: u32,
    },
    /// Anything else: a record produced some other way.
    Other,
}

/// What the core record with `key` and `value` is.
pub fn kept(key: Option<&[u8]>, value: &[u8]) -> Kept {
    if key.is_none() && value.len() == CONTINUATION_LEN && value[..2] == CONTINUATION_TAG {
        let back = u32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        if back > 0 {
            return Kept::Continuation { back };
        }
    }
    let be32 = |at: usize| i32::from_be_bytes([value[at], value[at + 1], value[at + 2], value[at + 3]]);
    if value.len() < BATCH_HEADER
        || value[16] != MAGIC
        || be32(8) as usize != value.len() - LOG_OVERHEAD
        || be32(57) < 1
        || be32(23) != be32(57) - 1
        || be32(17) as u32 != crc32c::crc32c(&value[CRC_FROM..])
    {
        return Kept::Other;
    }
    let codec = i16::from_be_bytes([value[21], value[22]]) & COMPRESSION_BITS;
    Kept::Batch { records: be32(57) as u32, codec }
}

/// Appends the stored batch `value` to a fetch response's records, at `offset` and
/// stamped with `leader_epoch`. Returns how many bytes it took.
pub fn serve_batch(out: &mut Vec<u8>, offset: u64, leader_epoch: i32, value: &[u8]) -> usize {
    let from = out.len();
    out.extend_from_slice(value);
    stamp(&mut out[from..], offset, leader_epoch);
    out.len() - from
}

/// Appends a record that is not a stored batch to a fetch response's records, as a batch
/// of its own at `offset`. Returns how many bytes it took.
pub fn serve_other(out: &mut Vec<u8>, offset: u64, leader_epoch: i32, key: Option<&[u8]>, value: &[u8]) -> usize {
    let from = out.len();
    wrap(out, key, value);
    stamp(&mut out[from..], offset, leader_epoch);
    out.len() - from
}

/// Sets a batch's base offset, and the epoch a consumer remembers its position by: both
/// lie outside the CRC.
fn stamp(batch: &mut [u8], offset: u64, leader_epoch: i32) {
    batch[..8].copy_from_slice(&(offset as i64).to_be_bytes());
    batch[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Appends a v2 batch at offset 0 holding one record with `key` and `value`, no
/// timestamp and no headers.
fn wrap(out: &mut Vec<u8>, key: Option<&[u8]>, value: &[u8]) {
    let mut body = Vec::with_capacity(value.len() + key.map_or(0, <[u8]>::len) + 12);
    match key {
        Some(k) => {
            put_varlong(&mut body, k.len() as i64);
            body.extend_from_slice(k);
        }
        None => put_varlong(&mut body, -1),
    }
    put_varlong(&mut body, value.len() as i64);
    body.extend_from_slice(value);
    put_varlong(&mut body, 0); // no headers
    let timestamp = -1i64;
    // The record: attributes 0, timestamp delta 0, offset delta 0, then the body.
    let record_len = 3 + body.len();
    let from = out.len();
    out.reserve(BATCH_HEADER + 5 + record_len);
    out.extend_from_slice(&0i64.to_be_bytes()); // base offset, set when served
    out.extend_from_slice(&[0; 4]); // batch length, below
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(MAGIC);
    out.extend_from_slice(&[0; 4]); // CRC, below
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes: create time, no compression
    out.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    out.extend_from_slice(&timestamp.to_be_bytes()); // base timestamp
    out.extend_from_slice(&timestamp.to_be_bytes()); // max timestamp
    out.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    out.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    out.extend_from_slice(&1i32.to_be_bytes()); // record count
    put_varlong(out, record_len as i64);
    out.extend_from_slice(&[0, 0, 0]); // attributes, timestamp delta 0, offset delta 0
    out.extend_from_slice(&body);
    let length = (out.len() - from - LOG_OVERHEAD) as i32;
    out[from + 8..from + 12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[from + CRC_FROM..]);
    out[from + 17..from + 21].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batches::tests::{compressed, decode, encode, gzip, record};
    use crate::batches::{accept, Bounds};
    use kafka_protocol::records::Compression;

    const BOUNDS: Bounds = Bounds { batch_bytes: 1 << 20, records: 1000, zstd: true };

    /// What a fetch from the first offset serves of `records` (stored from offset 100 on).
    fn served(records: &[ProduceRecord]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut head, mut next) = (100u64, 100u64);
        for (i, r) in records.iter().enumerate() {
            let offset = 100 + i as u64;
            if offset < next {
                let back = (offset - head) as u32;
                assert_eq!(kept(r.key.as_deref(), &r.value), Kept::Continuation { back }, "offset {offset}");
                continue;
            }
            match kept(r.key.as_deref(), &r.value) {
                Kept::Batch { records, .. } => {
                    serve_batch(&mut out, offset, 7, &r.value);
                    (head, next) = (offset, offset + u64::from(records));
                }
                other => panic!("offset {offset}: {other:?}"),
            }
        }
        out
    }

    #[test]
    fn batches_are_kept_whole_and_served_back_at_their_core_offsets() {
        let three = vec![
            record(0, Some("k1"), Some("v1"), &[("h", Some("x")), ("n", None)]),
            record(1, None, Some(""), &[]),
            record(2, Some(""), None, &[]),
        ];
        let plain = encode(&three, Compression::None);
        let gz = compressed(&encode(&[record(0, Some("k4"), Some("v4"), &[])], Compression::None), 1, gzip);
        let produced = bytes::Bytes::from([plain.clone(), gz.clone()].concat());
        let records = core_records(accept(&produced, BOUNDS).unwrap().batches);
        assert_eq!(records.len(), 4, "one core record per Kafka offset");
        assert_eq!(&records[0].value[..], &plain[..]);
        assert_eq!(kept(None, &records[1].value), Kept::Continuation { back: 1 });
        assert_eq!(kept(None, &records[2].value), Kept::Continuation { back: 2 });
        assert_eq!(kept(None, &records[3].value), Kept::Batch { records: 1, codec: 1 });
        let fetched = served(&records);
        let back = decode(&fetched[..plain.len()]);
        assert_eq!(back.len(), 3);
        for (i, (got, want)) in back.iter().zip(&three).enumerate() {
            assert_eq!(got.offset, 100 + i as i64);
            assert_eq!(got.partition_leader_epoch, 7, "stamped with the incarnation's epoch");
            assert_eq!((&got.key, &got.value, &got.headers), (&want.key, &want.value, &want.headers));
            assert_eq!(got.timestamp, want.timestamp);
        }
        assert_eq!(&fetched[plain.len() + 16..], &gz[16..], "the compressed batch is served as it came");
        assert_eq!(&fetched[plain.len() + 12..plain.len() + 16], &7i32.to_be_bytes(), "with the epoch");
        assert_eq!(&fetched[plain.len()..plain.len() + 8], &103i64.to_be_bytes());
    }

    #[test]
    fn continuations_are_told_from_other_records() {
        assert_eq!(kept(None, &[0xff, b'k', 0, 0, 0, 9]), Kept::Continuation { back: 9 });
        // Zero back, a key, another length or tag: a record produced some other way.
        assert_eq!(kept(None, &[0xff, b'k', 0, 0, 0, 0]), Kept::Other);
        assert_eq!(kept(Some(b""), &[0xff, b'k', 0, 0, 0, 9]), Kept::Other);
        assert_eq!(kept(None, &[0xff, b'k', 0, 0, 9]), Kept::Other);
        assert_eq!(kept(None, &[0xff, b'K', 0, 0, 0, 9]), Kept::Other);
        assert_eq!(kept(None, b""), Kept::Other);
        // A batch with one byte changed is no batch.
        let mut batch = encode(&[record(0, None, Some("v"), &[])], Compression::None);
        assert_eq!(kept(None, &batch), Kept::Batch { records: 1, codec: 0 });
        *batch.last_mut().unwrap() ^= 1;
        assert_eq!(kept(None, &batch), Kept::Other);
    }

    #[test]
    fn records_from_elsewhere_are_wrapped() {
        let mut fetched = Vec::new();
        serve_other(&mut fetched, 5, 7, Some(b"key"), b"plain value");
        serve_other(&mut fetched, 6, 7, None, b"");
        let back = decode(&fetched);
        assert_eq!(back[0].offset, 5);
        assert_eq!(back[0].key.as_deref(), Some(&b"key"[..]));
        assert_eq!(back[0].value.as_deref(), Some(&b"plain value"[..]));
        assert_eq!(back[0].timestamp, -1);
        assert_eq!((back[1].offset, back[1].key.clone(), back[1].value.as_deref()), (6, None, Some(&b""[..])));
    }
}
