//! [`Driver`]: the broker core on a real disk, with the real clock.
//!
//! The driver owns a [`Broker`], the data directory (locked for its lifetime, see
//! [`crate::datadir`]) and a pool of storage workers. One thread (the caller's) runs the
//! broker: it drains effects, hands storage operations to the workers, delivers
//! completions, and wakes at the broker's next deadline ([`Broker::poll_timeout`]) to
//! let the time pass. Background deletion runs whenever the caller is
//! inside the driver (`request`, `next_event`, `wait_reply`, `wait_deletion`,
//! `wait_quiescent`; all but `request` take a deadline).
//!
//! Retries: the core retries a failing storage operation for ever. The driver's
//! [`RetryPolicy`] bounds how long its waits go on meanwhile, recovery in
//! [`Driver::open`] included, and whether they report retries; [`crate::patience`]
//! holds the policy, so a caller makes one call and the driver applies it.
//! [`Driver::next_event`], the loop of a server, is never bounded.
//!
//! Halts: when the broker halts, the driver stops at once. It issues no further
//! storage operation (not even the ones the broker queued in the same batch), never
//! retries anything, and reports [`DriverEvent::Halted`]. The only way on is to drop
//! the driver and open a new one, which recovers from what is durable.

use crate::datadir::{lock_for_reading, prepare_directory, scan_directory, DirLock};
use crate::durability_file::{read_durability, write_durability};
use crate::patience::{Patience, Recovery, RetryPolicy, TICK};
use crate::pool::Pool;
use crate::realfs::RealFs;
use crate::report::{DriverError, Notice};
use broker_core::{
    Broker, BrokerError, Command, Config, DeletionStatus, Durability, Effect, HaltReason, OpId, OpResult, Phase, Reply,
    RequestId, StorageOp, Time, TopicDescription,
};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How a [`Driver`] runs.
#[derive(Clone, Debug)]
pub struct DriverOptions {
    /// The broker's limits and tuning.
    pub config: Config,
    /// How many log worker threads run storage operations (plus one journal worker).
    pub log_workers: usize,
    /// Give up opening the directory after this many failures while opening: every
    /// operation the core retries counts (reading the journal, listing, opening or
    /// creating a log, removing a stray; the core retries with backoff for ever);
    /// `None`: no limit but the retry policy's timeout.
    pub recovery_attempts: Option<u32>,
    /// How long every wait of the driver, recovery included, goes on while storage keeps
    /// failing, and whether it reports retries.
    pub retry: RetryPolicy,
    /// Make this the directory's durability once the broker serves (`serve
    /// --durability`); `None` runs as the directory's `DURABILITY` file says (and
    /// `config.durability` is ignored either way: see [`crate::durability_file`]).
    pub durability: Option<Durability>,
}

/// The most records one produce may carry in broker-fs: more than the smallest Kafka
/// records (7 bytes each) fill the largest batch (1 MiB) with, so that an uncompressed
/// Kafka produce is bounded by its bytes (`MESSAGE_TOO_LARGE`, which the Java producer
/// answers by splitting the batch), never by a count no Kafka client knows of. A
/// compressed batch can hold more; past this it is refused as too large, with a message
/// to send smaller batches. It bounds what one produce holds: a core record per offset.
/// The core's default, 10,000, is what librdkafka puts in one batch by default.
pub const MAX_BATCH_RECORDS: usize = 1 << 18;

/// The core's configuration as broker-fs runs it: the core's defaults, with a produce's
/// record count at [`MAX_BATCH_RECORDS`].
pub fn default_config() -> Config {
    Config { max_batch_records: MAX_BATCH_RECORDS, ..Config::default() }
}

impl Default for DriverOptions {
    fn default() -> DriverOptions {
        DriverOptions {
            config: default_config(),
            log_workers: 4,
            recovery_attempts: Some(6),
            retry: RetryPolicy::default(),
            durability: None,
        }
    }
}

/// What [`Driver::next_event`] hands back.
#[derive(Debug)]
pub enum DriverEvent<M> {
    /// The answer to a command submitted with [`Driver::submit`].
    Reply {
        /// The id `submit` returned.
        request: RequestId,
        /// The reply, or why the command failed.
        reply: Result<Reply, BrokerError>,
    },
    /// A message sent through a [`Mailbox`].
    Message(M),
    /// The broker halted. Every later call returns this again.
    Halted(HaltReason),
}

