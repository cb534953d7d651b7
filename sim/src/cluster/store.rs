//! The simulated shared store: the store contract exactly (a [`MemStore`]), and a record
//! of everything it has ever held: each journal entry with when it landed, the catalog
//! those entries fold to (the *truth*), and every segment ever created (a topic object
//! counts as one segment for each partition it holds records of). It judges
//! nothing: what an operation did that a checker may judge, it tells as [`Fact`]s
//! (`crate::cluster::checkers` judges them).
//!
//! Journal entries land in seq order (a node appends `j/{p+1}` only once it has read
//! `j/{p}`), so folding them as they land gives the catalog at every instant, and the
//! instant an entry lands is the linearization point of the command that wrote it. The
//! one exception is a key compaction deleted that a delayed create writes again: it is
//! counted, never folded.

use broker_core::cluster::catalog::{Catalog, Folded};
use broker_core::cluster::entry::{self, EntryKind};
use broker_core::cluster::keys::{parse_data_key, parse_journal_key, parse_object_key, parse_segment_key};
use broker_core::cluster::memstore::MemStore;
use broker_core::cluster::store::{StoreOp, StoreOutput};
use broker_core::cluster::{segment, topic_object};
use broker_core::{Bytes, Time, TopicId};
use std::collections::{BTreeMap, BTreeSet};

/// When an incarnation's entries landed.
#[derive(Clone, Debug)]
pub struct Life {
    /// Its name.
    pub name: String,
    /// Its partition count.
    pub partitions: u32,
    /// When its `Create` landed.
    pub created: Time,
    /// When its tombstone landed.
    pub deleted: Option<Time>,
    /// How many `Removed` entries name it.
    pub completions: u32,
}

impl Life {
    /// Whether it was live at some instant of `[from, to]`.
    pub fn overlaps(&self, from: Time, to: Time) -> bool {
        self.created <= to && self.deleted.is_none_or(|d| d > from)
    }
}

/// One partition's segments: the values of each, by base.
pub type Segments = BTreeMap<u64, Vec<broker_core::Bytes>>;

/// The store and its history.
#[derive(Debug, Default)]
pub struct SimStore {
    /// What it holds now.
    pub objects: MemStore,
    /// The catalog of every entry that landed.
    pub truth: Catalog,
    /// Every incarnation, by id.
    pub lives: BTreeMap<TopicId, Life>,
    /// The records of every segment created before its incarnation's tombstone, by
    /// partition, then by base.
    pub segments: BTreeMap<(TopicId, u32), Segments>,
    /// Creates answered `Exists`: a writer lost a race (or its own earlier attempt landed).
    pub lost_races: u64,
    /// Journal keys created again after compaction deleted them (a create delayed in
    /// flight or timed out that landed late).
    pub stale_landings: u64,
    /// Every tombstone, in the order they landed, with when.
    pub tombstones: Vec<(TopicId, Time)>,
    /// Keys outside the layout planted before the run: never to be deleted.
    pub foreign: BTreeSet<String>,
}

/// What one store operation did, told as it happened, in order, for the checkers to
/// judge. Carrying out an operation tells none, one or (a delete) two of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    /// A key planted outside the layout before the run was deleted.
    ForeignDeleted {
        /// The key.
        key: String,
    },
    /// A segment the store held was deleted.
    SegmentDeleted {
        /// Its key.
        key: String,
        /// Its incarnation.
        topic: TopicId,
        /// Whether its incarnation's tombstone had landed by then.
        tombstoned: bool,
    },
    /// A segment was created before its incarnation's tombstone landed, and recorded.
    SegmentCreated {
        /// Its key.
        key: String,
        /// Its first offset.
        base: u64,
        /// Where the partition's record ended before it.
        end: u64,
    },
    /// A segment was created whose bytes do not decode.
    SegmentUndecodable {
        /// Its key.
        key: String,
        /// Why they do not.
        error: String,
    },
    /// A journal entry was written whose bytes do not decode.
    EntryUndecodable {
        /// Its seq.
        seq: u64,
        /// Why they do not.
        error: String,
    },
    /// A journal entry landed past the next seq of the journal: entries before it are
    /// missing. It was not folded.
    EntryAfterGap {
        /// Its seq.
        seq: u64,
        /// The last seq folded before it.
        position: u64,
    },
    /// A journal entry landed at the next seq and was folded into the truth.
    EntryFolded {
        /// Its seq.
        seq: u64,
        /// For a `Removed` that names a known incarnation: that incarnation, and how
        /// many `Removed` entries have named it now, this one included.
        completion: Option<(TopicId, u32)>,
        /// Why the catalog ignored it, if it did (then it changed no life).
        ignored: Option<String>,
    },
}

