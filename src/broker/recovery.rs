//! Recovery: replay the journal (corruption before the tail refuses to start), rewrite
//! it as a snapshot (atomic replace; a torn tail is backed up first), then open every
//! live log (creating missing ones, restoring next offsets), remove stray logs nothing
//! names, serve, and resume every pending deletion.
//!
//! Why rewrite the journal on every start: after a failed fsync, the page cache may
//! still hold journal records that never became durable, and a restarted process reads
//! them back. Nothing may act on such a record (create a log, remove one) until it is
//! durable, so recovery makes everything it read durable first.

use super::state::{Deletion, DeletionStage, Partition, Recovery, Topic};
use super::{Broker, PendingOp, Phase, TimerPurpose};
use crate::config::MAX_PARTITIONS_EVER;
use crate::effect::{DamagedRange, StorageOp, TailCut};

/// What opening a log found: its next offset, damaged acknowledged ranges, and the tail
/// cut under [`crate::Durability::LogSync`].
type Opened = (u64, Vec<DamagedRange>, Option<TailCut>);
use crate::error::{HaltReason, StorageError};
use crate::ids::{LogId, TopicId};
use crate::journal::{decode_journal, JournalRecord, MetaState, JOURNAL_FILE};
use crate::notice::Notice;
use std::collections::BTreeSet;

/// Whether a record names a topic with more partitions than any broker may create.
fn names_too_many_partitions(r: &JournalRecord) -> bool {
    match r {
        JournalRecord::TopicCreated(m) => m.partitions > MAX_PARTITIONS_EVER,
        JournalRecord::Snapshot(s) => {
            s.live.iter().any(|m| m.partitions > MAX_PARTITIONS_EVER)
                || s.deleting.iter().any(|d| d.topic.partitions > MAX_PARTITIONS_EVER)
        }
        _ => false,
    }
}

impl Broker {
    pub(super) fn begin_recovery(&mut self) {
        self.recovery = Some(Recovery::default());
        self.op(StorageOp::ReadJournal, PendingOp::ReadJournal);
    }

    pub(super) fn journal_read(&mut self, image: Option<Vec<u8>>) {
        let meta = match image {
            None => {
                self.journal = super::JournalWriter::resume(0, 0, 0);
                if !self.config.read_only {
                    self.journal.force_replace(false);
                    self.notice(Notice::NewJournal);
                }
                MetaState::default()
            }
            Some(bytes) => match decode_journal(&bytes) {
                Err(c) => {
                    return self.halt(HaltReason::CorruptJournal {
                        file: JOURNAL_FILE.to_string(),
                        offset: c.offset,
                        detail: c.detail,
                    })
                }
                // Every journal file begins with a snapshot written atomically
                // (temporary file, fsync, rename), so that record cannot be torn by a
                // crash. If not even it validates, the damage is corruption: treating
                // it as a torn tail would drop every topic and then remove their logs
                // as strays.
                // A checksum-valid record may still name an absurd partition count;
                // recovery allocates per partition, so that is refused as corruption.
                Ok(d) if d.records.iter().any(|(_, r)| names_too_many_partitions(r)) => {
                    let offset = d.records.iter().find(|(_, r)| names_too_many_partitions(r)).map_or(0, |(p, _)| *p);
                    return self.halt(HaltReason::CorruptJournal {
                        file: JOURNAL_FILE.to_string(),
                        offset,
                        detail: format!("a topic names more than {MAX_PARTITIONS_EVER} partitions"),
                    });
                }
                Ok(d) if d.records.is_empty() => {
                    let detail = d.torn_tail.map_or_else(|| "no record".to_string(), |(_, why)| why);
                    return self.halt(HaltReason::CorruptJournal {
                        file: JOURNAL_FILE.to_string(),
                        offset: crate::journal::JOURNAL_FIRST_FRAME as u64,
                        detail: format!(
                            "the snapshot that begins the file is damaged ({detail}); it was written \
                             atomically, so this is not a torn write"
                        ),
                    });
                }
                Ok(d) => {
                    self.journal = super::JournalWriter::resume(d.epoch, d.records.len() as u64, bytes.len() as u64);
                    // Read-only, nothing is rewritten: nothing acts on what was read either.
                    // A torn tail or a repaired copy: the old file is kept for inspection.
                    let mut damage: Vec<Notice> = d
                        .repaired
                        .iter()
                        .map(|(offset, detail)| Notice::JournalCopyRepaired {
                            offset: *offset,
                            detail: detail.clone(),
                            rewritten: !self.config.read_only,
                            backup: None,
                        })
                        .collect();
                    if let Some((offset, detail)) = &d.torn_tail {
                        damage.push(Notice::TornJournalTail {
                            offset: *offset,
                            detail: detail.clone(),
                            rewritten: !self.config.read_only,
                            backup: None,
                        });
                    }
                    if self.config.read_only {
                        damage.into_iter().for_each(|n| self.notice(n));
                    } else {
                        self.journal.force_replace(!damage.is_empty());
                        if let Some(r) = self.recovery.as_mut() {
                            r.journal_damage = damage;
                        }
                    }
                    MetaState::replay(d.records.iter().map(|(_, r)| r))
                }
            },
        };
        self.install(meta);
        if let Some(r) = self.recovery.as_mut() {
            r.replayed = true;
        }
        self.maybe_finish_recovery();
    }

