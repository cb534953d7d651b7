//! **no-orphans**: at every crash point, every log that survived on the durable disk
//! belongs to a topic the durable journal names (live or pending deletion), with a
//! partition it has; after faults stop and the run settles, the logs on disk are
//! exactly those of the live topics.

use crate::disk::SimDisk;
use broker_core::{decode_journal, LogId, MetaState, TopicDescription, JOURNAL_FILE};
use std::collections::BTreeSet;

/// What breaks the invariant on the durable disk right after a crash.
pub fn at_crash(disk: &SimDisk) -> Vec<String> {
    let names = disk.durable_names();
    let logs: Vec<LogId> = names.iter().filter_map(|n| LogId::parse_file_name(n)).collect();
    if logs.is_empty() {
        return Vec::new();
    }
    let meta = match disk.durable_file(JOURNAL_FILE).as_deref().map(decode_journal) {
        None => MetaState::default(),
        Some(Ok(d)) => MetaState::replay(d.records.iter().map(|(_, r)| r)),
        Some(Err(c)) => return vec![format!("durable journal is corrupt at byte {}: {}", c.offset, c.detail)],
    };
    logs.into_iter()
        .filter(|log| meta.topics.get(&log.topic).is_none_or(|t| log.partition >= t.meta.partitions))
        .map(|log| format!("log {log} survives a crash but the durable journal names no such topic"))
        .collect()
}

/// What breaks the invariant once the run has settled with these live topics.
pub fn after_settling(live: &[TopicDescription], disk: &SimDisk) -> Vec<String> {
    let expected: BTreeSet<String> = live
        .iter()
        .flat_map(|t| (0..t.partitions).map(move |p| LogId { topic: t.id, partition: p }.file_name()))
        .collect();
    let on_disk: BTreeSet<String> =
        disk.durable_names().into_iter().filter(|n| LogId::parse_file_name(n).is_some()).collect();
    let extra = on_disk
        .difference(&expected)
        .map(|extra| format!("after settling, {extra} remains on disk but no live topic owns it"));
    let missing =
        expected.difference(&on_disk).map(|missing| format!("after settling, live log {missing} is missing from disk"));
    extra.chain(missing).collect()
}
