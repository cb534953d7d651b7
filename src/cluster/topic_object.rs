//! Topic objects: the records of one or more partitions of one incarnation, written by
//! one flush, one object each under `d/{topic}/{n}` (DESIGN.md, section 10, "one object
//! per topic"), as rule D writes them.
//!
//! Object layout: `BRKO`, format version u16, then two frames (`src/frame.rs`), both
//! checksums salted with the incarnation and `n`, so an object copied under another key
//! never validates:
//! - the header (kind 1): the writer (node u32, boot u64, nonce u64); the incarnation's
//!   partition count `P` u32 and the end of each of its `P` partitions after this object
//!   (u64 each); the parts, a count u32 and for each, in increasing partition order, the
//!   partition u32, its record count u32 and the length u64 of its records in the second
//!   frame. A part's first offset is its partition's end less its count;
//! - the records (kind 2): each part's records in turn, each record's key (flag byte,
//!   then length-prefixed bytes) and value (length-prefixed bytes), as a segment's.
//!
//! All little-endian. The header comes first and alone in its frame so that the ends, and
//! where each partition's records lie, can be read from an object's first bytes.

/// Magic and format version, before an object's first frame.
use super::head::HEAD as HEADER;
use crate::bytes::{Reader, Writer};
use crate::cluster::entry::EntryWriter;
use crate::command::ProduceRecord;
use crate::config::MAX_PARTITIONS_EVER;
use crate::error::DecodeError;
use crate::frame::{encode_frame, frame_at, seal_frame, FRAME_HEADER_LEN};
use crate::ids::TopicId;
use crate::logcodec::MAX_LOG_FRAME;
use crate::Bytes;

const MAGIC: &[u8; 4] = b"BRKO";
/// The topic object format this build writes and reads.
pub const OBJECT_FORMAT_VERSION: u16 = 1;
const KIND_HEADER: u8 = 1;
const KIND_RECORDS: u8 = 2;
/// The writer and the partition count, before the ends.
const WRITER_AND_COUNT: usize = 4 + 8 + 8 + 4;
/// One part's description in the header.
const PART: usize = 4 + 4 + 8;
/// The longest header: every partition a topic may ever have, each with a part.
const MAX_HEADER_FRAME: usize =
    WRITER_AND_COUNT + 8 * MAX_PARTITIONS_EVER as usize + 4 + PART * MAX_PARTITIONS_EVER as usize;

/// The records of one partition in an object, as its header describes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// The partition.
    pub partition: u32,
    /// How many records (at least one).
    pub count: u32,
    /// How many bytes its records take in the records frame.
    pub len: u64,
}

/// An object's header: who wrote it, every partition's end after it, and its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectHeader {
    /// Who wrote it.
    pub writer: EntryWriter,
    /// The end of each partition of the incarnation once this object is counted: one
    /// more than the last offset written, or 0.
    pub ends: Vec<u64>,
    /// The partitions it holds records of, in increasing order.
    pub parts: Vec<Part>,
}

impl ObjectHeader {
    /// The first offset of `part`'s records: its partition's end less its count (a
    /// decoded or encoded header never has an end below a part's count).
    pub fn base(&self, part: &Part) -> u64 {
        self.ends.get(part.partition as usize).copied().unwrap_or(0).saturating_sub(u64::from(part.count))
    }
}

/// A decoded object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicObject {
    /// Its header.
    pub header: ObjectHeader,
    /// The records of each part, in the header's order.
    pub records: Vec<Vec<ProduceRecord>>,
}

/// Why an object cannot be encoded: the caller's ends or parts break the layout's rules.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// No partition, or more than any topic may have.
    #[error("an incarnation of {0} partitions")]
    PartitionCount(usize),
    /// No part at all.
    #[error("an object with no records")]
    NoParts,
    /// A part's partition is not past the one before it, or not within the ends.
    #[error("partition {0} is out of order or out of range")]
    PartitionOrder(u32),
    /// A part without records, or with more than a count holds.
    #[error("partition {0}: a part of {1} records")]
    PartSize(u32, usize),
    /// A part's records would end past the last offset.
    #[error("partition {0}: its records would end past the last offset")]
    OffsetsRunOut(u32),
    /// The records take more than one frame may.
    #[error("records of {0} bytes, more than one object holds ({MAX_LOG_FRAME})")]
    TooLarge(usize),
}

