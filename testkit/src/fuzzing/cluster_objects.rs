//! Target `cluster_objects`: the objects the cluster reads back from the shared store
//! (journal entries, segments, snapshots), which other nodes, other versions, operators
//! and bit rot also write.

use crate::alloc_probe::largest_allocation;
use broker_core::cluster::catalog::{Catalog, Folded, Incarnation};
use broker_core::cluster::entry::{self, Entry, EntryKind, EntryWriter};
use broker_core::cluster::segment::{self, Segment};
use broker_core::cluster::snapshot;
use broker_core::cluster::topic_object::{self, TopicObject};
use broker_core::{Bytes, DecodeError, ProduceRecord, TopicId, TopicSettings};
use std::collections::{BTreeMap, BTreeSet};

pub use super::objects_input::{Objects, ObjectsInput, MAX_FRAME_KIND};

/// What one `cluster_objects` input decoded to: `None` for an object it was not decoded as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectsRun {
    /// The entry, or why not.
    pub entry: Option<Result<Entry, DecodeError>>,
    /// The segment, or why not.
    pub segment: Option<Result<Segment, DecodeError>>,
    /// The snapshot's catalog, or why not.
    pub snapshot: Option<Result<Catalog, DecodeError>>,
    /// The topic object, or why not.
    pub topic_object: Option<Result<TopicObject, DecodeError>>,
}

/// Target `cluster_objects`: decodes bytes as the cluster's stored objects.
///
/// Input layout ([`ObjectsInput`]): one mode byte, whose bits 0-1 choose what the bytes
/// are decoded as (0 an entry, 1 a segment, 2 a snapshot, 3 each of the three and a
/// topic object), bit 2 whether the bytes are a payload to frame (with a right
/// checksum, the frame kind being bits 3-7; a topic object's two payloads are split as
/// [`ObjectsInput`] says) or a whole object; then the key: seq u64 (the entry's and the
/// snapshot's, the segment's and the topic object's incarnation), partition u32, base
/// u64 (the segment's base, the topic object's number), little-endian (missing bytes
/// read as zeros); then the bytes.
///
/// Checks:
/// - decoding gives a value or a typed error naming a byte within the object, never a
///   panic; no single allocation exceeds what the object's length can justify (when
///   the binary's allocator reports to [`crate::alloc_probe`]; under cargo-fuzz,
///   libFuzzer's `-malloc_limit_mb` is the check);
/// - a decoded value re-encodes to exactly the input object (each layout admits one
///   encoding of a value) and decodes again to the same value; a segment's records
///   `[base, base + n)` end at an offset a `u64` holds (the nodes compute that end); a
///   topic object's header reads the same from its first bytes alone, and each part's
///   records end at its partition's end;
/// - a snapshot's catalog is one folding could leave: its position is the seq, it
///   restores to itself, it keeps the rules of `Catalog::restore` (checked here
///   independently: ids within `1..=position`, a tombstone's seq and writer together,
///   after its create and at most the position, no seq used twice, the lives of one
///   name disjoint), and, up to position [`REPLAY_LIMIT`], folding its creates and
///   tombstones at their seqs (and entries that change nothing elsewhere) gives it back;
///   folding a create, a delete and a removal after it gives catalogs that keep all this;
/// - an entry folds into an empty and a fixed catalog as the catalog's `validate_*`
///   say it will, with the effect it names, and the result keeps all of the above.
pub fn fuzz_cluster_objects(data: &[u8]) {
    run_cluster_objects(data);
}

