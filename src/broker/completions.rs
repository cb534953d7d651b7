//! Storage completions and timers: each result is checked against what was asked.

use super::{Broker, JournalWaiter, PendingOp, Phase, TimerPurpose};
use crate::command::Reply;
use crate::effect::{Effect, OpOutput, OpResult, StorageOp};
use crate::error::{BrokerError, HaltReason, StorageError};
use crate::ids::{LogId, OpId, TopicId};
use crate::journal::JournalRecord;
use crate::notice::{Notice, Operation};

impl Broker {
    pub(super) fn completion(&mut self, op: OpId, pending: PendingOp, result: OpResult) {
        if let Err(StorageError::DirSyncFailed(detail)) = &result {
            // Whatever the operation, the directory entry it changed may or may not be
            // durable; retrying the fsync could succeed and prove nothing (fsyncgate).
            return self.halt(HaltReason::DirectorySyncFailed(detail.clone()));
        }
        match pending {
            PendingOp::ReadJournal => match result {
                Ok(OpOutput::Journal(image)) => self.journal_read(image),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "a journal image")),
                Err(e) => self.retry_recovery_read(TimerPurpose::RetryReadJournal, e),
            },
            PendingOp::JournalWrite { backs_up } => match result {
                Ok(output @ (OpOutput::Done | OpOutput::BackedUp(_))) => {
                    if backs_up {
                        self.journal_backed_up(output);
                    }
                    if self.journal.op_done() {
                        self.journal_durable();
                    }
                }
                Ok(_) => self.halt(HaltReason::wrong_output(op, "done")),
                Err(e) => self.halt(HaltReason::JournalWriteFailed(e)),
            },
            PendingOp::ListLogs => match result {
                Ok(OpOutput::Logs(logs)) => self.logs_listed(logs),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "a log list")),
                Err(e) => self.retry_recovery_read(TimerPurpose::RetryListLogs, e),
            },
            PendingOp::OpenLog(log) => match result {
                Ok(OpOutput::Opened { next_offset, damaged, tail_cut }) => {
                    self.log_opened(log, Ok((next_offset, damaged, tail_cut)))
                }
                Ok(_) => self.halt(HaltReason::wrong_output(op, "an opened log")),
                Err(e) => self.log_opened(log, Err(e)),
            },
            PendingOp::CreateLog(log) => match result {
                Ok(OpOutput::Done) => self.log_created(log),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "done")),
                Err(e) => self.create_failed(log, e),
            },
            PendingOp::SyncLog { log, end } if result.is_err() && planted!(self.config, RetryFailedFsync) => {
                self.op(StorageOp::SyncLog { log }, PendingOp::SyncLog { log, end });
            }
            PendingOp::Append { log, end } | PendingOp::SyncLog { log, end } => match result {
                Ok(OpOutput::Done) => self.write_done(log, end),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "done")),
                Err(error) => self.halt(HaltReason::LogWriteFailed { log, error }),
            },
            PendingOp::Read { request, log, offset, count, high_watermark } => {
                self.io_finished(log);
                let reply = match result {
                    Ok(OpOutput::Records(records)) => {
                        let dense =
                            records.iter().enumerate().all(|(i, r)| offset.checked_add(i as u64) == Some(r.offset));
                        if records.is_empty() || records.len() > count as usize || !dense {
                            Err(BrokerError::Storage(format!(
                                "read of {log} from offset {offset} returned {} records, not a dense run of up to {count}",
                                records.len()
                            )))
                        } else {
                            Ok(Reply::Fetched { topic: log.topic, records, high_watermark })
                        }
                    }
                    Ok(_) => Err(BrokerError::Storage(format!("read of {log} returned something other than records"))),
                    Err(StorageError::Corrupt { position, record_offset, record_end, detail, .. }) => {
                        let at = record_offset.unwrap_or(offset);
                        // The extent the runtime reports, kept past the offset and within
                        // the high watermark: a reader that skips the damage resumes at `end`.
                        let least = at.saturating_add(1);
                        let mut end = record_end.unwrap_or(least).clamp(least, high_watermark.max(least));
                        if planted!(self.config, CorruptExtentToHighWatermark) {
                            end = high_watermark.max(least);
                        }
                        let detail = format!("{detail} (byte {position})");
                        self.notice(Notice::Corruption { log, from: at, to: end, detail: detail.clone() });
                        Err(BrokerError::CorruptRecord { log: log.file_name(), offset: at, end, detail })
                    }
                    Err(e) => Err(BrokerError::Storage(e.to_string())),
                };
                self.reply(request, reply);
            }
            PendingOp::RemoveLog(log) => match result {
                Ok(OpOutput::Done) => self.log_removed(log),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "done")),
                Err(e) => self.removal_failed(log, e),
            },
            PendingOp::RemoveStray(log) => match result {
                Ok(OpOutput::Done) => self.stray_removal_done(log, Ok(())),
                Ok(_) => self.halt(HaltReason::wrong_output(op, "done")),
                Err(e) => self.stray_removal_done(log, Err(e)),
            },
        }
    }

    pub(super) fn timer(&mut self, purpose: TimerPurpose) {
        match purpose {
            TimerPurpose::Grace(id) => self.grace_over(id),
            TimerPurpose::RetryRemove(log) => self.retry_removal(log),
            TimerPurpose::RetryCreate(log) => self.retry_create(log),
            TimerPurpose::RetryOpen(log) => self.open(log),
            TimerPurpose::RetryStray(log) => {
                self.strays.insert(log);
            }
            TimerPurpose::RetryReadJournal => {
                self.op(StorageOp::ReadJournal, PendingOp::ReadJournal);
            }
            TimerPurpose::RetryListLogs => {
                self.op(StorageOp::ListLogs, PendingOp::ListLogs);
            }
            TimerPurpose::JournalEnds => {
                self.ends_timer_armed = false;
                match self.config.durability {
                    // The start's journal work comes first.
                    crate::Durability::LogSync { journal_ends_ms } if self.phase != Phase::Serving => {
                        self.journal_ends_within(journal_ends_ms)
                    }
                    _ => self.journal_acked_ends(None),
                }
            }
        }
    }

    /// Arms a retry of a recovery read (journal or log list), with exponential backoff.
    fn retry_recovery_read(&mut self, purpose: TimerPurpose, error: StorageError) {
        let delay = self.config.backoff_ms(self.journal_retries);
        self.journal_retries += 1;
        self.retrying(purpose, error, self.journal_retries, delay);
        self.timer_in(delay, purpose);
    }

    /// Arms a retry of a background operation on `log`, with exponential backoff.
    pub(super) fn retry_later(&mut self, log: LogId, purpose: TimerPurpose, error: StorageError) {
        let attempt = self.retries.entry(log).or_insert(0);
        let delay = self.config.backoff_ms(*attempt);
        *attempt += 1;
        let failures = *attempt;
        self.retrying(purpose, error, failures, delay);
        self.timer_in(delay, purpose);
    }

    /// Tells the operator that the operation behind `purpose` failed and waits for a retry.
    fn retrying(&mut self, purpose: TimerPurpose, error: StorageError, failures: u32, retry_in_ms: u64) {
        let operation = match purpose {
            TimerPurpose::RetryReadJournal => Operation::ReadJournal,
            TimerPurpose::RetryListLogs => Operation::ListLogs,
            TimerPurpose::RetryOpen(log) => Operation::OpenLog(log),
            TimerPurpose::RetryCreate(log) => Operation::CreateLog(log),
            TimerPurpose::RetryRemove(log) => Operation::RemoveLog(log),
            TimerPurpose::RetryStray(log) => Operation::RemoveStray(log),
            TimerPurpose::Grace(_) | TimerPurpose::JournalEnds => return,
        };
        self.notice(Notice::Retrying { operation, error, failures, retry_in_ms });
    }

    /// The journal rewrite that keeps the old journal completed: report what was wrong
    /// with the old one, naming the copy.
    fn journal_backed_up(&mut self, output: OpOutput) {
        let copy = match output {
            OpOutput::BackedUp(file) => Some(file),
            _ => None,
        };
        let damage = self.recovery.as_mut().map(|r| std::mem::take(&mut r.journal_damage)).unwrap_or_default();
        for mut n in damage {
            if let Notice::TornJournalTail { backup, .. } | Notice::JournalCopyRepaired { backup, .. } = &mut n {
                backup.clone_from(&copy);
            }
            self.notice(n);
        }
    }

    /// One storage operation on `log` finished; a deletion may now proceed.
    pub(super) fn io_finished(&mut self, log: LogId) {
        let Some(id) = self.owner_of(log) else { return };
        if let Some(p) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) {
            p.inflight = p.inflight.saturating_sub(1);
        }
    }

    /// An append or sync of a produce completed: once a write's records are synced (in
    /// offset order), journal its end; it is acknowledged once that record is durable.
    fn write_done(&mut self, log: LogId, end: u64) {
        self.io_finished(log);
        let Some(id) = self.owner_of(log) else { return };
        let Some(part) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) else {
            return;
        };
        if let Some(w) = part.writes.iter_mut().find(|w| w.end == end) {
            w.ops_left = w.ops_left.saturating_sub(1);
        }
        let ack_anyway = planted!(self.config, AckProduceOfDeletedTopic);
        let Some(topic) = self.topics.get_mut(&id) else { return };
        let deleting = topic.deletion.is_some() && !ack_anyway;
        let Some(part) = topic.partitions.get_mut(log.partition as usize) else { return };
        let mut synced_end = None;
        let mut producers = Vec::new();
        while part.writes.front().is_some_and(|w| w.ops_left == 0) {
            let Some(mut w) = part.writes.pop_front() else { break };
            synced_end = Some(w.end);
            producers.extend(w.producer.take());
            part.journaling.push_back(w);
        }
        let Some(end) = synced_end else { return };
        if deleting {
            // Its topic is deleted: the records will never be served, so no end is journaled.
            return self.ends_durable(id, log.partition, end);
        }
        // Idempotent producers' batches go in the same group commit as the end, ahead
        // of it: durable once their produce is acknowledged (under log-sync, within one
        // journal commit of it).
        for rec in producers {
            if let JournalRecord::ProducerAppended { log, batch, records, first_offset } = &rec {
                self.journaled_producers.append(*log, *batch, *records, *first_offset);
            }
            self.journal.push(rec);
        }
        let Some(part) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) else {
            return;
        };
        if let crate::Durability::LogSync { journal_ends_ms } = self.config.durability {
            // Acknowledged now; the journal learns the end within the interval.
            self.ends_durable(id, log.partition, end);
            return self.journal_ends_within(journal_ends_ms);
        }
        part.journaled_end = part.journaled_end.max(end);
        // Named by the incarnation (the storage log's name may differ under a planted bug).
        let log = LogId { topic: id, partition: log.partition };
        self.wait_for_journal(
            JournalRecord::LogEnd { log, end },
            JournalWaiter::LogEnd { topic: id, partition: log.partition, end },
        );
    }

    /// Arms the timer that journals the acknowledged ends, unless it is armed.
    pub(super) fn journal_ends_within(&mut self, ms: u64) {
        if !self.ends_timer_armed {
            self.ends_timer_armed = true;
            self.timer_in(ms, TimerPurpose::JournalEnds);
        }
    }

    /// Queues a `LogEnd` record for every partition (of topic `only`, if given) whose
    /// acknowledged end the journal does not hold yet: only under
    /// [`crate::Durability::LogSync`] does one lag. Nothing waits for the records.
    pub(super) fn journal_acked_ends(&mut self, only: Option<TopicId>) {
        let mut ends = Vec::new();
        let mut lagging = |id: TopicId, topic: &mut super::state::Topic| {
            for (p, part) in topic.partitions.iter_mut().enumerate() {
                if part.high_watermark > part.journaled_end {
                    part.journaled_end = part.high_watermark;
                    let log = LogId { topic: id, partition: p as u32 };
                    ends.push(JournalRecord::LogEnd { log, end: part.journaled_end });
                }
            }
        };
        match only {
            // A delete looks at its own topic only, whatever the number of topics.
            Some(id) => {
                if let Some(topic) = self.topics.get_mut(&id) {
                    lagging(id, topic);
                }
            }
            None => {
                for (&id, topic) in self.topics.iter_mut() {
                    lagging(id, topic);
                }
            }
        }
        for rec in ends {
            self.journal.push(rec);
        }
    }

    /// The journal holds `end` as the acknowledged end of a partition: acknowledge its
    /// writes up to there, in offset order. A write whose topic was deleted meanwhile is
    /// answered that the topic is gone: no produce is acknowledged after its topic's
    /// deletion could have been.
    pub(super) fn ends_durable(&mut self, id: TopicId, partition: u32, end: u64) {
        self.acknowledge_writes(id, partition, end);
        if !self.waiting_retries.is_empty() {
            self.answer_retries(id, partition);
        }
    }

    /// Acknowledges the writes of a partition up to `end` (see [`Broker::ends_durable`]).
    fn acknowledge_writes(&mut self, id: TopicId, partition: u32, end: u64) {
        // The partition is looked up again after each reply, which needs the whole broker.
        loop {
            let ack_anyway = planted!(self.config, AckProduceOfDeletedTopic);
            let Some(topic) = self.topics.get_mut(&id) else { return };
            let deleted = topic.deletion.is_some() && !ack_anyway;
            let part = topic.partitions.get_mut(partition as usize);
            let Some(part) = part.filter(|p| p.journaling.front().is_some_and(|w| w.end <= end)) else { return };
            let Some(w) = part.journaling.pop_front() else { return };
            if deleted {
                let name = topic.meta.name.clone();
                self.reply(w.request, Err(BrokerError::TopicNotFound { name }));
                continue;
            }
            part.high_watermark = part.high_watermark.max(w.end);
            let done = match self.requests.get_mut(&w.request) {
                Some(Some(p)) => {
                    p.partitions_left -= 1;
                    p.partitions_left == 0
                }
                _ => false,
            };
            if done {
                if let Some(Some(p)) = self.requests.remove(&w.request) {
                    let reply = Ok(Reply::Produced { topic: p.topic, positions: p.positions });
                    self.effects.push_back(Effect::Reply { request: w.request, reply });
                }
            }
        }
    }
}