fn salt(topic: TopicId, n: u64) -> u64 {
    topic.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n.rotate_left(17) ^ 0x4252_4b4f_424a_4543
}

/// The bytes of object `n` of `topic`, holding `parts` (each a partition and its
/// records, in increasing partition order), written after an object that left the
/// incarnation's partitions at `ends_before`.
pub fn encode(
    topic: TopicId,
    n: u64,
    writer: EntryWriter,
    ends_before: &[u64],
    parts: &[(u32, &[ProduceRecord])],
) -> Result<Vec<u8>, ObjectError> {
    if ends_before.is_empty() || ends_before.len() > MAX_PARTITIONS_EVER as usize {
        return Err(ObjectError::PartitionCount(ends_before.len()));
    }
    if parts.is_empty() {
        return Err(ObjectError::NoParts);
    }
    let mut ends = ends_before.to_vec();
    let mut described = Vec::with_capacity(parts.len());
    let mut records_len = 0usize;
    for (i, (partition, records)) in parts.iter().enumerate() {
        let after_previous = i == 0 || parts[i - 1].0 < *partition;
        let end = ends.get_mut(*partition as usize).filter(|_| after_previous);
        let end = end.ok_or(ObjectError::PartitionOrder(*partition))?;
        let count = u32::try_from(records.len()).ok().filter(|c| *c > 0);
        let count = count.ok_or(ObjectError::PartSize(*partition, records.len()))?;
        *end = end.checked_add(u64::from(count)).ok_or(ObjectError::OffsetsRunOut(*partition))?;
        let len: usize = records.iter().map(record_len).sum();
        records_len = records_len.saturating_add(len);
        described.push(Part { partition: *partition, count, len: len as u64 });
    }
    if records_len > MAX_LOG_FRAME {
        return Err(ObjectError::TooLarge(records_len));
    }
    let header_len = WRITER_AND_COUNT + 8 * ends.len() + 4 + PART * described.len();
    let mut buf = Vec::with_capacity(HEADER + 2 * FRAME_HEADER_LEN + header_len + records_len);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&OBJECT_FORMAT_VERSION.to_le_bytes());
    let mut w = Writer { buf: Vec::with_capacity(header_len) };
    w.u32(writer.node);
    w.u64(writer.boot);
    w.u64(writer.nonce);
    w.u32(ends.len() as u32);
    for end in &ends {
        w.u64(*end);
    }
    w.u32(described.len() as u32);
    for part in &described {
        w.u32(part.partition);
        w.u32(part.count);
        w.u64(part.len);
    }
    encode_frame(&mut buf, salt(topic, n), KIND_HEADER, &w.buf);
    // The records are written in place behind room for their frame's header, which is
    // filled in last: each value is copied once.
    let records_at = buf.len();
    buf.resize(records_at + FRAME_HEADER_LEN, 0);
    let mut w = Writer { buf };
    for (_, records) in parts {
        for r in *records {
            w.opt_bytes(r.key.as_deref());
            w.bytes(&r.value);
        }
    }
    let mut out = w.buf;
    seal_frame(&mut out[records_at..], salt(topic, n), KIND_RECORDS);
    Ok(out)
}

fn record_len(r: &ProduceRecord) -> usize {
    5 + r.key.as_ref().map_or(0, |k| 4 + k.len()) + r.value.len()
}

