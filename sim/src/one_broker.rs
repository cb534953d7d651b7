//! One simulated run: the real core and the real storage executor over the simulated
//! disk, driven by seeded clients, with faults, crashes, restarts and checkers.
//!
//! Phases: *chaos* (the workload runs; faults and crashes are on), then *settle*
//! (faults and crashes stop; the broker must finish all pending work within a bound),
//! then the *final checks* (durability of every acknowledged record, exact log set).
//!
//! [`crate::runner::run`] sends a seed here unless it runs a cluster.

use crate::checkers::durability::{self, ReadBack};
use crate::checkers::{liveness, no_orphans, no_premature_removal, Checkers};
use crate::client_wakes::ClientWakes;
use crate::disk::{CrashMode, DiskFaults, SimDisk};
use crate::events::EventQueue;
use crate::model::{Model, ValueId};
use crate::rng::SimRng;
use crate::swarm::SwarmParams;
use crate::trace::{EffectText, IssueText, OpText, ResultText, Trace};
use crate::tripwire::Tripwire;
use crate::violation::{Checker, Violation};
use crate::workload::Workload;
use broker_core::{
    check_group, decode_journal, Broker, BrokerError, Command, Config, DecodedJournal, Effect, Executor, LogId, Notice,
    OpId, OpResult, Phase, Reply, RequestId, StorageOp, Time, TopicDescription, TopicId, JOURNAL_FILE,
};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::run::{core_config, RunOptions, RunReport, RunStats, CHAOS_LIMIT_MS, LIVENESS_BOUND_MS};

/// The least journal reserve of the simulated broker (the real default is 1 MiB; the
/// simulated journals are small, and the reserve also covers twice the journal).
pub const SIM_JOURNAL_RESERVE: u64 = 8 << 10;

#[derive(Debug, Clone)]
enum Event {
    ClientWake(usize),
    Execute {
        life: u32,
        id: OpId,
    },
    Complete {
        life: u32,
        id: OpId,
        result: OpResult,
    },
    /// The broker's clock reaches a deadline it asked for.
    Timeout {
        life: u32,
        at: Time,
    },
    RandomCrash,
    Restart,
    EndChaos,
}

/// Which ordering lane an operation runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Journal,
    Log(LogId),
    Directory,
}

/// The running broker process.
struct Node {
    broker: Broker,
    exec: Executor<Tripwire<SimDisk>>,
    ops: BTreeMap<OpId, StorageOp>,
    lanes: BTreeMap<Lane, Time>,
    /// Requests in flight, by the client that sent them.
    requests: BTreeMap<RequestId, usize>,
    serving: bool,
    /// Deadlines of the broker's timers with a `Timeout` event scheduled.
    wakes: BTreeSet<Time>,
}

struct Sim {
    now: Time,
    params: SwarmParams,
    config: Config,
    rng: SimRng,
    queue: EventQueue<Event>,
    life: u32,
    node: Option<Node>,
    /// The disk while the process is down.
    idle_disk: Option<Tripwire<SimDisk>>,
    workload: Workload,
    outstanding: Vec<u32>,
    /// The clients' wakes, parked while a client could send nothing.
    client_wakes: ClientWakes,
    next_request: u64,
    chaos: bool,
    crash_now: bool,
    crash_at: Option<(u64, CrashMode)>,
    model: Model,
    /// The checkers that watch requests, replies and storage operations from outside the model.
    checkers: Checkers,
    violations: Vec<Violation>,
    trace: Trace,
    stats: RunStats,
    completed: BTreeSet<TopicId>,
    last_completed: OpId,
    /// Restarts since the broker last reached serving.
    failed_starts: u32,
    /// See [`RunReport::journal_lost_to_rot`].
    journal_lost_to_rot: Option<Time>,
}

