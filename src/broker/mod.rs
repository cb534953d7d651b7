//! The broker state machine: commands, completions and timers in; effects out.
//!
//! ```text
//!  client ──Command──▶ ┌────────┐ ──Storage op──▶ runtime (executor, disk)
//!  runtime ─Completion▶│ Broker │ ──Reply───────▶ client
//!  runtime ─Timeout───▶└────────┘ ──Halt──────────▶ runtime
//! ```
//!
//! Every entry point takes the current virtual time. Effects queue up inside the
//! broker; the runtime drains them with [`Broker::poll_effect`]. The broker keeps its
//! own timers (grace delays, retry backoffs): after every input the runtime asks
//! [`Broker::poll_timeout`] for the next deadline and calls [`Broker::handle_timeout`]
//! once its clock reaches it, as quinn-proto's and str0m's sans-I/O cores do.

mod commands;
mod completions;
mod creation;
mod deletion;
mod groups;
mod journal_writer;
mod producing;
mod recovery;
mod state;

use crate::command::{Command, Reply, TopicDescription};
use crate::config::Config;
use crate::effect::{Effect, OpResult, StorageOp};
use crate::error::{BrokerError, HaltReason};
use crate::ids::{LogId, OpId, RequestId, TopicId};
use crate::journal::{JournalRecord, MetaState, MetaTopic};
use crate::offsets::CommittedOffsets;
use crate::producers::ProducerStates;
use crate::time::Time;
use journal_writer::{CompactionLimits, JournalIo, JournalWriter};
use state::Topic;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// How many of its latest completed deletions a broker remembers.
pub const COMPLETED_KEPT: usize = 1024;

/// Whether the broker serves commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Replaying the journal and opening logs; commands are refused as unavailable.
    Recovering,
    /// Serving commands.
    Serving,
    /// Stopped after a fatal error; drop it and start a new broker.
    Halted,
}

/// A pending deletion as [`Broker::pending_deletions`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletionStatus {
    /// The incarnation being removed.
    pub topic: TopicId,
    /// Its name.
    pub name: String,
    /// Its partition count.
    pub partitions: u32,
    /// How many of its logs are removed.
    pub removed: u32,
    /// Whether the tombstone is durable (the delete is acknowledged once the
    /// incarnation's storage operations have drained too).
    pub tombstone_durable: bool,
    /// When its grace delay ends, in the runtime's clock (durable with the tombstone).
    pub remove_after: Time,
    /// When removal begins: `remove_after`, but never more than the whole grace delay
    /// after this broker started waiting (or, where it has not, after now), should the
    /// clock have gone back since the delete. What is left of the grace delay is this
    /// less the runtime's clock.
    pub removal_due: Time,
    /// Whether its logs are being removed (its grace delay is over).
    pub removing: bool,
}

/// Acknowledged records of a live topic that cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedRecords {
    /// The live incarnation's id.
    pub topic: TopicId,
    /// Its name.
    pub name: String,
    /// The partition whose log holds the damage.
    pub partition: u32,
    /// The offsets, and what was found.
    pub range: crate::effect::DamagedRange,
}

/// What an in-flight storage operation is for.
#[derive(Debug, Clone)]
enum PendingOp {
    ReadJournal,
    /// A journal write; `backs_up` if it keeps the old journal (recovery found damage).
    JournalWrite {
        backs_up: bool,
    },
    ListLogs,
    OpenLog(LogId),
    CreateLog(LogId),
    Append {
        log: LogId,
        end: u64,
    },
    SyncLog {
        log: LogId,
        end: u64,
    },
    Read {
        request: RequestId,
        log: LogId,
        offset: u64,
        count: u32,
        high_watermark: u64,
    },
    RemoveLog(LogId),
    RemoveStray(LogId),
}

/// A fixed, fast hasher for integer ids (Fibonacci hashing): deterministic, unlike the
/// standard library's randomly seeded one.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// What a timer is for.
#[derive(Debug, Clone, Copy)]
enum TimerPurpose {
    Grace(TopicId),
    RetryRemove(LogId),
    RetryCreate(LogId),
    RetryOpen(LogId),
    RetryStray(LogId),
    RetryReadJournal,
    RetryListLogs,
    /// Under [`crate::Durability::LogSync`], the journal learns the acknowledged ends.
    JournalEnds,
}