/// The header of object `n` of `topic`, from the object's first bytes (the whole object
/// will do), and where its records frame begins.
pub fn decode_header(topic: TopicId, n: u64, bytes: &[u8]) -> Result<(ObjectHeader, usize), DecodeError> {
    let malformed = |position: u64, detail: String| DecodeError::Malformed { position, detail };
    super::head::check(bytes, MAGIC, OBJECT_FORMAT_VERSION, "a topic object", "topic object")?;
    let frame = frame_at(bytes, HEADER, salt(topic, n), MAX_HEADER_FRAME, &|kind, payload| {
        kind == KIND_HEADER && payload.len() >= WRITER_AND_COUNT
    })
    .map_err(|detail| malformed(HEADER as u64, detail))?;
    let mut r = Reader::new(frame.payload, (HEADER + FRAME_HEADER_LEN) as u64);
    let writer = EntryWriter { node: r.u32()?, boot: r.u64()?, nonce: r.u64()? };
    let partitions = r.partitions(MAX_PARTITIONS_EVER)? as usize;
    // Each end takes 8 bytes: no count past what the payload holds is allocated for.
    if partitions == 0 || partitions > (frame.payload.len() - WRITER_AND_COUNT) / 8 {
        return Err(r.malformed(format!("{partitions} partitions")));
    }
    let mut ends = Vec::with_capacity(partitions);
    for _ in 0..partitions {
        ends.push(r.u64()?);
    }
    let count_at = r.position();
    let count = r.u32()? as usize;
    let room = frame.payload.len() - WRITER_AND_COUNT - 8 * partitions - 4;
    if count == 0 || count > partitions || count > room / PART {
        return Err(DecodeError::Malformed { position: count_at, detail: format!("{count} parts") });
    }
    let mut parts: Vec<Part> = Vec::with_capacity(count);
    for _ in 0..count {
        let at = r.position();
        let part = Part { partition: r.u32()?, count: r.u32()?, len: r.u64()? };
        let after_previous = parts.last().is_none_or(|p| p.partition < part.partition);
        let end = ends.get(part.partition as usize).filter(|_| after_previous);
        let detail = match end {
            None => format!("partition {} is out of order or out of range", part.partition),
            Some(_) if part.count == 0 => format!("partition {}: a part of no records", part.partition),
            Some(end) if *end < u64::from(part.count) => {
                format!("partition {}: {} records end at offset {end}", part.partition, part.count)
            }
            // Every record takes at least 5 bytes.
            Some(_) if part.len / 5 < u64::from(part.count) => {
                format!("partition {}: {} records in {} bytes", part.partition, part.count, part.len)
            }
            Some(_) => {
                parts.push(part);
                continue;
            }
        };
        return Err(DecodeError::Malformed { position: at, detail });
    }
    r.finish()?;
    Ok((ObjectHeader { writer, ends, parts }, frame.end() as usize))
}

/// Decodes object `n` of `topic`. Its records' values are slices of `bytes`, not copies.
pub fn decode(topic: TopicId, n: u64, bytes: &Bytes) -> Result<TopicObject, DecodeError> {
    let (header, records_at) = decode_header(topic, n, bytes)?;
    let frame = frame_at(bytes, records_at, salt(topic, n), MAX_LOG_FRAME, &|kind, _| kind == KIND_RECORDS)
        .map_err(|detail| DecodeError::Malformed { position: records_at as u64, detail })?;
    if frame.end() != bytes.len() as u64 {
        let detail = format!("{} bytes after the object", bytes.len() as u64 - frame.end());
        return Err(DecodeError::Malformed { position: frame.end(), detail });
    }
    let total: u64 = header.parts.iter().map(|p| p.len).fold(0u64, u64::saturating_add);
    if total != frame.payload.len() as u64 {
        let detail = format!("the parts take {total} bytes, the records frame holds {}", frame.payload.len());
        return Err(DecodeError::Malformed { position: records_at as u64, detail });
    }
    let mut at = 0usize;
    let mut records = Vec::with_capacity(header.parts.len());
    for part in &header.parts {
        // Within the frame: the lengths sum to its payload's.
        let span = &frame.payload[at..at + part.len as usize];
        let mut r = Reader::new(span, (records_at + FRAME_HEADER_LEN + at) as u64);
        let mut part_records = Vec::with_capacity(part.count as usize);
        for _ in 0..part.count {
            let key = r.opt_bytes()?;
            let value = bytes.slice_ref(&span[r.bytes_span()?]);
            part_records.push(ProduceRecord { key, value });
        }
        r.finish()?;
        records.push(part_records);
        at += part.len as usize;
    }
    Ok(TopicObject { header, records })
}

