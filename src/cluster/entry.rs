//! Journal entries of the shared journal, and their codec.
//!
//! Object layout: `BRKE`, format version u16, then one frame (`src/frame.rs`) whose
//! kind is the entry's and whose checksum is salted with the entry's seq, so an entry
//! copied under another key never validates. The payload is the writer (node u32,
//! boot u64, nonce u64) and the entry's fields, little-endian, as the local journal writes them.

/// Magic and format version, before an object's first frame.
use super::head::HEAD as HEADER;
use crate::bytes::{Reader, Writer};
use crate::command::TopicSettings;
use crate::config::MAX_PARTITIONS_EVER;
use crate::error::DecodeError;
use crate::frame::{encode_frame, frame_at, FRAME_HEADER_LEN};
use crate::ids::TopicId;

const MAGIC: &[u8; 4] = b"BRKE";
/// The entry format this build writes and reads.
pub const ENTRY_FORMAT_VERSION: u16 = 1;
/// The largest payload an entry may have: a name of at most 249 characters and a few
/// numbers fit many times over.
const MAX_PAYLOAD: usize = 4096;

const KIND_CREATE: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_REMOVED: u8 = 3;

/// Who wrote an entry: a writer that cannot tell whether its write happened (a timeout)
/// reads the key back and knows the entry for its own by this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryWriter {
    /// The node.
    pub node: u32,
    /// The node's life: a number its runtime picks at each start, never the same twice
    /// (a random number in a real runtime, a seeded one in the simulator), so that an
    /// entry a previous life wrote, landing late, is never taken for this life's.
    pub boot: u64,
    /// A number this life never uses twice.
    pub nonce: u64,
}

/// One journal entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Who wrote it.
    pub writer: EntryWriter,
    /// What it records.
    pub kind: EntryKind,
}

/// What an entry records. An incarnation's id is the seq of its `Create` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A topic is created.
    Create {
        /// Its name.
        name: String,
        /// Its partition count.
        partitions: u32,
        /// Its settings.
        settings: TopicSettings,
    },
    /// The live incarnation `topic` of `name` is deleted: its tombstone.
    Delete {
        /// The name it had.
        name: String,
        /// The incarnation.
        topic: TopicId,
    },
    /// Every segment of `topic` is removed: its deletion is complete.
    Removed {
        /// The incarnation.
        topic: TopicId,
    },
}

fn salt(seq: u64) -> u64 {
    seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x4252_4b45_4e54_5259
}

/// The bytes of `entry` as journal entry `seq`.
pub fn encode(seq: u64, entry: &Entry) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(entry.writer.node);
    w.u64(entry.writer.boot);
    w.u64(entry.writer.nonce);
    let kind = match &entry.kind {
        EntryKind::Create { name, partitions, settings } => {
            w.bytes(name.as_bytes());
            w.u32(*partitions);
            w.u64(settings.deletion_grace_ms);
            KIND_CREATE
        }
        EntryKind::Delete { name, topic } => {
            w.bytes(name.as_bytes());
            w.u64(topic.0);
            KIND_DELETE
        }
        EntryKind::Removed { topic } => {
            w.u64(topic.0);
            KIND_REMOVED
        }
    };
    frame_object(seq, kind, &w.buf)
}

/// The bytes of journal entry `seq` around any frame kind and payload, framed as
/// [`encode`] frames an entry's: the checksum is right whatever the payload holds. For
/// tests and fuzzers that must reach [`decode`]'s payload parser behind the checksum.
pub fn frame_object(seq: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + FRAME_HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&ENTRY_FORMAT_VERSION.to_le_bytes());
    encode_frame(&mut out, salt(seq), kind, payload);
    out
}

/// Decodes journal entry `seq` from the bytes stored under its key.
pub fn decode(seq: u64, bytes: &[u8]) -> Result<Entry, DecodeError> {
    let malformed = |position: u64, detail: String| DecodeError::Malformed { position, detail };
    super::head::check(bytes, MAGIC, ENTRY_FORMAT_VERSION, "a journal entry", "entry")?;
    let frame = frame_at(bytes, HEADER, salt(seq), MAX_PAYLOAD, &|kind, _| {
        matches!(kind, KIND_CREATE | KIND_DELETE | KIND_REMOVED)
    })
    .map_err(|detail| malformed(HEADER as u64, detail))?;
    if frame.end() != bytes.len() as u64 {
        return Err(malformed(frame.end(), format!("{} bytes after the entry", bytes.len() as u64 - frame.end())));
    }
    let mut r = Reader::new(frame.payload, (HEADER + FRAME_HEADER_LEN) as u64);
    let writer = EntryWriter { node: r.u32()?, boot: r.u64()?, nonce: r.u64()? };
    let kind = match frame.kind {
        KIND_CREATE => EntryKind::Create {
            name: r.string()?,
            partitions: r.partitions(MAX_PARTITIONS_EVER)?,
            settings: TopicSettings { deletion_grace_ms: r.u64()? },
        },
        KIND_DELETE => EntryKind::Delete { name: r.string()?, topic: TopicId(r.u64()?) },
        _ => EntryKind::Removed { topic: TopicId(r.u64()?) },
    };
    r.finish()?;
    Ok(Entry { writer, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<Entry> {
        let writer = EntryWriter { node: 3, boot: 9, nonce: 77 };
        vec![
            Entry {
                writer,
                kind: EntryKind::Create {
                    name: "orders".into(),
                    partitions: 12,
                    settings: TopicSettings { deletion_grace_ms: 5_000 },
                },
            },
            Entry { writer, kind: EntryKind::Delete { name: "orders".into(), topic: TopicId(1) } },
            Entry {
                writer: EntryWriter { node: u32::MAX, boot: u64::MAX, nonce: u64::MAX },
                kind: EntryKind::Removed { topic: TopicId(1) },
            },
        ]
    }

    #[test]
    fn entries_decode_as_encoded() {
        for (i, e) in entries().into_iter().enumerate() {
            let seq = 10 + i as u64;
            assert_eq!(decode(seq, &encode(seq, &e)), Ok(e));
        }
    }

    /// A create of more partitions than any topic has is corrupt, as in the one-broker
    /// journal: a node describing it once allocated a high watermark for each of 4
    /// billion partitions (fuzz input `crash-create-of-4-billion-partitions`).
    #[test]
    fn a_create_of_more_partitions_than_any_topic_has_is_refused() {
        let create = |partitions| Entry {
            writer: EntryWriter { node: 1, boot: 1, nonce: 1 },
            kind: EntryKind::Create { name: "t".into(), partitions, settings: TopicSettings::default() },
        };
        let most = crate::config::MAX_PARTITIONS_EVER;
        assert_eq!(decode(1, &encode(1, &create(most))), Ok(create(most)));
        for partitions in [most + 1, u32::MAX] {
            let e = decode(1, &encode(1, &create(partitions))).expect_err("too many partitions");
            assert!(e.to_string().contains("partitions, more than any topic has"), "{e}");
        }
    }

    #[test]
    fn an_entry_under_another_seq_or_damaged_is_refused() {
        let e = &entries()[0];
        let bytes = encode(5, e);
        assert!(decode(6, &bytes).is_err(), "copied under another key");
        for i in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(decode(5, &b).is_err(), "a flipped bit at byte {i} went unseen");
            }
        }
        for cut in 0..bytes.len() {
            assert!(decode(5, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(decode(5, &longer).is_err(), "a trailing byte");
    }
}
