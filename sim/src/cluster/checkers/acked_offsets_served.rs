//! **acked-offsets-served**, in cluster runs: each segment starts where its partition's
//! record ends and decodes; every acknowledged position holds its record; a fetch
//! serves consecutive offsets below its high watermark; and no high watermark a fetch,
//! an out-of-range answer, a describe or a list shows is past every record written.
//! A describe's or list's is judged only while its incarnation's tombstone has not
//! landed (a node may have learned the end of an orphan by then), and never from below
//! (a node shows the ends it learned itself, which may lag behind other nodes').

use super::judged::Judged;
use crate::cluster::store::{Fact, Life};
use crate::model::ValueId;
use crate::violation::{Checker, Flags};
use broker_core::{RecordPosition, TopicDescription, TopicId};

/// The store carried out an operation that did `fact`.
pub fn store_did(flags: &mut Flags, fact: &Fact) {
    match fact {
        Fact::SegmentCreated { key, base, end } if base != end => flags.flag(
            Checker::AckedOffsetsServed,
            format!("segment {key} created where the partition ends at {end}: offsets overlap or skip"),
        ),
        Fact::SegmentUndecodable { key, error } => {
            flags.flag(Checker::AckedOffsetsServed, format!("segment {key} created undecodable: {error}"))
        }
        _ => {}
    }
}

/// A produce of values `values` acknowledged at `positions` of `topic`: each holds its
/// record (a value of the same id: label, length and CRC32C).
pub fn produced(j: &mut Judged, topic: TopicId, positions: &[RecordPosition], values: &[ValueId]) {
    for (p, id) in positions.iter().zip(values) {
        if j.store.value_at(topic, p.partition, p.offset).map(ValueId::of).as_ref() != Some(id) {
            j.flag(
                Checker::AckedOffsetsServed,
                format!("acknowledged at {topic}/{}@{}, which holds another record", p.partition, p.offset),
            );
        }
    }
}

/// A fetch served a record at `offset` where `expected` was due, below high watermark
/// `hw` or not. Returns whether it was in order (if not, the rest of the fetch is not
/// judged).
pub fn served_in_order(j: &mut Judged, expected: u64, offset: u64, hw: u64) -> bool {
    if offset != expected || offset >= hw {
        j.flag(
            Checker::AckedOffsetsServed,
            format!("served offset {offset} where {expected} was due (high watermark {hw})"),
        );
        return false;
    }
    true
}

/// A fetch of `partition` of `topic` from `offset` served `served` records (or none)
/// with high watermark `hw`: none only at the high watermark, which is past no record
/// written.
pub fn fetched_watermark(j: &mut Judged, topic: TopicId, partition: u32, offset: u64, served: bool, hw: u64) {
    if !served && offset < hw {
        j.flag(Checker::AckedOffsetsServed, format!("served nothing at {offset} below the high watermark {hw}"));
    }
    if hw > j.store.end(topic, partition) {
        j.flag(Checker::AckedOffsetsServed, format!("high watermark {hw} past every record written"));
    }
}

/// A fetch at `offset` answered out of range with high watermark `hw`: the offset must
/// be past it. Returns whether it is (then the lifecycle judges the high watermark).
pub fn out_of_range_past_watermark(j: &mut Judged, offset: u64, hw: u64) -> bool {
    if offset <= hw {
        j.flag(
            Checker::AckedOffsetsServed,
            format!("answered offset {offset} out of range below its high watermark {hw}"),
        );
        return false;
    }
    true
}

/// A describe or list shows `t`, of the journal's incarnation `life`, with a high
/// watermark for each partition: none past what the store held, while the tombstone
/// has not landed.
pub fn watermarks(j: &mut Judged, t: &TopicDescription, life: &Life) {
    let tombstoned = life.deleted.is_some_and(|d| d <= j.to);
    for (p, hw) in (0..).zip(&t.high_watermarks) {
        let end = j.store.end(t.id, p);
        if *hw > end && !tombstoned {
            j.flag(
                Checker::AckedOffsetsServed,
                format!("shows {}/{p} with high watermark {hw}, past every record written ({end})", t.id),
            );
        }
    }
}
