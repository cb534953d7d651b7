//! Kafka record batches (format v2) as the Kafka listener stores and serves them.
//!
//! A produced batch is split into one single-record batch per record, each stored as one
//! broker-core record (no key, the batch as its value), so that every Kafka offset is a
//! core offset. A fetch serves the stored batches back to back with each base offset set
//! to the record's core offset: the CRC covers only the bytes after it, so a stored batch
//! is served without being encoded again. A record that was produced some other way (the
//! CLI, the JSON protocol) is wrapped into a batch when fetched, with no timestamp.
//!
//! The parser here is our own, strict and bounded: it allocates nothing a declared count
//! asks for before the bytes are there, refuses what this broker cannot honour
//! (compression, transactions, log-append timestamps), and checks every length, the CRC
//! and the record count against the bytes. An idempotent producer's batch comes with its
//! producer id, epoch and base sequence ([`Produced::producer`]), which the core judges.

use std::fmt;

/// Bytes before a batch's records.
pub const BATCH_HEADER: usize = 61;
/// The fewest bytes a stored record takes: its batch header and the smallest record
/// (a length, attributes, two deltas, a null key, a null value and no headers).
pub const MIN_STORED: usize = BATCH_HEADER + 7;
/// Where the CRC-covered part of a batch begins.
const CRC_FROM: usize = 21;
const MAGIC: u8 = 2;
/// `baseOffset` and `batchLength`, the part of the header `batchLength` does not count.
const LOG_OVERHEAD: usize = 12;
/// Attribute bits a producer may not set here: compression (0-2), log-append time (3),
/// transactional (4), control (5).
const COMPRESSION_BITS: i16 = 0b111;
const LOG_APPEND_TIME_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// Why produced records were refused; each maps to the Kafka error a client expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// Malformed bytes, a wrong length or a CRC mismatch: `CORRUPT_MESSAGE`.
    Corrupt(String),
    /// A compressed batch: `UNSUPPORTED_COMPRESSION_TYPE`.
    Compressed(i16),
    /// Valid bytes this broker refuses (transactions, idempotence, an old message
    /// format): `INVALID_RECORD`.
    Refused(String),
    /// A batch whose CRC holds but whose records do not add up (a count, a length, an
    /// offset delta), or no batch at all: the producer sent what it meant, and it is
    /// wrong, so `INVALID_RECORD` as Kafka answers, not `CORRUPT_MESSAGE`.
    Invalid(String),
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Corrupt(why) => write!(f, "corrupt record batch: {why}"),
            BatchError::Compressed(codec) => write!(
                f,
                "compressed record batches (codec {codec}) are not supported: set compression.type=none in the producer"
            ),
            BatchError::Refused(why) => write!(f, "record batch refused: {why}"),
            BatchError::Invalid(why) => write!(f, "invalid record batch: {why}"),
        }
    }
}

/// A cursor over bytes that fails, never panics, when they run out.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        let end = self.at.checked_add(n).filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| BatchError::Corrupt(format!("{n} bytes needed at byte {}", self.at)))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], BatchError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, BatchError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, BatchError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, BatchError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A zigzag varlong of at most 10 bytes.
    fn varlong(&mut self) -> Result<i64, BatchError> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.take(1)?[0];
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(BatchError::Corrupt(format!("a varint longer than 10 bytes at byte {}", self.at)))
    }

    /// A zigzag varint that fits an i32.
    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| BatchError::Corrupt(format!("varint {v} out of range at byte {}", self.at)))
    }

    /// A length-prefixed byte string; `-1` (null) is allowed only if `nullable`.
    fn bytes(&mut self, what: &str, nullable: bool) -> Result<Option<&'a [u8]>, BatchError> {
        match self.varint()? {
            -1 if nullable => Ok(None),
            n if n >= 0 => Ok(Some(self.take(n as usize)?)),
            n => Err(BatchError::Corrupt(format!("{what} length {n}"))),
        }
    }
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One produced record, as stored: a v2 batch holding that record alone, base offset 0.
pub type StoredBatch = Vec<u8>;

