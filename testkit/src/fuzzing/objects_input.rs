//! What a `cluster_objects` input is: which objects its bytes are decoded as, the key
//! they are read under, and whether the target frames them first.

use broker_core::cluster::{entry, segment, snapshot, topic_object};
use broker_core::TopicId;

/// Which objects an input's bytes are decoded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objects {
    /// A journal entry, seq [`ObjectsInput::seq`].
    Entry,
    /// A segment, under [`ObjectsInput::seq`] (the incarnation), partition and base.
    Segment,
    /// A snapshot, seq [`ObjectsInput::seq`].
    Snapshot,
    /// The same bytes as each of the three, and as a topic object: object
    /// [`ObjectsInput::base`] of incarnation [`ObjectsInput::seq`].
    Each,
}

/// A `cluster_objects` input, read from its layout (see [`super::fuzz_cluster_objects`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectsInput {
    /// What the bytes are decoded as.
    pub objects: Objects,
    /// `Some(kind)`: [`Self::bytes`] are a payload, framed as the objects' encoders frame
    /// theirs (checksum right) with this frame kind, at most [`MAX_FRAME_KIND`]; `None`:
    /// the bytes are the whole object, checksum and all.
    pub frame_kind: Option<u8>,
    /// The entry's and the snapshot's seq, and the segment's incarnation.
    pub seq: u64,
    /// The segment's partition.
    pub partition: u32,
    /// The segment's base offset, and the topic object's number.
    pub base: u64,
    /// The object, or the payload to frame.
    pub bytes: Vec<u8>,
}

/// The largest frame kind an input can choose (five bits of its first byte): the valid
/// kinds (1 to 3) and many invalid ones.
pub const MAX_FRAME_KIND: u8 = 31;

/// Bytes before an input's object or payload: the mode byte and the key.
const INPUT_HEADER: usize = 1 + 8 + 4 + 8;

impl ObjectsInput {
    /// Reads an input; bytes missing from a short key read as zeros.
    pub fn parse(data: &[u8]) -> ObjectsInput {
        let mut head = [0u8; INPUT_HEADER];
        let n = data.len().min(INPUT_HEADER);
        head[..n].copy_from_slice(&data[..n]);
        let mode = head[0];
        let objects = match mode & 0b11 {
            0 => Objects::Entry,
            1 => Objects::Segment,
            2 => Objects::Snapshot,
            _ => Objects::Each,
        };
        ObjectsInput {
            objects,
            frame_kind: (mode & 0b100 != 0).then_some(mode >> 3),
            seq: u64::from_le_bytes(head[1..9].try_into().expect("8 bytes")),
            partition: u32::from_le_bytes(head[9..13].try_into().expect("4 bytes")),
            base: u64::from_le_bytes(head[13..21].try_into().expect("8 bytes")),
            bytes: data[n..].to_vec(),
        }
    }

    /// The input's bytes, as [`Self::parse`] reads them. Panics if the frame kind is
    /// above [`MAX_FRAME_KIND`] (it would not fit).
    pub fn to_bytes(&self) -> Vec<u8> {
        let objects = match self.objects {
            Objects::Entry => 0,
            Objects::Segment => 1,
            Objects::Snapshot => 2,
            Objects::Each => 3,
        };
        let framed = match self.frame_kind {
            Some(kind) => {
                assert!(kind <= MAX_FRAME_KIND, "frame kind {kind} does not fit in an input");
                0b100 | kind << 3
            }
            None => 0,
        };
        let mut out = vec![objects | framed];
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.partition.to_le_bytes());
        out.extend_from_slice(&self.base.to_le_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    pub(super) fn decodes(&self, objects: Objects) -> bool {
        self.objects == objects || self.objects == Objects::Each
    }

    pub(super) fn entry_bytes(&self) -> Vec<u8> {
        match self.frame_kind {
            Some(kind) => entry::frame_object(self.seq, kind, &self.bytes),
            None => self.bytes.clone(),
        }
    }

    pub(super) fn segment_bytes(&self) -> Vec<u8> {
        match self.frame_kind {
            Some(kind) => segment::frame_object(TopicId(self.seq), self.partition, self.base, kind, &self.bytes),
            None => self.bytes.clone(),
        }
    }

    /// The topic object's bytes. Framed, the payload is split in two: a u32 (little-endian)
    /// gives the header's length (cut to what follows), the header's payload follows,
    /// and the rest is the records'; the frame kind is the layout's own for each.
    pub(super) fn topic_object_bytes(&self) -> Vec<u8> {
        if self.frame_kind.is_none() {
            return self.bytes.clone();
        }
        let mut len = [0u8; 4];
        let n = self.bytes.len().min(4);
        len[..n].copy_from_slice(&self.bytes[..n]);
        let rest = &self.bytes[n..];
        let (header, records) = rest.split_at((u32::from_le_bytes(len) as usize).min(rest.len()));
        topic_object::frame_object(TopicId(self.seq), self.base, header, records)
    }

    pub(super) fn snapshot_bytes(&self) -> Vec<u8> {
        match self.frame_kind {
            Some(kind) => snapshot::frame_object(self.seq, kind, &self.bytes),
            None => self.bytes.clone(),
        }
    }
}
