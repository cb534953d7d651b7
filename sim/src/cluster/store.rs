//! The simulated shared store: the store contract exactly (a [`MemStore`]), and a record
//! of everything it has ever held, for the checkers: each journal entry with when it
//! landed, the catalog those entries fold to (the *truth*), and every segment ever
//! created.
//!
//! Journal entries land in seq order (a node appends `j/{p+1}` only once it has read
//! `j/{p}`), so folding them as they land gives the catalog at every instant, and the
//! instant an entry lands is the linearization point of the command that wrote it. The
//! one exception is a key compaction deleted that a delayed create writes again: it is
//! counted, never folded.

use crate::violation::{Checker, Violation};
use broker_core::cluster::catalog::{Catalog, Folded};
use broker_core::cluster::entry::{self, EntryKind};
use broker_core::cluster::keys::{parse_journal_key, parse_segment_key};
use broker_core::cluster::memstore::MemStore;
use broker_core::cluster::segment;
use broker_core::cluster::store::{StoreOp, StoreOutput};
use broker_core::{Time, TopicId};
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
pub type Segments = BTreeMap<u64, Vec<Vec<u8>>>;

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

impl SimStore {
    /// Carries out `op` at `now`, judging what it changes.
    pub fn apply(&mut self, now: Time, op: &StoreOp, out: &mut Vec<Violation>) -> StoreOutput {
        let mut flag = |checker, detail| out.push(Violation { checker, at: now, detail });
        if let StoreOp::Delete { key } = op {
            if self.foreign.contains(key) {
                flag(Checker::NoPrematureRemoval, format!("{key}, a key outside the layout, deleted"));
            }
        }
        if let StoreOp::Delete { key } = op {
            if let Some((topic, _, _)) = parse_segment_key(key) {
                let tombstoned = self.lives.get(&topic).is_some_and(|l| l.deleted.is_some());
                if self.objects.get(key).is_some() && !tombstoned {
                    flag(Checker::NoPrematureRemoval, format!("segment {key} deleted while {topic} is not deleted"));
                }
            }
        }
        let output = self.objects.apply(op);
        let StoreOp::Create { key, bytes } = op else { return output };
        if output == StoreOutput::Exists {
            self.lost_races += 1;
            return output;
        }
        if let Some(seq) = parse_journal_key(key) {
            self.landed(now, seq, bytes, &mut flag);
        } else if let Some((topic, partition, base)) = parse_segment_key(key) {
            match segment::decode(topic, partition, base, bytes) {
                // A segment created after its incarnation's tombstone landed is an
                // orphan, written by a node that had not folded the tombstone yet: no
                // fence lets it be acknowledged or served, so it is not recorded, and
                // anything shown from it is flagged. Until the tombstone lands, the
                // incarnation's segments are all there, so each must start where the
                // last one ends.
                Ok(_) if self.lives.get(&topic).is_some_and(|l| l.deleted.is_some()) => {}
                Ok(seg) => {
                    let part = self.segments.entry((topic, partition)).or_default();
                    let end = part.iter().next_back().map_or(0, |(b, r)| b + r.len() as u64);
                    if base != end {
                        flag(
                            Checker::AckedOffsetsServed,
                            format!("segment {key} created where the partition ends at {end}: offsets overlap or skip"),
                        );
                    }
                    part.insert(base, seg.records.into_iter().map(|r| r.value).collect());
                }
                Err(e) => flag(Checker::AckedOffsetsServed, format!("segment {key} created undecodable: {e}")),
            }
        }
        output
    }

    fn landed(&mut self, now: Time, seq: u64, bytes: &[u8], flag: &mut impl FnMut(Checker, String)) {
        let entry = match entry::decode(seq, bytes) {
            Ok(e) => e,
            Err(e) => {
                return flag(Checker::OneLiveIncarnation, format!("journal entry {seq} written undecodable: {e}"))
            }
        };
        let p = self.truth.position();
        if seq <= p {
            // A create delayed past the compaction that deleted its key: readers check
            // against the snapshots before they fold an entry below one (rule C).
            self.stale_landings += 1;
            return;
        }
        if seq != p + 1 {
            return flag(Checker::OneLiveIncarnation, format!("journal entry {seq} landed after entry {p}"));
        }
        let folded = self.truth.fold(&entry);
        if let EntryKind::Removed { topic } = &entry.kind {
            if let Some(life) = self.lives.get_mut(topic) {
                life.completions += 1;
                if life.completions > 1 {
                    flag(Checker::OneCompletion, format!("journal entry {seq}: a second Removed of {topic}"));
                    return;
                }
            }
        }
        if let Folded::Ignored(why) = folded {
            return flag(Checker::OneLiveIncarnation, format!("journal entry {seq} contradicts the journal: {why}"));
        }
        match entry.kind {
            EntryKind::Create { name, partitions, .. } => {
                self.lives.insert(TopicId(seq), Life { name, partitions, created: now, deleted: None, completions: 0 });
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

    /// Creates `key`, a key outside the layout, as another program might.
    pub fn plant_foreign(&mut self, key: String) {
        self.objects.apply(&StoreOp::Create { key: key.clone(), bytes: b"not the protocol's".to_vec() });
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
        values.get((offset - base) as usize).map(Vec::as_slice)
    }

    /// The end of a partition: one past the last offset ever written.
    pub fn end(&self, topic: TopicId, partition: u32) -> u64 {
        self.segments.get(&(topic, partition)).and_then(|p| p.iter().next_back()).map_or(0, |(b, r)| b + r.len() as u64)
    }
}
