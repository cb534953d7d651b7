//! Kafka record batches (format v2) as a producer sends them: checked whole before the
//! listener stores them (see [`crate::stored`] for how they are kept and served).
//!
//! The parser here is our own, strict and bounded: it allocates nothing a declared count
//! asks for before the bytes are there, decompresses within a bound
//! ([`MAX_DECOMPRESSED`]), refuses what this broker cannot honour (transactions,
//! log-append timestamps), and checks every length, the CRC and the record count against
//! the bytes, inside a compressed batch too. An idempotent producer's batch comes with its
//! producer id, epoch and base sequence ([`Accepted::producer`]), which the core judges.

use crate::compression::{decompress, Codec, DecompressError};
use bytes::Bytes;
use std::fmt;

/// Bytes before a batch's records.
pub const BATCH_HEADER: usize = 61;
/// Where the CRC-covered part of a batch begins.
pub const CRC_FROM: usize = 21;
/// Where a batch's max timestamp lies.
const MAX_TIMESTAMP_AT: usize = 35;
/// The magic byte of v2 record batches.
pub const MAGIC: u8 = 2;
/// `baseOffset` and `batchLength`, the part of the header `batchLength` does not count.
pub const LOG_OVERHEAD: usize = 12;
/// The most bytes the records of one compressed batch may decompress to. A producer's
/// batch is at most `batch.size` (1 MiB at most by default) before compression, so this
/// leaves room for any real batch, and stops a small batch that would decompress to
/// gigabytes (which Kafka itself would walk through) before it takes the memory.
pub const MAX_DECOMPRESSED: usize = 64 << 20;
/// The attribute bits of the compression codec (0: none).
pub const COMPRESSION_BITS: i16 = 0b111;
/// Attribute bits a producer may not set here: log-append time (3), transactional (4),
/// control (5).
const LOG_APPEND_TIME_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
/// The produce version from which a batch may be compressed with zstd (Kafka 2.1's).
pub const ZSTD_PRODUCE_VERSION: i16 = 7;

/// Why produced records were refused; each maps to the Kafka error a client expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// Malformed bytes, a wrong length, a CRC mismatch, or compressed bytes that do not
    /// decompress: `CORRUPT_MESSAGE`.
    Corrupt(String),
    /// A codec this broker does not know, or zstd before produce v7:
    /// `UNSUPPORTED_COMPRESSION_TYPE`.
    Unsupported(String),
    /// Valid bytes this broker refuses (transactions, an old message format):
    /// `INVALID_RECORD`.
    Refused(String),
    /// A batch whose CRC holds but whose records do not add up (a count, a length, an
    /// offset delta), or no batch at all: the producer sent what it meant, and it is
    /// wrong, so `INVALID_RECORD` as Kafka answers, not `CORRUPT_MESSAGE`.
    Invalid(String),
    /// A batch past a bound (its bytes, its record count, what it decompresses to):
    /// `MESSAGE_TOO_LARGE`, which a producer answers by sending smaller batches.
    TooLarge(String),
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Corrupt(why) => write!(f, "corrupt record batch: {why}"),
            BatchError::Unsupported(why) => write!(f, "unsupported compression: {why}"),
            BatchError::Refused(why) => write!(f, "record batch refused: {why}"),
            BatchError::Invalid(why) => write!(f, "invalid record batch: {why}"),
            BatchError::TooLarge(why) => write!(f, "record batch too large: {why}"),
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

/// Appends `v` as a zigzag varlong, as record fields are encoded.
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

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

/// One checked batch, as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Its bytes, from its base offset to its last record: a slice of the request.
    pub bytes: Bytes,
    /// How many records (and so offsets) it holds, at least 1.
    pub records: u32,
}

/// The batches of one partition of a produce, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The batches, in order.
    pub batches: Vec<Batch>,
    /// The idempotent producer that sent them, if one did (then they came in one batch).
    pub producer: Option<ProducerOf>,
}

/// The bounds a produce's batches are held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The most bytes one batch may take (the core's largest record: a batch is stored
    /// as one).
    pub batch_bytes: usize,
    /// The most records all the batches may hold together (the core's count of one
    /// produce's records).
    pub records: usize,
    /// Whether zstd is allowed (a produce of version [`ZSTD_PRODUCE_VERSION`] or later).
    pub zstd: bool,
}