/// The pure broker core. See the module docs for its shape and the crate docs for an example.
#[derive(Debug)]
pub struct Broker {
    config: Config,
    now: Time,
    phase: Phase,
    effects: VecDeque<Effect>,
    next_op: u64,
    /// Sequence number of the next timer armed: it orders timers with equal deadlines.
    next_timer: u64,
    /// Operations in flight. Never iterated (only looked up, counted and cleared), so a
    /// hash map with a fixed hasher keeps the core deterministic; it is the hottest map
    /// (two inserts and two removals per produce).
    ops: HashMap<OpId, PendingOp, BuildHasherDefault<IdHasher>>,
    /// Armed timers by deadline, then by the order they were armed in.
    timers: BTreeMap<(Time, u64), TimerPurpose>,
    topics: BTreeMap<TopicId, Topic>,
    /// Names of live topics (and topics being created).
    live_names: BTreeMap<String, TopicId>,
    /// Every incarnation being deleted, by name (the newest is the last).
    deleting_names: BTreeMap<String, BTreeSet<TopicId>>,
    next_topic_id: u64,
    /// Where the next topic's offsets begin ([`crate::journal::MetaState::offset_floor`]).
    offset_floor: u64,
    journal: JournalWriter,
    /// What waits for the durability of a journal record, with the record's sequence
    /// number, ascending: each waits for the record queued just before it, the newest
    /// ([`Broker::wait_for_journal`]).
    journal_waiters: VecDeque<(u64, JournalWaiter)>,
    /// Client requests not yet answered; a produce's with how many partition writes it
    /// still waits for.
    requests: BTreeMap<RequestId, Option<ProduceProgress>>,
    /// Log removals issued and not yet completed, strays included: at most
    /// `Config::removal_concurrency`.
    removals_in_flight: usize,
    /// Stray logs (named by no topic) found at recovery, waiting for a removal slot.
    strays: BTreeSet<LogId>,
    /// Deletions whose tombstone is durable, waiting for their incarnation's storage
    /// operations to drain before they are acknowledged: every reply owed for the
    /// incarnation (produce, fetch, create) goes out before `DeleteAccepted`.
    draining: BTreeSet<TopicId>,
    /// Deletions past their grace delay, removing logs.
    removing: BTreeSet<TopicId>,
    /// The latest deletions completed by this broker, in order: at most
    /// [`COMPLETED_KEPT`], so a long-running broker's memory stays bounded.
    completed: VecDeque<TopicId>,
    /// How many deletions this broker completed in all.
    completed_count: u64,
    recovery: Option<state::Recovery>,
    /// Retry counts of background operations, for backoff.
    retries: BTreeMap<LogId, u32>,
    journal_retries: u32,
    /// Whether the timer that journals acknowledged ends is armed.
    ends_timer_armed: bool,
    /// Consumer groups' committed offsets, as the journal holds them once its queued
    /// records are written.
    offsets: CommittedOffsets,
    /// Replies computed and waiting for the journal records queued before them to be
    /// durable ([`JournalWaiter::Held`]).
    held_replies: BTreeMap<RequestId, Reply>,
    /// Idempotent producers' states as admitted batches leave them (those in flight
    /// included): what a new batch is judged against.
    producers: ProducerStates,
    /// Idempotent producers' states as the journal holds them once its queued records
    /// are written: what a snapshot holds.
    journaled_producers: ProducerStates,
    /// The next producer id to hand out.
    next_producer_id: u64,
    /// Retries of idempotent batches still in flight, by topic and partition: answered
    /// when the first send is.
    waiting_retries: BTreeMap<(TopicId, u32), Vec<PendingRetry>>,
}

/// A retry of an idempotent batch whose first send is not acknowledged yet.
#[derive(Debug, Clone)]
struct PendingRetry {
    /// One past the batch's last offset: it is acknowledged once the high watermark
    /// reaches it.
    end: u64,
    request: RequestId,
    positions: Vec<crate::command::RecordPosition>,
}