/// Runs one seed of one broker on the simulated disk, with the seed's `params`, to the
/// end, and checks it.
pub fn run(opts: &RunOptions, params: SwarmParams) -> RunReport {
    let faults = DiskFaults {
        io_error: params.io_error,
        disk_full: params.disk_full,
        fsync_failure: params.fsync_failure,
        bit_rot: params.bit_rot,
        read_only_after_error: params.read_only_after_error,
        capacity: params.disk_capacity,
        ..DiskFaults::default()
    };
    let disk = SimDisk::with_faults(SimRng::fork(opts.seed, "disk").u64(), faults);
    let config = Config { durability: opts.durability(), ..core_config(&params, opts.bug) };
    let clients = params.clients as usize;
    let think_us = params.think_us;
    let mut checkers = Checkers::new(config.removal_concurrency, config.max_offset_metadata_bytes);
    checkers.set_produce_limits(&config);
    let mut model = Model::default();
    model.producers.log_sync = matches!(config.durability, broker_core::Durability::LogSync { .. });
    let mut sim = Sim {
        now: Time::ZERO,
        workload: match &opts.script {
            Some(script) => Workload::scripted(&script.groups),
            None => Workload::new(opts.seed, &params).with_group_offsets().with_idempotent_producers(),
        },
        crash_at: opts.crash_at,
        params,
        config,
        rng: SimRng::fork(opts.seed, "scheduler"),
        queue: EventQueue::default(),
        life: 0,
        node: None,
        idle_disk: Some(Tripwire::new(disk)),
        outstanding: vec![0; clients],
        client_wakes: ClientWakes::new(clients, think_us),
        next_request: 1,
        chaos: true,
        crash_now: false,
        model,
        checkers,
        violations: Vec::new(),
        trace: Trace::new(opts.keep_trace),
        stats: RunStats::default(),
        completed: BTreeSet::new(),
        last_completed: OpId(0),
        failed_starts: 0,
        journal_lost_to_rot: None,
    };
    sim.start_node();
    for c in 0..clients {
        let at = Time(sim.rng.below(sim.params.think_us.max(1)));
        sim.schedule(at, Event::ClientWake(c));
    }
    if sim.params.crash_every_us > 0 {
        let at = Time(sim.rng.between(1, 2 * sim.params.crash_every_us));
        sim.schedule(at, Event::RandomCrash);
    }
    sim.run_events();
    sim.final_checks();
    sim.stats.deletions_started = sim.model.deleted.len() as u64;
    let producers = sim.model.producers.stats;
    sim.stats.producer_ids = producers.ids;
    sim.stats.idempotent_batches = producers.batches_acked;
    sim.stats.duplicate_answers = producers.duplicates;
    sim.stats.duplicates_across_crash = producers.duplicates_across_crash;
    sim.stats.acked_after_cut_off = producers.acked_after_cut_off;
    let faults = sim.disk().counters();
    let (violations, excused) = {
        let mut v = std::mem::take(&mut sim.violations);
        v.extend(sim.checkers.take_violations());
        let lost = sim.journal_lost_to_rot;
        v.into_iter().partition(|v| lost.is_none_or(|at| v.at < at))
    };
    RunReport {
        seed: opts.seed,
        trace_hash: sim.trace.hash(),
        events: sim.trace.events(),
        sim_time: sim.now,
        stats: sim.stats.clone(),
        faults,
        violations,
        journal_lost_to_rot: sim.journal_lost_to_rot,
        excused,
        params: sim.params.clone(),
        trace: sim.trace.into_lines(),
        cluster: None,
    }
}

impl Sim {
    fn schedule(&mut self, at: Time, ev: Event) {
        self.queue.push(at.max(self.now), ev);
    }

    fn flag(&mut self, checker: Checker, detail: String) {
        self.violations.push(Violation { checker, at: self.now, detail });
    }

    fn disk(&self) -> &SimDisk {
        match (&self.node, &self.idle_disk) {
            (Some(n), _) => n.exec.fs().inner(),
            (None, Some(d)) => d.inner(),
            (None, None) => unreachable!("the disk is always somewhere"),
        }
    }

