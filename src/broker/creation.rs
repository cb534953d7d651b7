//! Topic creation: the intent is journaled first, then every log is created, then the
//! client hears `Created`. Failed log creations are retried with backoff.

use super::{Broker, PendingOp, TimerPurpose};
use crate::command::Reply;
use crate::effect::StorageOp;
use crate::ids::{LogId, TopicId};

impl Broker {
    /// The `TopicCreated` record of `id` is durable: create its logs.
    pub(super) fn create_logs(&mut self, id: TopicId) {
        let Some(t) = self.topics.get(&id) else { return };
        if t.deletion.is_some() {
            // Deleted before its logs existed: the create still happened.
            return self.settle_create(id, u32::MAX);
        }
        let logs: Vec<LogId> = (0..t.meta.partitions).map(|p| self.log_of(t, p)).collect();
        for log in logs {
            self.issue_create(id, log);
        }
    }

    fn issue_create(&mut self, id: TopicId, log: LogId) {
        if let Some(p) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) {
            p.inflight += 1;
        }
        let first_offset = self.topics.get(&id).map_or(0, |t| t.meta.offset_base);
        let keep_whole_tail = self.keeps_whole_tails();
        self.op(StorageOp::CreateLog { log, first_offset, keep_whole_tail }, PendingOp::CreateLog(log));
    }

    /// `count` more logs of `id` are created (or need not be): reply once all are.
    fn settle_create(&mut self, id: TopicId, count: u32) {
        let Some(t) = self.topics.get_mut(&id) else { return };
        let Some((request, left)) = t.create_waiter.take() else { return };
        let left = left.saturating_sub(count);
        if left > 0 {
            t.create_waiter = Some((request, left));
            return;
        }
        t.created = true;
        self.reply(request, Ok(Reply::Created { topic: id }));
    }

    pub(super) fn log_created(&mut self, log: LogId) {
        self.io_finished(log);
        self.retries.remove(&log);
        let Some(id) = self.owner_of(log) else { return };
        if let Some(p) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) {
            p.ready = true;
        }
        if self.recovery.as_mut().is_some_and(|r| r.opening.remove(&log)) {
            self.maybe_finish_recovery();
        } else {
            self.settle_create(id, 1);
        }
    }

    pub(super) fn retry_create(&mut self, log: LogId) {
        let Some(id) = self.owner_of(log) else { return };
        let deleting = self.topics.get(&id).is_some_and(|t| t.deletion.is_some());
        if let Some(p) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(log.partition as usize)) {
            p.inflight = p.inflight.saturating_sub(1);
        }
        if deleting {
            self.settle_create(id, 1);
        } else {
            self.issue_create(id, log);
        }
    }

    /// A failed log creation: try again later (the log stays counted as busy).
    pub(super) fn create_failed(&mut self, log: LogId, error: crate::error::StorageError) {
        self.retry_later(log, TimerPurpose::RetryCreate(log), error);
    }
}