#[derive(Debug, Clone)]
struct ProduceProgress {
    topic: TopicId,
    positions: Vec<crate::command::RecordPosition>,
    partitions_left: usize,
}

#[derive(Debug, Clone, Copy)]
enum JournalWaiter {
    Created(TopicId),
    Tombstone(TopicId),
    LogEnd {
        topic: TopicId,
        partition: u32,
        end: u64,
    },
    /// A reply in `Broker::held_replies`.
    Held(RequestId),
}

impl Broker {
    /// Starts a broker over existing (or empty) storage. It begins recovering at once:
    /// its first effect reads the journal. Commands are refused until it serves.
    pub fn start(config: Config, now: Time) -> Broker {
        let mut b = Broker {
            config,
            now,
            phase: Phase::Recovering,
            effects: VecDeque::new(),
            next_op: 1,
            next_timer: 1,
            ops: HashMap::default(),
            timers: BTreeMap::new(),
            topics: BTreeMap::new(),
            live_names: BTreeMap::new(),
            deleting_names: BTreeMap::new(),
            next_topic_id: 0,
            offset_floor: 0,
            journal: JournalWriter::default(),
            journal_waiters: VecDeque::new(),
            requests: BTreeMap::new(),
            removals_in_flight: 0,
            strays: BTreeSet::new(),
            draining: BTreeSet::new(),
            removing: BTreeSet::new(),
            completed: VecDeque::new(),
            completed_count: 0,
            recovery: None,
            retries: BTreeMap::new(),
            journal_retries: 0,
            ends_timer_armed: false,
            offsets: CommittedOffsets::default(),
            held_replies: BTreeMap::new(),
            producers: ProducerStates::default(),
            journaled_producers: ProducerStates::default(),
            next_producer_id: 0,
            waiting_retries: BTreeMap::new(),
        };
        b.producers.bound(b.config.max_producer_states);
        b.journaled_producers.bound(b.config.max_producer_states);
        b.begin_recovery();
        b
    }

    /// Handles one client command. Its reply comes out as an [`Effect::Reply`] with
    /// the same request id, now or after storage work.
    pub fn handle_command(&mut self, now: Time, request: RequestId, command: Command) {
        self.tick(now);
        match self.phase {
            Phase::Halted => {
                return self.reply_now(request, Err(BrokerError::Unavailable("the broker has halted".into())))
            }
            Phase::Recovering => {
                return self.reply_now(request, Err(BrokerError::Unavailable("the broker is recovering".into())))
            }
            Phase::Serving => {}
        }
        match self.requests.entry(request) {
            Entry::Occupied(_) => return self.reply_now(request, Err(BrokerError::DuplicateRequestId(request.0))),
            Entry::Vacant(v) => v.insert(None),
        };
        self.command(request, command);
        self.pump();
    }

    /// Handles the completion of storage operation `op`.
    pub fn handle_completion(&mut self, now: Time, op: OpId, result: OpResult) {
        self.tick(now);
        if self.phase == Phase::Halted {
            return;
        }
        match self.ops.remove(&op) {
            None => self.halt(HaltReason::unknown_op(op)),
            Some(pending) => self.completion(op, pending, result),
        }
        self.pump();
    }