    /// Once the rewritten journal is durable: open every live log and look for strays.
    fn issue_log_checks(&mut self) {
        let Some(r) = self.recovery.as_mut() else { return };
        if r.logs_issued {
            return;
        }
        r.logs_issued = true;
        let open = std::mem::take(&mut r.to_open);
        r.opening.extend(open.iter().copied());
        for log in open {
            self.open(log);
        }
        if self.config.read_only {
            // Stray logs are left alone: nothing is removed.
            if let Some(r) = self.recovery.as_mut() {
                r.listed = true;
            }
            return;
        }
        self.op(StorageOp::ListLogs, PendingOp::ListLogs);
    }

    /// Opens a live log up to its acknowledged end.
    pub(super) fn open(&mut self, log: LogId) {
        let topic = self.owner_of(log).and_then(|id| self.topics.get(&id));
        let first_offset = topic.map_or(0, |t| t.meta.offset_base);
        let acked_end =
            topic.and_then(|t| t.partitions.get(log.partition as usize)).map_or(first_offset, |p| p.journaled_end);
        let keep_whole_tail = self.keeps_whole_tails();
        self.op(StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail }, PendingOp::OpenLog(log));
    }

    /// Rebuilds topics from replayed metadata and opens every live log.
    fn install(&mut self, meta: MetaState) {
        self.next_topic_id = meta.next_topic_id;
        self.offset_floor = meta.offset_floor;
        self.offsets = meta.offsets;
        self.next_producer_id = meta.next_producer_id;
        self.journaled_producers = meta.producers;
        self.journaled_producers.bound(self.config.max_producer_states);
        self.producers = if planted!(self.config, ProducerStateNotRecovered) {
            crate::producers::ProducerStates::new(self.config.max_producer_states)
        } else {
            self.journaled_producers.clone()
        };
        let clear_deleting = planted!(self.config, ReloadClearsDeleting);
        let deleting_names: BTreeSet<String> = if planted!(self.config, RecoveryDeletesRecreatedName) {
            meta.topics.values().filter(|t| t.deleting).map(|t| t.meta.name.clone()).collect()
        } else {
            BTreeSet::new()
        };
        let mut open = Vec::new();
        for (id, mt) in meta.topics {
            let mut topic = Topic::new(mt.meta, true);
            let name = topic.meta.name.clone();
            if (mt.deleting || deleting_names.contains(&name)) && !clear_deleting {
                topic.deletion = Some(Deletion {
                    stage: DeletionStage::AwaitTombstone,
                    tombstone_seq: 0,
                    waiters: vec![],
                    removed: mt.removed,
                    removing: BTreeSet::new(),
                    backing_off: BTreeSet::new(),
                    remove_after: mt.remove_after,
                    removal_due: None,
                });
                self.deleting_names.entry(name).or_default().insert(id);
            } else {
                for p in 0..topic.meta.partitions {
                    open.push(self.log_of(&topic, p));
                    let base = topic.meta.offset_base;
                    let end = meta.ends.get(&LogId { topic: id, partition: p }).copied().unwrap_or(base).max(base);
                    if let Some(part) = topic.partitions.get_mut(p as usize) {
                        part.journaled_end = end;
                    }
                }
                for part in &mut topic.partitions {
                    part.inflight = 1;
                }
                self.live_names.insert(name, id);
            }
            self.topics.insert(id, topic);
        }
        if let Some(r) = self.recovery.as_mut() {
            r.to_open = open;
        }
    }

    pub(super) fn logs_listed(&mut self, logs: Vec<LogId>) {
        for log in logs {
            let owned = self
                .owner_of(log)
                .and_then(|id| self.topics.get(&id))
                .is_some_and(|t| log.partition < t.meta.partitions);
            if !owned {
                // Its metadata may have been lost (a torn journal tail) and its removal
                // may fail and be retried: never hand its id to a new topic.
                if self.owner_of(log).is_none() {
                    self.next_topic_id = self.next_topic_id.max(log.topic.0.saturating_add(1));
                }
                self.strays.insert(log);
            }
        }
        self.pump_removals();
        if let Some(r) = self.recovery.as_mut() {
            r.listed = true;
        }
        self.maybe_finish_recovery();
    }

    /// Partition `partition` of topic `owner`, if both exist.
    fn partition_mut(&mut self, owner: Option<TopicId>, partition: u32) -> Option<&mut Partition> {
        owner.and_then(|id| self.topics.get_mut(&id)).and_then(|t| t.partitions.get_mut(partition as usize))
    }

    /// A producer's batch the start did not keep (a damaged tail cut under log-sync, a
    /// log that cannot be read past the journal's end) is no longer its: the producers
    /// of `partition` of `owner` with a batch reaching past `end` are forgotten, and
    /// durably so, since those offsets may be handed out again.
    fn forget_producers_beyond(&mut self, owner: Option<TopicId>, partition: u32, end: u64) {
        let Some(id) = owner else { return };
        let by_incarnation = LogId { topic: id, partition };
        let forgot = self.producers.forget_beyond(by_incarnation, end)
            | self.journaled_producers.forget_beyond(by_incarnation, end);
        if forgot && !self.config.read_only {
            self.journal.force_replace(false);
        }
    }

    pub(super) fn log_opened(&mut self, log: LogId, result: Result<Opened, StorageError>) {
        let owner = self.owner_of(log);
        let first = owner.and_then(|id| self.topics.get(&id)).map_or(0, |t| t.meta.offset_base);
        let forget_hw = planted!(self.config, RecoveryForgetsHighWatermark);
        match result {
            Ok((next, damaged, tail_cut)) => {
                if let Some(cut) = tail_cut.filter(|_| !planted!(self.config, TailCutUnreported)) {
                    let TailCut { bytes, detail, .. } = cut;
                    self.notice(Notice::TailCut { log, offset: next, bytes, detail });
                }
                let part = owner
                    .and_then(|id| self.topics.get_mut(&id))
                    .and_then(|t| t.partitions.get_mut(log.partition as usize));
                let mut unjournaled = false;
                if let Some(p) = part {
                    for d in &damaged {
                        let (from, to, detail) = (d.from, d.to, d.detail.clone());
                        self.effects.push_back(crate::effect::Effect::Notice(Notice::Corruption {
                            log,
                            from,
                            to,
                            detail,
                        }));
                    }
                    p.damaged = damaged;
                    p.next_offset = next;
                    p.high_watermark = if forget_hw { first } else { next };
                    p.ready = true;
                    unjournaled = p.high_watermark > p.journaled_end;
                }
                self.forget_producers_beyond(owner, log.partition, next);
                // (A read-only start writes nothing: a writer's start journals them.)
                if unjournaled && self.keeps_whole_tails() && !self.config.read_only {
                    // Records kept past the journal's end: the journal learns the new end
                    // before the start ends.
                    self.journal_acked_ends(owner);
                }
            }
            Err(StorageError::NotFound(e)) if self.config.read_only => {
                if let Some(p) = self.partition_mut(owner, log.partition) {
                    p.failed = Some(format!("its log is missing and the data was opened read-only: {e}"));
                    p.next_offset = p.journaled_end;
                    p.high_watermark = p.journaled_end;
                }
            }
            // Missing: create it (the log stays counted as busy).
            Err(StorageError::NotFound(_)) => {
                let keep_whole_tail = self.keeps_whole_tails();
                self.op(StorageOp::CreateLog { log, first_offset: first, keep_whole_tail }, PendingOp::CreateLog(log));
                return;
            }
            Err(e @ StorageError::Corrupt { .. }) => {
                if let Some(p) = self.partition_mut(owner, log.partition) {
                    // Unreadable as a whole (say, its header rotted): every acknowledged
                    // record is reported corrupt by fetch, and the high watermark stays.
                    p.failed = Some(e.to_string());
                    p.next_offset = p.journaled_end;
                    p.high_watermark = p.journaled_end;
                    let to = p.journaled_end;
                    self.notice(Notice::Corruption { log, from: first, to, detail: e.to_string() });
                    if matches!(self.config.durability, crate::Durability::LogSync { .. }) {
                        // Records acknowledged past the journal's end cannot be counted.
                        let detail = format!("the log cannot be read: {e}");
                        self.notice(Notice::TailCut { log, offset: to, bytes: 0, detail });
                    }
                    // Nor can a producer's batch there: a retry of it would wait for
                    // an acknowledgement that never comes.
                    self.forget_producers_beyond(owner, log.partition, to);
                }
            }
            Err(e) => return self.retry_later(log, TimerPurpose::RetryOpen(log), e),
        }
        self.io_finished(log);
        if let Some(r) = self.recovery.as_mut() {
            r.opening.remove(&log);
        }
        self.maybe_finish_recovery();
    }

    /// Serves once the journal is replayed and durable, every log is listed and every
    /// live log is open.
    pub(super) fn maybe_finish_recovery(&mut self) {
        let replayed = self.recovery.as_ref().is_some_and(|r| r.replayed);
        if !replayed || !self.journal.idle() || self.phase != Phase::Recovering {
            return;
        }
        // Under log-sync, the ends of the records a start kept past the journal's end
        // are durable before anything is served: a start under another setting may
        // follow, and it keeps nothing past the journal's end.
        if self.keeps_whole_tails() && !self.journal.all_durable() {
            return;
        }
        self.issue_log_checks();
        if self.recovery.as_ref().is_some_and(|r| !r.listed || !r.opening.is_empty()) {
            return;
        }
        self.recovery = None;
        self.phase = Phase::Serving;
        if planted!(self.config, SkipResumeDeletions) || self.config.read_only {
            return;
        }
        let pending: Vec<_> = self.topics.values().filter(|t| t.deletion.is_some()).map(|t| t.meta.id).collect();
        for id in pending {
            self.start_physical(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::journal::{decode_journal, encode_compacted, MetaState, JOURNAL_FILE, JOURNAL_FIRST_FRAME};
    use crate::{Command, Config, HaltReason, MemFs, Phase, SyncDriver, TopicSettings};

    fn disk_with_one_topic() -> MemFs {
        let mut d = SyncDriver::start(Config::default(), MemFs::new());
        let create = Command::CreateTopic { name: "a".into(), partitions: 2, settings: TopicSettings::default() };
        d.request(create).unwrap();
        d.crash()
    }

    #[test]
    fn a_damaged_snapshot_is_corruption_not_a_torn_tail() {
        let mut disk = disk_with_one_topic();
        // Compact by hand: the journal becomes a single snapshot record, as compaction
        // writes it. It serves; then one flipped byte in it must refuse to start.
        let decoded = decode_journal(disk.file(JOURNAL_FILE).unwrap()).unwrap();
        let meta = MetaState::replay(decoded.records.iter().map(|(_, r)| r));
        let compacted = encode_compacted(decoded.epoch + 1, meta.snapshot());
        *disk.file_mut(JOURNAL_FILE).unwrap() = compacted;
        assert_eq!(SyncDriver::start(Config::default(), disk.clone()).broker().live_topics().len(), 1);
        // One flipped byte in one copy: the other copy serves, and the journal is
        // rewritten whole.
        let j = disk.file_mut(JOURNAL_FILE).unwrap();
        let last = j.len() - 1;
        j[last] ^= 0x40;
        let d = SyncDriver::start(Config::default(), disk.clone());
        assert_eq!(d.broker().live_topics().len(), 1);
        assert!(decode_journal(d.fs().file(JOURNAL_FILE).unwrap()).unwrap().repaired.is_empty());
        // Both copies damaged: corruption.
        disk.file_mut(JOURNAL_FILE).unwrap()[JOURNAL_FIRST_FRAME + 12] ^= 0x40;
        let d = SyncDriver::start(Config::default(), disk);
        assert_eq!(d.phase(), Phase::Halted);
        let Some(HaltReason::CorruptJournal { offset, detail, .. }) = d.halted() else { panic!("{:?}", d.halted()) };
        assert_eq!(*offset, JOURNAL_FIRST_FRAME as u64);
        assert!(detail.contains("snapshot"), "{detail}");
        // Nothing was removed: the logs are still there for an operator to rescue.
        assert_eq!(d.fs().names().iter().filter(|n| n.ends_with(".log")).count(), 2);
    }
}
