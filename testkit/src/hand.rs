//! The hold-back harness: a broker and a storage executor with everything in between
//! in the test's hands. Storage operations wait until the test completes them (with
//! the executor, or with a result of its choosing); time passes only when it says.

use broker_core::{
    Broker, BrokerError, Command, Config, Effect, Executor, FileSystem, HaltReason, LogId, MemFs, Notice, OpId,
    OpResult, Reply, RequestId, StorageOp, Time,
};
use std::collections::BTreeMap;

/// A broker, an executor and everything in between, driven one completion at a time.
pub struct Hand<F: FileSystem = MemFs> {
    /// The broker under test.
    pub broker: Broker,
    /// The executor that carries out the operations the test completes.
    pub exec: Executor<F>,
    /// The virtual time every input is given.
    pub now: Time,
    /// Issued storage operations not yet completed.
    pub pending: BTreeMap<OpId, StorageOp>,
    /// Completed operations, for duplicate completions.
    pub done: BTreeMap<OpId, StorageOp>,
    /// Replies received and not yet taken.
    pub replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    /// Every reply ever received, in order (a request must be answered at most once).
    pub answered: Vec<RequestId>,
    /// Halt effects received.
    pub halts: Vec<HaltReason>,
    /// Notices received.
    pub notices: Vec<Notice>,
    /// Every effect, in the order the broker emitted it.
    pub trace: Vec<Effect>,
    next_request: u64,
}

impl Hand<MemFs> {
    /// A broker over `fs`, recovered and serving (every operation completed, no timer fired).
    pub fn start(config: Config, fs: MemFs) -> Hand<MemFs> {
        Hand::start_on(config, fs)
    }
}

impl<F: FileSystem> Hand<F> {
    /// A broker over `fs`, nothing completed yet.
    pub fn new(config: Config, fs: F) -> Hand<F> {
        Hand::new_at(config, fs, Time::ZERO)
    }

    /// A broker over `fs` started at `now`, nothing completed yet.
    pub fn new_at(config: Config, fs: F, now: Time) -> Hand<F> {
        let mut exec = Executor::new(fs);
        exec.set_read_only(config.read_only);
        let mut h = Hand {
            broker: Broker::start(config, now),
            exec,
            now,
            pending: BTreeMap::new(),
            done: BTreeMap::new(),
            replies: BTreeMap::new(),
            answered: Vec::new(),
            halts: Vec::new(),
            notices: Vec::new(),
            trace: Vec::new(),
            next_request: 1,
        };
        h.collect();
        h
    }

    /// A broker over `fs`, recovered (every operation completed, no timer fired).
    pub fn start_on(config: Config, fs: F) -> Hand<F> {
        let mut h = Hand::new(config, fs);
        h.run();
        h
    }

    /// Takes every queued effect from the broker.
    pub fn collect(&mut self) {
        while let Some(e) = self.broker.poll_effect() {
            self.trace.push(e.clone());
            match e {
                Effect::Storage { id, op } => {
                    assert!(
                        !self.pending.contains_key(&id) && !self.done.contains_key(&id),
                        "op id {} issued twice",
                        id.0
                    );
                    self.pending.insert(id, op);
                }
                Effect::Reply { request, reply } => {
                    self.answered.push(request);
                    self.replies.insert(request, reply);
                }
                Effect::Notice(notice) => self.notices.push(notice),
                Effect::Halt(reason) => self.halts.push(reason),
            }
        }
    }

    /// Sends a command; returns its request id.
    pub fn submit(&mut self, command: Command) -> RequestId {
        self.submit_with(command, |_| {})
    }

