//! Segments: the records `[base, base + n)` of one partition of one incarnation, one
//! object each under `d/{topic}/{partition}/{base}`: the layout before topic objects
//! (`super::topic_object`). Nodes no longer write them; the codec stays for the
//! simulator's store and the fuzz harness, which judge stores of either layout.
//!
//! Object layout: `BRKS`, format version u16, then one frame (`src/frame.rs`) whose
//! checksum is salted with the incarnation, the partition and the base offset, so a
//! segment copied under another key never validates. The payload is the writer (node
//! u32, boot u64, nonce u64: a writer whose create timed out knows its own segment by
//! it), the record count u32, then each record's key (flag byte, then length-prefixed
//! bytes) and value (length-prefixed bytes), little-endian.

/// Magic and format version, before an object's first frame.
use super::head::HEAD as HEADER;
use crate::bytes::{Reader, Writer};
use crate::cluster::entry::EntryWriter;
use crate::command::ProduceRecord;
use crate::error::DecodeError;
use crate::frame::{encode_frame, frame_at, seal_frame, FRAME_HEADER_LEN};
use crate::ids::TopicId;
use crate::logcodec::MAX_LOG_FRAME;
use crate::Bytes;

const MAGIC: &[u8; 4] = b"BRKS";
/// The segment format this build writes and reads.
pub const SEGMENT_FORMAT_VERSION: u16 = 1;
const KIND_SEGMENT: u8 = 1;
/// Writer and record count, before the records.
const PAYLOAD_HEADER: usize = 4 + 8 + 8 + 4;

/// A decoded segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Who wrote it.
    pub writer: EntryWriter,
    /// Its records, the first at the segment's base offset.
    pub records: Vec<ProduceRecord>,
}

fn salt(topic: TopicId, partition: u32, base: u64) -> u64 {
    topic.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(partition).rotate_left(32) ^ base ^ 0x4252_4b53_4547_4d54
}

/// The bytes of a segment of `records` (at least one), stored under
/// `d/{topic}/{partition}/{base}`. The caller keeps them within a log frame's limit, as
/// a produce's batch limit does.
pub fn encode(topic: TopicId, partition: u32, base: u64, writer: EntryWriter, records: &[ProduceRecord]) -> Vec<u8> {
    // The payload is written in place behind room for the frame's header, which is
    // filled in last: the records are copied once.
    let payload_len: usize =
        records.iter().map(|r| 5 + r.key.as_ref().map_or(0, |k| 4 + k.len()) + r.value.len()).sum();
    let mut buf = Vec::with_capacity(HEADER + FRAME_HEADER_LEN + PAYLOAD_HEADER + payload_len);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
    buf.resize(HEADER + FRAME_HEADER_LEN, 0);
    let mut w = Writer { buf };
    w.u32(writer.node);
    w.u64(writer.boot);
    w.u64(writer.nonce);
    w.u32(records.len() as u32);
    for r in records {
        w.opt_bytes(r.key.as_deref());
        w.bytes(&r.value);
    }
    let mut out = w.buf;
    seal_frame(&mut out[HEADER..], salt(topic, partition, base), KIND_SEGMENT);
    out
}

/// The bytes of the segment under `d/{topic}/{partition}/{base}` around any frame kind
/// and payload, framed as [`encode`] frames a segment's: the checksum is right whatever
/// the payload holds. For tests and fuzzers that must reach [`decode`]'s payload parser
/// behind the checksum.
pub fn frame_object(topic: TopicId, partition: u32, base: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + FRAME_HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
    encode_frame(&mut out, salt(topic, partition, base), kind, payload);
    out
}