impl SimStore {
    /// Carries out `op` at `now`; returns the store's output and what it did, in order.
    pub fn apply(&mut self, now: Time, op: &StoreOp) -> (StoreOutput, Vec<Fact>) {
        let mut facts = Vec::new();
        if let StoreOp::Delete { key } = op {
            if self.foreign.contains(key) {
                facts.push(Fact::ForeignDeleted { key: key.clone() });
            }
        }
        if let StoreOp::Delete { key } = op {
            if let Some(topic) = parse_data_key(key) {
                let tombstoned = self.lives.get(&topic).is_some_and(|l| l.deleted.is_some());
                if self.objects.get(key).is_some() {
                    facts.push(Fact::SegmentDeleted { key: key.clone(), topic, tombstoned });
                }
            }
        }
        let output = self.objects.apply(op);
        let StoreOp::Create { key, bytes } = op else { return (output, facts) };
        if output == StoreOutput::Exists {
            self.lost_races += 1;
            return (output, facts);
        }
        if let Some(seq) = parse_journal_key(key) {
            if let Some(fact) = self.landed(now, seq, bytes) {
                facts.push(fact);
            }
        } else if let Some((topic, partition, base)) = parse_segment_key(key) {
            match segment::decode(topic, partition, base, bytes) {
                Ok(seg) => self.created(topic, partition, base, key, seg.records, &mut facts),
                Err(e) => facts.push(Fact::SegmentUndecodable { key: key.clone(), error: e.to_string() }),
            }
        } else if let Some((topic, n)) = parse_object_key(key) {
            match topic_object::decode(topic, n, bytes) {
                Ok(object) => {
                    for (part, records) in object.header.parts.iter().zip(object.records) {
                        let key = format!("{key} (partition {})", part.partition);
                        self.created(topic, part.partition, object.header.base(part), &key, records, &mut facts);
                    }
                }
                Err(e) => facts.push(Fact::SegmentUndecodable { key: key.clone(), error: e.to_string() }),
            }
        }
        (output, facts)
    }

    /// Records `records` created at `base` of a partition under `key`. One created after
    /// its incarnation's tombstone landed is an orphan, written by a node that had not
    /// folded the tombstone yet: no fence lets it be acknowledged or served, so it is not
    /// recorded, and anything shown from it is flagged. Until the tombstone lands, the
    /// incarnation's records are all there, so each segment must start where the last
    /// one ends.
    fn created(
        &mut self,
        topic: TopicId,
        partition: u32,
        base: u64,
        key: &str,
        records: Vec<broker_core::ProduceRecord>,
        facts: &mut Vec<Fact>,
    ) {
        if self.lives.get(&topic).is_some_and(|l| l.deleted.is_some()) {
            return;
        }
        let part = self.segments.entry((topic, partition)).or_default();
        let end = part.iter().next_back().map_or(0, |(b, r)| b + r.len() as u64);
        facts.push(Fact::SegmentCreated { key: key.to_string(), base, end });
        part.insert(base, records.into_iter().map(|r| r.value).collect());
    }

    /// Journal entry `seq`, `bytes`, landed at `now`: folds it if it is the next, and
    /// records the life it begins or ends.
    fn landed(&mut self, now: Time, seq: u64, bytes: &[u8]) -> Option<Fact> {
        let entry = match entry::decode(seq, bytes) {
            Ok(e) => e,
            Err(e) => return Some(Fact::EntryUndecodable { seq, error: e.to_string() }),
        };
        let p = self.truth.position();
        if seq <= p {
            // A create delayed past the compaction that deleted its key: readers check
            // against the snapshots before they fold an entry below one (rule C).
            self.stale_landings += 1;
            return None;
        }
        if seq != p + 1 {
            return Some(Fact::EntryAfterGap { seq, position: p });
        }
        let folded = self.truth.fold(&entry);
        let mut completion = None;
        if let EntryKind::Removed { topic } = &entry.kind {
            if let Some(life) = self.lives.get_mut(topic) {
                life.completions += 1;
                completion = Some((*topic, life.completions));
            }
        }
        let ignored = match folded {
            Folded::Ignored(why) => Some(why),
            Folded::Applied => None,
        };
        if ignored.is_none() {
            match entry.kind {
                EntryKind::Create { name, partitions, .. } => {
                    let life = Life { name, partitions, created: now, deleted: None, completions: 0 };
                    self.lives.insert(TopicId(seq), life);
                }
                EntryKind::Delete { topic, .. } => {
                    if let Some(life) = self.lives.get_mut(&topic) {
                        life.deleted = Some(now);
                    }
                    self.tombstones.push((topic, now));
                }
                EntryKind::Removed { .. } => {}
            }
        }
        Some(Fact::EntryFolded { seq, completion, ignored })
    }