/// Checks the `records` of one partition of a produce request (one or more v2 batches),
/// every one of them, compressed ones decompressed; nothing is returned unless every
/// batch is valid and within `bounds`. An idempotent producer's records must come in
/// one batch (as every Kafka client sends them): several would need their sequences
/// judged one by one.
pub fn accept(records: &Bytes, bounds: Bounds) -> Result<Accepted, BatchError> {
    let mut out = Accepted { batches: Vec::new(), producer: None };
    if records.is_empty() {
        return Err(BatchError::Invalid("no record batch".into()));
    }
    let (mut at, mut total_records) = (0, 0usize);
    while at < records.len() {
        let (batch, producer) = check_one(records.slice(at..), bounds)?;
        at += batch.bytes.len();
        total_records += batch.records as usize;
        if total_records > bounds.records {
            return Err(BatchError::TooLarge(format!(
                "more than {} records for one partition of one request: send smaller batches \
                 (batch.num.messages, batch.size)",
                bounds.records
            )));
        }
        out.batches.push(batch);
        if producer.is_some() {
            out.producer = producer;
        }
        if out.producer.is_some() && out.batches.len() > 1 {
            return Err(BatchError::Refused(
                "an idempotent producer's records for one partition come in one batch per request".into(),
            ));
        }
    }
    Ok(out)
}

/// Checks the batch at the start of `bytes`; returns it and its idempotent producer, if
/// it has one.
fn check_one(bytes: Bytes, bounds: Bounds) -> Result<(Batch, Option<ProducerOf>), BatchError> {
    let mut r = Reader { bytes: &bytes, at: 0 };
    let _base_offset = r.i64()?;
    let length = r.i32()?;
    let total = usize::try_from(length)
        .ok()
        .and_then(|l| l.checked_add(LOG_OVERHEAD))
        .filter(|t| *t >= BATCH_HEADER && *t <= bytes.len())
        .ok_or_else(|| {
            BatchError::Corrupt(format!("batch length {length} does not fit the {} bytes given", bytes.len()))
        })?;
    if total > bounds.batch_bytes {
        return Err(BatchError::TooLarge(format!(
            "a batch of {total} bytes, over the limit of {} bytes: lower the producer's batch.size",
            bounds.batch_bytes
        )));
    }
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
    let codec = match attributes & COMPRESSION_BITS {
        0 => None,
        bits => match Codec::from_bits(bits) {
            Some(Codec::Zstd) if !bounds.zstd => {
                return Err(BatchError::Unsupported(format!(
                    "zstd needs produce version {ZSTD_PRODUCE_VERSION} or later (a client from Kafka 2.1 on)"
                )))
            }
            Some(codec) => Some(codec),
            None => {
                return Err(BatchError::Unsupported(format!(
                    "compression codec {bits} does not exist: use none, gzip, snappy, lz4 or zstd"
                )))
            }
        },
    };
    if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) != 0 {
        return Err(BatchError::Refused("transactional and control batches are not supported".into()));
    }
    if attributes & LOG_APPEND_TIME_BIT != 0 {
        return Err(BatchError::Refused("a producer may not set log-append time".into()));
    }
    let last_offset_delta = r.i32()?;
    let base_timestamp = r.i64()?;
    let max_timestamp = r.i64()?;
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
    let count = r.i32()?;
    let body = &bytes[BATCH_HEADER..total];
    let decompressed;
    let body = match codec {
        None => body,
        Some(codec) => {
            decompressed = decompress(codec, body, MAX_DECOMPRESSED).map_err(|e| match e {
                DecompressError::Corrupt(_) => BatchError::Corrupt(e.to_string()),
                DecompressError::TooLarge { .. } => BatchError::TooLarge(e.to_string()),
            })?;
            &decompressed[..]
        }
    };
    // Past the CRC (and the codec), the bytes are what the producer meant: what does not
    // add up in them is an invalid batch, not a corrupt one.
    let records_max =
        check_records(body, count, last_offset_delta, base_timestamp, bounds.records).map_err(|e| match e {
            BatchError::Corrupt(why) => BatchError::Invalid(why),
            e => e,
        })?;
    // The header's max timestamp is what a time index trusts: one that is not the
    // records' is set to theirs, with the CRC made right, as Kafka sets it on append.
    let kept = if max_timestamp == records_max {
        bytes.slice(..total)
    } else {
        let mut fixed = bytes[..total].to_vec();
        fixed[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&records_max.to_be_bytes());
        let crc = crc32c::crc32c(&fixed[CRC_FROM..]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(fixed)
    };
    // `check_records` holds the count to at least 1.
    Ok((Batch { bytes: kept, records: count as u32 }, producer))
}

