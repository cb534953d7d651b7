//! Snapshots of the catalog (rule C of DESIGN.md, section 10): `s/{seq}` holds the
//! catalog as of journal entry `seq`, so the entries up to it may be deleted.
//!
//! Object layout: `BRKC`, format version u16, then one frame (`src/frame.rs`) whose
//! checksum is salted with the snapshot's seq, so a snapshot copied under another key
//! never validates. The payload, little-endian: the position u64 (the seq again), the
//! incarnation count u32, then each incarnation live or being deleted, by ascending id:
//! id u64, name (u32 length, bytes), partitions u32, deletion grace u64, the writer of
//! its `Create` (node u32, boot u64, nonce u64), then a flag byte, 0 if live, or 1 and
//! the seq u64 and writer of its tombstone.
//!
//! Removed incarnations take no room: the catalog knows an id as removed when it is at
//! or below the position and neither live nor being deleted, and a snapshot keeps that
//! exactly. So a snapshot grows with the incarnations live or being deleted, never
//! with history, and the reconciler of a node that loaded one removes exactly what it
//! would have after folding every entry.

/// Magic and format version, before an object's first frame.
use super::head::HEAD as HEADER;
use crate::bytes::{Reader, Writer};
use crate::cluster::catalog::{Catalog, Incarnation};
use crate::cluster::entry::EntryWriter;
use crate::command::TopicSettings;
use crate::config::MAX_PARTITIONS_EVER;
use crate::error::DecodeError;
use crate::frame::{encode_frame, frame_at, FRAME_HEADER_LEN};
use crate::ids::TopicId;
use std::collections::BTreeMap;

const MAGIC: &[u8; 4] = b"BRKC";
/// The snapshot format this build writes and reads.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 1;
const KIND_SNAPSHOT: u8 = 1;
/// The largest payload read: over a million incarnations with the longest names. The
/// payload is borrowed from the object, never allocated by its length.
const MAX_PAYLOAD: usize = 1 << 30;
/// Position and count, before the incarnations.
const PAYLOAD_HEADER: usize = 8 + 4;
/// The fewest bytes an incarnation takes: id, an empty name, partitions, grace, the
/// creator, and the flag of a live one.
const MIN_INCARNATION: usize = 8 + 4 + 4 + 8 + 20 + 1;

fn salt(seq: u64) -> u64 {
    seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x4252_4b53_4e41_5053
}

fn write_writer(w: &mut Writer, writer: &EntryWriter) {
    w.u32(writer.node);
    w.u64(writer.boot);
    w.u64(writer.nonce);
}

fn read_writer(r: &mut Reader<'_>) -> Result<EntryWriter, DecodeError> {
    Ok(EntryWriter { node: r.u32()?, boot: r.u64()?, nonce: r.u64()? })
}

/// The bytes of `catalog` as the snapshot `s/{catalog.position()}`.
pub fn encode(catalog: &Catalog) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(catalog.position());
    let incarnations: Vec<(TopicId, &Incarnation)> = catalog.incarnations().collect();
    w.u32(incarnations.len() as u32);
    for (id, t) in incarnations {
        w.u64(id.0);
        w.bytes(t.name.as_bytes());
        w.u32(t.partitions);
        w.u64(t.settings.deletion_grace_ms);
        write_writer(&mut w, &t.created_by);
        match (t.deleted_at, &t.deleted_by) {
            (Some(at), Some(by)) => {
                w.u8(1);
                w.u64(at);
                write_writer(&mut w, by);
            }
            _ => w.u8(0),
        }
    }
    frame_object(catalog.position(), KIND_SNAPSHOT, &w.buf)
}

/// The bytes of the snapshot `s/{seq}` around any frame kind and payload, framed as
/// [`encode`] frames a snapshot's: the checksum is right whatever the payload holds.
/// For tests and fuzzers that must reach [`decode`]'s payload parser behind the checksum.
pub fn frame_object(seq: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + FRAME_HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    encode_frame(&mut out, salt(seq), kind, payload);
    out
}