    /// Creates `key`, a key outside the layout, as another program might.
    pub fn plant_foreign(&mut self, key: String) {
        self.objects.apply(&StoreOp::Create { key: key.clone(), bytes: Bytes::from_static(b"not the protocol's") });
        self.foreign.insert(key);
    }

    /// The incarnations of `name`, oldest first.
    pub fn lives_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (TopicId, &'a Life)> + 'a {
        self.lives.iter().filter(move |(_, l)| l.name == name).map(|(id, l)| (*id, l))
    }

    /// The value ever written at `offset` of a partition.
    pub fn value_at(&self, topic: TopicId, partition: u32, offset: u64) -> Option<&[u8]> {
        let part = self.segments.get(&(topic, partition))?;
        let (base, values) = part.range(..=offset).next_back()?;
        values.get((offset - base) as usize).map(|v| &v[..])
    }

    /// The end of a partition: one past the last offset ever written.
    pub fn end(&self, topic: TopicId, partition: u32) -> u64 {
        self.segments.get(&(topic, partition)).and_then(|p| p.iter().next_back()).map_or(0, |(b, r)| b + r.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::cluster::entry::{Entry, EntryWriter};
    use broker_core::cluster::keys::{journal_key, object_key};
    use broker_core::{ProduceRecord, TopicSettings};

    const WRITER: EntryWriter = EntryWriter { node: 1, boot: 1, nonce: 1 };

    fn create(store: &mut SimStore, key: String, bytes: Vec<u8>) -> Vec<Fact> {
        store.apply(Time(0), &StoreOp::Create { key, bytes: bytes.into() }).1
    }

    fn records(values: &[&str]) -> Vec<ProduceRecord> {
        values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect()
    }

    /// A topic object is recorded as one segment per partition it holds, each judged by
    /// where its partition ended; its delete and its undecodable bytes are told as a
    /// segment's are.
    #[test]
    fn a_topic_object_counts_as_a_segment_for_each_partition_it_holds() {
        let mut store = SimStore::default();
        let kind = EntryKind::Create { name: "t".into(), partitions: 2, settings: TopicSettings::default() };
        create(&mut store, journal_key(1), entry::encode(1, &Entry { writer: WRITER, kind }));
        let topic = TopicId(1);
        let (a, b) = (records(&["a0", "a1"]), records(&["b0"]));
        let first = topic_object::encode(topic, 0, WRITER, &[0, 0], &[(0, &a), (1, &b)]).expect("encodes");
        let key = object_key(topic, 0);
        let facts = create(&mut store, key.clone(), first);
        let want = |p: u32, base, end| Fact::SegmentCreated { key: format!("{key} (partition {p})"), base, end };
        assert_eq!(facts, vec![want(0, 0, 0), want(1, 0, 0)]);
        assert_eq!(store.value_at(topic, 0, 1), Some(&b"a1"[..]));
        assert_eq!((store.end(topic, 0), store.end(topic, 1)), (2, 1));
        // A writer that took partition 0's end for 1: told with where it really ended.
        let second = topic_object::encode(topic, 1, WRITER, &[1, 1], &[(0, &b)]).expect("encodes");
        let key = object_key(topic, 1);
        let facts = create(&mut store, key.clone(), second);
        assert_eq!(facts, vec![Fact::SegmentCreated { key: format!("{key} (partition 0)"), base: 1, end: 2 }]);
        let bad = create(&mut store, object_key(topic, 2), b"BRKO nonsense".to_vec());
        assert!(matches!(&bad[..], [Fact::SegmentUndecodable { .. }]), "{bad:?}");
        let (_, facts) = store.apply(Time(0), &StoreOp::Delete { key: object_key(topic, 0) });
        assert_eq!(facts, vec![Fact::SegmentDeleted { key: object_key(topic, 0), topic, tombstoned: false }]);
    }
}
