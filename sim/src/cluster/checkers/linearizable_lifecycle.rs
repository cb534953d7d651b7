//! **linearizable-lifecycle**: every reply against the real-time order of invocations,
//! replies and the instants journal entries landed, judged once the run is over.
//!
//! An incarnation is live from the instant its `Create` landed in the store until the
//! instant its tombstone did. A reply that shows an incarnation (a create, describe,
//! list, produce or fetch) must overlap its life: invoked before the tombstone landed,
//! answered after the create did. A reply that says a name is absent must come from a
//! call that no life of the name covers entirely. A fetch must show every record
//! acknowledged before it was invoked. So no command invoked after a delete's
//! acknowledgement (which comes after its tombstone landed) observes the deleted
//! incarnation, and none invoked after a create's acknowledgement misses it.
//!
//! An out-of-range fetch is judged like the high watermark of a fetched one, against
//! some life of the name that overlaps the call; a partition not found must be past the
//! partition count of such a life. A delete is never acknowledged for one incarnation
//! while another was live all along.

use super::judged::Judged;
use crate::cluster::history::History;
use crate::cluster::store::Life;
use crate::violation::Checker;
use broker_core::{Reply, TopicDescription, TopicId};
use std::collections::BTreeMap;

/// Per partition, acknowledged produces: (when answered, the end they reached).
pub type Acked = BTreeMap<(TopicId, u32), Vec<(broker_core::Time, u64)>>;

/// Every acknowledged produce of the history, by partition.
pub fn acked(history: &History) -> Acked {
    let mut acked: Acked = BTreeMap::new();
    for call in history.calls.values() {
        if let Some((at, Ok(Reply::Produced { topic, positions }))) = &call.answer {
            for p in positions {
                acked.entry((*topic, p.partition)).or_default().push((*at, p.offset + 1));
            }
        }
    }
    acked
}

/// The highest end acknowledged for a partition before the call was invoked.
fn acked_before(j: &Judged, acked: &Acked, topic: TopicId, partition: u32) -> Option<u64> {
    let before = acked.get(&(topic, partition)).into_iter().flatten();
    before.filter(|(at, _)| *at < j.from).map(|(_, end)| *end).max()
}

/// Shows `topic`, the journal's incarnation `life`: it must be live during the call.
pub fn shown_live(j: &mut Judged, topic: TopicId, life: &Life) -> bool {
    if life.overlaps(j.from, j.to) {
        return true;
    }
    let (created, deleted) = (life.created, life.deleted);
    j.flag(Checker::LinearizableLifecycle, format!("shows {topic}, live from {created} to {deleted:?} only"));
    false
}

/// Says `name` is absent: no life of it may cover the whole call.
pub fn absent(j: &mut Judged, name: &str) {
    let (from, to) = (j.from, j.to);
    if let Some((id, l)) = j.store.lives_of(name).find(|(_, l)| l.created < from && l.deleted.is_none_or(|d| d > to)) {
        let (created, deleted) = (l.created, l.deleted);
        j.flag(
            Checker::LinearizableLifecycle,
            format!("says {name:?} is absent while {id} was live, from {created} to {deleted:?}"),
        );
    }
}

/// Says `partition` of `name` does not exist, for partition `asked`, as `partitions`
/// are all it has: it must be the one asked, and some life of the name overlapping the
/// call must have that many.
pub fn partition_not_found(j: &mut Judged, name: &str, asked: u32, partition: u32, partitions: u32) {
    if asked != partition {
        j.flag(
            Checker::LinearizableLifecycle,
            format!("answered partition {partition} not found, for partition {asked}"),
        );
    }
    let (from, to) = (j.from, j.to);
    let fits = |l: &Life| l.overlaps(from, to) && l.partitions == partitions && partition >= partitions;
    if !j.store.lives_of(name).any(|(_, l)| fits(l)) {
        let lives: Vec<String> = j
            .store
            .lives_of(name)
            .filter(|(_, l)| l.overlaps(from, to))
            .map(|(id, l)| format!("{id} with {}", l.partitions))
            .collect();
        j.flag(
            Checker::LinearizableLifecycle,
            format!(
                "says partition {partition} is past the {partitions} of {name:?}, whose lives during the call were \
                 [{}]",
                lives.join(", ")
            ),
        );
    }
}

/// Answers offset `answered` out of range, for offset `asked`: it must be the one asked.
pub fn out_of_range_as_asked(j: &mut Judged, answered: u64, asked: u64) {
    if answered != asked {
        j.flag(Checker::LinearizableLifecycle, format!("answered offset {answered} out of range, for {asked}"));
    }
}

