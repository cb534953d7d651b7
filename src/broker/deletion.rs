//! Physical deletion, after the tombstone is durable: wait out the grace delay, remove
//! each log once its own I/O has drained (bounded concurrency, retries with backoff),
//! journal progress, and journal completion.

use super::state::DeletionStage;
use super::{Broker, PendingOp, TimerPurpose};
use crate::command::Reply;
use crate::effect::StorageOp;
use crate::ids::{LogId, TopicId};
use crate::journal::JournalRecord;

impl Broker {
    /// The tombstone of `id` is durable: start the physical step, and acknowledge once
    /// no storage operation of the incarnation is outstanding, so that every produce,
    /// fetch and create it admitted is answered before `DeleteAccepted` (removal waits
    /// for the same drain, log by log).
    pub(super) fn tombstone_durable(&mut self, id: TopicId) {
        let Some(d) = self.topics.get_mut(&id).and_then(|t| t.deletion.as_mut()) else { return };
        if d.stage != DeletionStage::AwaitTombstone {
            return;
        }
        self.draining.insert(id);
        self.ack_drained_deletions();
        if planted!(self.config, FinishedAtTombstone) {
            let name = self.topics.get(&id).map(|t| t.meta.name.clone()).unwrap_or_default();
            self.notice(crate::notice::Notice::DeletionFinished { topic: id, name });
        }
        self.start_physical(id);
    }

    /// Acknowledges the deletions whose incarnation has drained since its tombstone
    /// became durable.
    pub(super) fn ack_drained_deletions(&mut self) {
        let at_once = planted!(self.config, AckDeleteBeforeIoDrains);
        let drained: Vec<TopicId> = self
            .draining
            .iter()
            .copied()
            .filter(|id| at_once || self.topics.get(id).is_none_or(|t| t.partitions.iter().all(|p| p.inflight == 0)))
            .collect();
        for id in drained {
            self.acknowledge_deletion(id);
        }
    }

    /// Answers every delete of `id` waiting for its acknowledgement.
    fn acknowledge_deletion(&mut self, id: TopicId) {
        self.draining.remove(&id);
        let Some(d) = self.topics.get_mut(&id).and_then(|t| t.deletion.as_mut()) else { return };
        for request in std::mem::take(&mut d.waiters) {
            self.reply(request, Ok(Reply::DeleteAccepted { topic: id }));
        }
    }

    /// Begins physical removal of a topic whose tombstone is durable.
    pub(super) fn start_physical(&mut self, id: TopicId) {
        let now = self.now;
        let Some(t) = self.topics.get_mut(&id) else { return };
        let grace = t.meta.settings.deletion_grace_ms;
        let Some(d) = t.deletion.as_mut() else { return };
        // What is left of the grace delay that began at the delete (before any restart);
        // never more than the whole delay, should the clock have gone back.
        let left_us = d.remove_after.as_micros().saturating_sub(now.as_micros());
        let left_ms = left_us.div_ceil(1000).min(grace);
        d.removal_due = Some(now.plus_millis(left_ms));
        if left_ms > 0 {
            d.stage = DeletionStage::Grace;
            self.timer_in(left_ms, TimerPurpose::Grace(id));
        } else {
            d.stage = DeletionStage::Removing;
            self.removing.insert(id);
        }
    }

    pub(super) fn grace_over(&mut self, id: TopicId) {
        if let Some(d) = self.topics.get_mut(&id).and_then(|t| t.deletion.as_mut()) {
            d.stage = DeletionStage::Removing;
            self.removing.insert(id);
        }
    }