/// Checks the `count` records of a batch (uncompressed) in `body`, which they must fill;
/// returns the largest of their timestamps.
fn check_records(
    body: &[u8],
    count: i32,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_records: usize,
) -> Result<i64, BatchError> {
    // Every record takes at least 7 bytes: no count above what the bytes can hold.
    let room = body.len() / 7;
    if count < 1 || count as usize > room {
        return Err(BatchError::Invalid(format!("record count {count} for {} bytes of records", body.len())));
    }
    if count as usize > max_records {
        return Err(BatchError::TooLarge(format!(
            "a batch of {count} records, over the limit of {max_records}: send smaller batches \
             (batch.num.messages, batch.size)"
        )));
    }
    if last_offset_delta != count - 1 {
        return Err(BatchError::Invalid(format!("last offset delta {last_offset_delta} for {count} records")));
    }
    let mut r = Reader { bytes: body, at: 0 };
    let mut max_timestamp = i64::MIN;
    for index in 0..count {
        let size = r.varint()?;
        let size = usize::try_from(size).map_err(|_| BatchError::Corrupt(format!("record {index}: size {size}")))?;
        let mut rec = Reader { bytes: r.take(size)?, at: 0 };
        let _record_attributes = rec.take(1)?[0];
        let timestamp_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        if offset_delta != index {
            return Err(BatchError::Invalid(format!("record {index} has offset delta {offset_delta}")));
        }
        let timestamp = base_timestamp
            .checked_add(timestamp_delta)
            .ok_or_else(|| BatchError::Corrupt(format!("record {index}: timestamp overflows")))?;
        max_timestamp = max_timestamp.max(timestamp);
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
    }
    if r.at != body.len() {
        return Err(BatchError::Invalid(format!("{} bytes after the last record of the batch", body.len() - r.at)));
    }
    Ok(max_timestamp)
}