/// Says `offset` of `partition` of `name` is past the end, `hw` (below the offset):
/// judged like a fetched high watermark, against some life of the name overlapping the
/// call.
pub fn out_of_range(j: &mut Judged, name: &str, partition: u32, offset: u64, hw: u64, acked: &Acked) {
    let (from, to) = (j.from, j.to);
    let mut why = Vec::new();
    for (id, l) in j.store.lives_of(name).filter(|(_, l)| l.overlaps(from, to)) {
        let end = j.store.end(id, partition);
        match acked_before(j, acked, id, partition) {
            _ if partition >= l.partitions => why.push(format!("{id} has {} partitions", l.partitions)),
            _ if hw > end => why.push(format!("{id} held {end} records there")),
            Some(acked) if hw < acked => {
                why.push(format!("{id} had offsets up to {acked} acknowledged before the call"))
            }
            _ => return,
        }
    }
    if why.is_empty() {
        why.push(format!("no life of {name:?} overlaps the call"));
    }
    j.flag(
        Checker::LinearizableLifecycle,
        format!("answered {offset} out of range, high watermark {hw}, but {}", why.join("; ")),
    );
}

/// Acknowledges the create of `topic`, the journal's incarnation `life`: its entry
/// must have landed during the call.
pub fn created(j: &mut Judged, topic: TopicId, life: &Life) {
    let at = life.created;
    if at < j.from || at > j.to {
        j.flag(Checker::LinearizableLifecycle, format!("created {topic}, which landed at {at}"));
    }
}

/// Refuses a create of `name` as existing: some life of it must overlap the call.
pub fn exists(j: &mut Judged, name: &str) {
    let (from, to) = (j.from, j.to);
    if !j.store.lives_of(name).any(|(_, l)| l.overlaps(from, to)) {
        j.flag(Checker::LinearizableLifecycle, format!("refused as existing while {name:?} was absent"));
    }
}

/// Acknowledges the delete of `topic`, as `name`: its tombstone must have landed by the
/// answer, and no other incarnation of the name may have been live all along.
pub fn delete_accepted(j: &mut Judged, name: &str, topic: TopicId) {
    match j.life(topic, name).and_then(|l| l.deleted) {
        Some(at) if at <= j.to => {}
        deleted => j.flag(
            Checker::LinearizableLifecycle,
            format!("acknowledged the delete of {topic}, whose tombstone landed at {deleted:?}"),
        ),
    }
    // At its linearization point the delete tombstoned the incarnation live then, or
    // found none live: never while another was live all along.
    let (from, to) = (j.from, j.to);
    if let Some((id, l)) =
        j.store.lives_of(name).find(|(id, l)| *id != topic && l.created < from && l.deleted.is_none_or(|d| d > to))
    {
        let (created, deleted) = (l.created, l.deleted);
        j.flag(
            Checker::LinearizableLifecycle,
            format!("acknowledged the delete of {topic} while {id} was live all along, from {created} to {deleted:?}"),
        );
    }
}

/// A describe or list shows `t`, of the journal's incarnation `life`: with the
/// partitions it was created with, and a high watermark for each.
pub fn partitions_as_created(j: &mut Judged, t: &TopicDescription, life: &Life) -> bool {
    if t.partitions == life.partitions && t.high_watermarks.len() == life.partitions as usize {
        return true;
    }
    let (n, shown) = (life.partitions, t.high_watermarks.len());
    j.flag(
        Checker::LinearizableLifecycle,
        format!("shows {} with {} partitions and {shown} high watermarks, created with {n}", t.id, t.partitions),
    );
    false
}

/// A list shows `topics`: every incarnation live all along the call must be among them.
pub fn lists_all(j: &mut Judged, topics: &[TopicDescription]) {
    let (from, to) = (j.from, j.to);
    let missing: Vec<TopicId> = j
        .store
        .lives
        .iter()
        .filter(|(id, l)| l.created < from && l.deleted.is_none_or(|d| d > to) && !topics.iter().any(|t| t.id == **id))
        .map(|(id, _)| *id)
        .collect();
    for id in missing {
        j.flag(Checker::LinearizableLifecycle, format!("lists no {id}, live all along"));
    }
}

/// A fetch of `partition` of `topic` answered with high watermark `hw`: at least the
/// end of every produce acknowledged before it was invoked.
pub fn fetch_sees_acked(j: &mut Judged, topic: TopicId, partition: u32, hw: u64, acked: &Acked) {
    if let Some(end) = acked_before(j, acked, topic, partition) {
        if hw < end {
            j.flag(
                Checker::LinearizableLifecycle,
                format!("high watermark {hw}, while offsets up to {end} were acknowledged before it"),
            );
        }
    }
}

/// A describe shows `partition` of `topic` with high watermark `hw`: at least the end of
/// every produce acknowledged before it was invoked (a list may show less: it reports
/// the ends its node has learned).
pub fn describe_sees_acked(j: &mut Judged, topic: TopicId, partition: u32, hw: u64, acked: &Acked) {
    if let Some(end) = acked_before(j, acked, topic, partition) {
        if hw < end {
            j.flag(
                Checker::LinearizableLifecycle,
                format!(
                    "describes {topic}/{partition} with high watermark {hw}, while offsets up to {end} were \
                     acknowledged before the call"
                ),
            );
        }
    }
}