/// Decodes the snapshot stored under `s/{seq}`: the catalog as of entry `seq`.
pub fn decode(seq: u64, bytes: &[u8]) -> Result<Catalog, DecodeError> {
    let malformed = |position: u64, detail: String| DecodeError::Malformed { position, detail };
    super::head::check(bytes, MAGIC, SNAPSHOT_FORMAT_VERSION, "a snapshot", "snapshot")?;
    let frame = frame_at(bytes, HEADER, salt(seq), MAX_PAYLOAD, &|kind, payload| {
        kind == KIND_SNAPSHOT && payload.len() >= PAYLOAD_HEADER
    })
    .map_err(|detail| malformed(HEADER as u64, detail))?;
    if frame.end() != bytes.len() as u64 {
        return Err(malformed(frame.end(), format!("{} bytes after the snapshot", bytes.len() as u64 - frame.end())));
    }
    let mut r = Reader::new(frame.payload, (HEADER + FRAME_HEADER_LEN) as u64);
    let position = r.u64()?;
    if position != seq {
        return Err(r.malformed(format!("a snapshot as of entry {position} under the key of {seq}")));
    }
    let count = r.u32()?;
    // No count above what the payload can hold (the map is built as it is read, so this
    // only refuses early).
    if count as usize > (frame.payload.len() - PAYLOAD_HEADER) / MIN_INCARNATION {
        return Err(r.malformed(format!("incarnation count {count}")));
    }
    let mut topics = BTreeMap::new();
    let mut last: Option<u64> = None;
    for _ in 0..count {
        let id = r.u64()?;
        if let Some(last) = last.filter(|last| id <= *last) {
            return Err(r.malformed(format!("incarnation {id} after {last}: ids must ascend")));
        }
        last = Some(id);
        let name = r.string()?;
        let partitions = r.partitions(MAX_PARTITIONS_EVER)?;
        let settings = TopicSettings { deletion_grace_ms: r.u64()? };
        let created_by = read_writer(&mut r)?;
        let (deleted_at, deleted_by) = match r.u8()? {
            0 => (None, None),
            1 => (Some(r.u64()?), Some(read_writer(&mut r)?)),
            flag => return Err(r.malformed(format!("tombstone flag {flag}"))),
        };
        topics.insert(TopicId(id), Incarnation { name, partitions, settings, created_by, deleted_at, deleted_by });
    }
    r.finish()?;
    Catalog::restore(position, topics).map_err(|detail| malformed((HEADER + FRAME_HEADER_LEN) as u64, detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::entry::{Entry, EntryKind};

    fn writer(node: u32, nonce: u64) -> EntryWriter {
        EntryWriter { node, boot: 7, nonce }
    }

    /// Folds `kinds` as entries 1, 2, ..., entry `i` written by node `i % 3`.
    fn folded(kinds: Vec<EntryKind>) -> Catalog {
        let mut c = Catalog::default();
        for (i, kind) in kinds.into_iter().enumerate() {
            c.fold(&Entry { writer: writer(i as u32 % 3, i as u64), kind });
        }
        c
    }

    fn create(name: &str, partitions: u32, grace: u64) -> EntryKind {
        EntryKind::Create { name: name.into(), partitions, settings: TopicSettings { deletion_grace_ms: grace } }
    }

    /// Live, being deleted and removed incarnations, and an ignored entry.
    fn catalog() -> Catalog {
        folded(vec![
            create("orders", 12, 5_000),
            create("gone", 1, 0),
            EntryKind::Delete { name: "gone".into(), topic: TopicId(2) },
            EntryKind::Removed { topic: TopicId(2) },
            create("orders", 3, 0),
            create("pending", 4, 60_000),
            EntryKind::Delete { name: "pending".into(), topic: TopicId(6) },
            create("pending", 2, 1),
        ])
    }

    #[test]
    fn snapshots_decode_as_encoded() {
        for c in [Catalog::default(), folded(vec![create("a", 1, 0)]), catalog()] {
            let bytes = encode(&c);
            assert_eq!(decode(c.position(), &bytes), Ok(c.clone()));
        }
        let c = catalog();
        let back = decode(c.position(), &encode(&c)).unwrap();
        assert!(back.is_removed(TopicId(2)) && !back.is_removed(TopicId(9)), "removed ids are kept exactly");
        assert_eq!(back.deleting().map(|(id, _)| id).collect::<Vec<_>>(), vec![TopicId(6)]);
        assert_eq!(back.live("pending").map(|(id, _)| id), Some(TopicId(8)));
    }

    #[test]
    fn a_snapshot_under_another_seq_or_damaged_is_refused() {
        let c = catalog();
        let seq = c.position();
        let bytes = encode(&c);
        assert!(decode(seq + 1, &bytes).is_err(), "copied under another key");
        assert!(decode(seq - 1, &bytes).is_err(), "copied under another key");
        for i in 0..bytes.len() {
            for bit in [0x01, 0x10, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(decode(seq, &b).is_err(), "a flipped bit {bit:#x} at byte {i} went unseen");
            }
        }
        for cut in 0..bytes.len() {
            assert!(decode(seq, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(decode(seq, &longer).is_err(), "a trailing byte");
    }

    /// Frames whose checksum is right but whose contents folding could never leave (a
    /// writer with a bug, or a forged object) are refused with a reason, not loaded.
    #[test]
    fn a_valid_frame_with_impossible_contents_is_refused() {
        let framed = |seq: u64, payload: &[u8]| frame_object(seq, KIND_SNAPSHOT, payload);
        let incarnation = |w: &mut Writer, id: u64, name: &str, deleted: Option<u64>| {
            w.u64(id);
            w.bytes(name.as_bytes());
            w.u32(1);
            w.u64(0);
            write_writer(w, &writer(1, id));
            match deleted {
                Some(at) => {
                    w.u8(1);
                    w.u64(at);
                    write_writer(w, &writer(1, at));
                }
                None => w.u8(0),
            }
        };
        // (what the error names, incarnations as (id, name, tombstone seq), the count)
        type Case = (&'static str, Vec<(u64, &'static str, Option<u64>)>, u32);
        let cases: Vec<Case> = vec![
            ("count", vec![], u32::MAX),
            ("count", vec![(1, "a", None)], 2),
            ("ascend", vec![(2, "a", None), (1, "b", None)], 2),
            ("outside", vec![(9, "a", None)], 1),
            ("outside", vec![(0, "a", None)], 1),
            ("live as", vec![(1, "a", None), (2, "a", None)], 2),
            // Folding ignores a create of a live name: 3 could not be created while 1 lived.
            ("live as", vec![(1, "a", Some(4)), (3, "a", None)], 2),
            ("live as", vec![(1, "a", Some(5)), (3, "a", Some(4))], 2),
            ("deleted at", vec![(2, "a", Some(2))], 1),
            ("deleted at", vec![(2, "a", Some(6))], 1),
            ("used twice", vec![(1, "a", Some(2)), (2, "b", None)], 2),
        ];
        let mut w = Writer::default();
        w.u64(5);
        w.u32(1);
        w.u64(1);
        w.bytes(b"a");
        w.u32(crate::config::MAX_PARTITIONS_EVER + 1);
        w.u64(0);
        write_writer(&mut w, &writer(1, 1));
        w.u8(0);
        let e = decode(5, &framed(5, &w.buf)).expect_err("partitions");
        assert!(e.to_string().contains("partitions, more than any topic has"), "{e}");
        for (why, incarnations, count) in cases {
            let mut w = Writer::default();
            w.u64(5);
            w.u32(count);
            for (id, name, deleted) in incarnations {
                incarnation(&mut w, id, name, deleted);
            }
            let e = decode(5, &framed(5, &w.buf)).expect_err(why);
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
        let mut w = Writer::default();
        w.u64(4);
        w.u32(0);
        let e = decode(5, &framed(5, &w.buf)).expect_err("position");
        assert!(e.to_string().contains("under the key of 5"), "{e}");
        let mut w = Writer::default();
        w.u64(5);
        w.u32(1);
        incarnation(&mut w, 1, "a", None);
        let last = w.buf.len() - 1;
        w.buf[last] = 2;
        let e = decode(5, &framed(5, &w.buf)).expect_err("flag");
        assert!(e.to_string().contains("tombstone flag 2"), "{e}");
    }

    /// A snapshot as of entry u64::MAX whose incarnation u64::MAX has a tombstone (which
    /// no seq after it can be) is refused; naming the seqs a tombstone may take once
    /// overflowed (fuzz input `crash-tombstone-of-incarnation-u64-max`).
    #[test]
    fn a_tombstone_of_the_last_possible_incarnation_is_refused() {
        let mut w = Writer::default();
        w.u64(u64::MAX);
        w.u32(1);
        w.u64(u64::MAX);
        w.bytes(b"a");
        w.u32(1);
        w.u64(0);
        write_writer(&mut w, &writer(1, 1));
        w.u8(1);
        w.u64(5);
        write_writer(&mut w, &writer(1, 2));
        let e = decode(u64::MAX, &frame_object(u64::MAX, KIND_SNAPSHOT, &w.buf)).expect_err("refused");
        assert!(e.to_string().contains("deleted at 5"), "{e}");
    }

    /// Arbitrary bytes, and arbitrary payloads in a valid frame, never panic.
    #[test]
    fn any_bytes_decode_to_a_catalog_or_an_error() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let good = encode(&catalog());
        for _ in 0..2_000 {
            let len = (next() % 200) as usize;
            let noise: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let _ = decode(8, &noise);
            let _ = decode(8, &frame_object(8, KIND_SNAPSHOT, &noise));
            // A valid frame around a payload mutated in a few bytes.
            let payload_start = HEADER + FRAME_HEADER_LEN;
            let mut payload = good[payload_start..].to_vec();
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % payload.len();
                payload[i] = next() as u8;
            }
            let _ = decode(8, &frame_object(8, KIND_SNAPSHOT, &payload));
        }
    }
}