/// Decodes the segment stored under `d/{topic}/{partition}/{base}`. Its records' values
/// are slices of `bytes`, not copies.
pub fn decode(topic: TopicId, partition: u32, base: u64, bytes: &Bytes) -> Result<Segment, DecodeError> {
    let malformed = |position: u64, detail: String| DecodeError::Malformed { position, detail };
    super::head::check(bytes, MAGIC, SEGMENT_FORMAT_VERSION, "a segment", "segment")?;
    let frame = frame_at(bytes, HEADER, salt(topic, partition, base), MAX_LOG_FRAME, &|kind, payload| {
        kind == KIND_SEGMENT && payload.len() >= PAYLOAD_HEADER
    })
    .map_err(|detail| malformed(HEADER as u64, detail))?;
    if frame.end() != bytes.len() as u64 {
        return Err(malformed(frame.end(), format!("{} bytes after the segment", bytes.len() as u64 - frame.end())));
    }
    let mut r = Reader::new(frame.payload, (HEADER + FRAME_HEADER_LEN) as u64);
    let writer = EntryWriter { node: r.u32()?, boot: r.u64()?, nonce: r.u64()? };
    let count = r.u32()?;
    // Every record takes at least 5 bytes: no count above what the payload holds.
    if count == 0 || count as usize > (frame.payload.len() - PAYLOAD_HEADER) / 5 {
        return Err(r.malformed(format!("record count {count}")));
    }
    // Every record has an offset, and so does the end after the last one (readers
    // compute it), as a log batch's span must.
    if base.checked_add(u64::from(count)).is_none() {
        return Err(r.malformed(format!("{count} records from offset {base} run past the last offset")));
    }
    let mut records = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let key = r.opt_bytes()?;
        let value = bytes.slice_ref(&frame.payload[r.bytes_span()?]);
        records.push(ProduceRecord { key, value });
    }
    r.finish()?;
    Ok(Segment { writer, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<ProduceRecord> {
        vec![
            ProduceRecord { key: Some(b"k".to_vec()), value: b"v1".to_vec().into() },
            ProduceRecord { key: None, value: vec![].into() },
            ProduceRecord { key: Some(vec![]), value: vec![0xff; 300].into() },
        ]
    }

    /// [`decode`] of a copy of `bytes`.
    fn dec(topic: TopicId, partition: u32, base: u64, bytes: &[u8]) -> Result<Segment, DecodeError> {
        decode(topic, partition, base, &Bytes::copy_from_slice(bytes))
    }

    const WRITER: EntryWriter = EntryWriter { node: 2, boot: 5, nonce: 8 };

    #[test]
    fn segments_decode_as_encoded() {
        let bytes = encode(TopicId(7), 3, 100, WRITER, &records());
        assert_eq!(dec(TopicId(7), 3, 100, &bytes), Ok(Segment { writer: WRITER, records: records() }));
    }

    #[test]
    fn a_segment_under_another_key_or_damaged_is_refused() {
        let bytes = encode(TopicId(7), 3, 100, WRITER, &records()[..1]);
        assert!(dec(TopicId(8), 3, 100, &bytes).is_err(), "another incarnation");
        assert!(dec(TopicId(7), 4, 100, &bytes).is_err(), "another partition");
        assert!(dec(TopicId(7), 3, 101, &bytes).is_err(), "another base");
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(dec(TopicId(7), 3, 100, &b).is_err(), "a flipped bit at byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(dec(TopicId(7), 3, 100, &bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// Records whose end would pass the last offset are refused: a node computes
    /// `base + n` (fuzz input `crash-segment-ending-past-the-last-offset`).
    #[test]
    fn a_segment_ending_past_the_last_offset_is_refused() {
        let last = u64::MAX - 2;
        let bytes = encode(TopicId(7), 3, last, WRITER, &records()[..2]);
        assert_eq!(dec(TopicId(7), 3, last, &bytes).map(|s| s.records.len()), Ok(2), "ends at u64::MAX");
        let bytes = encode(TopicId(7), 3, last, WRITER, &records());
        let e = dec(TopicId(7), 3, last, &bytes).expect_err("ends past u64::MAX");
        assert!(e.to_string().contains("run past the last offset"), "{e}");
    }

    #[test]
    fn a_valid_frame_with_a_count_past_its_bytes_is_refused_before_allocating() {
        let mut w = Writer::default();
        w.u32(1);
        w.u64(1);
        w.u64(1);
        w.u32(u32::MAX);
        let e = dec(TopicId(1), 0, 0, &frame_object(TopicId(1), 0, 0, KIND_SEGMENT, &w.buf)).expect_err("refused");
        assert!(e.to_string().contains("record count"), "{e}");
    }
}