/// Sends messages into a driver's event loop from any thread (for example, a thread
/// reading client requests), so the loop wakes for them as for storage completions.
pub struct Mailbox<M> {
    tx: Sender<Event<M>>,
}

impl<M> Clone for Mailbox<M> {
    fn clone(&self) -> Mailbox<M> {
        Mailbox { tx: self.tx.clone() }
    }
}

impl<M> Mailbox<M> {
    /// Sends `message`; false if the driver is gone.
    pub fn send(&self, message: M) -> bool {
        self.tx.send(Event::Message(message)).is_ok()
    }
}

/// The driver's inbox: storage completions and messages.
enum Event<M> {
    Completion(OpId, OpResult),
    Message(M),
}

fn completion<M>(id: OpId, result: OpResult) -> Event<M> {
    Event::Completion(id, result)
}

/// The broker on a real data directory. `M` is the type of messages other threads may
/// send into the event loop through a [`Mailbox`]; use `()` if there are none.
pub struct Driver<M = ()> {
    broker: Broker,
    dir: PathBuf,
    start: Instant,
    pool: Pool,
    events: Receiver<Event<M>>,
    sender: Sender<Event<M>>,
    ready: VecDeque<DriverEvent<M>>,
    /// Storage operations that came out with a reply, dispatched once the caller has had
    /// the chance to take the reply (see [`Driver::pump`]).
    deferred: Vec<(OpId, StorageOp)>,
    stashed: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    halted: Option<HaltReason>,
    notices: Vec<Notice>,
    next_request: u64,
    /// Recovery's failures while [`Driver::open`] recovers; `None` once it is open.
    recovery: Option<Recovery>,
    /// The waits' failures once open, under the retry policy.
    patience: Patience,
    /// Messages that arrived while [`Driver::wait_reply`] (or [`Driver::request`]) waited.
    held: VecDeque<M>,
    /// The wall-clock time at `start`: the origin of the broker's clock.
    origin: Time,
    /// The data directory's locks, held for the driver's lifetime (they go with the
    /// driver, and with the process): exclusive for a writing start, shared for a
    /// read-only one.
    _lock: DirLock,
}