    /// The earliest deadline of an armed timer: the runtime calls
    /// [`Broker::handle_timeout`] once its clock reaches it. `None` when no timer is
    /// armed (after a halt, never). Ask again after every input: any input may arm an
    /// earlier timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.keys().next().map(|&(at, _)| at)
    }

    /// Time has passed: fires, in deadline order, every timer due at `now` (armed before
    /// this call). Calling it early, late or more than once is harmless: a timer fires
    /// once, at the first call at or after its deadline.
    pub fn handle_timeout(&mut self, now: Time) {
        self.tick(now);
        if self.phase == Phase::Halted {
            return;
        }
        let due_end = (self.now, self.next_timer);
        while let Some(entry) = self.timers.first_entry() {
            if *entry.key() >= due_end {
                break;
            }
            let purpose = entry.remove();
            self.timer(purpose);
            if self.phase == Phase::Halted {
                return;
            }
        }
        self.pump();
    }

    /// The next effect, if any. Drain until `None` after every input.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// Drains every queued effect.
    pub fn drain_effects(&mut self) -> Vec<Effect> {
        self.effects.drain(..).collect()
    }

    /// Whether the broker is recovering, serving or halted.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether logs run under log-sync: opening keeps whole frames past the journal's
    /// end, and nothing cuts what follows the last whole frame.
    fn keeps_whole_tails(&self) -> bool {
        matches!(self.config.durability, crate::Durability::LogSync { .. })
            && !planted!(self.config, LogSyncCutsSyncedTail)
    }

    /// Changes when produces are acknowledged from now on. Leaving
    /// [`crate::Durability::LogSync`] queues every acknowledged end the journal lacks, so
    /// that once the journal is idle it holds them all and a start under any setting
    /// keeps every acknowledged record. (A start under log-sync journals the ends it
    /// kept before it serves, so a runtime may switch at [`Phase::Serving`] before any
    /// command.) Entering log-sync is for a start's configuration: logs already open
    /// were opened without `keep_whole_tail`, which a runtime's executor keeps for them
    /// until they are opened again.
    pub fn set_durability(&mut self, durability: crate::Durability) {
        self.config.durability = durability;
        if durability == crate::Durability::Journaled {
            self.journal_acked_ends(None);
            self.pump();
        }
    }

    /// How many storage operations are outstanding.
    pub fn ops_in_flight(&self) -> usize {
        self.ops.len()
    }

    /// How many timers are armed and not yet fired.
    pub fn timers_armed(&self) -> usize {
        self.timers.len()
    }

    /// Live topics (created and not deleting), ordered by name.
    pub fn live_topics(&self) -> Vec<TopicDescription> {
        self.live_names.values().filter_map(|id| self.topics.get(id)).filter(|t| t.visible()).map(describe).collect()
    }

    /// Ids of live topics, including those still being created, ascending.
    pub fn live_topic_ids(&self) -> Vec<TopicId> {
        let mut ids: Vec<TopicId> = self.live_names.values().copied().collect();
        ids.sort();
        ids
    }

    /// Acknowledged records of live topics that cannot be read back, found when their
    /// logs were opened: damaged ranges of offsets, and whole logs that failed to open
    /// (as the range of every acknowledged offset). Ordered by topic name and partition.
    pub fn damaged_records(&self) -> Vec<DamagedRecords> {
        let mut out = Vec::new();
        for t in self.live_names.values().filter_map(|id| self.topics.get(id)).filter(|t| t.visible()) {
            for (p, part) in t.partitions.iter().enumerate() {
                let whole = part.failed.as_ref().map(|why| crate::effect::DamagedRange {
                    from: t.meta.offset_base,
                    to: part.high_watermark,
                    detail: why.clone(),
                });
                for range in part.damaged.iter().cloned().chain(whole) {
                    out.push(DamagedRecords {
                        topic: t.meta.id,
                        name: t.meta.name.clone(),
                        partition: p as u32,
                        range,
                    });
                }
            }
        }
        out
    }

    /// Deletions not yet complete, ordered by topic id.
    pub fn pending_deletions(&self) -> Vec<DeletionStatus> {
        self.topics
            .values()
            .filter_map(|t| {
                let d = t.deletion.as_ref()?;
                let whole_delay = self.now.plus_millis(t.meta.settings.deletion_grace_ms);
                Some(DeletionStatus {
                    topic: t.meta.id,
                    name: t.meta.name.clone(),
                    partitions: t.meta.partitions,
                    removed: d.removed.len() as u32,
                    tombstone_durable: self.journal.is_durable(d.tombstone_seq),
                    remove_after: d.remove_after,
                    removal_due: d.removal_due.unwrap_or(d.remove_after.min(whole_delay)),
                    removing: d.stage == state::DeletionStage::Removing,
                })
            })
            .collect()
    }

    /// The latest topics whose deletion this broker completed (all logs removed,
    /// completion journaled), oldest first: the last [`COMPLETED_KEPT`] of them.
    pub fn completed_deletions(&self) -> impl Iterator<Item = TopicId> + '_ {
        self.completed.iter().copied()
    }

    /// How many deletions this broker completed since it started.
    pub fn completed_deletion_count(&self) -> u64 {
        self.completed_count
    }

    /// Whether the start's sweep for stray logs is still running: the logs are being
    /// listed, or a log no topic names waits for its removal (or its retry).
    pub fn sweeping_strays(&self) -> bool {
        !self.strays.is_empty()
            || self.ops.values().any(|op| matches!(op, PendingOp::ListLogs | PendingOp::RemoveStray(_)))
            || self.timers.values().any(|t| matches!(t, TimerPurpose::RetryListLogs | TimerPurpose::RetryStray(_)))
    }

    /// The epoch of the journal file being written.
    pub fn journal_epoch(&self) -> u64 {
        self.journal.epoch
    }

    fn tick(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    fn op(&mut self, op: StorageOp, pending: PendingOp) -> OpId {
        let id = OpId(self.next_op);
        self.next_op += 1;
        self.ops.insert(id, pending);
        self.effects.push_back(Effect::Storage { id, op });
        id
    }

    fn timer_in(&mut self, ms: u64, purpose: TimerPurpose) {
        let seq = self.next_timer;
        self.next_timer += 1;
        self.timers.insert((self.now.plus_millis(ms), seq), purpose);
    }

    fn notice(&mut self, notice: crate::notice::Notice) {
        self.effects.push_back(Effect::Notice(notice));
    }

    /// Replies to a request that was never admitted (it is not tracked).
    fn reply_now(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        self.effects.push_back(Effect::Reply { request, reply });
    }

    /// Replies to an admitted request and forgets it.
    fn reply(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        if self.requests.remove(&request).is_some() {
            self.effects.push_back(Effect::Reply { request, reply });
        }
    }

    /// Stops the broker: every admitted request learns that its outcome is unknown.
    fn halt(&mut self, reason: HaltReason) {
        if self.phase == Phase::Halted {
            return;
        }
        self.phase = Phase::Halted;
        let why = reason.to_string();
        for request in std::mem::take(&mut self.requests).into_keys() {
            self.effects.push_back(Effect::Reply { request, reply: Err(BrokerError::Halted(why.clone())) });
        }
        self.ops.clear();
        self.held_replies.clear();
        self.waiting_retries.clear();
        self.timers.clear();
        self.ends_timer_armed = false;
        self.effects.push_back(Effect::Halt(reason));
    }

    /// The log that stores `partition` of `topic`.
    fn log_of(&self, topic: &Topic, partition: u32) -> LogId {
        let id = if planted!(self.config, KeyStorageByName) {
            TopicId(crate::partitioner::murmur2(topic.meta.name.as_bytes()) as u32 as u64)
        } else {
            topic.meta.id
        };
        LogId { topic: id, partition }
    }

    /// Finds the topic and partition a log belongs to.
    fn owner_of(&self, log: LogId) -> Option<TopicId> {
        if planted!(self.config, KeyStorageByName) {
            return self.topics.values().rev().find(|t| self.log_of(t, log.partition) == log).map(|t| t.meta.id);
        }
        self.topics.contains_key(&log.topic).then_some(log.topic)
    }

    /// Issues whatever work is ready: journal writes and log removals.
    fn pump(&mut self) {
        if self.phase == Phase::Halted {
            return;
        }
        if !self.draining.is_empty() {
            self.ack_drained_deletions();
        }
        // Removals first: finishing a deletion queues its `DeletionCompleted` record,
        // which the journal I/O below must carry (nothing else may come to issue it).
        if self.phase == Phase::Serving {
            self.pump_removals();
        }
        let live = (self.topics.len() + self.offsets.entries() + self.journaled_producers.len()) as u64;
        let limits = CompactionLimits {
            min_records: self.config.compaction_min_records,
            ratio: self.config.compaction_ratio,
            min_bytes: self.config.compaction_min_bytes,
        };
        let journaled = Journaled {
            topics: &self.topics,
            next_topic_id: self.next_topic_id,
            offset_floor: self.offset_floor,
            offsets: &self.offsets,
            producers: &self.journaled_producers,
            next_producer_id: self.next_producer_id,
        };
        match self.journal.next_io(live, &limits, || journaled.meta_state().snapshot()) {
            Some(JournalIo::AppendSync { epoch, records }) => {
                self.op(StorageOp::AppendJournal { epoch, records }, PendingOp::JournalWrite { backs_up: false });
                self.op(StorageOp::SyncJournal, PendingOp::JournalWrite { backs_up: false });
            }
            Some(JournalIo::Replace { contents, keep_old }) => {
                self.op(
                    StorageOp::ReplaceJournal { contents, keep_old },
                    PendingOp::JournalWrite { backs_up: keep_old },
                );
            }
            None => {}
        }
    }

    /// Queues `rec` in the journal, and `waiter` to be woken once it is durable; returns
    /// the record's sequence number.
    fn wait_for_journal(&mut self, rec: JournalRecord, waiter: JournalWaiter) -> u64 {
        let seq = self.journal.push(rec);
        self.journal_waiters.push_back((seq, waiter));
        seq
    }

    /// Journal work completed: wake everything waiting for durability, in the order the
    /// records were queued. What the waiters queue in turn is not durable yet.
    fn journal_durable(&mut self) {
        let durable = self.journal.durable_seq();
        while let Some(&(seq, waiter)) = self.journal_waiters.front() {
            if seq > durable {
                break;
            }
            self.journal_waiters.pop_front();
            match waiter {
                JournalWaiter::Created(id) => self.create_logs(id),
                JournalWaiter::Tombstone(id) => self.tombstone_durable(id),
                JournalWaiter::LogEnd { topic, partition, end } => self.ends_durable(topic, partition, end),
                JournalWaiter::Held(request) => self.release_held(request),
            }
        }
        self.maybe_finish_recovery();
    }
}