/// The first record of the stored batch `value` (checked when it was accepted, or
/// anything a CLI user stored) whose timestamp is at least `t`: its offset delta and
/// timestamp, reading the records decompressed if the batch is compressed. A batch with
/// log-append time gives every record its max timestamp, as Kafka reads it. `Err` if
/// the records cannot be read; never a panic.
pub fn first_record_at_least(value: &[u8], t: i64) -> Result<Option<(u32, i64)>, BatchError> {
    if value.len() < BATCH_HEADER {
        return Err(BatchError::Corrupt(format!("{} bytes, shorter than a batch header", value.len())));
    }
    let mut r = Reader { bytes: value, at: 8 };
    let length = r.i32()?;
    if usize::try_from(length).ok().and_then(|l| l.checked_add(LOG_OVERHEAD)) != Some(value.len()) {
        return Err(BatchError::Corrupt(format!("batch length {length} for {} bytes", value.len())));
    }
    r.at = 21;
    let attributes = r.i16()?;
    let _last_offset_delta = r.i32()?;
    let (base, max) = (r.i64()?, r.i64()?);
    r.at = 57;
    let count = u32::try_from(r.i32()?).map_err(|_| BatchError::Corrupt("a negative record count".into()))?;
    let body = &value[BATCH_HEADER..];
    let decompressed;
    let body = match attributes & COMPRESSION_BITS {
        0 => body,
        bits => {
            let codec = Codec::from_bits(bits).ok_or_else(|| BatchError::Unsupported(format!("codec {bits}")))?;
            decompressed = decompress(codec, body, MAX_DECOMPRESSED).map_err(|e| BatchError::Corrupt(e.to_string()))?;
            &decompressed[..]
        }
    };
    let mut r = Reader { bytes: body, at: 0 };
    for _ in 0..count {
        let size = usize::try_from(r.varlong()?).map_err(|_| BatchError::Corrupt("a negative record size".into()))?;
        let mut rec = Reader { bytes: r.take(size)?, at: 0 };
        rec.take(1)?; // attributes
        let delta = rec.varlong()?;
        let offset_delta = u32::try_from(rec.varlong()?)
            .ok()
            .filter(|d| *d < count)
            .ok_or_else(|| BatchError::Corrupt("an offset delta outside the batch".into()))?;
        let timestamp = if attributes & LOG_APPEND_TIME_BIT != 0 {
            max
        } else {
            base.checked_add(delta).ok_or_else(|| BatchError::Corrupt("a timestamp overflows".into()))?
        };
        if timestamp >= t {
            return Ok(Some((offset_delta, timestamp)));
        }
    }
    Ok(None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    pub(crate) fn record(
        offset: i64,
        key: Option<&str>,
        value: Option<&str>,
        headers: &[(&str, Option<&str>)],
    ) -> Record {
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
            // Offset minus sequence constant: the encoder keeps such records in one batch.
            sequence: offset as i32,
            timestamp: 1_700_000_000_000 + offset * 7,
            key: key.map(|k| bytes::Bytes::from(k.to_string())),
            value: value.map(|v| bytes::Bytes::from(v.to_string())),
            headers: h,
        }
    }

    pub(crate) fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, records, &RecordEncodeOptions { version: 2, compression }).unwrap();
        buf.to_vec()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Vec<Record> {
        let mut buf = bytes::Bytes::copy_from_slice(bytes);
        RecordBatchDecoder::decode_all(&mut buf).unwrap().into_iter().flat_map(|s| s.records).collect()
    }

    const BOUNDS: Bounds = Bounds { batch_bytes: 1 << 20, records: 1000, zstd: true };

    fn accept_vec(bytes: &[u8]) -> Result<Accepted, BatchError> {
        accept(&bytes::Bytes::copy_from_slice(bytes), BOUNDS)
    }

    #[test]
    fn batches_are_accepted_whole_with_their_record_counts() {
        let records = vec![
            record(0, Some("k1"), Some("v1"), &[("h", Some("x")), ("n", None)]),
            record(1, None, Some(""), &[]),
            record(2, Some(""), None, &[]),
        ];
        let first = encode(&records, Compression::None);
        let second = encode(&[record(0, Some("k4"), Some("v4"), &[])], Compression::None);
        let produced = [first.clone(), second.clone()].concat();
        let Accepted { batches, producer } = accept_vec(&produced).unwrap();
        assert_eq!(producer, None);
        assert_eq!(batches.len(), 2);
        assert_eq!((&batches[0].bytes[..], batches[0].records), (&first[..], 3), "kept byte for byte");
        assert_eq!((&batches[1].bytes[..], batches[1].records), (&second[..], 1));
        assert_eq!(decode(&batches[0].bytes).len(), 3);
    }

    /// `batch` (uncompressed) with its records compressed by `compress` under codec `bits`.
    pub(crate) fn compressed(batch: &[u8], bits: i16, compress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        let mut out = batch[..BATCH_HEADER].to_vec();
        out.extend(compress(&batch[BATCH_HEADER..]));
        let attributes = i16::from_be_bytes([out[21], out[22]]) | bits;
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        let length = (out.len() - LOG_OVERHEAD) as i32;
        out[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&out[CRC_FROM..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn compressed_batches_are_checked_inside_and_kept_compressed() {
        let plain = encode(&[record(0, Some("k"), Some("v"), &[]), record(1, None, Some("w"), &[])], Compression::None);
        let gz = compressed(&plain, 1, gzip);
        let accepted = accept_vec(&gz).unwrap();
        assert_eq!((&accepted.batches[0].bytes[..], accepted.batches[0].records), (&gz[..], 2));
        // Bytes that are not gzip, behind a CRC that holds: corrupt, as Kafka answers.
        let garbage = compressed(&plain, 1, |b| b.iter().map(|x| x ^ 0x5a).collect());
        let r = accept_vec(&garbage);
        assert!(matches!(&r, Err(BatchError::Corrupt(m)) if m.contains("gzip")), "{r:?}");
        // Valid gzip of records that do not add up: invalid.
        let mut short = plain.clone();
        short[57..61].copy_from_slice(&3i32.to_be_bytes());
        short[23..27].copy_from_slice(&2i32.to_be_bytes());
        let r = accept_vec(&compressed(&short, 1, gzip));
        assert!(matches!(&r, Err(BatchError::Invalid(_))), "{r:?}");
        // Codecs 5 to 7 do not exist; zstd needs produce v7.
        let unknown = compressed(&plain, 5, |b| b.to_vec());
        assert!(matches!(accept_vec(&unknown), Err(BatchError::Unsupported(m)) if m.contains("codec 5")));
        let zstd = compressed(&plain, 4, |b| b.to_vec());
        let old = accept(&bytes::Bytes::from(zstd), Bounds { zstd: false, ..BOUNDS });
        assert!(matches!(old, Err(BatchError::Unsupported(m)) if m.contains("zstd")));
    }

    #[test]
    fn a_wrong_max_timestamp_is_set_to_the_records_one() {
        let records = [record(0, None, Some("a"), &[]), record(1, None, Some("b"), &[])];
        let good = encode(&records, Compression::None);
        let mut wrong = good.clone();
        wrong[35..43].copy_from_slice(&5i64.to_be_bytes());
        let crc = crc32c::crc32c(&wrong[CRC_FROM..]);
        wrong[17..21].copy_from_slice(&crc.to_be_bytes());
        let kept = accept_vec(&wrong).unwrap().batches.remove(0).bytes;
        assert_eq!(&kept[..], &good[..], "the records' max timestamp, and a CRC that holds");
        assert_eq!(i64::from_be_bytes(kept[35..43].try_into().unwrap()), 1_700_000_000_007);
        // A compressed batch too: only the header changes.
        let gz = compressed(&good, 1, gzip);
        let mut wrong = gz.clone();
        wrong[35..43].copy_from_slice(&i64::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&wrong[CRC_FROM..]);
        wrong[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(&accept_vec(&wrong).unwrap().batches[0].bytes[..], &gz[..]);
    }

    #[test]
    fn bounds_refuse_before_the_work() {
        let many: Vec<Record> = (0..10).map(|i| record(i, None, Some("v"), &[])).collect();
        let batch = encode(&many, Compression::None);
        let few = Bounds { records: 9, ..BOUNDS };
        let r = accept(&bytes::Bytes::from(batch.clone()), few);
        assert!(matches!(r, Err(BatchError::TooLarge(m)) if m.contains("10 records")));
        let two = [batch.clone(), encode(&many[..5], Compression::None)].concat();
        let r = accept(&bytes::Bytes::from(two), Bounds { records: 12, ..BOUNDS });
        assert!(matches!(r, Err(BatchError::TooLarge(m)) if m.contains("more than 12")));
        let small = Bounds { batch_bytes: batch.len() - 1, ..BOUNDS };
        let r = accept(&bytes::Bytes::from(batch.clone()), small);
        assert!(matches!(r, Err(BatchError::TooLarge(m)) if m.contains("batch.size")));
        // A gzip bomb: 100 MiB of zeros in about 100 KiB, past what a batch may hold.
        let mut bomb = batch[..BATCH_HEADER].to_vec();
        bomb[57..61].copy_from_slice(&1i32.to_be_bytes());
        bomb[23..27].copy_from_slice(&0i32.to_be_bytes());
        let bomb = compressed(&[bomb, vec![0; 100 << 20]].concat(), 1, gzip);
        let r = accept(&bytes::Bytes::from(bomb), BOUNDS);
        assert!(matches!(r, Err(BatchError::TooLarge(_))), "{r:?}");
    }

    #[test]
    fn bad_batches_are_refused_with_the_reason() {
        let good = encode(&[record(0, Some("k"), Some("v"), &[])], Compression::None);
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(matches!(accept_vec(&bad_crc), Err(BatchError::Corrupt(m)) if m.contains("CRC")));
        assert!(matches!(accept_vec(&good[..good.len() - 1]), Err(BatchError::Corrupt(_))));
        assert!(matches!(accept_vec(&[]), Err(BatchError::Invalid(m)) if m.contains("no record batch")));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(accept_vec(&trailing).is_err(), "a byte after the last batch");
        let gzip_attr = |b: &mut Vec<u8>| {
            b[22] |= 1;
            let crc = crc32c::crc32c(&b[CRC_FROM..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
        };
        let mut compressed = good.clone();
        gzip_attr(&mut compressed);
        assert!(
            matches!(accept_vec(&compressed), Err(BatchError::Corrupt(_))),
            "a gzip flag on bytes that are not gzip"
        );
        let mut old = good.clone();
        old[16] = 1;
        assert!(matches!(accept_vec(&old), Err(BatchError::Refused(_))));
        // A huge declared record count with valid CRC is refused before any allocation.
        let mut huge = good.clone();
        huge[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&huge[CRC_FROM..]);
        huge[17..21].copy_from_slice(&crc.to_be_bytes());
        // Behind a CRC that holds, what does not add up is invalid, not corrupt.
        assert!(matches!(accept_vec(&huge), Err(BatchError::Invalid(m)) if m.contains("record count")));
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
        let split_idempotent = accept_vec(&idempotent).unwrap();
        assert_eq!(split_idempotent.producer, Some(ProducerOf { id: 7, epoch: 2, base_sequence: 40 }));
        assert_eq!(split_idempotent.batches.len(), 1);
        for (id, epoch, sequence) in [(7, -1, 0), (7, 0, -1), (-2, 0, 0)] {
            let bad = with_producer(id, epoch, sequence);
            assert!(matches!(accept_vec(&bad), Err(BatchError::Invalid(_))), "{id} {epoch} {sequence}");
        }
        let mut two = idempotent.clone();
        two.extend_from_slice(&idempotent);
        assert!(matches!(accept_vec(&two), Err(BatchError::Refused(m)) if m.contains("one batch")));
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
            let _ = accept_vec(&b[..cut]);
            let _ = accept_vec(&b);
        }
    }
}