/// The bytes of object `n` of `topic` around any header payload and records payload,
/// framed as [`encode`] frames them: both checksums are right whatever the payloads
/// hold. For tests and fuzzers that must reach the parsers behind the checksums.
pub fn frame_object(topic: TopicId, n: u64, header: &[u8], records: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 2 * FRAME_HEADER_LEN + header.len() + records.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&OBJECT_FORMAT_VERSION.to_le_bytes());
    encode_frame(&mut out, salt(topic, n), KIND_HEADER, header);
    encode_frame(&mut out, salt(topic, n), KIND_RECORDS, records);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITER: EntryWriter = EntryWriter { node: 2, boot: 5, nonce: 8 };

    fn rec(key: Option<&[u8]>, value: &[u8]) -> ProduceRecord {
        ProduceRecord { key: key.map(<[u8]>::to_vec), value: value.to_vec().into() }
    }

    fn p0() -> Vec<ProduceRecord> {
        vec![rec(Some(b"k"), b"v1"), rec(None, b"")]
    }

    fn p3() -> Vec<ProduceRecord> {
        vec![rec(Some(b""), &[0xff; 300])]
    }

    /// Object 9 of incarnation 7 (4 partitions, at ends 10, 0, 5, 20 before it): two
    /// records of partition 0 and one of partition 3.
    fn object() -> Vec<u8> {
        encode(TopicId(7), 9, WRITER, &[10, 0, 5, 20], &[(0, &p0()), (3, &p3())]).expect("encodes")
    }

    fn dec(topic: TopicId, n: u64, bytes: &[u8]) -> Result<TopicObject, DecodeError> {
        decode(topic, n, &Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn objects_decode_as_encoded_with_every_end_and_each_part_s_base() {
        let o = dec(TopicId(7), 9, &object()).expect("decodes");
        assert_eq!(o.header.writer, WRITER);
        assert_eq!(o.header.ends, vec![12, 0, 5, 21], "every partition's end after the object");
        assert_eq!(o.records, vec![p0(), p3()]);
        let bases: Vec<(u32, u64)> = o.header.parts.iter().map(|p| (p.partition, o.header.base(p))).collect();
        assert_eq!(bases, vec![(0, 10), (3, 20)]);
        let lens: Vec<u64> = o.header.parts.iter().map(|p| p.len).collect();
        // Flag, key length, key, value length, value: 12 and 5 bytes, then 309.
        assert_eq!(lens, vec![(1 + 4 + 1 + 4 + 2) + (1 + 4), 1 + 4 + 4 + 300]);
    }

    #[test]
    fn the_header_reads_from_the_object_s_first_bytes_alone() {
        let bytes = object();
        let (header, records_at) = decode_header(TopicId(7), 9, &bytes).expect("header");
        assert_eq!(decode_header(TopicId(7), 9, &bytes[..records_at]), Ok((header.clone(), records_at)));
        assert_eq!(dec(TopicId(7), 9, &bytes).map(|o| o.header), Ok(header));
        assert!(decode_header(TopicId(7), 9, &bytes[..records_at - 1]).is_err(), "a header cut short");
    }

    #[test]
    fn an_object_under_another_key_or_damaged_is_refused() {
        let bytes = object();
        assert!(dec(TopicId(8), 9, &bytes).is_err(), "another incarnation");
        assert!(dec(TopicId(7), 10, &bytes).is_err(), "another object");
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(dec(TopicId(7), 9, &b).is_err(), "a flipped bit at byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(dec(TopicId(7), 9, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let e = dec(TopicId(7), 9, &longer).expect_err("a byte after the object");
        assert!(e.to_string().contains("1 bytes after the object"), "{e}");
    }

    #[test]
    fn what_the_layout_cannot_hold_is_not_encoded() {
        let (t, w) = (TopicId(1), WRITER);
        let one = p3();
        assert_eq!(encode(t, 1, w, &[], &[(0, &one)]), Err(ObjectError::PartitionCount(0)));
        assert_eq!(encode(t, 1, w, &[0], &[]), Err(ObjectError::NoParts));
        assert_eq!(encode(t, 1, w, &[0, 0], &[(1, &one), (0, &one)]), Err(ObjectError::PartitionOrder(0)));
        assert_eq!(encode(t, 1, w, &[0, 0], &[(1, &one), (1, &one)]), Err(ObjectError::PartitionOrder(1)));
        assert_eq!(encode(t, 1, w, &[0, 0], &[(2, &one)]), Err(ObjectError::PartitionOrder(2)));
        assert_eq!(encode(t, 1, w, &[0, 0], &[(0, &[])]), Err(ObjectError::PartSize(0, 0)));
        assert_eq!(encode(t, 1, w, &[u64::MAX], &[(0, &one)]), Err(ObjectError::OffsetsRunOut(0)));
        let ends = encode(t, 1, w, &[u64::MAX - 1], &[(0, &one)]).map(|b| dec(t, 1, &b).map(|o| o.header.ends));
        assert_eq!(ends, Ok(Ok(vec![u64::MAX])), "records may end at the last offset");
        let big = vec![rec(None, &vec![0; MAX_LOG_FRAME])];
        assert_eq!(encode(t, 1, w, &[0], &[(0, &big)]), Err(ObjectError::TooLarge(MAX_LOG_FRAME + 5)));
    }

    /// A header payload: the writer, `ends`, then `parts` as (partition, count, len).
    fn header(ends: &[u64], parts: &[(u32, u32, u64)]) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(1);
        w.u64(1);
        w.u64(1);
        w.u32(ends.len() as u32);
        for end in ends {
            w.u64(*end);
        }
        w.u32(parts.len() as u32);
        for (partition, count, len) in parts {
            w.u32(*partition);
            w.u32(*count);
            w.u64(*len);
        }
        w.buf
    }

    /// Headers whose checksums are right and whose fields break the layout's rules are
    /// refused, each naming what is wrong, before anything is allocated for a count.
    #[test]
    fn a_header_that_breaks_the_layout_is_refused_by_what_it_breaks() {
        let records = {
            let mut w = Writer::default();
            w.opt_bytes(None);
            w.bytes(b"v");
            w.buf
        };
        let cases: [(Vec<u8>, &str); 9] = [
            (header(&[], &[]), "0 partitions"),
            (header(&[1], &[]), "0 parts"),
            (header(&[1], &[(0, 1, 6), (0, 1, 6)]), "2 parts"),
            (header(&[1, 1], &[(1, 1, 6), (0, 1, 6)]), "partition 0 is out of order"),
            (header(&[1], &[(1, 1, 6)]), "partition 1 is out of order or out of range"),
            (header(&[1], &[(0, 0, 6)]), "a part of no records"),
            (header(&[1], &[(0, 2, 12)]), "2 records end at offset 1"),
            (header(&[5], &[(0, 2, 6)]), "2 records in 6 bytes"),
            (header(&[5], &[(0, 1, 7)]), "the parts take 7 bytes, the records frame holds 6"),
        ];
        for (payload, want) in cases {
            let e = dec(TopicId(3), 4, &frame_object(TopicId(3), 4, &payload, &records)).expect_err(want);
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        let mut huge = header(&[1], &[(0, 1, 6)]);
        huge[20..24].copy_from_slice(&MAX_PARTITIONS_EVER.to_le_bytes());
        let e = dec(TopicId(3), 4, &frame_object(TopicId(3), 4, &huge, &records)).expect_err("huge");
        assert!(e.to_string().contains("1048576 partitions"), "{e}");
        let fine = frame_object(TopicId(3), 4, &header(&[1], &[(0, 1, 6)]), &records);
        assert_eq!(dec(TopicId(3), 4, &fine).map(|o| o.records), Ok(vec![vec![rec(None, b"v")]]));
    }

    #[test]
    fn values_are_slices_of_the_object_not_copies() {
        let bytes = Bytes::from(object());
        let o = decode(TopicId(7), 9, &bytes).expect("decodes");
        let value = &o.records[1][0].value;
        let inside = bytes.as_ptr_range();
        assert!(inside.contains(&value.as_ptr()), "the value points into the object");
    }
}