/// What the journal holds once its queued records are written, borrowed from the
/// broker's state.
struct Journaled<'a> {
    topics: &'a BTreeMap<TopicId, Topic>,
    next_topic_id: u64,
    offset_floor: u64,
    offsets: &'a CommittedOffsets,
    producers: &'a ProducerStates,
    next_producer_id: u64,
}

impl Journaled<'_> {
    /// The metadata state the journal describes (queued records included).
    fn meta_state(&self) -> MetaState {
        meta_state_of(self)
    }
}

/// The metadata state the journal describes (queued records included).
fn meta_state_of(j: &Journaled<'_>) -> MetaState {
    let (all, next_topic_id, offset_floor) = (j.topics, j.next_topic_id, j.offset_floor);
    let topics = all
        .values()
        .map(|t| {
            let removed = t.deletion.as_ref().map(|d| d.removed.clone()).unwrap_or_default();
            let remove_after = t.deletion.as_ref().map_or(Time::ZERO, |d| d.remove_after);
            (t.meta.id, MetaTopic { meta: t.meta.clone(), deleting: t.deletion.is_some(), removed, remove_after })
        })
        .collect();
    let ends = all
        .values()
        .filter(|t| t.deletion.is_none())
        .flat_map(|t| {
            let id = t.meta.id;
            t.partitions
                .iter()
                .enumerate()
                .filter(|(_, part)| part.journaled_end > t.meta.offset_base)
                .map(move |(p, part)| (LogId { topic: id, partition: p as u32 }, part.journaled_end))
        })
        .collect();
    MetaState {
        next_topic_id,
        topics,
        ends,
        offset_floor,
        offsets: j.offsets.clone(),
        next_producer_id: j.next_producer_id,
        producers: j.producers.clone(),
    }
}

/// The public description of a topic.
fn describe(t: &Topic) -> TopicDescription {
    TopicDescription {
        name: t.meta.name.clone(),
        id: t.meta.id,
        partitions: t.meta.partitions,
        settings: t.meta.settings.clone(),
        high_watermarks: t.partitions.iter().map(|p| p.high_watermark).collect(),
        log_start: t.meta.offset_base,
    }
}