/// An idempotent producer's batch header: who sent it, and its first sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerOf {
    /// The producer id (at least 0).
    pub id: i64,
    /// Its epoch (at least 0).
    pub epoch: i16,
    /// The first record's sequence number (at least 0).
    pub base_sequence: i32,
}

/// The records of one partition of a produce, split for storing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produced {
    /// One stored batch per record, in order.
    pub stored: Vec<StoredBatch>,
    /// The idempotent producer that sent them, if one did (then they came in one batch).
    pub producer: Option<ProducerOf>,
}

/// Splits the `records` of one partition of a produce request (one or more v2 batches)
/// into stored single-record batches, in order. Nothing is returned unless every batch
/// is valid. An idempotent producer's records must come in one batch (as every Kafka
/// client sends them): several would need their sequences judged one by one.
pub fn split(mut records: &[u8]) -> Result<Produced, BatchError> {
    let mut out = Produced { stored: Vec::new(), producer: None };
    if records.is_empty() {
        return Err(BatchError::Invalid("no record batch".into()));
    }
    let mut batches = 0;
    while !records.is_empty() {
        let (used, producer) = split_one(records, &mut out.stored)?;
        records = &records[used..];
        batches += 1;
        if producer.is_some() {
            out.producer = producer;
        }
        if out.producer.is_some() && batches > 1 {
            return Err(BatchError::Refused(
                "an idempotent producer's records for one partition come in one batch per request".into(),
            ));
        }
    }
    Ok(out)
}

/// Splits the batch at the start of `bytes` into `out`; returns the bytes it took and
/// its idempotent producer, if it has one.
fn split_one(bytes: &[u8], out: &mut Vec<StoredBatch>) -> Result<(usize, Option<ProducerOf>), BatchError> {
    let mut r = Reader { bytes, at: 0 };
    let _base_offset = r.i64()?;
    let length = r.i32()?;
    let total = usize::try_from(length)
        .ok()
        .and_then(|l| l.checked_add(LOG_OVERHEAD))
        .filter(|t| *t >= BATCH_HEADER && *t <= bytes.len())
        .ok_or_else(|| {
            BatchError::Corrupt(format!("batch length {length} does not fit the {} bytes given", bytes.len()))
        })?;
    let mut r = Reader { bytes: &bytes[..total], at: LOG_OVERHEAD };
    let _leader_epoch = r.i32()?;
    let magic = r.take(1)?[0];
    if magic != MAGIC {
        return Err(BatchError::Refused(format!(
            "message format v{magic}: only v2 record batches are accepted (a client from Kafka 0.11 on sends them)"
        )));
    }
    let crc = u32::from_be_bytes(r.array()?);
    let actual = crc32c::crc32c(&bytes[CRC_FROM..total]);
    if crc != actual {
        return Err(BatchError::Corrupt(format!("CRC mismatch (batch says {crc:08x}, bytes give {actual:08x})")));
    }
    let attributes = r.i16()?;
    if attributes & COMPRESSION_BITS != 0 {
        return Err(BatchError::Compressed(attributes & COMPRESSION_BITS));
    }
    if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) != 0 {
        return Err(BatchError::Refused("transactional and control batches are not supported".into()));
    }
    if attributes & LOG_APPEND_TIME_BIT != 0 {
        return Err(BatchError::Refused("a producer may not set log-append time".into()));
    }
    let last_offset_delta = r.i32()?;
    let base_timestamp = r.i64()?;
    let _max_timestamp = r.i64()?;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let base_sequence = r.i32()?;
    let producer = match producer_id {
        -1 => None,
        id if id >= 0 && producer_epoch >= 0 && base_sequence >= 0 => {
            Some(ProducerOf { id, epoch: producer_epoch, base_sequence })
        }
        id => {
            return Err(BatchError::Invalid(format!(
                "producer id {id}, epoch {producer_epoch}, base sequence {base_sequence}: \
                 an idempotent batch has all three at least 0, any other has producer id -1"
            )))
        }
    };
    // Past the CRC, the bytes are what the producer meant: what does not add up in
    // them is an invalid batch, not a corrupt one.
    records(&mut r, last_offset_delta, base_timestamp, total, out).map_err(|e| match e {
        BatchError::Corrupt(why) => BatchError::Invalid(why),
        e => e,
    })?;
    Ok((total, producer))
}