    /// Sends a command, first telling `before` the request id it will carry (a test's
    /// model notes the request before any reply can come out).
    pub fn submit_with(&mut self, command: Command, before: impl FnOnce(RequestId)) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        before(request);
        self.broker.handle_command(self.now, request, command);
        self.collect();
        request
    }

    /// Sends a command and runs every operation to completion (no timers); returns the reply.
    #[track_caller]
    pub fn request(&mut self, command: Command) -> Result<Reply, BrokerError> {
        let r = self.submit(command);
        self.run();
        self.take_reply(r).expect("the command was answered")
    }

    /// Sends a command and returns its reply if it came at once, completing nothing.
    pub fn ask(&mut self, command: Command) -> Option<Result<Reply, BrokerError>> {
        let r = self.submit(command);
        self.take_reply(r)
    }

    /// The reply to `request`, if it came.
    pub fn take_reply(&mut self, request: RequestId) -> Option<Result<Reply, BrokerError>> {
        self.replies.remove(&request)
    }

    /// Carries out pending operation `id` with the executor and feeds its result back.
    pub fn complete(&mut self, id: OpId) {
        let op = self.pending.remove(&id).expect("the operation is pending");
        let result = self.exec.execute(&op);
        self.done.insert(id, op);
        self.broker.handle_completion(self.now, id, result);
        self.collect();
    }

    /// Feeds `result` for operation `id` without carrying it out (it need not be pending).
    pub fn complete_with(&mut self, id: OpId, result: OpResult) {
        if let Some(op) = self.pending.remove(&id) {
            self.done.insert(id, op);
        }
        self.broker.handle_completion(self.now, id, result);
        self.collect();
    }

    /// Pending operations matching `pred`, oldest first.
    pub fn pending_where(&self, pred: impl Fn(&StorageOp) -> bool) -> Vec<OpId> {
        self.pending.iter().filter(|(_, op)| pred(op)).map(|(id, _)| *id).collect()
    }

    /// The single oldest pending operation matching `pred`.
    #[track_caller]
    pub fn first_pending(&self, pred: impl Fn(&StorageOp) -> bool) -> OpId {
        *self.pending_where(pred).first().expect("a matching operation is pending")
    }

    /// Completes pending operations, oldest first, except those `hold` keeps back,
    /// until none is left to complete.
    pub fn run_holding(&mut self, hold: impl Fn(&StorageOp) -> bool) {
        while let Some(id) = self.pending_where(|op| !hold(op)).first().copied() {
            self.complete(id);
        }
    }

    /// Completes every pending operation (and those they lead to), firing no timer.
    pub fn run(&mut self) {
        self.run_holding(|_| false);
    }

    /// Moves the clock to the broker's next deadline and lets the time pass, completing
    /// nothing. False if no timer is armed.
    pub fn fire_next_timer_only(&mut self) -> bool {
        let Some(at) = self.broker.poll_timeout() else { return false };
        self.now = self.now.max(at);
        self.broker.handle_timeout(self.now);
        self.collect();
        true
    }

    /// Moves the clock to the earliest armed timer, fires it and runs. False if none is armed.
    pub fn fire_next_timer(&mut self) -> bool {
        let fired = self.fire_next_timer_only();
        self.run();
        fired
    }

    /// Runs and fires timers until nothing is left (at most `max` timers).
    pub fn settle(&mut self, max: usize) {
        self.run();
        for _ in 0..max {
            if !self.fire_next_timer() {
                break;
            }
        }
    }

    /// The effects traced since `from` (an index into `trace`).
    pub fn trace_since(&self, from: usize) -> &[Effect] {
        &self.trace[from..]
    }

    /// Storage operations in the trace since `from` that match `pred`.
    pub fn ops_since(&self, from: usize, pred: impl Fn(&StorageOp) -> bool) -> Vec<StorageOp> {
        self.trace[from..]
            .iter()
            .filter_map(|e| match e {
                Effect::Storage { op, .. } if pred(op) => Some(op.clone()),
                _ => None,
            })
            .collect()
    }

    /// The logs the broker's live topics own, in order: what should be on disk once
    /// every deletion is done.
    pub fn live_logs(&self) -> Vec<LogId> {
        let topics = self.broker.live_topics();
        let mut logs: Vec<LogId> = topics
            .iter()
            .flat_map(|t| (0..t.partitions).map(move |partition| LogId { topic: t.id, partition }))
            .collect();
        logs.sort();
        logs
    }

    /// A crash, then a new broker over the same storage at the same time, nothing
    /// completed yet. Request ids continue from the old broker's, so no two requests of
    /// the two lives share one.
    pub fn restart(self, config: Config) -> Hand<F> {
        let (now, next_request) = (self.now, self.next_request);
        let mut h = Hand::new_at(config, self.crash(), now);
        h.next_request = next_request;
        h
    }

    /// Drops the broker (a crash) and hands back the storage.
    pub fn crash(self) -> F {
        self.exec.into_fs()
    }
}

/// Whether `op` is a `RemoveLog`.
pub fn is_remove(op: &StorageOp) -> bool {
    matches!(op, StorageOp::RemoveLog { .. })
}

/// Whether `op` is a journal operation.
pub fn is_journal(op: &StorageOp) -> bool {
    matches!(op, StorageOp::AppendJournal { .. } | StorageOp::SyncJournal | StorageOp::ReplaceJournal { .. })
}