    fn rotted(&self) -> BTreeSet<String> {
        self.disk().rotted_files().into_iter().collect()
    }

    /// Whether rot made the journal the broker is about to read lose a commit (both
    /// copies bad) that the same bytes without rot hold.
    fn journal_lost_a_commit_to_rot(disk: &SimDisk) -> bool {
        if !disk.live_file_rotted(JOURNAL_FILE) {
            return false;
        }
        let (Some(seen), Some(clean)) = (disk.live_file(JOURNAL_FILE), disk.live_file_unrotted(JOURNAL_FILE)) else {
            return false;
        };
        let records = |d: DecodedJournal| d.records.into_iter().map(|(_, r)| r).collect::<Vec<_>>();
        match (decode_journal(&seen), decode_journal(&clean)) {
            (_, Err(_)) => false,
            (Err(_), Ok(_)) => true,
            (Ok(seen), Ok(clean)) => records(seen) != records(clean),
        }
    }

    /// Notes the first moment the journal on disk has lost a commit to rot.
    fn note_journal_rot(&mut self) {
        if self.journal_lost_to_rot.is_none() && Self::journal_lost_a_commit_to_rot(self.disk()) {
            self.journal_lost_to_rot = Some(self.now);
            self.trace.record(self.now, "journal-lost", format_args!("rot struck both copies of a journal commit"));
        }
    }

    fn start_node(&mut self) {
        if self.idle_disk.is_none() {
            return;
        }
        self.note_journal_rot();
        let Some(disk) = self.idle_disk.take() else { return };
        self.life += 1;
        self.last_completed = OpId(0);
        self.stats.restarts += u64::from(self.life > 1);
        let mut exec = Executor::new(disk);
        // A journal reserve as the real one works, at a size the simulated journals need.
        exec.set_reserve_min(SIM_JOURNAL_RESERVE);
        #[cfg(feature = "planted-bugs")]
        exec.plant(&self.config.bugs);
        self.trace.record(self.now, "start", format_args!("life {}", self.life));
        self.node = Some(Node {
            broker: Broker::start(self.config.clone(), self.now),
            exec,
            ops: BTreeMap::new(),
            lanes: BTreeMap::new(),
            requests: BTreeMap::new(),
            serving: false,
            wakes: BTreeSet::new(),
        });
        self.drain_effects();
    }

    /// Kills the process; with `lose_cache`, the machine too (unsynced data is lost).
    fn kill(&mut self, why: &str, lose_cache: bool) {
        self.kill_with(why, lose_cache, None);
    }

    fn kill_with(&mut self, why: &str, lose_cache: bool, mode: Option<CrashMode>) {
        let Some(node) = self.node.take() else { return };
        self.count_completions(&node.broker);
        self.model.crashed();
        self.checkers.process_died();
        self.workload.process_died();
        self.outstanding.iter_mut().for_each(|o| *o = 0);
        let mut disk = node.exec.into_fs();
        disk.disarm();
        if lose_cache {
            self.stats.crashes += 1;
            let report = match mode {
                Some(mode) => disk.inner_mut().crash_with(mode),
                None => disk.inner_mut().crash(),
            };
            self.trace.record(self.now, "crash", format_args!("{why}: {report:?}"));
            self.idle_disk = Some(disk);
            self.check_no_orphans();
        } else {
            self.trace.record(self.now, "restart", format_args!("{why}"));
            self.idle_disk = Some(disk);
        }
        // A supervisor restarts the process, backing off while restarts keep failing.
        let backoff = 100u64 << self.failed_starts.min(14);
        self.failed_starts += 1;
        let at = self.now.plus_micros(backoff + self.rng.between(0, 5_000));
        self.schedule(at, Event::Restart);
    }