/// The records of a batch whose header and CRC were checked, `r` at its record count,
/// split into `out`.
fn records(
    r: &mut Reader<'_>,
    last_offset_delta: i32,
    base_timestamp: i64,
    total: usize,
    out: &mut Vec<StoredBatch>,
) -> Result<(), BatchError> {
    let count = r.i32()?;
    // Every record takes at least 7 bytes: no count above what the bytes can hold.
    let room = (total - BATCH_HEADER) / 7;
    if count < 1 || count as usize > room {
        return Err(BatchError::Invalid(format!("record count {count} for {} bytes of records", total - BATCH_HEADER)));
    }
    if last_offset_delta != count - 1 {
        return Err(BatchError::Invalid(format!("last offset delta {last_offset_delta} for {count} records")));
    }
    out.reserve(count as usize);
    for index in 0..count {
        let size = r.varint()?;
        let size = usize::try_from(size).map_err(|_| BatchError::Corrupt(format!("record {index}: size {size}")))?;
        let mut rec = Reader { bytes: r.take(size)?, at: 0 };
        let record_attributes = rec.take(1)?[0];
        let timestamp_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        if offset_delta != index {
            return Err(BatchError::Invalid(format!("record {index} has offset delta {offset_delta}")));
        }
        let timestamp = base_timestamp
            .checked_add(timestamp_delta)
            .ok_or_else(|| BatchError::Corrupt(format!("record {index}: timestamp overflows")))?;
        // Key, value and headers are kept byte for byte; walk them to check their lengths.
        let body_from = rec.at;
        rec.bytes("key", true)?;
        rec.bytes("value", true)?;
        let headers = rec.varint()?;
        if headers < 0 || headers as usize > rec.bytes.len() {
            return Err(BatchError::Corrupt(format!("record {index}: header count {headers}")));
        }
        for _ in 0..headers {
            let key = rec.bytes("header key", false)?.unwrap_or_default();
            if std::str::from_utf8(key).is_err() {
                return Err(BatchError::Corrupt(format!("record {index}: a header key is not UTF-8")));
            }
            rec.bytes("header value", true)?;
        }
        if rec.at != rec.bytes.len() {
            return Err(BatchError::Corrupt(format!(
                "record {index}: {} bytes past its end",
                rec.bytes.len() - rec.at
            )));
        }
        out.push(single(record_attributes, timestamp, &rec.bytes[body_from..]));
    }
    if r.at != total {
        return Err(BatchError::Invalid(format!("{} bytes after the last record of the batch", total - r.at)));
    }
    Ok(())
}