/// Runs `cluster_objects` on `data` with every check, and says what it decoded to.
pub fn run_cluster_objects(data: &[u8]) -> ObjectsRun {
    let input = ObjectsInput::parse(data);
    let mut run = ObjectsRun::default();
    if input.decodes(Objects::Entry) {
        let bytes = input.entry_bytes();
        let decoded = measured("entry", &bytes, || entry::decode(input.seq, &bytes));
        if let Ok(e) = &decoded {
            check_entry(input.seq, &bytes, e);
        }
        run.entry = Some(decoded);
    }
    if input.decodes(Objects::Segment) {
        let bytes = Bytes::from(input.segment_bytes());
        let (topic, partition, base) = (TopicId(input.seq), input.partition, input.base);
        let decoded = measured("segment", &bytes, || segment::decode(topic, partition, base, &bytes));
        if let Ok(s) = &decoded {
            assert!(!s.records.is_empty(), "a segment holds at least one record");
            let end = base.checked_add(s.records.len() as u64);
            assert!(end.is_some(), "a segment's records [{base}, {base} + {}) end within u64", s.records.len());
            let again = Bytes::from(segment::encode(topic, partition, base, s.writer, &s.records));
            assert_eq!(segment::decode(topic, partition, base, &again).as_ref(), Ok(s), "a segment round trips");
            assert_eq!(again, bytes, "a segment re-encodes to its bytes");
        }
        run.segment = Some(decoded);
    }
    if input.decodes(Objects::Snapshot) {
        let bytes = input.snapshot_bytes();
        let decoded = measured("snapshot", &bytes, || snapshot::decode(input.seq, &bytes));
        if let Ok(c) = &decoded {
            assert_eq!(c.position(), input.seq, "a snapshot is as of its own seq");
            assert_eq!(snapshot::encode(c), bytes, "a snapshot re-encodes to its bytes");
            check_catalog(c);
            check_folds_after(c);
        }
        run.snapshot = Some(decoded);
    }
    if input.objects == Objects::Each {
        let bytes = Bytes::from(input.topic_object_bytes());
        let (topic, n) = (TopicId(input.seq), input.base);
        let decoded = measured("topic object", &bytes, || topic_object::decode(topic, n, &bytes));
        if let Ok(o) = &decoded {
            check_topic_object(topic, n, &bytes, o);
        }
        run.topic_object = Some(decoded);
    }
    super::node_fed::check_node_fed(&input);
    run
}

/// `o`, decoded from `bytes` as object `n` of `topic`, re-encodes to them from the ends
/// before it, and its header decodes alone from the bytes before its records.
fn check_topic_object(topic: TopicId, n: u64, bytes: &Bytes, o: &TopicObject) {
    let header = &o.header;
    assert_eq!(header.parts.len(), o.records.len(), "a part's records for each part");
    let mut ends_before = header.ends.clone();
    for (part, records) in header.parts.iter().zip(&o.records) {
        assert_eq!(records.len(), part.count as usize, "a part holds its count of records");
        let end = header.ends[part.partition as usize];
        assert_eq!(header.base(part) + u64::from(part.count), end, "a part ends at its partition's end");
        ends_before[part.partition as usize] = header.base(part);
    }
    let parts: Vec<(u32, &[ProduceRecord])> =
        header.parts.iter().zip(&o.records).map(|(p, r)| (p.partition, r.as_slice())).collect();
    let again = topic_object::encode(topic, n, header.writer, &ends_before, &parts).expect("a decoded object encodes");
    assert_eq!(again, bytes.as_ref(), "a topic object re-encodes to its bytes");
    let (alone, records_at) = topic_object::decode_header(topic, n, bytes).expect("its header decodes");
    assert_eq!(&alone, header, "the header decodes as the object's");
    assert_eq!(
        topic_object::decode_header(topic, n, &bytes[..records_at]),
        Ok((alone, records_at)),
        "from its first bytes"
    );
}

/// The most one allocation may take while decoding `len` bytes: a segment's record
/// list takes `size_of::<ProduceRecord>()` (48) bytes per record of at least 5 bytes,
/// under 10 per input byte; names, keys and values are copies of input bytes; map nodes
/// and messages are small. A count the input claims but does not hold asks for more.
fn allowance(len: usize) -> usize {
    len.saturating_mul(std::mem::size_of::<ProduceRecord>() / 5 + 1).saturating_add(4096)
}

/// Runs the decode `f` of the object `bytes`: its allocations stay within
/// [`allowance`], its error names a byte within the object.
fn measured<T>(what: &str, bytes: &[u8], f: impl FnOnce() -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    let (decoded, largest) = largest_allocation(f);
    if let Some(largest) = largest {
        assert!(
            largest <= allowance(bytes.len()),
            "decoding {} bytes as a {what} allocated {largest} bytes at once",
            bytes.len()
        );
    }
    if let Err(e) = &decoded {
        let position = match e {
            DecodeError::Truncated(p) => *p,
            DecodeError::Malformed { position, .. } => *position,
        };
        assert!(
            position <= bytes.len() as u64,
            "a {what} of {} bytes: the error names byte {position}: {e}",
            bytes.len()
        );
    }
    decoded
}