    fn run_events(&mut self) {
        let mut chaos_end_scheduled = false;
        let mut settle_deadline = None;
        while let Some((at, ev)) = self.queue.pop() {
            self.now = at;
            if let Some(deadline) = settle_deadline {
                if at > deadline {
                    break;
                }
            }
            self.event(ev);
            if self.crash_now {
                self.crash_now = false;
                self.kill("targeted crash", true);
            }
            let too_long = self.now > Time::from_millis(CHAOS_LIMIT_MS);
            if self.chaos && !chaos_end_scheduled && (self.workload.exhausted() || too_long) {
                chaos_end_scheduled = true;
                self.schedule(self.now, Event::EndChaos);
            }
            if !self.chaos && settle_deadline.is_none() {
                settle_deadline = Some(self.now.plus_millis(LIVENESS_BOUND_MS));
            }
        }
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::ClientWake(c) => self.client_wake(c),
            Event::Execute { life, id } if life == self.life => self.execute(id),
            Event::Complete { life, id, result } if life == self.life => {
                if id < self.last_completed {
                    self.stats.reordered_completions += 1;
                }
                self.last_completed = self.last_completed.max(id);
                self.checkers.storage_completed(id);
                self.trace.record(self.now, "complete", format_args!("#{} {}", id.0, ResultText(&result)));
                if let Some(n) = self.node.as_mut() {
                    n.broker.handle_completion(self.now, id, result);
                }
                self.drain_effects();
            }
            Event::Timeout { life, at } if life == self.life => {
                if let Some(n) = self.node.as_mut() {
                    n.wakes.remove(&at);
                    if n.broker.poll_timeout().is_some_and(|due| due <= self.now) {
                        self.trace.record(self.now, "timeout", format_args!(""));
                        n.broker.handle_timeout(self.now);
                    }
                }
                self.drain_effects();
            }
            Event::Execute { .. } | Event::Complete { .. } | Event::Timeout { .. } => {} // a dead process's
            Event::RandomCrash => {
                if self.chaos {
                    self.kill("random crash", true);
                    let next = self.now.plus_micros(self.rng.between(1, 2 * self.params.crash_every_us));
                    self.schedule(next, Event::RandomCrash);
                }
            }
            Event::Restart => self.start_node(),
            Event::EndChaos => {
                self.chaos = false;
                self.trace.record(self.now, "end-chaos", format_args!(""));
                match (&mut self.node, &mut self.idle_disk) {
                    (Some(n), _) => {
                        n.exec.fs_mut().disarm();
                        n.exec.fs_mut().inner_mut().set_faults_enabled(false);
                    }
                    (None, Some(d)) => {
                        d.disarm();
                        d.inner_mut().set_faults_enabled(false);
                    }
                    (None, None) => {}
                }
            }
        }
    }

    fn client_wake(&mut self, c: usize) {
        if !self.chaos || self.workload.exhausted() {
            return;
        }
        // Issue as much as the client may have in flight, all at this instant.
        while self.node.as_ref().is_some_and(|n| n.serving) && self.outstanding[c] < self.params.depth {
            let Some(issue) = self.workload.next_command(self.outstanding[c] == 0) else { break };
            let cmd = &issue.command;
            let request = RequestId(self.next_request);
            self.next_request += 1;
            self.outstanding[c] += 1;
            self.stats.commands += 1;
            if let Command::Produce { records, .. } | Command::ProduceIdempotent { records, .. } = cmd {
                let bytes = broker_core::batch_bytes(records);
                let largest = records.iter().map(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.len()).max();
                self.stats.large_batches += u64::from(bytes > crate::disk::SECTOR_SIZE);
                self.stats.batches_over_limit +=
                    u64::from(bytes > self.config.batch_bytes_limit() || largest > Some(self.config.max_record_bytes));
            }
            let shared = Rc::new(cmd.clone());
            self.checkers.issued(self.now, &self.model, request, &shared, &issue.values);
            self.model.issued(self.now, request, &shared, &issue.values);
            self.trace.record(self.now, "command", format_args!("req{} c{c} {}", request.0, IssueText(&issue)));
            if let Some(n) = self.node.as_mut() {
                n.requests.insert(request, c);
                n.broker.handle_command(self.now, request, issue.command);
            }
            self.drain_effects();
        }
        self.next_wake(c);
    }

    /// Draws client `c`'s next wake, a think time from now. If it could send nothing
    /// then (it has all it may have in flight, or the broker is not serving), the wake is parked: [`Sim::unpark`]
    /// schedules it once a reply or the broker serving frees the client, which then does not wake for
    /// nothing meanwhile.
    fn next_wake(&mut self, c: usize) {
        let can_send = self.outstanding[c] < self.params.depth && self.node.as_ref().is_some_and(|n| n.serving);
        if let Some(at) = self.client_wakes.next(&mut self.rng, self.now, c, can_send) {
            self.schedule(at, Event::ClientWake(c));
        }
    }

    /// Client `c` has a request fewer in flight, or the broker now serves: if it was
    /// waiting for that, it wakes as it would have, had it woken all along
    /// ([`ClientWakes::unpark`]).
    fn unpark(&mut self, c: usize) {
        if let Some(at) = self.client_wakes.unpark(&mut self.rng, self.now, c) {
            self.schedule(at, Event::ClientWake(c));
        }
    }

    fn execute(&mut self, id: OpId) {
        let chaos = self.chaos;
        let targeted = self.params.targeted_crash;
        let Some(n) = self.node.as_mut() else { return };
        let Some(op) = n.ops.remove(&id) else { return };
        if matches!(op, StorageOp::RemoveLog { .. }) {
            if let Some(detail) = no_premature_removal::removal(&op, &n.broker.live_topic_ids()) {
                self.violations.push(Violation { checker: Checker::NoPrematureRemoval, at: self.now, detail });
            }
        }
        // Crash points inside the operation: after a few calls, or right after an fsync.
        // Journal compaction (temporary file, fsync, rename, directory fsync) is the
        // multi-step operation most worth cutting short.
        let inside = if matches!(op, StorageOp::ReplaceJournal { .. }) { targeted } else { targeted / 8.0 };
        if chaos && self.rng.chance(inside) {
            if self.rng.chance(0.5) {
                n.exec.fs_mut().arm_after_next_sync();
            } else {
                n.exec.fs_mut().arm_after_calls(self.rng.below(4));
            }
        }
        let result = n.exec.execute(&op);
        self.stats.storage_ops += 1;
        let tripped = n.exec.fs().tripped();
        n.exec.fs_mut().disarm();
        self.trace.record(self.now, "execute", format_args!("#{} {} -> {}", id.0, OpText(&op), ResultText(&result)));
        if tripped {
            self.crash_now = true;
            return;
        }
        self.model.producers.storage_executed(id, result.is_ok());
        if let Some((k, mode)) = self.crash_at {
            if self.stats.storage_ops == k {
                self.kill_with(&format!("exhaustive crash after op {k}"), true, Some(mode));
                return;
            }
        }
        if let Some(detail) = no_premature_removal::result(&op, &result) {
            self.flag(Checker::NoPrematureRemoval, detail);
        }
        if chaos && result.is_ok() {
            let p = match &op {
                StorageOp::RemoveLog { .. } | StorageOp::ReplaceJournal { .. } => targeted,
                StorageOp::SyncJournal | StorageOp::SyncLog { .. } => targeted / 4.0,
                // Appended but not yet synced: e.g. a completion record not yet durable.
                StorageOp::AppendJournal { .. } => targeted / 4.0,
                _ => 0.0,
            };
            if self.rng.chance(p) {
                self.crash_now = true;
                return;
            }
        }
        // Completions arrive after a jitter, so concurrent ones can be reordered.
        let jitter = self.rng.below(self.params.latency_us.1.max(1));
        let life = self.life;
        self.schedule(self.now.plus_micros(jitter), Event::Complete { life, id, result });
    }

    fn lane(op: &StorageOp) -> Option<Lane> {
        match op {
            StorageOp::Read { .. } => None,
            StorageOp::ListLogs => Some(Lane::Directory),
            op => Some(op.log().map_or(Lane::Journal, Lane::Log)),
        }
    }

    fn drain_effects(&mut self) {
        loop {
            let Some(n) = self.node.as_mut() else { return };
            let Some(effect) = n.broker.poll_effect() else { break };
            self.trace.record(self.now, "effect", format_args!("{}", EffectText(&effect)));
            match effect {
                Effect::Storage { id, op } => self.issue(id, op),
                Effect::Reply { request, reply } => self.reply(request, reply),
                Effect::Notice(notice) => {
                    let names = self.disk().live_names();
                    let rotted = self.rotted();
                    let rotted = |f: &str| rotted.contains(f);
                    self.checkers.notice(self.now, &self.model, &notice, &names, &rotted);
                    if let Notice::TailCut { log, offset, .. } = notice {
                        self.model.tail_cut(log, offset);
                    }
                }
                Effect::Halt(reason) => {
                    self.stats.halts += 1;
                    let lose_cache = self.rng.chance(self.params.halt_loses_cache);
                    self.kill(&format!("halt: {reason}"), lose_cache);
                    return;
                }
            }
        }
        let Some(n) = self.node.as_mut() else { return };
        if let Some(at) = n.broker.poll_timeout() {
            if n.wakes.insert(at) {
                let life = self.life;
                self.schedule(at, Event::Timeout { life, at });
            }
        }
        let Some(n) = self.node.as_mut() else { return };
        if !n.serving && n.broker.phase() == Phase::Serving {
            n.serving = true;
            self.failed_starts = 0;
            let live = n.broker.live_topic_ids();
            self.checkers.recovered(self.now, &self.model, &live);
            (0..self.client_wakes.clients()).for_each(|c| self.unpark(c));
        }
    }

    fn issue(&mut self, id: OpId, op: StorageOp) {
        let (lo, hi) = self.params.latency_us;
        let mut latency = self.rng.between(lo, hi);
        if self.chaos && self.rng.chance(self.params.slow_op) {
            latency *= 100;
            self.stats.slow_ops += 1;
        }
        // Reads copy data out and often take longer than metadata operations, which
        // keeps some reads in flight across a whole deletion's logical step.
        if matches!(op, StorageOp::Read { .. }) {
            latency *= self.rng.between(1, 8);
        }
        let lane = Self::lane(&op);
        let Some(n) = self.node.as_mut() else { return };
        let mut at = self.now.plus_micros(latency);
        if let Some(lane) = lane {
            if let Some(prev) = n.lanes.get(&lane) {
                at = at.max(prev.plus_micros(1));
            }
            n.lanes.insert(lane, at);
        }
        self.checkers.storage_issued(self.now, id, &op);
        self.model.producers.storage_issued(id, &op);
        n.ops.insert(id, op);
        let life = self.life;
        self.schedule(at, Event::Execute { life, id });
    }

    /// Folds a broker life's completed deletions into the run's count.
    fn count_completions(&mut self, broker: &Broker) {
        for id in broker.completed_deletions() {
            if self.completed.insert(id) {
                self.stats.deletions_completed += 1;
            }
        }
    }

    fn reply(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        self.stats.replies += 1;
        self.workload.observe_answer(self.model.command_of(request), &reply);
        if let Some(c) = self.node.as_mut().and_then(|n| n.requests.remove(&request)) {
            self.outstanding[c] = self.outstanding[c].saturating_sub(1);
            self.unpark(c);
        }
        if matches!(reply, Ok(Reply::DeleteAccepted { .. })) {
            // Targeted crash between the logical and the physical deletion step.
            if self.chaos && self.rng.chance(self.params.targeted_crash) {
                self.crash_now = true;
            }
        }
        self.fold_reply(request, &reply);
    }

    /// Feeds a reply to the checkers, then folds it into the model, which shows the
    /// checkers each part of it as it goes.
    fn fold_reply(&mut self, request: RequestId, reply: &Result<Reply, BrokerError>) {
        let rotted = self.rotted();
        let is_rotted = |log: LogId| rotted.contains(&log.file_name());
        self.checkers.replied(self.now, &self.model, request, reply, &is_rotted);
        let (now, checkers) = (self.now, &mut self.checkers);
        self.model.replied(now, request, reply, &mut |model, seen| checkers.model_saw(now, model, &seen, &is_rotted));
    }

    /// No orphans at a crash point: every log that survived belongs to a topic the
    /// durable journal names (live or pending deletion).
    fn check_no_orphans(&mut self) {
        self.note_journal_rot();
        for detail in no_orphans::at_crash(self.disk()) {
            self.flag(Checker::NoOrphans, detail);
        }
    }

    /// Runs one command to completion with every storage operation executed at once.
    fn sync_request(&mut self, cmd: Command) -> Option<Result<Reply, BrokerError>> {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        let shared = Rc::new(cmd.clone());
        let values = ValueId::of_command(&shared);
        self.checkers.issued(self.now, &self.model, request, &shared, &values);
        self.model.issued(self.now, request, &shared, &values);
        let n = self.node.as_mut()?;
        n.broker.handle_command(self.now, request, cmd);
        let mut answer = None;
        for _ in 0..100_000 {
            let Some(effect) = n.broker.poll_effect() else { break };
            match effect {
                Effect::Storage { id, op } => {
                    let result = n.exec.execute(&op);
                    n.broker.handle_completion(self.now, id, result);
                }
                Effect::Reply { request: r, reply } if r == request => answer = Some(reply),
                _ => {}
            }
        }
        if let Some(reply) = &answer {
            self.fold_reply(request, reply);
        }
        answer
    }

    fn final_checks(&mut self) {
        if let Some(node) = self.node.take() {
            self.count_completions(&node.broker);
            self.node = Some(node);
        }
        // Liveness: serving, with nothing pending.
        let phase = self.node.as_ref().map(|n| n.broker.phase());
        let pending = self.node.as_ref().map(|n| n.broker.pending_deletions()).unwrap_or_default();
        for detail in liveness::at_end(phase, &pending) {
            self.flag(Checker::Liveness, detail);
        }
        let Some(n) = self.node.as_ref().filter(|n| n.broker.phase() == Phase::Serving) else { return };
        // No orphans after settling: exactly the live topics' logs remain.
        let live = n.broker.live_topics();
        for detail in no_orphans::after_settling(&live, self.disk()) {
            self.flag(Checker::NoOrphans, detail);
        }
        // Before the final fetches below, which are requests of their own.
        self.checkers.run_ended(self.now);
        let live_ids: Vec<TopicId> = self.node.as_ref().map(|n| n.broker.live_topic_ids()).unwrap_or_default();
        self.checkers.recovered(self.now, &self.model, &live_ids);
        for detail in durability::at_end(self, &live) {
            self.flag(Checker::Durability, detail);
        }
        self.read_back_groups(&live);
    }

    /// Once the run settled: reads every group's positions in every live topic, and
    /// lists the groups, through the checkers (group-offsets judges the replies: every
    /// acknowledged commit must have survived every crash).
    fn read_back_groups(&mut self, live: &[TopicDescription]) {
        let groups: Vec<String> =
            self.model.groups.groups().filter(|g| check_group(g).is_ok()).map(str::to_string).collect();
        if groups.is_empty() {
            return;
        }
        for group in &groups {
            for t in live {
                self.sync_request(Command::FetchOffsets { group: group.clone(), topic: t.name.clone() });
            }
        }
        self.sync_request(Command::ListGroups);
    }
}

/// The final read-back runs through the broker, the checkers and the model.
impl ReadBack for Sim {
    fn model(&self) -> &Model {
        &self.model
    }

    fn rotted_files(&self) -> BTreeSet<String> {
        self.rotted()
    }

    fn fetch(&mut self, command: Command) -> Option<Result<Reply, BrokerError>> {
        self.sync_request(command)
    }
}