/// A v2 batch of one record at offset 0: `body` is the record's key, value and headers
/// as encoded in a batch.
fn single(record_attributes: u8, timestamp: i64, body: &[u8]) -> StoredBatch {
    // The record: attributes, timestamp delta 0, offset delta 0, then the body.
    let record_len = 3 + body.len();
    let mut out = Vec::with_capacity(BATCH_HEADER + 5 + record_len);
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
    put_varlong(&mut out, record_len as i64);
    out.push(record_attributes);
    out.extend_from_slice(&[0, 0]); // timestamp delta 0, offset delta 0 (zigzag varints)
    out.extend_from_slice(body);
    let length = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_FROM..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A record that was not produced through Kafka, as a batch with no timestamp.
fn wrap(key: Option<&[u8]>, value: &[u8]) -> StoredBatch {
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
    single(0, -1, &body)
}

/// Whether `value` is a stored single-record batch: its length, magic, count and CRC
/// all agree.
fn is_stored_batch(value: &[u8]) -> bool {
    value.len() > BATCH_HEADER
        && value[16] == MAGIC
        && i32::from_be_bytes([value[8], value[9], value[10], value[11]]) as usize == value.len() - LOG_OVERHEAD
        && value[57..61] == 1i32.to_be_bytes()
        && u32::from_be_bytes([value[17], value[18], value[19], value[20]]) == crc32c::crc32c(&value[CRC_FROM..])
}

/// Appends the record at `offset` to a fetch response's records, as a batch whose base
/// offset is `offset`. Returns how many bytes it took.
pub fn serve(out: &mut Vec<u8>, offset: u64, leader_epoch: i32, key: Option<&[u8]>, value: &[u8]) -> usize {
    let from = out.len();
    if is_stored_batch(value) {
        out.extend_from_slice(value);
    } else {
        out.extend_from_slice(&wrap(key, value));
    }
    out[from..from + 8].copy_from_slice(&(offset as i64).to_be_bytes());
    // The epoch a consumer remembers its position by; like the base offset, it lies
    // outside the CRC.
    out[from + 12..from + 16].copy_from_slice(&leader_epoch.to_be_bytes());
    out.len() - from
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn record(offset: i64, key: Option<&str>, value: Option<&str>, headers: &[(&str, Option<&str>)]) -> Record {
        let mut h = IndexMap::new();
        for (k, v) in headers {
            h.insert(StrBytes::from_string(k.to_string()), v.map(|v| bytes::Bytes::from(v.to_string())));
        }
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 1_700_000_000_000 + offset * 7,
            key: key.map(|k| bytes::Bytes::from(k.to_string())),
            value: value.map(|v| bytes::Bytes::from(v.to_string())),
            headers: h,
        }
    }

    fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, records, &RecordEncodeOptions { version: 2, compression }).unwrap();
        buf.to_vec()
    }

    fn decode(bytes: &[u8]) -> Vec<Record> {
        let mut buf = bytes::Bytes::copy_from_slice(bytes);
        RecordBatchDecoder::decode_all(&mut buf).unwrap().into_iter().flat_map(|s| s.records).collect()
    }

    #[test]
    fn split_then_serve_gives_each_record_back_at_its_core_offset() {
        let records = vec![
            record(0, Some("k1"), Some("v1"), &[("h", Some("x")), ("n", None)]),
            record(1, None, Some(""), &[]),
            record(2, Some(""), None, &[]),
        ];
        let mut produced = encode(&records, Compression::None);
        produced.extend(encode(&[record(0, Some("k4"), Some("v4"), &[])], Compression::None));
        let Produced { stored, producer } = split(&produced).unwrap();
        assert_eq!(producer, None);
        assert_eq!(stored.len(), 4);
        let mut fetched = Vec::new();
        for (i, s) in stored.iter().enumerate() {
            let n = serve(&mut fetched, 100 + i as u64, 7, None, s);
            assert_eq!(n, s.len(), "a stored batch is served as it is");
        }
        let back = decode(&fetched);
        assert_eq!(back.len(), 4);
        for (i, (got, want)) in
            back.iter().zip(records.iter().chain([&record(0, Some("k4"), Some("v4"), &[])])).enumerate()
        {
            assert_eq!(got.offset, 100 + i as i64);
            assert_eq!(got.partition_leader_epoch, 7, "stamped with the incarnation's epoch");
            assert_eq!((&got.key, &got.value, &got.headers), (&want.key, &want.value, &want.headers));
            assert_eq!(got.timestamp, want.timestamp);
        }
    }

    #[test]
    fn records_from_elsewhere_are_wrapped() {
        let mut fetched = Vec::new();
        serve(&mut fetched, 5, 7, Some(b"key"), b"plain value");
        serve(&mut fetched, 6, 7, None, b"");
        let back = decode(&fetched);
        assert_eq!(back[0].offset, 5);
        assert_eq!(back[0].key.as_deref(), Some(&b"key"[..]));
        assert_eq!(back[0].value.as_deref(), Some(&b"plain value"[..]));
        assert_eq!(back[0].timestamp, -1);
        assert_eq!((back[1].offset, back[1].key.clone(), back[1].value.as_deref()), (6, None, Some(&b""[..])));
    }

    #[test]
    fn bad_batches_are_refused_with_the_reason() {
        let good = encode(&[record(0, Some("k"), Some("v"), &[])], Compression::None);
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(matches!(split(&bad_crc), Err(BatchError::Corrupt(m)) if m.contains("CRC")));
        assert!(matches!(split(&good[..good.len() - 1]), Err(BatchError::Corrupt(_))));
        assert!(matches!(split(&[]), Err(BatchError::Invalid(m)) if m.contains("no record batch")));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(split(&trailing).is_err(), "a byte after the last batch");
        let gzip_attr = |b: &mut Vec<u8>| {
            b[22] |= 1;
            let crc = crc32c::crc32c(&b[CRC_FROM..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
        };
        let mut compressed = good.clone();
        gzip_attr(&mut compressed);
        assert_eq!(split(&compressed), Err(BatchError::Compressed(1)));
        let mut old = good.clone();
        old[16] = 1;
        assert!(matches!(split(&old), Err(BatchError::Refused(_))));
        // A huge declared record count with valid CRC is refused before any allocation.
        let mut huge = good.clone();
        huge[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&huge[CRC_FROM..]);
        huge[17..21].copy_from_slice(&crc.to_be_bytes());
        // Behind a CRC that holds, what does not add up is invalid, not corrupt.
        assert!(matches!(split(&huge), Err(BatchError::Invalid(m)) if m.contains("record count")));
        // Producer id, epoch and base sequence: all at least 0, or the id -1.
        let with_producer = |id: i64, epoch: i16, sequence: i32| {
            let mut b = good.clone();
            b[43..51].copy_from_slice(&id.to_be_bytes());
            b[51..53].copy_from_slice(&epoch.to_be_bytes());
            b[53..57].copy_from_slice(&sequence.to_be_bytes());
            let crc = crc32c::crc32c(&b[CRC_FROM..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            b
        };
        let idempotent = with_producer(7, 2, 40);
        let split_idempotent = split(&idempotent).unwrap();
        assert_eq!(split_idempotent.producer, Some(ProducerOf { id: 7, epoch: 2, base_sequence: 40 }));
        assert_eq!(split_idempotent.stored.len(), 1);
        for (id, epoch, sequence) in [(7, -1, 0), (7, 0, -1), (-2, 0, 0)] {
            let bad = with_producer(id, epoch, sequence);
            assert!(matches!(split(&bad), Err(BatchError::Invalid(_))), "{id} {epoch} {sequence}");
        }
        let mut two = idempotent.clone();
        two.extend_from_slice(&idempotent);
        assert!(matches!(split(&two), Err(BatchError::Refused(m)) if m.contains("one batch")));
    }

    /// Any bytes at all: an error or batches, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let good = encode(
            &[record(0, Some("k"), Some("v"), &[("a", Some("b"))]), record(1, None, None, &[])],
            Compression::None,
        );
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = good.clone();
            let i = (x % b.len() as u64) as usize;
            b[i] ^= (x >> 32) as u8 | 1;
            let cut = ((x >> 16) % (b.len() as u64 + 1)) as usize;
            // Fix the CRC half of the time so the parser gets past it.
            if x & 1 == 0 && b.len() > CRC_FROM {
                let crc = crc32c::crc32c(&b[CRC_FROM..]);
                b[17..21].copy_from_slice(&crc.to_be_bytes());
            }
            let _ = split(&b[..cut]);
            let _ = split(&b);
        }
    }
}