/// `e`, decoded from `bytes` as entry `seq`, re-encodes to them, and folds into an
/// empty catalog and [`reference_catalog`] as their `validate_*` predict.
fn check_entry(seq: u64, bytes: &[u8], e: &Entry) {
    let again = entry::encode(seq, e);
    assert_eq!(entry::decode(seq, &again).as_ref(), Ok(e), "an entry round trips");
    assert_eq!(again, bytes, "an entry re-encodes to its bytes");
    for mut catalog in [Catalog::default(), reference_catalog()] {
        let before = catalog.clone();
        let expected = match &e.kind {
            EntryKind::Create { name, .. } => before.live(name).is_none(),
            EntryKind::Delete { name, topic } => before.live(name).map(|(id, _)| id) == Some(*topic),
            EntryKind::Removed { topic } => before.validate_removed(*topic),
        };
        let folded = catalog.fold(e);
        assert_eq!(folded == Folded::Applied, expected, "{e:?} folded into {before:?}: {folded:?}");
        let seq = catalog.position();
        assert_eq!(seq, before.position() + 1, "folding moves the position by one");
        match (&e.kind, folded) {
            (EntryKind::Create { name, partitions, settings }, Folded::Applied) => {
                let t = catalog.live(name).map(|(id, t)| (id, t.partitions, &t.settings, t.created_by));
                assert_eq!(t, Some((TopicId(seq), *partitions, settings, e.writer)), "a create is live as its seq");
            }
            (EntryKind::Delete { topic, .. }, Folded::Applied) => {
                let t = catalog.incarnation(*topic).map(|t| (t.deleted_at, t.deleted_by));
                assert_eq!(t, Some((Some(seq), Some(e.writer))), "a tombstone is at its seq");
            }
            (EntryKind::Removed { topic }, Folded::Applied) => assert!(catalog.is_removed(*topic)),
            (_, Folded::Ignored(_)) => {
                let unchanged = Catalog::restore(seq, before.incarnations().map(|(id, t)| (id, t.clone())).collect());
                assert_eq!(unchanged.as_ref(), Ok(&catalog), "an ignored entry changes nothing but the position");
            }
        }
        check_catalog(&catalog);
    }
}

/// A catalog with a live, a deleting and a removed incarnation, for entries to fold into:
/// `orders` live as 1, `gone` being deleted as 2 (tombstone 3), `audit` removed as 4.
fn reference_catalog() -> Catalog {
    let writer = EntryWriter { node: 1, boot: 1, nonce: 1 };
    let create = |name: &str| EntryKind::Create {
        name: name.into(),
        partitions: 2,
        settings: TopicSettings { deletion_grace_ms: 10 },
    };
    let mut c = Catalog::default();
    for kind in [
        create("orders"),
        create("gone"),
        EntryKind::Delete { name: "gone".into(), topic: TopicId(2) },
        create("audit"),
        EntryKind::Delete { name: "audit".into(), topic: TopicId(4) },
        EntryKind::Removed { topic: TopicId(4) },
    ] {
        assert_eq!(c.fold(&Entry { writer, kind }), Folded::Applied);
    }
    c
}

/// The largest position up to which [`fuzz_cluster_objects`] folds a catalog's whole
/// journal again, to compare with it (each fold is cheap, but a position is a u64).
pub const REPLAY_LIMIT: u64 = 4096;

