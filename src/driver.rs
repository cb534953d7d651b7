//! A synchronous driver: the broker plus the storage executor over any [`FileSystem`],
//! each storage operation carried out the moment it is issued, timers fired by a
//! virtual clock. The simplest way to embed the core, and the harness of the tests.

use crate::broker::{Broker, Phase};
use crate::command::{Command, Reply};
use crate::config::Config;
use crate::effect::Effect;
use crate::error::{BrokerError, HaltReason};
use crate::executor::Executor;
use crate::fs::FileSystem;
use crate::ids::RequestId;
use crate::notice::Notice;
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};

/// Runs a [`Broker`] over an [`Executor`] in one thread, deterministically: each storage
/// operation is carried out over the [`FileSystem`] the moment it is issued, and timers
/// are fired by a virtual clock. The simplest way to embed the core, and the harness of
/// the tests.
#[derive(Debug)]
pub struct SyncDriver<F> {
    broker: Broker,
    executor: Executor<F>,
    now: Time,
    replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    next_request: u64,
    halted: Option<HaltReason>,
    notices: Vec<Notice>,
    trace: Option<Vec<Effect>>,
    backlog: VecDeque<Effect>,
}

impl<F: FileSystem> SyncDriver<F> {
    /// Starts a broker over `fs` and runs its recovery until idle, firing no timer: it
    /// serves, unless it halted or a failed step waits for its retry timer.
    pub fn start(config: Config, fs: F) -> SyncDriver<F> {
        Self::start_at(config, fs, Time::ZERO)
    }

    /// Like [`SyncDriver::start`], with the virtual clock starting at `now`.
    pub fn start_at(config: Config, fs: F, now: Time) -> SyncDriver<F> {
        let mut executor = Executor::new(fs);
        executor.set_read_only(config.read_only);
        #[cfg(feature = "planted-bugs")]
        executor.plant(&config.bugs);
        let mut d = SyncDriver {
            broker: Broker::start(config, now),
            executor,
            now,
            replies: BTreeMap::new(),
            next_request: 1,
            halted: None,
            notices: Vec::new(),
            trace: None,
            backlog: VecDeque::new(),
        };
        d.run_until_idle();
        d
    }

    /// Sends a command, runs until it is answered (firing timers if it must wait for
    /// them), and returns the reply.
    pub fn request(&mut self, command: Command) -> Result<Reply, BrokerError> {
        let request = self.submit(command);
        loop {
            if let Some(reply) = self.replies.remove(&request) {
                return reply;
            }
            if !self.fire_next_timer() {
                return Err(BrokerError::Unavailable("the command was never answered".into()));
            }
        }
    }

    /// Sends a command and runs until idle without firing timers; the reply, if
    /// any, is collected by [`SyncDriver::take_reply`].
    pub fn submit(&mut self, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.broker.handle_command(self.now, request, command);
        self.run_until_idle();
        request
    }

    /// The reply to `request`, if it has come.
    pub fn take_reply(&mut self, request: RequestId) -> Option<Result<Reply, BrokerError>> {
        self.replies.remove(&request)
    }

    /// Executes every queued effect (storage operations complete at once) until none is left.
    pub fn run_until_idle(&mut self) {
        loop {
            while let Some(e) = self.broker.poll_effect() {
                self.backlog.push_back(e);
            }
            let Some(effect) = self.backlog.pop_front() else { return };
            if let Some(t) = self.trace.as_mut() {
                t.push(effect.clone());
            }
            match effect {
                Effect::Storage { id, op } => {
                    let result = self.executor.execute(&op);
                    self.broker.handle_completion(self.now, id, result);
                }
                Effect::Reply { request, reply } => {
                    self.replies.insert(request, reply);
                }
                Effect::Notice(notice) => self.notices.push(notice),
                Effect::Halt(reason) => {
                    self.halted = Some(reason);
                }
            }
        }
    }

    /// Moves the clock to the broker's next deadline and lets the time pass. False if no
    /// timer is armed.
    pub fn fire_next_timer(&mut self) -> bool {
        let Some(at) = self.broker.poll_timeout() else { return false };
        self.now = self.now.max(at);
        self.broker.handle_timeout(self.now);
        self.run_until_idle();
        true
    }

    /// Moves the clock forward by `ms`, firing every timer that falls due.
    pub fn advance_millis(&mut self, ms: u64) {
        let until = self.now.plus_millis(ms);
        while self.broker.poll_timeout().is_some_and(|at| at <= until) {
            self.fire_next_timer();
        }
        self.now = until;
    }

    /// Fires timers until none is armed (or `max_timers` have fired): background work,
    /// such as deletions, runs to completion.
    pub fn settle(&mut self, max_timers: usize) {
        for _ in 0..max_timers {
            if !self.fire_next_timer() {
                break;
            }
        }
    }

    /// Drops the broker and executor, as a crash would, and hands back the storage.
    pub fn crash(self) -> F {
        self.executor.into_fs()
    }

    /// Starts recording every effect, for traces.
    pub fn record_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// The effects recorded since the last call.
    pub fn take_trace(&mut self) -> Vec<Effect> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The notices the broker gave since the last call, oldest first.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Why the broker halted, if it did.
    pub fn halted(&self) -> Option<&HaltReason> {
        self.halted.as_ref()
    }

    /// Whether the broker serves commands.
    pub fn phase(&self) -> Phase {
        self.broker.phase()
    }

    /// Changes when produces are acknowledged ([`Broker::set_durability`]), then runs
    /// until idle.
    pub fn set_durability(&mut self, durability: crate::Durability) {
        self.broker.set_durability(durability);
        self.run_until_idle();
    }

    /// The broker, to inspect (topics, pending deletions, phase).
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// The file system the executor writes to.
    pub fn fs(&self) -> &F {
        self.executor.fs()
    }

    /// The storage, mutably (tests damage it on purpose).
    pub fn fs_mut(&mut self) -> &mut F {
        self.executor.fs_mut()
    }

    /// The virtual clock, moved only by [`SyncDriver::fire_next_timer`] and
    /// [`SyncDriver::advance_millis`].
    pub fn now(&self) -> Time {
        self.now
    }
}
