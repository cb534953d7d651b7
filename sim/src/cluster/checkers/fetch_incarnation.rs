//! **fetch-incarnation**, in cluster runs: a fetched record is one that was written
//! there, at its offset of its partition of the incarnation the reply names, before
//! that incarnation's tombstone landed (a segment created after it is an orphan, left
//! out of the store's record).

use super::judged::Judged;
use crate::violation::Checker;
use broker_core::{StoredRecord, TopicId};

/// A fetch of `partition` of `topic` served `record`.
pub fn written_there(j: &mut Judged, topic: TopicId, partition: u32, record: &StoredRecord) {
    if j.store.value_at(topic, partition, record.offset) != Some(&record.value[..]) {
        j.flag(
            Checker::FetchIncarnation,
            format!("served at {topic}/{partition}@{} a record never written there", record.offset),
        );
    }
}