/// `c` is a catalog folding could leave, and its snapshot gives it back.
fn check_catalog(c: &Catalog) {
    let position = c.position();
    let topics: BTreeMap<TopicId, Incarnation> = c.incarnations().map(|(id, t)| (id, t.clone())).collect();
    assert_eq!(Catalog::restore(position, topics.clone()).as_ref(), Ok(c), "a catalog restores to itself");
    assert_eq!(snapshot::decode(position, &snapshot::encode(c)).as_ref(), Ok(c), "a catalog's snapshot round trips");

    // Restore's rules, checked here on their own: what folding `position` entries can leave.
    let mut seqs = BTreeSet::new();
    // The newest incarnation of each name so far (by id), and its tombstone.
    let mut newest: BTreeMap<&str, (TopicId, Option<u64>)> = BTreeMap::new();
    for (id, t) in &topics {
        assert!((1..=position).contains(&id.0), "incarnation {id} outside 1..={position}");
        assert!(seqs.insert(id.0), "seq {} used twice", id.0);
        assert_eq!(t.deleted_at.is_some(), t.deleted_by.is_some(), "{id}: a tombstone's seq and writer go together");
        if let Some(at) = t.deleted_at {
            assert!(id.0 < at && at <= position, "{id} deleted at {at}, position {position}");
            assert!(seqs.insert(at), "seq {at} used twice");
        }
        if let Some((before, deleted)) = newest.insert(t.name.as_str(), (*id, t.deleted_at)) {
            assert!(deleted.is_some_and(|at| at < id.0), "{:?} is live as {before} when {id} is created", t.name);
        }
    }
    let live: Vec<(&str, TopicId)> = c.live_topics().map(|(name, id, _)| (name, id)).collect();
    let expected: Vec<(&str, TopicId)> =
        newest.iter().filter(|(_, (_, deleted))| deleted.is_none()).map(|(name, (id, _))| (*name, *id)).collect();
    assert_eq!(live, expected, "the live names are the incarnations without a tombstone");
    let deleting: Vec<TopicId> = c.deleting().map(|(id, _)| id).collect();
    let tombstoned: Vec<TopicId> = topics.iter().filter(|(_, t)| t.deleted_at.is_some()).map(|(id, _)| *id).collect();
    assert_eq!(deleting, tombstoned);
    for id in topics.keys() {
        assert!(!c.is_removed(*id));
    }

    if position <= REPLAY_LIMIT {
        assert_eq!(&replay(&topics, position), c, "folding the catalog's own journal gives it back");
    }
}

/// Folds the journal of `topics` at `position`: each create and tombstone at its seq,
/// every other seq an entry that changes nothing (the removal of incarnation 0, never
/// one). Every create and tombstone must take effect.
fn replay(topics: &BTreeMap<TopicId, Incarnation>, position: u64) -> Catalog {
    let mut at: BTreeMap<u64, Entry> = BTreeMap::new();
    for (id, t) in topics {
        let settings = t.settings.clone();
        let kind = EntryKind::Create { name: t.name.clone(), partitions: t.partitions, settings };
        at.insert(id.0, Entry { writer: t.created_by, kind });
        if let (Some(seq), Some(writer)) = (t.deleted_at, t.deleted_by) {
            at.insert(seq, Entry { writer, kind: EntryKind::Delete { name: t.name.clone(), topic: *id } });
        }
    }
    let filler =
        Entry { writer: EntryWriter { node: 0, boot: 0, nonce: 0 }, kind: EntryKind::Removed { topic: TopicId(0) } };
    let mut c = Catalog::default();
    for seq in 1..=position {
        match at.get(&seq) {
            Some(e) => assert_eq!(c.fold(e), Folded::Applied, "entry {seq} of the catalog's journal: {e:?}"),
            None => assert!(matches!(c.fold(&filler), Folded::Ignored(_))),
        }
    }
    c
}

/// Folding a create, the delete of a live incarnation and the removal of one being
/// deleted after `c` gives catalogs that [`check_catalog`] accepts, each a seq further;
/// after entry `u64::MAX`, where no seq is next, each is ignored and changes nothing.
fn check_folds_after(c: &Catalog) {
    let writer = EntryWriter { node: 9, boot: 9, nonce: 9 };
    let mut kinds =
        vec![EntryKind::Create { name: "fuzz-probe".into(), partitions: 1, settings: TopicSettings::default() }];
    if let Some((name, topic, _)) = c.live_topics().next() {
        kinds.push(EntryKind::Delete { name: name.to_string(), topic });
    }
    if let Some((topic, _)) = c.deleting().next() {
        kinds.push(EntryKind::Removed { topic });
    }
    let mut folded = c.clone();
    for kind in kinds {
        let before = folded.clone();
        let create_of_live = matches!(&kind, EntryKind::Create { name, .. } if folded.live(name).is_some());
        let result = folded.fold(&Entry { writer, kind });
        match before.position().checked_add(1) {
            Some(next) => {
                assert_eq!(result == Folded::Applied, !create_of_live, "{result:?}");
                assert_eq!(folded.position(), next);
            }
            None => {
                assert!(matches!(result, Folded::Ignored(_)), "an entry after u64::MAX: {result:?}");
                assert_eq!(folded, before, "an entry after u64::MAX changes nothing");
            }
        }
        check_catalog(&folded);
    }
}