impl<M: Send + 'static> Driver<M> {
    /// Opens (creating it if needed) and locks the data directory `dir`, starts the
    /// broker and runs its recovery until it serves and every stray log is removed.
    /// Pending deletions resume in the background from then on. Read-only
    /// ([`Config::read_only`]), the directory must exist and nothing is created.
    pub fn open(dir: impl AsRef<Path>, options: DriverOptions) -> Result<Driver<M>, DriverError> {
        let dir = dir.as_ref().to_path_buf();
        let read_only = options.config.read_only;
        let mut notices = Vec::new();
        let lock =
            if read_only { lock_for_reading(&dir, &mut notices)? } else { prepare_directory(&dir, &mut notices)? };
        notices.append(&mut scan_directory(&dir)?);
        // A directory last served under log-sync starts under log-sync whatever comes
        // next: only such a start keeps what the journal does not hold yet.
        let stored = read_durability(&dir)?;
        let wanted = options.durability.unwrap_or(stored);
        let mut config = options.config;
        config.durability = match (stored, wanted) {
            (Durability::LogSync { .. }, Durability::Journaled) => stored,
            _ => wanted,
        };
        let fs = RealFs::new(&dir);
        let (sender, events) = mpsc::channel();
        let pool = Pool::start(&fs, options.log_workers, read_only, sender.clone(), completion::<M>)
            .map_err(|e| DriverError::Directory { dir: dir.clone(), detail: format!("cannot start workers: {e}") })?;
        let (start, origin) = (Instant::now(), wall_clock());
        let patience = Patience::new(options.retry, &dir);
        let mut driver = Driver {
            broker: Broker::start(config, origin),
            origin,
            dir,
            start,
            pool,
            events,
            sender,
            ready: VecDeque::new(),
            deferred: Vec::new(),
            stashed: BTreeMap::new(),
            halted: None,
            notices: Vec::new(),
            next_request: 1,
            recovery: Some(Recovery::new(options.retry, options.recovery_attempts)),
            patience,
            held: VecDeque::new(),
            _lock: lock,
        };
        driver.notices.append(&mut notices);
        driver.pump();
        // Recovered means serving, with the directory listed and its strays removed.
        while (driver.broker.phase() == Phase::Recovering || driver.cleaning_up()) && driver.halted.is_none() {
            let recovery = driver.recovery.as_mut().expect("recovering");
            // Wake at the time limit at the latest, even if no retry is due before it.
            let wake = recovery.next_wait(&driver.dir)?;
            driver.turn(wake);
        }
        if let Some(reason) = driver.halted.clone() {
            return Err(driver.halt_error(reason));
        }
        driver.recovery = None;
        // Serving under log-sync, the journal holds every end the start kept: from here
        // a switch to journaled keeps every acknowledged record.
        if driver.broker.config().durability != wanted {
            driver.broker.set_durability(wanted);
            driver.pump();
        }
        if wanted != stored && !read_only {
            write_durability(&driver.dir, wanted)?;
        }
        Ok(driver)
    }

    /// A handle that other threads use to send messages into the event loop.
    pub fn mailbox(&self) -> Mailbox<M> {
        Mailbox { tx: self.sender.clone() }
    }

    /// Submits a command; its reply comes back from [`Driver::next_event`] (or
    /// [`Driver::request`] if that is what waits for it).
    pub fn submit(&mut self, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        let now = self.now();
        self.broker.handle_command(now, request, command);
        self.pump();
        request
    }

    /// Submits a command and runs the event loop until it is answered, or until the
    /// retry policy gives up.
    pub fn request(&mut self, command: Command) -> Result<Reply, DriverError> {
        let request = self.submit(command);
        loop {
            if let Some(reply) = self.wait_reply(request, None) {
                return reply;
            }
        }
    }

    /// Runs the event loop until `request` (from [`Driver::submit`]) is answered, or
    /// until `deadline` passes: `None` then, and the request stays in flight, so a later
    /// call can go on waiting. A halt answers it with an error, and so does the retry
    /// policy when it gives up.
    pub fn wait_reply(&mut self, request: RequestId, deadline: Option<Instant>) -> Option<Result<Reply, DriverError>> {
        self.patiently(deadline, |d, until| d.reply_by(request, until).transpose()).transpose()
    }

    /// [`Driver::wait_reply`] without the retry policy.
    fn reply_by(&mut self, request: RequestId, deadline: Option<Instant>) -> Option<Result<Reply, DriverError>> {
        loop {
            if let Some(reply) = self.stashed.remove(&request) {
                return Some(reply.map_err(DriverError::from));
            }
            match self.next_inner(deadline) {
                Some(DriverEvent::Reply { request: r, reply }) if r == request => {
                    return Some(reply.map_err(DriverError::from))
                }
                Some(DriverEvent::Reply { request: r, reply }) => {
                    self.stashed.insert(r, reply);
                }
                Some(DriverEvent::Halted(reason)) => return Some(Err(self.halt_error(reason))),
                Some(DriverEvent::Message(m)) => self.held.push_back(m),
                None => return None,
            }
        }
    }

    /// Runs the event loop until something is ready for the caller or `deadline`
    /// passes (`None` when it passes). Background work runs meanwhile.
    pub fn next_event(&mut self, deadline: Option<Instant>) -> Option<DriverEvent<M>> {
        if let Some(m) = self.held.pop_front() {
            return Some(DriverEvent::Message(m));
        }
        self.next_inner(deadline)
    }

    fn next_inner(&mut self, deadline: Option<Instant>) -> Option<DriverEvent<M>> {
        loop {
            if let Some(reason) = &self.halted {
                if self.ready.iter().all(|e| !matches!(e, DriverEvent::Reply { .. })) {
                    return Some(DriverEvent::Halted(reason.clone()));
                }
            }
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if !self.turn(deadline) {
                return None;
            }
        }
    }

    /// Runs until nothing is left to do: no pending deletion, no storage operation in
    /// flight, no timer armed. False if `deadline` passed first; an error if the retry
    /// policy gave up.
    pub fn wait_quiescent(&mut self, deadline: Option<Instant>) -> Result<bool, DriverError> {
        let done = self.patiently(deadline, |d, until| Ok(d.quiescent_by(until)?.then_some(())))?;
        Ok(done.is_some())
    }

    /// [`Driver::wait_quiescent`] without the retry policy.
    fn quiescent_by(&mut self, deadline: Option<Instant>) -> Result<bool, DriverError> {
        loop {
            if let Some(reason) = self.halted.clone() {
                return Err(self.halt_error(reason));
            }
            if self.is_quiescent() {
                return Ok(true);
            }
            if !self.turn(deadline) {
                return Ok(false);
            }
        }
    }

    /// Whether no deletion is pending and no storage operation or timer is outstanding.
    pub fn is_quiescent(&self) -> bool {
        self.broker.pending_deletions().is_empty()
            && self.broker.ops_in_flight() == 0
            && self.broker.poll_timeout().is_none()
    }

    /// Runs until the deletion of topic incarnation `topic` is finished and durable.
    /// False if `deadline` passed first (the deletion goes on whenever the driver runs);
    /// an error if the retry policy gave up.
    pub fn wait_deletion(
        &mut self,
        topic: broker_core::TopicId,
        deadline: Option<Instant>,
    ) -> Result<bool, DriverError> {
        let done = self.patiently(deadline, |d, until| Ok(d.deletion_by(topic, until)?.then_some(())))?;
        Ok(done.is_some())
    }

    /// [`Driver::wait_deletion`] without the retry policy.
    fn deletion_by(&mut self, topic: broker_core::TopicId, deadline: Option<Instant>) -> Result<bool, DriverError> {
        loop {
            if let Some(reason) = self.halted.clone() {
                return Err(self.halt_error(reason));
            }
            let pending = self.broker.pending_deletions().iter().any(|d| d.topic == topic);
            if !pending && self.broker.ops_in_flight() == 0 {
                return Ok(true);
            }
            if !self.turn(deadline) {
                return Ok(false);
            }
        }
    }

    /// Deletions not yet finished, with their progress.
    pub fn pending_deletions(&self) -> Vec<DeletionStatus> {
        self.broker.pending_deletions()
    }

    /// Live topics, ordered by name.
    pub fn live_topics(&self) -> Vec<TopicDescription> {
        self.broker.live_topics()
    }

    /// Everything noticed so far that an operator should hear about.
    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    /// Takes the notices gathered since the last call.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Runs `step`, one wait until the deadline it is given (`None` if not done by
    /// then), under the retry policy: if the policy watches, in [`TICK`]s, after each of
    /// which the retries since are counted and the policy may give up or report. `None`
    /// once `deadline` has passed.
    fn patiently<T>(
        &mut self,
        deadline: Option<Instant>,
        mut step: impl FnMut(&mut Self, Option<Instant>) -> Result<Option<T>, DriverError>,
    ) -> Result<Option<T>, DriverError> {
        if !self.patience.watches() {
            return step(self, deadline);
        }
        loop {
            let tick = Instant::now() + TICK;
            if let Some(done) = step(self, Some(deadline.map_or(tick, |d| d.min(tick))))? {
                return Ok(Some(done));
            }
            self.count_retries();
            self.patience.check()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// Moves the retry notices gathered since the last call into the retry policy's
    /// count, leaving the other notices, in order, for [`Driver::take_notices`].
    fn count_retries(&mut self) {
        for n in std::mem::take(&mut self.notices) {
            match n {
                Notice::Broker(broker_core::Notice::Retrying { operation, error, .. }) => {
                    self.patience.failed(operation.to_string(), error.to_string())
                }
                other => self.notices.push(other),
            }
        }
    }

    /// The broker (read-only).
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// The data directory, as given to [`Driver::open`].
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// Why the broker halted, if it did.
    pub fn halted(&self) -> Option<&HaltReason> {
        self.halted.as_ref()
    }

    /// Whether the recovery listing, or a stray removal it started, is still running.
    fn cleaning_up(&self) -> bool {
        self.broker.sweeping_strays()
    }

    /// The broker's clock now: wall-clock microseconds since the Unix epoch at the
    /// start, then advanced by the monotonic clock (so it never goes back within a
    /// process). Deadlines the core journals, such as the end of a grace delay, hold
    /// across starts.
    pub fn clock(&self) -> Time {
        self.now()
    }

    fn now(&self) -> Time {
        self.origin.plus_micros(u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn instant_of(&self, t: Time) -> Instant {
        self.start + Duration::from_micros(t.as_micros().saturating_sub(self.origin.as_micros()))
    }

    fn halt_error(&self, reason: HaltReason) -> DriverError {
        match reason {
            HaltReason::CorruptJournal { file, offset, detail } => {
                DriverError::CorruptJournal { file: self.dir.join(file), offset, detail }
            }
            other => DriverError::Halted(other),
        }
    }

    /// Drains the broker's effects: storage operations go to the workers, replies and a
    /// halt become events for the caller.
    ///
    /// Storage operations that come out together with a reply are held back until the
    /// next turn of the event loop, after the caller has taken the reply: a delete's
    /// acknowledgement then never waits behind the log removals that the same durable
    /// tombstone let start (on a busy machine, unlinking large files competes with the
    /// thread that answers).
    fn pump(&mut self) {
        loop {
            let batch = self.broker.drain_effects();
            if batch.is_empty() {
                return;
            }
            let halting = batch.iter().any(|e| matches!(e, Effect::Halt(_)));
            let replying = batch.iter().any(|e| matches!(e, Effect::Reply { .. }));
            for effect in batch {
                match effect {
                    // After a halt nothing more reaches the disk: not even operations
                    // queued in the same batch. Recovery starts from what is durable.
                    Effect::Storage { .. } if halting || self.halted.is_some() => {}
                    Effect::Storage { id, op } if replying => self.deferred.push((id, op)),
                    Effect::Storage { id, op } => self.pool.dispatch(id, op),
                    Effect::Reply { request, reply } => self.ready.push_back(DriverEvent::Reply { request, reply }),
                    Effect::Notice(notice) => self.notice(notice),
                    Effect::Halt(reason) => {
                        if self.halted.is_none() {
                            self.halted = Some(reason);
                        }
                    }
                }
            }
        }
    }

    /// Keeps a notice of the broker for the caller; while opening, a retry also counts
    /// as a failed recovery attempt.
    fn notice(&mut self, notice: broker_core::Notice) {
        if let (Some(recovery), broker_core::Notice::Retrying { operation, error, .. }) = (&mut self.recovery, &notice)
        {
            recovery.failed(format!("{operation} failed: {error}"));
        }
        self.notices.push(Notice::Broker(notice));
    }

    /// One turn of the event loop: fire due timers, else wait for one event (up to the
    /// next timer or `deadline`) and handle it. False once `deadline` has passed.
    fn turn(&mut self, deadline: Option<Instant>) -> bool {
        if self.halted.is_none() {
            for (id, op) in std::mem::take(&mut self.deferred) {
                self.pool.dispatch(id, op);
            }
        }
        if self.halted.is_some() {
            // Nothing runs after a halt; in-flight completions are dropped.
            while self.events.try_recv().is_ok() {}
            return match deadline {
                Some(d) => {
                    std::thread::sleep(d.saturating_duration_since(Instant::now()));
                    false
                }
                None => true,
            };
        }
        let now = self.now();
        let timeout = self.broker.poll_timeout();
        if timeout.is_some_and(|at| at <= now) {
            self.broker.handle_timeout(now);
            self.pump();
            return true;
        }
        let wake = match (timeout.map(|at| self.instant_of(at)), deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let event = match wake {
            None => self.events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(w) => self.events.recv_timeout(w.saturating_duration_since(Instant::now())),
        };
        match event {
            Ok(Event::Completion(id, result)) => {
                let now = self.now();
                self.broker.handle_completion(now, id, result);
                self.pump();
            }
            Ok(Event::Message(m)) => self.ready.push_back(DriverEvent::Message(m)),
            Err(RecvTimeoutError::Timeout) => {}
            // The driver holds a sender itself, so the channel cannot disconnect.
            Err(RecvTimeoutError::Disconnected) => {}
        }
        deadline.is_none_or(|d| Instant::now() < d)
    }
}

/// The wall clock as the core's [`Time`]: microseconds since the Unix epoch.
pub fn wall_clock() -> Time {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Time(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
}
