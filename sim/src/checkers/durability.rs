//! **durability**: every record acknowledged to a client, or served to one below the
//! high watermark, stays readable with its offset and bytes for the rest of the run;
//! injected bit rot is the only excuse, and then only for a record reported corrupt by
//! its own offset (or a log reported corrupt whole), never for a silent loss, a short
//! high watermark or another record in its place. An incarnation with acknowledged
//! records vanishes only if a delete of it may have happened (see
//! [`Model::may_be_deleted`]).
//!
//! During the run, the checker reads each part of a reply as the model folds it in
//! ([`Seen`]): a fetched record must be the one acknowledged or first served at its
//! position, a position once served must be acknowledged with the same record, and an
//! acknowledged record is reported corrupt only where rot struck its log. At the end of
//! a run whose broker settled and serves, [`at_end`] reads back every partition of
//! every live incarnation.

use crate::model::{label, Model, RecordBytes, Seen};
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Command, LogId, Reply, TopicDescription, TopicId};
use std::collections::{BTreeMap, BTreeSet};

/// Judges one part of a reply, against the model as folded up to it. `rotted` tells the
/// logs that suffered injected bit rot.
pub(super) fn saw(flags: &mut Flags, model: &Model, seen: &Seen<'_>, rotted: &dyn Fn(LogId) -> bool) {
    match seen {
        Seen::Reply {
            command: Command::Fetch { .. },
            reply: Err(BrokerError::CorruptRecord { log, offset, .. }),
            ..
        } => {
            let Some(log_id) = LogId::parse_file_name(log) else { return };
            if !rotted(log_id) && model.records.acked.contains_key(&(log_id.topic, log_id.partition, *offset)) {
                let detail =
                    format!("acknowledged record {log_id}@{offset} reported corrupt without injected corruption");
                flags.flag(Checker::Durability, detail);
            }
        }
        Seen::Produced { at: (topic, partition, offset), record, .. } => {
            if let Some(served) = model.records.served.get(&(*topic, *partition, *offset)).filter(|s| *s != *record) {
                let detail = format!(
                    "{topic}/p{partition}@{offset} was served as {}, then acknowledged for {}",
                    label(&served.value),
                    label(&record.value)
                );
                flags.flag(Checker::Durability, detail);
            }
        }
        Seen::Fetched { at, record: got, .. } => {
            let (topic, partition, offset) = *at;
            if let Some(want) = model.records.acked.get(at) {
                if want != *got {
                    let detail = format!(
                        "{topic}/p{partition}@{offset} reads {}, acknowledged {}",
                        label(&got.value),
                        label(&want.value)
                    );
                    flags.flag(Checker::Durability, detail);
                }
            } else if let Some(served) = model.records.served.get(at) {
                if served != *got {
                    let detail = format!(
                        "{topic}/p{partition}@{offset} was served as {}, later reads {}",
                        label(&served.value),
                        label(&got.value)
                    );
                    flags.flag(Checker::Durability, detail);
                }
            }
        }
        _ => {}
    }
}

/// What the read-back at the end of a run needs from the runner.
pub trait ReadBack {
    /// The reference model.
    fn model(&self) -> &Model;
    /// The names of the files injected bit rot struck.
    fn rotted_files(&self) -> BTreeSet<String>;
    /// Runs a command to completion at once, through the checkers and the model as any
    /// request; `None` if it got no reply.
    fn fetch(&mut self, command: Command) -> Option<Result<Reply, BrokerError>>;
}

/// What breaks the invariant at the end of a run whose broker serves these live
/// incarnations: reads every partition of each back, up to its high watermark.
pub fn at_end(run: &mut dyn ReadBack, live: &[TopicDescription]) -> Vec<String> {
    let mut found = Vec::new();
    let model = run.model();
    let acked_ids: BTreeSet<TopicId> = model.records.acked.keys().map(|k| k.0).collect();
    let live_ids: BTreeSet<TopicId> = live.iter().map(|t| t.id).collect();
    for id in acked_ids.difference(&live_ids) {
        if !model.may_be_deleted(*id) {
            found.push(format!("{id} has acknowledged records but vanished without a delete"));
        }
    }
    let rotted = run.rotted_files();
    for t in live {
        for p in 0..t.partitions {
            let log = LogId { topic: t.id, partition: p };
            let hw = t.high_watermarks.get(p as usize).copied().unwrap_or(0);
            let is_rotted = rotted.contains(&log.file_name());
            read_back(run, &mut found, t, log, hw, is_rotted);
        }
    }
    found
}