    /// Issues log removals up to the concurrency bound and completes finished deletions.
    pub(super) fn pump_removals(&mut self) {
        let ignore_reads = planted!(self.config, RemoveBeforeReadsFinish);
        let mut completed = Vec::new();
        let mut issue = Vec::new();
        let bound = self.config.removal_concurrency + usize::from(planted!(self.config, RemovalConcurrencyOffByOne));
        while self.removals_in_flight < bound {
            let Some(log) = self.strays.pop_first() else { break };
            self.removals_in_flight += 1;
            self.op(StorageOp::RemoveLog { log }, PendingOp::RemoveStray(log));
        }
        for &id in &self.removing {
            let Some(t) = self.topics.get(&id) else { continue };
            let Some(d) = t.deletion.as_ref() else { continue };
            for (p, part) in t.partitions.iter().enumerate() {
                let p = p as u32;
                if self.removals_in_flight + issue.len() >= bound {
                    break;
                }
                let idle = part.inflight == 0 || ignore_reads;
                if idle && !d.removed.contains(&p) && !d.removing.contains(&p) && !d.backing_off.contains(&p) {
                    issue.push((id, p, self.log_of(t, p)));
                }
            }
            if d.removed.len() == t.partitions.len() && d.removing.is_empty() {
                completed.push(id);
            }
        }
        for (id, p, log) in issue {
            if let Some(d) = self.topics.get_mut(&id).and_then(|t| t.deletion.as_mut()) {
                d.removing.insert(p);
            }
            self.removals_in_flight += 1;
            self.op(StorageOp::RemoveLog { log }, PendingOp::RemoveLog(log));
        }
        for id in completed {
            // Not yet acknowledged only if removal outran the drain (it never should).
            if self.draining.contains(&id) {
                self.acknowledge_deletion(id);
            }
            self.removing.remove(&id);
            let mut finished_name = None;
            if let Some(t) = self.topics.remove(&id) {
                finished_name = Some(t.meta.name.clone());
                // Older incarnations of the name may still be being deleted.
                if let Some(ids) = self.deleting_names.get_mut(&t.meta.name) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.deleting_names.remove(&t.meta.name);
                    }
                }
            }
            self.journal.push(JournalRecord::DeletionCompleted { id });
            if let Some(name) = finished_name {
                self.notice(crate::notice::Notice::DeletionFinished { topic: id, name });
            }
            if self.completed.len() == super::COMPLETED_KEPT {
                self.completed.pop_front();
            }
            self.completed.push_back(id);
            self.completed_count += 1;
        }
    }

    /// The topic being deleted that owns `log`, with the partition.
    fn deleting_owner(&mut self, log: LogId) -> Option<&mut super::state::Deletion> {
        let id = self.owner_of(log)?;
        self.topics.get_mut(&id)?.deletion.as_mut()
    }

    pub(super) fn log_removed(&mut self, log: LogId) {
        self.removals_in_flight = self.removals_in_flight.saturating_sub(1);
        self.retries.remove(&log);
        let id = self.owner_of(log);
        let Some(d) = self.deleting_owner(log) else { return };
        d.removing.remove(&log.partition);
        if d.removed.insert(log.partition) {
            if let Some(id) = id {
                self.journal.push(JournalRecord::PartitionRemoved { id, partition: log.partition });
            }
        }
    }

    pub(super) fn removal_failed(&mut self, log: LogId, error: crate::error::StorageError) {
        self.removals_in_flight = self.removals_in_flight.saturating_sub(1);
        if let Some(d) = self.deleting_owner(log) {
            d.removing.remove(&log.partition);
            d.backing_off.insert(log.partition);
        }
        self.retry_later(log, TimerPurpose::RetryRemove(log), error);
    }

    /// A stray log's removal finished: its slot is free; a failure is retried later.
    pub(super) fn stray_removal_done(&mut self, log: LogId, result: Result<(), crate::error::StorageError>) {
        self.removals_in_flight = self.removals_in_flight.saturating_sub(1);
        match result {
            Ok(()) => {
                self.retries.remove(&log);
                self.notice(crate::notice::Notice::StrayLogRemoved { log });
            }
            Err(e) => self.retry_later(log, TimerPurpose::RetryStray(log), e),
        }
    }

    pub(super) fn retry_removal(&mut self, log: LogId) {
        if let Some(d) = self.deleting_owner(log) {
            d.backing_off.remove(&log.partition);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Command, Config, MemFs, SyncDriver, Time, TopicSettings};

    /// After the clock is set back, the broker waits at most the whole grace delay, and
    /// `removal_due` (from which runtimes say what is left) says so, for a writing
    /// start and for a read-only one alike; the durable deadline itself does not move.
    #[test]
    fn removal_is_due_within_the_whole_grace_delay_after_the_clock_went_back() {
        let grace_ms = 10_000;
        let at = |s: u64| Time::from_millis(s * 1000);
        let mut d = SyncDriver::start_at(Config::default(), MemFs::new(), at(1_000));
        let settings = TopicSettings { deletion_grace_ms: grace_ms };
        d.request(Command::CreateTopic { name: "a".into(), partitions: 1, settings }).unwrap();
        d.request(Command::DeleteTopic { name: "a".into() }).unwrap();
        let before = d.broker().pending_deletions()[0].clone();
        assert_eq!((before.remove_after, before.removal_due), (at(1_010), at(1_010)));

        // The clock is set back by 900 s before the next start.
        let disk = d.crash();
        let d = SyncDriver::start_at(Config::default(), disk.clone(), at(100));
        let after = d.broker().pending_deletions()[0].clone();
        assert_eq!(after.remove_after, at(1_010), "the durable deadline is kept");
        assert_eq!(after.removal_due, at(110), "but removal waits at most the whole delay");

        let read_only = Config { read_only: true, ..Config::default() };
        let d = SyncDriver::start_at(read_only, disk, at(100));
        assert_eq!(d.broker().pending_deletions()[0].removal_due, at(110));
    }
}