/// Reads one partition back from its first offset to its high watermark `hw`.
fn read_back(
    run: &mut dyn ReadBack,
    found: &mut Vec<String>,
    t: &TopicDescription,
    log: LogId,
    hw: u64,
    is_rotted: bool,
) {
    // What was served (below the high watermark) counts as committed too.
    let model = run.model();
    let range = (t.id, log.partition, 0)..=(t.id, log.partition, u64::MAX);
    let served = model.records.served.range(range.clone()).map(|(k, v)| (k.2, v.clone()));
    let mut acked: Vec<(u64, RecordBytes)> =
        model.records.acked.range(range).map(|(k, v)| (k.2, v.clone())).chain(served).collect();
    acked.sort_by_key(|(o, _)| *o);
    if let Some((last, _)) = acked.last() {
        if *last >= hw {
            found.push(format!("{log}: acknowledged offset {last} is at or past the high watermark {hw}"));
        }
    }
    if let Some((first, _)) = acked.first().filter(|(o, _)| *o < t.log_start) {
        found
            .push(format!("{log}: acknowledged offset {first} is before the partition's first offset {}", t.log_start));
    }
    let mut read: BTreeMap<u64, RecordBytes> = BTreeMap::new();
    // Offsets reported corrupt, and whether the whole log was (its header rotted).
    let (mut reported, mut log_reported) = (Vec::<std::ops::Range<u64>>::new(), false);
    let mut offset = t.log_start;
    while offset < hw {
        let cmd = Command::Fetch {
            topic: t.name.clone(),
            partition: log.partition,
            offset,
            max_records: 1_000,
            max_bytes: None,
        };
        match run.fetch(cmd) {
            Some(Ok(Reply::Fetched { records, .. })) if !records.is_empty() => {
                for r in records {
                    offset = r.offset + 1;
                    read.insert(r.offset, RecordBytes { key: r.key, value: r.value });
                }
            }
            Some(Err(BrokerError::CorruptRecord { offset: bad, end, .. })) if bad >= offset && end > bad => {
                // The damage's extent is skipped in one step; its last offset must read
                // as damaged too, or the extent hid records that read.
                if end - 1 > bad {
                    let last = Command::Fetch {
                        topic: t.name.clone(),
                        partition: log.partition,
                        offset: end - 1,
                        max_records: 1,
                        max_bytes: None,
                    };
                    match run.fetch(last) {
                        Some(Err(BrokerError::CorruptRecord { offset: o, end: e, .. })) if o == end - 1 && e == end => {
                        }
                        other => found.push(format!(
                            "{log}: offsets {bad}..{end} were reported damaged, but a fetch of {} got {other:?}",
                            end - 1
                        )),
                    }
                }
                reported.push(bad..end);
                offset = end;
            }
            // A log whose header rotted cannot be opened: reported, not served.
            Some(Err(BrokerError::Storage(e))) if is_rotted && e.contains("corrupt") => {
                log_reported = true;
                break;
            }
            other => {
                found.push(format!("{log}: final fetch from {offset} (hw {hw}) got {other:?}"));
                break;
            }
        }
    }
    for (o, want) in acked {
        match read.get(&o) {
            Some(got) if *got == want => {}
            None if is_rotted && (log_reported || reported.iter().any(|r| r.contains(&o))) => {}
            got => {
                let detail =
                    format!("{log}@{o}: acknowledged {}, reads {:?}", label(&want.value), got.map(|g| label(&g.value)));
                found.push(detail);
            }
        }
    }
}
