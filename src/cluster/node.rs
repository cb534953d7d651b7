//! One cluster node: commands and store results in, store operations and replies out,
//! with no I/O of its own, as [`crate::Broker`] is.
//!
//! Built so far: the metadata path, rules A (append) and F (fence) of DESIGN.md,
//! section 10. Every command waits for a fence: a round of listing `j/` after the
//! node's position and folding what it finds, until a listing finds nothing new; a
//! round serves every command that arrived before it began, so a busy node pays one
//! round per group of commands. After its fence, list and describe answer from the
//! catalog, and a create or delete is validated and appended at `position + 1` with a
//! conditional create; an append that meets another's entry folds it and runs again,
//! and one whose outcome is unknown reads the key back and knows its own entry by its
//! writer. A produce places its records as one node does and writes one segment per
//! partition with a conditional create at the end it knows (rule D), learning the end
//! again after a lost race, then waits for a second fence: acknowledged if the topic is
//! still live, else answered with an unknown outcome. A fetch lists and reads the
//! partition's segments, then waits for a second fence before it answers.
//!
//! Compaction (rule C): a node that has folded `compact_after_entries` entries past the
//! newest snapshot it knows creates `s/{S}` at its position `S`, then deletes the
//! entries and snapshots below it. A fence round that meets a gap, or an entry gone,
//! loads the newest snapshot; one that read entries folds them only if a listing of `s/`
//! issued after the reads finds no snapshot past its position (else it loads the
//! newest), and an append is taken as done only if no snapshot past its seq exists
//! (else a snapshot says whose entry the seq holds): a deleted key may be created again
//! by a create that was delayed.

use crate::broker::placement::{check_produce, place, Placement};
use crate::broker::Config;
use crate::cluster::catalog::{Catalog, DeleteOf, Folded};
use crate::cluster::entry::{self, Entry, EntryKind, EntryWriter};
use crate::cluster::keys::{
    journal_key, parse_journal_key, parse_segment_key, parse_snapshot_key, partition_prefix, segment_key, snapshot_key,
    topic_prefix, DATA_PREFIX, JOURNAL_PREFIX, SNAPSHOT_PREFIX,
};
use crate::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use crate::cluster::{segment, snapshot};
use crate::command::{Command, ProduceRecord, RecordPosition, Reply, StoredRecord, TopicDescription};
use crate::error::BrokerError;
use crate::ids::{RequestId, TopicId};
use crate::planted::Bug;
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Identifies one store operation of a node, to match its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoreOpId(pub u64);

/// What a node asks of its runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEffect {
    /// Carry out `op` on the shared store and report its result with `id`.
    Store {
        /// The operation's id.
        id: StoreOpId,
        /// The operation.
        op: StoreOp,
    },
    /// Answer a request.
    Reply {
        /// The request.
        request: RequestId,
        /// The answer.
        reply: Result<Reply, BrokerError>,
    },
}

/// How a node runs.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The node's id in the cluster.
    pub node: u32,
    /// This life of the node: never the same twice (see [`EntryWriter::boot`]).
    pub boot: u64,
    /// Limits and retry tuning, as for one node.
    pub config: Config,
    /// The most keys one listing of the journal asks for.
    pub list_limit: u32,
    /// How often an idle node reads the journal's tail on its own (rule H), in
    /// milliseconds; 0: only when a command needs a fence.
    pub tail_every_ms: u64,
    /// How often the node runs the reconciler (rule O), in milliseconds; 0: never.
    pub reconcile_every_ms: u64,
    /// Compaction (rule C): once the node has folded this many entries past the newest
    /// snapshot it knows (or past the start), it writes a snapshot of its catalog and
    /// deletes the entries before it; 0: never.
    pub compact_after_entries: u64,
    /// How long a request may wait for the store, in milliseconds, before it is answered
    /// anyway (rule H); 0: as long as it takes. A request that has written nothing yet
    /// is answered unavailable and dropped; one whose write is under way (a produce's
    /// segments, a create's or delete's entry) is answered with an unknown outcome, and
    /// its write goes on.
    pub request_timeout_ms: u64,
}

/// Why an operation was issued.
#[derive(Clone, Debug)]
enum Purpose {
    /// A fence round's listing of the journal.
    FenceList,
    /// A fence round's read of entry `seq`.
    FenceGet(u64),
    /// The conditional create of the append in flight.
    Append,
    /// Reading the append's key back after an unknown outcome or a lost race.
    AppendCheck,
    /// Listing a partition's segments after `after` (from the first if `None`).
    Segments { request: RequestId, partition: u32, after: Option<u64> },
    /// Reading the segment at `base`.
    ReadSegment { request: RequestId, partition: u32, base: u64 },
    /// Creating a produce's segment.
    WriteSegment { request: RequestId, partition: u32 },
    /// Reading a produce's segment key back after a lost race or an unknown outcome.
    CheckSegment { request: RequestId, partition: u32 },
    /// Listing what is left of an incarnation being removed.
    RemoveList(TopicId),
    /// Deleting one of its segments.
    RemoveSegment(TopicId),
    /// The reconciler's listing of `d/`.
    ReconcileList,
    /// The reconciler's delete of an orphan.
    ReconcileDelete,
    /// A fence round's listing of the snapshots past its position.
    FenceSnapshots,
    /// A fence round's read of the snapshot at this seq, to load it.
    FenceSnapshot(u64),
    /// Listing the snapshots past the append at this seq: was its key compacted away?
    AppendSnapshots(u64),
    /// Reading the snapshot (second seq) that judges the append (first seq).
    AppendSnapshot(u64, u64),
    /// Creating the snapshot at this seq.
    CompactWrite(u64),
    /// Reading it back after the create found it existing.
    CompactCheck(u64),
    /// Listing the keys compaction deletes.
    CompactList,
    /// Deleting one of them.
    CompactDelete,
}

/// What waits to be appended to the journal.
#[derive(Clone, Debug)]
enum Appendable {
    /// A client's create or delete, answered once appended.
    Client(RequestId, Command),
    /// The completion of this node's removal of an incarnation (rule R).
    Removed(TopicId),
}

/// What a command still needs once its first fence is done.
#[derive(Debug)]
enum After {
    /// The command itself: its first fence.
    Command(Command),
    /// A produce whose segments exist: acknowledged if its topic is still live.
    Produced,
    /// A fetch that has read its records, or found its offset past the end: answered
    /// so if its topic is still live.
    Fetched(Result<Reply, BrokerError>),
}

/// A produce or fetch between its two fences.
#[derive(Debug)]
enum Work {
    Produce {
        name: String,
        topic: TopicId,
        /// Where each record goes; offsets count from 0 in each partition until its
        /// segment's base is known.
        positions: Vec<RecordPosition>,
        parts: BTreeMap<u32, Part>,
    },
    Fetch {
        name: String,
        topic: TopicId,
        offset: u64,
        max_records: u32,
        /// The most bytes of keys and values to return (the first record whatever its size).
        max_bytes: u64,
        /// The partition's segments, as listed.
        bases: Vec<u64>,
        /// The high watermark, once the last segment is read.
        high_watermark: Option<u64>,
    },
}

/// One partition's share of a produce.
#[derive(Debug)]
struct Part {
    records: Vec<ProduceRecord>,
    writer: EntryWriter,
    /// The base it is being written at, and whether it is written.
    base: Option<u64>,
    written: bool,
}

/// A fence round in flight.
#[derive(Debug)]
struct Round {
    /// Its number: it serves the commands that arrived before it began.
    number: u64,
    /// Entries listed and being read, by seq; `Some` once read. Folded in seq order
    /// once all are read and a listing of `s/` issued after the reads shows that no
    /// compaction passed them (rule C).
    reads: BTreeMap<u64, Option<Entry>>,
    /// The listing of `s/` in flight, if any.
    search: Option<Search>,
}

/// A fence round's look for snapshots past its position.
#[derive(Debug)]
struct Search {
    /// Only snapshots past this seq count.
    from: u64,
    /// The newest listed so far.
    newest: Option<u64>,
    /// The journal has a gap (or a listed entry was gone): a snapshot past `from` must
    /// exist. Otherwise the round checks that its reads are not older than a snapshot.
    required: bool,
}

/// A page of a listing, and where the listing began.
#[derive(Debug)]
struct Page {
    /// The keys, in order: any under the prefix, ours or not.
    keys: Vec<String>,
    /// Whether keys may follow (the store says so: a page's length says nothing).
    more: bool,
    /// The listing's `after`.
    after: Option<String>,
}

impl Page {
    /// The page a listing `op` gave.
    fn of(keys: Vec<String>, more: bool, op: &StoreOp) -> Page {
        let after = match op {
            StoreOp::List { after, .. } => after.clone(),
            _ => None,
        };
        Page { keys, more, after }
    }

    /// Where the next page begins: after this page's last key, or, if it had none, where
    /// this one began.
    fn next(&self) -> Option<String> {
        self.keys.last().cloned().or_else(|| self.after.clone())
    }
}

/// Where a paged walk goes once the page in hand is done.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Then {
    /// That page was the last.
    Done,
    /// Lists on, after this key (`None`: from the start).
    From(Option<String>),
}

/// A compaction in flight (rule C).
#[derive(Debug)]
struct Compaction {
    /// Its snapshot's seq: the keys below it go.
    seq: u64,
    /// The snapshot's bytes until it is known to exist.
    bytes: Option<Vec<u8>>,
    /// The prefix being walked: `j/`, then `s/`.
    prefix: &'static str,
    /// Where the next listing goes on from.
    after: Option<String>,
    /// Deletes in flight.
    left: usize,
    /// The listing reached keys at or past `seq`, or the end.
    last_page: bool,
}

/// The entry being appended.
#[derive(Debug)]
struct Append {
    from: Appendable,
    seq: u64,
    entry: Entry,
    /// Once its key was read as holding this entry (`true`) or another's: whether a
    /// snapshot past `seq` exists, that is, whether the key may have been compacted and
    /// created again since (rule C), is being looked up.
    found_ours: Option<bool>,
}

/// What a snapshot past an append's seq says of it.
enum Verdict {
    /// The entry at its seq is ours.
    Ours,
    /// Another's: validate again and append at a later seq.
    Lost,
    /// The snapshot no longer tells (the incarnation it names is removed).
    Unknown,
}

/// A failed operation to issue again once its backoff ends.
#[derive(Debug)]
struct Retry {
    op: StoreOp,
    purpose: Purpose,
}

/// A cluster node.
#[derive(Debug)]
pub struct Node {
    options: NodeOptions,
    catalog: Catalog,
    effects: VecDeque<NodeEffect>,
    next_op: u64,
    next_nonce: u64,
    ops: BTreeMap<StoreOpId, (StoreOp, Purpose)>,
    /// Requests not yet answered.
    open: BTreeSet<RequestId>,
    /// When each open request is answered at the latest, by request and by time.
    deadline: BTreeMap<RequestId, Time>,
    deadlines: BTreeSet<(Time, RequestId)>,
    /// Requests answered at their deadline whose write goes on: their late answer is
    /// dropped, and their id stays taken until then.
    expired: BTreeSet<RequestId>,
    /// Fence rounds begun so far.
    rounds: u64,
    round: Option<Round>,
    /// Requests waiting for a fence, with the number of rounds begun when they arrived.
    waiting: Vec<(RequestId, After, u64)>,
    /// Produces and fetches between their two fences.
    work: BTreeMap<RequestId, Work>,
    /// Per partition, the end of its last segment as this node last learned it.
    ends: BTreeMap<(TopicId, u32), u64>,
    /// Per incarnation, where the next keyless record goes (round-robin).
    cursors: BTreeMap<TopicId, u32>,
    /// Entries to append, one at a time in arrival order.
    appends: VecDeque<Appendable>,
    appending: Option<Append>,
    /// The append lost its seq: fold before validating again.
    behind: bool,
    /// Failed operations by when they are issued again (then by arrival).
    retries: BTreeMap<(Time, u64), Retry>,
    /// Failures in a row, for the backoff; a success resets it.
    failures: u32,
    /// Set when the journal cannot be read on (an undecodable entry, a gap): every
    /// command is refused with it.
    broken: Option<String>,
    /// The latest time a caller gave.
    now: Time,
    /// When the node next reads the journal's tail on its own.
    next_tail: Option<Time>,
    /// Incarnations to remove, with when their grace delay (counted from when this node
    /// folded the tombstone) ends.
    removals: BTreeMap<TopicId, Time>,
    /// The removal in flight, and how many of its deletes are.
    removing: Option<(TopicId, usize)>,
    /// When the reconciler next runs.
    next_reconcile: Option<Time>,
    /// The reconciler's pass in flight: where its listing goes on once the page in
    /// hand is done, and how many of that page's deletes are in flight.
    reconciling: Option<(Then, usize)>,
    /// Orphans the reconciler has deleted, over the node's life.
    orphans_removed: u64,
    /// The newest snapshot this node wrote or loaded (0: none).
    snapshot_at: u64,
    /// The compaction in flight.
    compaction: Option<Compaction>,
}

impl Node {
    /// A node that has folded nothing yet; its first fence catches up.
    pub fn new(options: NodeOptions) -> Node {
        Node {
            options,
            catalog: Catalog::default(),
            effects: VecDeque::new(),
            next_op: 0,
            next_nonce: 0,
            ops: BTreeMap::new(),
            open: BTreeSet::new(),
            deadline: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            expired: BTreeSet::new(),
            rounds: 0,
            round: None,
            waiting: Vec::new(),
            work: BTreeMap::new(),
            ends: BTreeMap::new(),
            cursors: BTreeMap::new(),
            appends: VecDeque::new(),
            appending: None,
            behind: false,
            retries: BTreeMap::new(),
            failures: 0,
            broken: None,
            now: Time::ZERO,
            next_tail: None,
            removals: BTreeMap::new(),
            removing: None,
            next_reconcile: None,
            reconciling: None,
            orphans_removed: 0,
            snapshot_at: 0,
            compaction: None,
        }
    }

    /// The catalog as folded so far.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The next effect to carry out.
    pub fn poll_effect(&mut self) -> Option<NodeEffect> {
        self.effects.pop_front()
    }

    /// When the node next needs [`Node::handle_timeout`]: a failed operation's retry, a
    /// read of the journal's tail, the end of a removal's grace delay, or a request's
    /// deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        // A node that refuses to serve does nothing more on a timer.
        if self.broken.is_some() {
            return None;
        }
        let retry = self.retries.keys().next().map(|(at, _)| *at);
        let removal = self.removing.is_none().then(|| self.removals.values().min().copied()).flatten();
        let reconcile = self.next_reconcile.filter(|_| self.reconciling.is_none());
        let deadline = self.deadlines.first().map(|(at, _)| *at);
        [retry, self.next_tail, removal, reconcile, deadline].into_iter().flatten().min()
    }

    /// Lets time pass to `now`: issues again every failed operation whose backoff has
    /// ended, reads the journal's tail if it is time, and starts a removal whose grace
    /// delay has ended.
    pub fn handle_timeout(&mut self, now: Time) {
        self.clock(now);
        while let Some(&(at, request)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            self.deadline.remove(&request);
            self.expire(request);
        }
        while let Some(entry) = self.retries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let retry = entry.remove();
            self.issue(retry.op, retry.purpose);
        }
        if self.next_tail.is_some_and(|at| at <= now) && self.broken.is_none() {
            self.next_tail = Some(now.plus_millis(self.options.tail_every_ms));
            if self.round.is_none() && !self.planted(Bug::ClusterNoTailing) {
                self.begin_round();
            }
        }
        self.start_removal();
        if self.next_reconcile.is_some_and(|at| at <= now) && self.reconciling.is_none() && self.broken.is_none() {
            self.next_reconcile = Some(now.plus_millis(self.options.reconcile_every_ms));
            self.reconciling = Some((Then::From(None), 0));
            self.list_orphans(None);
        }
    }

    fn clock(&mut self, now: Time) {
        self.now = self.now.max(now);
        if self.next_tail.is_none() && self.options.tail_every_ms > 0 {
            self.next_tail = Some(self.now.plus_millis(self.options.tail_every_ms));
        }
        if self.next_reconcile.is_none() && self.options.reconcile_every_ms > 0 {
            self.next_reconcile = Some(self.now.plus_millis(self.options.reconcile_every_ms));
        }
    }

    /// Whether the node has nothing under way: no store operation in flight or waiting
    /// for its retry, no fence round, and no command, append or removal unfinished
    /// (timers for tailing and the reconciler aside).
    pub fn idle(&self) -> bool {
        self.ops.is_empty()
            && self.retries.is_empty()
            && self.round.is_none()
            && self.waiting.is_empty()
            && self.work.is_empty()
            && self.appends.is_empty()
            && self.appending.is_none()
            && self.removing.is_none()
    }

    /// How many orphan segments the reconciler has deleted in this life of the node.
    pub fn orphans_removed(&self) -> u64 {
        self.orphans_removed
    }

    /// A client command.
    pub fn handle_command(&mut self, now: Time, request: RequestId, command: Command) {
        self.clock(now);
        if self.expired.contains(&request) || !self.open.insert(request) {
            return self
                .effects
                .push_back(NodeEffect::Reply { request, reply: Err(BrokerError::DuplicateRequestId(request.0)) });
        }
        if self.options.request_timeout_ms > 0 {
            let at = now.plus_millis(self.options.request_timeout_ms);
            self.deadline.insert(request, at);
            self.deadlines.insert((at, request));
        }
        if let Some(why) = &self.broken {
            let reply = Err(BrokerError::Unavailable(why.clone()));
            return self.reply(request, reply);
        }
        let produce = matches!(command, Command::Produce { .. });
        let unverified = produce && self.planted(Bug::ClusterProduceUnverified);
        if (unverified || self.planted(Bug::ClusterSkipFence)) && self.catalog.position() > 0 {
            self.fenced(request, command);
            return self.pump_appends();
        }
        self.await_fence(request, After::Command(command));
    }

    /// Whether a planted bug is on (only in a build with the `planted-bugs` feature).
    fn planted(&self, bug: Bug) -> bool {
        crate::planted::ENABLED && self.options.config.bugs.has(bug)
    }

    /// Holds `after` until a fence round that begins from now on has completed.
    fn await_fence(&mut self, request: RequestId, after: After) {
        self.waiting.push((request, after, self.rounds));
        if self.round.is_none() {
            self.begin_round();
        }
    }

    /// The result of store operation `id`.
    pub fn handle_store(&mut self, now: Time, id: StoreOpId, result: StoreResult) {
        self.clock(now);
        let Some((op, purpose)) = self.ops.remove(&id) else { return };
        let output = match result {
            Ok(output) => {
                self.failures = 0;
                output
            }
            // An unknown outcome of the append is resolved by reading its key back.
            Err(StoreError::Unknown(_)) if matches!(purpose, Purpose::Append) => {
                return self.check_append();
            }
            Err(StoreError::Unknown(_)) if matches!(purpose, Purpose::WriteSegment { .. }) => {
                let Purpose::WriteSegment { request, partition } = purpose else { return };
                return self.check_segment(request, partition);
            }
            Err(_) => {
                // Nothing happened (or, for a read, nothing was learned): try again.
                let delay = self.options.config.backoff_ms(self.failures);
                self.failures = self.failures.saturating_add(1);
                let at = now.plus_millis(delay);
                self.retries.insert((at, id.0), Retry { op, purpose });
                return;
            }
        };
        match (purpose, output) {
            (Purpose::FenceList, StoreOutput::Listed { keys, more }) => self.listed(Page::of(keys, more, &op)),
            (Purpose::FenceGet(seq), StoreOutput::Found(bytes)) => self.read_entry(seq, &bytes),
            // Compacted since it was listed: a snapshot past it exists.
            (Purpose::FenceGet(seq), StoreOutput::Missing) => self.entry_gone(seq),
            (Purpose::FenceSnapshots, StoreOutput::Listed { keys, more }) => {
                self.snapshots_listed(Page::of(keys, more, &op))
            }
            (Purpose::FenceSnapshot(seq), StoreOutput::Found(bytes)) => self.snapshot_read(seq, &bytes),
            // Compacted in turn: a newer one exists.
            (Purpose::FenceSnapshot(_), StoreOutput::Missing) => self.search_again(),
            (Purpose::Append, StoreOutput::Created) => self.verify_append(true),
            (Purpose::Append, StoreOutput::Exists) if self.planted(Bug::ClusterUnconditionalAppend) => self.appended(),
            (Purpose::Append, StoreOutput::Exists) => self.check_append(),
            (Purpose::AppendCheck, StoreOutput::Found(bytes)) => self.append_checked(&bytes),
            (Purpose::Segments { request, partition, after }, StoreOutput::Listed { keys, more }) => {
                self.segments_listed(request, partition, after, Page::of(keys, more, &op));
            }
            (Purpose::ReadSegment { request, partition, base }, StoreOutput::Found(bytes)) => {
                self.segment_read(request, partition, base, &bytes);
            }
            (Purpose::ReadSegment { request, .. }, StoreOutput::Missing) => {
                // Removed: its topic's tombstone is in the journal, so the request is
                // answered as after the delete (a produce has written nothing yet).
                self.data_not_found(request);
            }
            (Purpose::WriteSegment { request, partition }, StoreOutput::Created) => {
                self.part_written(request, partition)
            }
            (Purpose::WriteSegment { request, partition }, StoreOutput::Exists) => {
                self.check_segment(request, partition)
            }
            (Purpose::CheckSegment { request, partition }, StoreOutput::Found(bytes)) => {
                self.segment_checked(request, partition, &bytes);
            }
            (Purpose::CheckSegment { request, partition }, StoreOutput::Missing) => {
                if let Some(base) = self.part(request, partition).and_then(|p| p.base) {
                    self.write_part(request, partition, base);
                }
            }
            (Purpose::RemoveList(topic), StoreOutput::Listed { keys, more }) => {
                self.removal_listed(topic, Page::of(keys, more, &op))
            }
            (Purpose::RemoveSegment(topic), StoreOutput::Deleted) => self.segment_removed(topic),
            (Purpose::ReconcileList, StoreOutput::Listed { keys, more }) => {
                self.orphans_listed(Page::of(keys, more, &op))
            }
            (Purpose::ReconcileDelete, StoreOutput::Deleted) => self.orphan_deleted(),
            (Purpose::AppendSnapshots(seq), StoreOutput::Listed { keys, more }) => {
                self.append_snapshots_listed(seq, Page::of(keys, more, &op))
            }
            (Purpose::AppendSnapshot(seq, at), StoreOutput::Found(bytes)) => self.judge_append(seq, at, &bytes),
            (Purpose::AppendSnapshot(seq, _), StoreOutput::Missing) => self.list_append_snapshots(seq, None),
            (Purpose::CompactWrite(seq), StoreOutput::Created) => self.snapshot_written(seq),
            (Purpose::CompactWrite(seq), StoreOutput::Exists) => {
                self.issue(StoreOp::Get { key: snapshot_key(seq) }, Purpose::CompactCheck(seq));
            }
            (Purpose::CompactCheck(seq), StoreOutput::Found(bytes)) => self.snapshot_checked(seq, &bytes),
            // Deleted by a newer compaction, which deletes what this one would.
            (Purpose::CompactCheck(_), StoreOutput::Missing) => self.compaction = None,
            (Purpose::CompactList, StoreOutput::Listed { keys, more }) => {
                self.compaction_listed(Page::of(keys, more, &op))
            }
            (Purpose::CompactDelete, StoreOutput::Deleted) => self.compaction_deleted(),
            (Purpose::AppendCheck, StoreOutput::Missing) => {
                // The unknown create did not land (yet), or landed and was compacted:
                // create again; should the first land after all, the second finds it and
                // reads it back as ours, and either way a snapshot past the seq, if any,
                // judges (rule C).
                if let Some(a) = &self.appending {
                    let op = StoreOp::Create { key: journal_key(a.seq), bytes: entry::encode(a.seq, &a.entry) };
                    self.issue(op, Purpose::Append);
                }
            }
            (purpose, output) => {
                self.break_down(format!(
                    "the store answered {purpose:?} with {output:?}, which the contract rules out"
                ));
            }
        }
    }

    fn issue(&mut self, op: StoreOp, purpose: Purpose) {
        let id = StoreOpId(self.next_op);
        self.next_op += 1;
        self.ops.insert(id, (op.clone(), purpose));
        self.effects.push_back(NodeEffect::Store { id, op });
    }

    fn reply(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        if self.expired.remove(&request) {
            return;
        }
        self.open.remove(&request);
        if let Some(at) = self.deadline.remove(&request) {
            self.deadlines.remove(&(at, request));
        }
        self.effects.push_back(NodeEffect::Reply { request, reply });
    }

    /// `request` reached its deadline unanswered (rule H).
    fn expire(&mut self, request: RequestId) {
        if !self.open.contains(&request) {
            return;
        }
        let waited = self.options.request_timeout_ms;
        let nothing_done = || {
            BrokerError::Unavailable(format!(
                "the shared store did not answer within {waited} ms; nothing was written: try again"
            ))
        };
        // Waiting for its first fence, or a fetch anywhere: nothing is written.
        let unstarted = |after: &After| matches!(after, After::Command(_) | After::Fetched(_));
        if let Some(i) = self.waiting.iter().position(|(r, after, _)| *r == request && unstarted(after)) {
            self.waiting.remove(i);
            self.work.remove(&request);
            return self.reply(request, Err(nothing_done()));
        }
        if matches!(self.work.get(&request), Some(Work::Fetch { .. })) {
            self.work.remove(&request);
            return self.reply(request, Err(nothing_done()));
        }
        if let Some(i) = self.appends.iter().position(|a| matches!(a, Appendable::Client(r, _) if *r == request)) {
            self.appends.remove(i);
            return self.reply(request, Err(nothing_done()));
        }
        let appending =
            self.appending.as_ref().is_some_and(|a| matches!(a.from, Appendable::Client(r, _) if r == request));
        if appending && self.planted(Bug::ClusterUnavailableAppend) {
            self.reply(request, Err(nothing_done()));
            self.expired.insert(request);
            return;
        }
        // A produce writing its segments or waiting for its second fence, or a create or
        // delete being appended: the write goes on and may take effect.
        let why = format!(
            "the shared store did not answer within {waited} ms while the write was under way: it may or may not \
             take effect"
        );
        self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
        self.expired.insert(request);
    }

    /// The journal cannot be read on: refuse everything waiting, and all that comes.
    fn break_down(&mut self, why: String) {
        self.broken = Some(why.clone());
        self.round = None;
        let waiting: Vec<RequestId> = self.waiting.drain(..).map(|(r, _, _)| r).collect();
        let work: Vec<RequestId> =
            std::mem::take(&mut self.work).into_keys().filter(|r| !waiting.contains(r)).collect();
        let client = |a: Appendable| match a {
            Appendable::Client(request, _) => Some(request),
            Appendable::Removed(_) => None,
        };
        let appends: Vec<RequestId> = self.appends.drain(..).filter_map(client).collect();
        let appending = self.appending.take().and_then(|a| client(a.from));
        for request in waiting.into_iter().chain(work).chain(appends).chain(appending) {
            self.reply(request, Err(BrokerError::Unavailable(why.clone())));
        }
    }

    // ---- rule F: the fence ----

    fn begin_round(&mut self) {
        self.rounds += 1;
        self.round = Some(Round { number: self.rounds, reads: BTreeMap::new(), search: None });
        self.list_journal();
    }

    fn list_journal(&mut self) {
        self.list_journal_after(None);
    }

    /// Lists `j/` past the position, and past `key` (where a page that brought nothing
    /// new ended: keys outside the layout, or entries folded meanwhile).
    fn list_journal_after(&mut self, key: Option<String>) {
        let position = self.catalog.position();
        let after = (position > 0).then(|| journal_key(position)).max(key);
        let op = StoreOp::List { prefix: JOURNAL_PREFIX.into(), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::FenceList);
    }

    fn listed(&mut self, page: Page) {
        if self.round.as_ref().is_none_or(|r| r.search.is_some()) {
            return;
        }
        let position = self.catalog.position();
        // Only ours are listed under `j/`: anything else is skipped. Entries at or below
        // the position were folded while the listing was in flight (this node's own
        // append).
        let seqs: Vec<u64> = page.keys.iter().filter_map(|k| parse_journal_key(k)).filter(|s| *s > position).collect();
        if seqs.is_empty() {
            // Nothing new on this page (entries folded meanwhile, keys outside the layout,
            // or no keys at all): the round ends only at the listing's last page.
            return if page.more { self.list_journal_after(page.next()) } else { self.end_round() };
        }
        if seqs.iter().zip(position + 1..).any(|(seq, expected)| *seq != expected) {
            let next = position.saturating_add(1);
            let covered = page.after.as_ref().is_none_or(|after| *after <= journal_key(position));
            if !covered {
                // The walk passed the next entry's key on an earlier page that did not
                // hold it (keys outside the layout led it there): that entry may have
                // landed since, behind the walk. It is read: found, it is folded and the
                // walk starts again from it; missing, it was compacted.
                if let Some(round) = self.round.as_mut() {
                    round.reads.insert(next, None);
                }
                return self.issue(StoreOp::Get { key: journal_key(next) }, Purpose::FenceGet(next));
            }
            // A gap on a page that began at the position: the entries after it were
            // compacted (rule C).
            return self.search_snapshots(true);
        }
        for seq in seqs {
            if let Some(round) = self.round.as_mut() {
                round.reads.insert(seq, None);
            }
            self.issue(StoreOp::Get { key: journal_key(seq) }, Purpose::FenceGet(seq));
        }
    }

    fn read_entry(&mut self, seq: u64, bytes: &[u8]) {
        let entry = match entry::decode(seq, bytes) {
            Ok(entry) => entry,
            Err(e) => return self.break_down(format!("journal entry {seq} is corrupt: {e}")),
        };
        // Only an entry the round waits for (not one folded meanwhile by this node's
        // own append, nor one read before the round looked for snapshots).
        let Some(round) = self.round.as_mut().filter(|r| r.search.is_none()) else { return };
        let Some(read) = round.reads.get_mut(&seq) else { return };
        *read = Some(entry);
        self.advance_round();
    }

    /// Once every entry listed is read, checks that no snapshot past the position
    /// exists before folding them; once all are folded, lists again, until a listing
    /// finds nothing. Entries folded meanwhile by another path (this node's own append)
    /// are dropped from the round.
    fn advance_round(&mut self) {
        let position = self.catalog.position();
        let Some(round) = self.round.as_mut().filter(|r| r.search.is_none()) else { return };
        round.reads.retain(|seq, _| *seq > position);
        if round.reads.is_empty() {
            self.list_journal();
        } else if round.reads.values().all(Option::is_some) {
            self.search_snapshots(false);
        }
    }

    fn fold(&mut self, entry: &Entry) {
        // A contradicting entry is ignored alike on every node (see `Catalog::fold`).
        if self.catalog.fold(entry) != Folded::Applied {
            return;
        }
        match &entry.kind {
            EntryKind::Delete { topic, .. } => {
                let grace = self
                    .catalog
                    .deleting()
                    .find(|(id, _)| id == topic)
                    .map_or(0, |(_, t)| t.settings.deletion_grace_ms);
                self.removals.insert(*topic, self.now.plus_millis(grace));
            }
            EntryKind::Removed { topic } => {
                self.removals.remove(topic);
                self.ends.retain(|(t, _), _| t != topic);
                self.cursors.remove(topic);
                if self.removing.is_some_and(|(t, _)| t == *topic) {
                    self.removing = None;
                }
            }
            EntryKind::Create { .. } => {}
        }
    }

    fn end_round(&mut self) {
        let Some(round) = self.round.take() else { return };
        self.maybe_compact();
        self.behind = false;
        let (served, later): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|(_, _, tag)| *tag < round.number);
        self.waiting = later;
        for (request, after, _) in served {
            match after {
                After::Command(command) => self.fenced(request, command),
                After::Produced => self.produced(request),
                After::Fetched(reply) => self.fetched(request, reply),
            }
        }
        if !self.waiting.is_empty() {
            self.begin_round();
        }
        self.pump_appends();
    }

    /// A command whose fence has completed.
    fn fenced(&mut self, request: RequestId, command: Command) {
        match command {
            Command::ListTopics => {
                let topics = self.catalog.live_topics().map(|(n, id, t)| describe(n, id, t, &self.ends)).collect();
                self.reply(request, Ok(Reply::Topics(topics)));
            }
            Command::DescribeTopic { name } => {
                let reply = match self.catalog.live(&name) {
                    Some((id, t)) => Ok(Reply::Described(describe(&name, id, t, &self.ends))),
                    None => Err(BrokerError::TopicNotFound { name }),
                };
                self.reply(request, reply);
            }
            Command::Produce { topic, partition, records } => self.produce(request, topic, partition, records),
            Command::Fetch { topic, partition, offset, max_records, max_bytes } => {
                self.fetch(request, topic, partition, offset, max_records, max_bytes);
            }
            command => self.appends.push_back(Appendable::Client(request, command)),
        }
    }

    // ---- rule D: the data ----

    fn produce(&mut self, request: RequestId, name: String, partition: Option<u32>, records: Vec<ProduceRecord>) {
        let Some((topic, t)) = self.catalog.live(&name) else {
            return self.reply(request, Err(BrokerError::TopicNotFound { name }));
        };
        let partitions = t.partitions;
        if let Err(e) = check_produce(&self.options.config, &name, partitions, partition, &records) {
            return self.reply(request, Err(e));
        }
        let cursor = self.cursors.get(&topic).copied().unwrap_or(0);
        let Placement { batches, positions, cursor } = place(partitions, cursor, partition, records);
        self.cursors.insert(topic, cursor);
        let mut parts = BTreeMap::new();
        for (p, records) in batches {
            let writer = EntryWriter { node: self.options.node, boot: self.options.boot, nonce: self.next_nonce };
            self.next_nonce += 1;
            parts.insert(p, Part { records, writer, base: None, written: false });
        }
        let ps: Vec<u32> = parts.keys().copied().collect();
        self.work.insert(request, Work::Produce { name, topic, positions, parts });
        for p in ps {
            match self.ends.get(&(topic, p)) {
                Some(&end) => self.write_part(request, p, end),
                None => self.list_segments(request, topic, p, None),
            }
        }
    }

    fn fetch(
        &mut self,
        request: RequestId,
        name: String,
        partition: u32,
        offset: u64,
        max_records: u32,
        max_bytes: Option<u64>,
    ) {
        let Some((topic, t)) = self.catalog.live(&name) else {
            return self.reply(request, Err(BrokerError::TopicNotFound { name }));
        };
        if partition >= t.partitions {
            let partitions = t.partitions;
            return self.reply(request, Err(BrokerError::PartitionNotFound { name, partition, partitions }));
        }
        let max = self.options.config.max_fetch_records;
        if max_records == 0 || max_records > max {
            let e = BrokerError::InvalidRequest(format!("max_records must be between 1 and {max}"));
            return self.reply(request, Err(e));
        }
        let limit = self.options.config.max_fetch_bytes;
        let max_bytes = max_bytes.map_or(limit, |b| b.min(limit));
        let work = Work::Fetch { name, topic, offset, max_records, max_bytes, bases: Vec::new(), high_watermark: None };
        self.work.insert(request, work);
        self.list_segments(request, topic, partition, None);
    }

    fn part(&self, request: RequestId, partition: u32) -> Option<&Part> {
        match self.work.get(&request) {
            Some(Work::Produce { parts, .. }) => parts.get(&partition),
            _ => None,
        }
    }

    fn list_segments(&mut self, request: RequestId, topic: TopicId, partition: u32, after: Option<u64>) {
        self.list_segments_after(request, topic, partition, after, None);
    }

    /// Lists the partition past `after`'s segment, or past `key` (the last key of the page
    /// before, a foreign key maybe).
    fn list_segments_after(
        &mut self,
        request: RequestId,
        topic: TopicId,
        partition: u32,
        after: Option<u64>,
        key: Option<String>,
    ) {
        let op = StoreOp::List {
            prefix: partition_prefix(topic, partition),
            after: key.or_else(|| after.map(|base| segment_key(topic, partition, base))),
            limit: self.options.list_limit.max(1),
        };
        self.issue(op, Purpose::Segments { request, partition, after });
    }

    fn segments_listed(&mut self, request: RequestId, partition: u32, after: Option<u64>, page: Page) {
        let Some(work) = self.work.get_mut(&request) else { return };
        let topic = match work {
            Work::Produce { topic, .. } | Work::Fetch { topic, .. } => *topic,
        };
        let listed: Vec<u64> = page
            .keys
            .iter()
            .filter_map(|k| parse_segment_key(k))
            .filter(|(t, p, _)| *t == topic && *p == partition)
            .map(|(_, _, base)| base)
            .collect();
        let is_produce = matches!(work, Work::Produce { .. });
        if let Work::Fetch { bases, .. } = work {
            bases.extend(&listed);
        }
        let last = listed.last().copied().or(after);
        if page.more {
            return self.list_segments_after(request, topic, partition, last, page.next());
        }
        let cached = self.ends.get(&(topic, partition)).copied();
        match (last, after, cached) {
            // A produce that lost a race learned the end past the winner's segment; with
            // nothing after it, that end is the partition's.
            (Some(b), Some(a), Some(end)) if b == a && is_produce => self.end_known(request, partition, end, None),
            (Some(base), _, _) => {
                let key = segment_key(topic, partition, base);
                self.issue(StoreOp::Get { key }, Purpose::ReadSegment { request, partition, base });
            }
            (None, _, _) => self.end_known(request, partition, 0, None),
        }
    }

    fn segment_read(&mut self, request: RequestId, partition: u32, base: u64, bytes: &[u8]) {
        let Some(work) = self.work.get(&request) else { return };
        let topic = match work {
            Work::Produce { topic, .. } | Work::Fetch { topic, .. } => *topic,
        };
        match segment::decode(topic, partition, base, bytes) {
            Ok(seg) => {
                let waiting_for_end = match work {
                    Work::Produce { .. } => true,
                    Work::Fetch { high_watermark, .. } => high_watermark.is_none(),
                };
                if waiting_for_end {
                    let end = base + seg.records.len() as u64;
                    self.end_known(request, partition, end, Some((base, seg.records)));
                } else if let Some(Work::Fetch { offset, bases, high_watermark, .. }) = self.work.get_mut(&request) {
                    if base + (seg.records.len() as u64) <= *offset {
                        // The segment ends before the offset, below the end the walk
                        // found: segments landed behind the walk (keys outside the layout
                        // led it past their keys). The walk goes again from this one.
                        *high_watermark = None;
                        bases.retain(|b| *b <= base);
                        return self.list_segments(request, topic, partition, Some(base));
                    }
                    self.serve_fetch(request, base, seg.records);
                }
            }
            Err(e) => {
                let log = segment_key(topic, partition, base);
                self.work.remove(&request);
                self.reply(request, Err(BrokerError::CorruptRecord { log, offset: base, detail: e.to_string() }));
            }
        }
    }

    /// The partition's end is `end`; `last` is its last segment, if read.
    fn end_known(&mut self, request: RequestId, partition: u32, end: u64, last: Option<(u64, Vec<ProduceRecord>)>) {
        let Some(work) = self.work.get_mut(&request) else { return };
        match work {
            Work::Produce { topic, .. } => {
                let topic = *topic;
                self.ends.insert((topic, partition), end);
                self.write_part(request, partition, end);
            }
            Work::Fetch { topic, offset, bases, high_watermark, .. } => {
                let (topic, offset) = (*topic, *offset);
                *high_watermark = Some(end);
                if offset > end {
                    // The listing may have met a removal under way (segments past `end`
                    // already deleted): answered only if a second fence shows it live.
                    let reply = Err(BrokerError::OffsetOutOfRange { offset, high_watermark: end });
                    if self.planted(Bug::ClusterUnfencedOutOfRange) {
                        self.work.remove(&request);
                        return self.reply(request, reply);
                    }
                    if self.planted(Bug::ClusterSkipFence) {
                        return self.fetched(request, reply);
                    }
                    return self.await_fence(request, After::Fetched(reply));
                }
                if offset == end {
                    return self.serve_fetch(request, end, Vec::new());
                }
                // The segment that holds `offset`: the last one whose base is at most it.
                let base = bases.iter().copied().filter(|b| *b <= offset).max().unwrap_or(0);
                match last {
                    Some((last_base, records)) if last_base == base => self.serve_fetch(request, base, records),
                    _ => {
                        let key = segment_key(topic, partition, base);
                        self.issue(StoreOp::Get { key }, Purpose::ReadSegment { request, partition, base });
                    }
                }
            }
        }
    }

    fn serve_fetch(&mut self, request: RequestId, base: u64, records: Vec<ProduceRecord>) {
        let Some(Work::Fetch { topic, offset, max_records, max_bytes, high_watermark, .. }) = self.work.get(&request)
        else {
            return;
        };
        let (topic, offset, max_records, max_bytes) = (*topic, *offset, *max_records, *max_bytes);
        let high_watermark = high_watermark.unwrap_or(offset);
        let skip = offset.saturating_sub(base) as usize;
        let mut bytes = 0u64;
        let records: Vec<StoredRecord> = records
            .into_iter()
            .enumerate()
            .skip(skip)
            .take(max_records as usize)
            .map(|(i, r)| StoredRecord { offset: base + i as u64, key: r.key, value: r.value })
            .take_while(|r| {
                let first = bytes == 0;
                bytes += (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64;
                first || bytes <= max_bytes
            })
            .collect();
        // Answered only if a fence begun after the read still shows the topic live.
        let reply = Reply::Fetched { topic, records, high_watermark };
        if self.planted(Bug::ClusterSkipFence) {
            return self.fetched(request, Ok(reply));
        }
        self.await_fence(request, After::Fetched(Ok(reply)));
    }

    fn write_part(&mut self, request: RequestId, partition: u32, base: u64) {
        let Some(Work::Produce { name, topic, parts, .. }) = self.work.get_mut(&request) else { return };
        let topic = *topic;
        let Some(part) = parts.get_mut(&partition) else { return };
        if base.checked_add(part.records.len() as u64).is_none() {
            // As on one node; only a forged store has a segment ending this far.
            let e = BrokerError::Storage(format!("partition {partition} of {name:?} has run out of offsets"));
            self.work.remove(&request);
            return self.reply(request, Err(e));
        }
        part.base = Some(base);
        let bytes = segment::encode(topic, partition, base, part.writer, &part.records);
        let op = StoreOp::Create { key: segment_key(topic, partition, base), bytes };
        self.issue(op, Purpose::WriteSegment { request, partition });
    }

    fn check_segment(&mut self, request: RequestId, partition: u32) {
        let Some(Work::Produce { topic, parts, .. }) = self.work.get(&request) else { return };
        let Some(base) = parts.get(&partition).and_then(|p| p.base) else { return };
        let key = segment_key(*topic, partition, base);
        self.issue(StoreOp::Get { key }, Purpose::CheckSegment { request, partition });
    }

    fn segment_checked(&mut self, request: RequestId, partition: u32, bytes: &[u8]) {
        let Some(Work::Produce { topic, parts, .. }) = self.work.get(&request) else { return };
        let topic = *topic;
        let Some(part) = parts.get(&partition) else { return };
        let Some(base) = part.base else { return };
        match segment::decode(topic, partition, base, bytes) {
            Ok(seg) if seg.writer == part.writer => self.part_written(request, partition),
            Ok(seg) => {
                // Another node appended first: learn the end past its segment, retry.
                self.ends.insert((topic, partition), base + seg.records.len() as u64);
                self.list_segments(request, topic, partition, Some(base));
            }
            Err(e) => {
                let log = segment_key(topic, partition, base);
                self.work.remove(&request);
                self.reply(request, Err(BrokerError::CorruptRecord { log, offset: base, detail: e.to_string() }));
            }
        }
    }

    fn part_written(&mut self, request: RequestId, partition: u32) {
        let Some(Work::Produce { topic, parts, .. }) = self.work.get_mut(&request) else { return };
        let topic = *topic;
        let Some(part) = parts.get_mut(&partition) else { return };
        let Some(base) = part.base else { return };
        part.written = true;
        let end = base + part.records.len() as u64;
        let all = parts.values().all(|p| p.written);
        let known = self.ends.entry((topic, partition)).or_insert(end);
        *known = (*known).max(end);
        if all && (self.planted(Bug::ClusterProduceUnverified) || self.planted(Bug::ClusterSkipFence)) {
            self.produced(request);
        } else if all {
            self.await_fence(request, After::Produced);
        }
    }

    /// A produce whose segments all exist, after its second fence.
    fn produced(&mut self, request: RequestId) {
        let Some(Work::Produce { name, topic, mut positions, parts }) = self.work.remove(&request) else { return };
        if self.catalog.live(&name).map(|(id, _)| id) != Some(topic) {
            let why = format!(
                "topic {name:?} ({topic}) was deleted while the produce was in flight: its records may have been \
                 written, and read, before the deletion"
            );
            return self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
        }
        for position in &mut positions {
            position.offset += parts.get(&position.partition).and_then(|p| p.base).unwrap_or(0);
        }
        self.reply(request, Ok(Reply::Produced { topic, positions }));
    }

    /// A fetch that has read its records, after its second fence.
    fn fetched(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let Some(Work::Fetch { name, topic, .. }) = self.work.remove(&request) else { return };
        let live = self.catalog.live_topics().any(|(_, id, _)| id == topic);
        if live {
            self.reply(request, reply);
        } else {
            self.reply(request, Err(BrokerError::TopicNotFound { name }));
        }
    }

    /// A segment vanished while a request read it: its topic is being removed.
    /// A produce that has issued a segment's create already may have had it land before
    /// the tombstone, and read: its outcome is unknown.
    fn data_not_found(&mut self, request: RequestId) {
        let planted = self.planted(Bug::ClusterProduceNotFoundAfterWrite);
        let reply = match self.work.remove(&request) {
            Some(Work::Produce { name, topic, parts, .. }) if parts.values().any(|p| p.base.is_some()) && !planted => {
                BrokerError::OutcomeUnknown(format!(
                    "topic {name:?} ({topic}) was deleted while the produce was in flight: some of its records may \
                     have been written, and read, before the deletion"
                ))
            }
            Some(Work::Produce { name, .. } | Work::Fetch { name, .. }) => BrokerError::TopicNotFound { name },
            None => return,
        };
        self.reply(request, Err(reply));
    }

    // ---- rule R: removal ----

    /// Starts removing the incarnation whose grace delay ended first, if none is being
    /// removed. Every node does this for every tombstone it folds: deletes are
    /// idempotent, so removals running at once on several nodes do no harm, and a node
    /// that dies mid-removal leaves the rest to the others.
    fn start_removal(&mut self) {
        if self.removing.is_some() || self.broken.is_some() {
            return;
        }
        let Some((&topic, _)) = self.removals.iter().filter(|(_, at)| **at <= self.now).min_by_key(|(_, at)| **at)
        else {
            return;
        };
        self.removing = Some((topic, 0));
        self.list_removal(topic, None);
    }

    fn list_removal(&mut self, topic: TopicId, after: Option<String>) {
        let op = StoreOp::List { prefix: topic_prefix(topic), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::RemoveList(topic));
    }

    /// Deletes the segments a page lists, then lists again from the start; a page with
    /// none goes on to the next, and only a walk to the last page that finds none
    /// records the removal.
    fn removal_listed(&mut self, topic: TopicId, page: Page) {
        if self.removing.map(|(t, _)| t) != Some(topic) {
            return;
        }
        let next = page.next();
        let segments: Vec<String> =
            page.keys.into_iter().filter(|k| parse_segment_key(k).is_some_and(|(t, _, _)| t == topic)).collect();
        if segments.is_empty() && page.more {
            return self.list_removal(topic, next);
        }
        if segments.is_empty() {
            // Nothing of it is left: record that once (an append validates again, so a
            // completion another node appended first is not repeated).
            self.removals.remove(&topic);
            self.removing = None;
            self.appends.push_back(Appendable::Removed(topic));
            self.pump_appends();
            return self.start_removal();
        }
        self.removing = Some((topic, segments.len()));
        for key in segments {
            self.issue(StoreOp::Delete { key }, Purpose::RemoveSegment(topic));
        }
    }

    fn segment_removed(&mut self, topic: TopicId) {
        let Some((t, left)) = self.removing.as_mut().filter(|(t, _)| *t == topic) else { return };
        *left -= 1;
        if *left == 0 {
            let t = *t;
            // List again: more than one listing's worth, or a late write.
            self.list_removal(t, None);
        }
    }

    // ---- rule O: the reconciler ----

    fn list_orphans(&mut self, after: Option<String>) {
        let op = StoreOp::List { prefix: DATA_PREFIX.into(), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::ReconcileList);
    }

    /// Deletes every listed segment whose incarnation this node knows to be removed;
    /// never one of a live or pending incarnation, never one whose id is past the
    /// node's position (a create not folded yet), never a key outside the layout. The
    /// segments of a live incarnation are skipped over in one step.
    fn orphans_listed(&mut self, page: Page) {
        if self.reconciling.is_none() {
            return;
        }
        // The next page starts after the last key, or, if that is a segment of an
        // incarnation not removed, after all of that incarnation's keys ('~' sorts after
        // its partitions), so a long live topic is skipped in one step.
        let next = page.next().map(|last| match parse_segment_key(&last) {
            Some((topic, _, _)) if !self.catalog.is_removed(topic) => format!("{}~", topic_prefix(topic)),
            _ => last,
        });
        let then = if page.more { Then::From(next) } else { Then::Done };
        let unknown_ids = self.planted(Bug::ClusterReconcileUnknownIds);
        let orphan = |t: TopicId| {
            self.catalog.is_removed(t) || (unknown_ids && !self.catalog.live_topics().any(|(_, id, _)| id == t))
        };
        let orphans: Vec<String> =
            page.keys.into_iter().filter(|k| parse_segment_key(k).is_some_and(|(t, _, _)| orphan(t))).collect();
        self.reconciling = Some((then.clone(), orphans.len()));
        for key in orphans {
            self.issue(StoreOp::Delete { key }, Purpose::ReconcileDelete);
        }
        if self.reconciling.as_ref().is_some_and(|(_, left)| *left == 0) {
            self.reconcile_on(then);
        }
    }

    fn orphan_deleted(&mut self) {
        self.orphans_removed += 1;
        let Some((then, left)) = self.reconciling.as_mut() else { return };
        *left = left.saturating_sub(1);
        if *left == 0 {
            let then = then.clone();
            self.reconcile_on(then);
        }
    }

    /// Lists the next page, or ends the pass after the last.
    fn reconcile_on(&mut self, then: Then) {
        match then {
            Then::From(after) => {
                self.reconciling = Some((Then::From(after.clone()), 0));
                self.list_orphans(after);
            }
            Then::Done => self.reconciling = None,
        }
    }

    // ---- rule C: snapshots and compaction ----
    //
    // Compaction deletes `j/{k}` for `k < S` once `s/{S}` exists, and deletes a snapshot
    // only once a newer one exists: so whenever an entry is gone, a snapshot past it
    // exists from then on. Deleting makes a key free again, and a create that was
    // delayed (another node's, or this node's own late one) may then write a different
    // entry under a compacted seq. Hence two checks, each a listing of `s/` issued after
    // the reads it vouches for: a round folds what it read only if no snapshot past its
    // position exists (else it loads the newest), and an append is taken as done only if
    // no snapshot past its seq exists (else a snapshot judges it by the writers it
    // records).

    /// Lists `s/` past the position: with `required`, because the journal is compacted
    /// past it; otherwise to check the round's reads before folding them.
    fn search_snapshots(&mut self, required: bool) {
        let from = self.catalog.position();
        let Some(round) = self.round.as_mut() else { return };
        if required {
            // Reads in flight are ignored from now on; the snapshot replaces them.
            round.reads.clear();
        }
        round.search = Some(Search { from, newest: None, required });
        self.list_snapshots(snapshot_key(from));
    }

    fn list_snapshots(&mut self, after: String) {
        let op =
            StoreOp::List { prefix: SNAPSHOT_PREFIX.into(), after: Some(after), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::FenceSnapshots);
    }

    /// A listed entry is gone: compacted since it was listed.
    fn entry_gone(&mut self, seq: u64) {
        let waited = self.round.as_ref().is_some_and(|r| r.search.is_none() && r.reads.get(&seq) == Some(&None));
        if waited {
            self.search_snapshots(true);
        }
    }

    /// The snapshot just read was deleted by a newer compaction: look again.
    fn search_again(&mut self) {
        let Some(required) = self.round.as_ref().and_then(|r| r.search.as_ref()).map(|s| s.required) else { return };
        self.search_snapshots(required);
    }

    fn snapshots_listed(&mut self, page: Page) {
        let Some(search) = self.round.as_mut().and_then(|r| r.search.as_mut()) else { return };
        let from = search.from;
        if let Some(seq) = page.keys.iter().filter_map(|k| parse_snapshot_key(k)).filter(|s| *s > from).max() {
            search.newest = Some(search.newest.map_or(seq, |n| n.max(seq)));
        }
        let (newest, required) = (search.newest, search.required);
        if let (true, Some(next)) = (page.more, page.next()) {
            return self.list_snapshots(next);
        }
        match newest {
            // Newer than what this node folded meanwhile (its own appends): load it.
            Some(seq) if seq > self.catalog.position() => {
                self.issue(StoreOp::Get { key: snapshot_key(seq) }, Purpose::FenceSnapshot(seq));
            }
            None if required => self.break_down(format!(
                "the journal is missing entries after {from}, and no snapshot past it exists: something other than \
                 compaction deleted them"
            )),
            // No snapshot past the reads: none of them was compacted and written again.
            _ => self.fold_reads(),
        }
    }

    fn snapshot_read(&mut self, seq: u64, bytes: &[u8]) {
        if self.round.as_ref().is_none_or(|r| r.search.is_none()) {
            return;
        }
        match snapshot::decode(seq, bytes) {
            Ok(catalog) => {
                if catalog.position() > self.catalog.position() {
                    self.load_snapshot(catalog);
                }
                self.fold_reads();
            }
            Err(e) => self.break_down(format!("snapshot {seq} is corrupt: {e}")),
        }
    }

    /// Takes `catalog`, a snapshot past the position, as the catalog, and brings the rest
    /// of the node in line as folding its entries would have: a removal is scheduled for
    /// every incarnation being deleted (its grace delay counted from now, as from
    /// folding its tombstone), and what is known of removed ones is forgotten.
    fn load_snapshot(&mut self, catalog: Catalog) {
        self.snapshot_at = self.snapshot_at.max(catalog.position());
        self.catalog = catalog;
        let deleting: Vec<(TopicId, u64)> =
            self.catalog.deleting().map(|(id, t)| (id, t.settings.deletion_grace_ms)).collect();
        self.removals.retain(|id, _| deleting.iter().any(|(d, _)| d == id));
        for (id, grace) in deleting {
            self.removals.entry(id).or_insert(self.now.plus_millis(grace));
        }
        let catalog = &self.catalog;
        self.ends.retain(|(t, _), _| !catalog.is_removed(*t));
        self.cursors.retain(|t, _| !catalog.is_removed(*t));
        if self.removing.is_some_and(|(t, _)| catalog.is_removed(t)) {
            self.removing = None;
        }
    }

    /// Ends the round's search: folds, in seq order, the reads past the position (all
    /// read after any snapshot they could be older than), then lists again.
    fn fold_reads(&mut self) {
        let Some(round) = self.round.as_mut() else { return };
        round.search = None;
        let mut reads = std::mem::take(&mut round.reads);
        // After entry u64::MAX (a snapshot as of it), there is no next entry to fold.
        while let Some(next) = self.catalog.position().checked_add(1) {
            reads.retain(|seq, _| *seq >= next);
            match reads.remove(&next) {
                Some(Some(entry)) => self.fold(&entry),
                _ => break,
            }
        }
        self.list_journal();
    }

    /// The append's key was read as holding this entry (`ours`) or another's. Unless a
    /// snapshot past its seq exists, the key was never compacted, so that entry is the
    /// journal's; else the snapshot judges.
    fn verify_append(&mut self, ours: bool) {
        let Some(a) = self.appending.as_mut() else { return };
        a.found_ours = Some(ours);
        let seq = a.seq;
        self.list_append_snapshots(seq, None);
    }

    fn list_append_snapshots(&mut self, seq: u64, after: Option<String>) {
        let after = after.unwrap_or_else(|| snapshot_key(seq));
        let op =
            StoreOp::List { prefix: SNAPSHOT_PREFIX.into(), after: Some(after), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::AppendSnapshots(seq));
    }

    fn append_snapshots_listed(&mut self, seq: u64, page: Page) {
        let Some(ours) = self.appending.as_ref().filter(|a| a.seq == seq).and_then(|a| a.found_ours) else { return };
        // The oldest past the seq: the likeliest to still hold the incarnation it names.
        if let Some(at) = page.keys.iter().filter_map(|k| parse_snapshot_key(k)).find(|s| *s > seq) {
            return self.issue(StoreOp::Get { key: snapshot_key(at) }, Purpose::AppendSnapshot(seq, at));
        }
        if page.more {
            return self.list_append_snapshots(seq, page.next());
        }
        if ours {
            self.appended();
        } else {
            self.append_lost();
        }
    }

    /// A snapshot past the append's seq says whose entry holds it, by the writers it
    /// records for the incarnation the entry creates or deletes.
    fn judge_append(&mut self, seq: u64, at: u64, bytes: &[u8]) {
        let Some(a) = self.appending.as_ref().filter(|a| a.seq == seq && a.found_ours.is_some()) else { return };
        let catalog = match snapshot::decode(at, bytes) {
            Ok(catalog) => catalog,
            Err(e) => return self.break_down(format!("snapshot {at} is corrupt: {e}")),
        };
        let writer = a.entry.writer;
        let verdict = match &a.entry.kind {
            EntryKind::Create { .. } => match catalog.incarnation(TopicId(seq)) {
                Some(t) if t.created_by == writer => Verdict::Ours,
                Some(_) => Verdict::Lost,
                None => Verdict::Unknown,
            },
            EntryKind::Delete { topic, .. } => match catalog.incarnation(*topic) {
                Some(t) if t.deleted_at == Some(seq) && t.deleted_by == Some(writer) => Verdict::Ours,
                Some(_) => Verdict::Lost,
                None => Verdict::Unknown,
            },
            // Validated again, a completion already in the journal appends nothing.
            EntryKind::Removed { .. } => Verdict::Lost,
        };
        match verdict {
            Verdict::Ours => self.appended(),
            Verdict::Lost => self.append_lost(),
            Verdict::Unknown => {
                let Some(a) = self.appending.take() else { return };
                if let Appendable::Client(request, _) = a.from {
                    let why = format!(
                        "journal entry {seq} was compacted before this node could read whose it is, and the \
                         incarnation it names is removed"
                    );
                    self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
                }
                // Catch up before appending again.
                self.behind = true;
                if self.round.is_none() {
                    self.begin_round();
                }
            }
        }
    }

    /// Starts a compaction once the node has folded `compact_after_entries` past the
    /// newest snapshot it knows: the snapshot of its catalog, created at its position.
    fn maybe_compact(&mut self) {
        let every = self.options.compact_after_entries;
        let seq = self.catalog.position();
        if every == 0
            || self.compaction.is_some()
            || self.broken.is_some()
            || seq < self.snapshot_at.saturating_add(every)
        {
            return;
        }
        let bytes = snapshot::encode(&self.catalog);
        self.compaction = Some(Compaction {
            seq,
            bytes: Some(bytes.clone()),
            prefix: JOURNAL_PREFIX,
            after: None,
            left: 0,
            last_page: false,
        });
        self.issue(StoreOp::Create { key: snapshot_key(seq), bytes }, Purpose::CompactWrite(seq));
    }

    /// The snapshot existed already: folding is deterministic, so it must be this one.
    fn snapshot_checked(&mut self, seq: u64, bytes: &[u8]) {
        let Some(c) = self.compaction.as_ref().filter(|c| c.seq == seq) else { return };
        if c.bytes.as_deref() == Some(bytes) {
            self.snapshot_written(seq);
        } else {
            self.compaction = None;
            self.break_down(format!("snapshot {seq} in the store is not this node's catalog as of entry {seq}"));
        }
    }

    /// The snapshot exists: delete the entries below it, then older snapshots.
    fn snapshot_written(&mut self, seq: u64) {
        let Some(c) = self.compaction.as_mut().filter(|c| c.seq == seq) else { return };
        c.bytes = None;
        self.snapshot_at = self.snapshot_at.max(seq);
        self.list_compaction();
    }

    fn list_compaction(&mut self) {
        let Some(c) = &self.compaction else { return };
        let op =
            StoreOp::List { prefix: c.prefix.into(), after: c.after.clone(), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::CompactList);
    }

    /// Deletes the listed keys below the snapshot; never the snapshot's entry itself, so
    /// the journal's newest entry is never deleted.
    fn compaction_listed(&mut self, page: Page) {
        let Some(c) = self.compaction.as_mut().filter(|c| c.bytes.is_none()) else { return };
        let parse = if c.prefix == JOURNAL_PREFIX { parse_journal_key } else { parse_snapshot_key };
        let mut doomed = Vec::new();
        c.last_page = !page.more;
        for key in &page.keys {
            match parse(key) {
                Some(seq) if seq < c.seq => doomed.push(key.clone()),
                Some(_) => c.last_page = true,
                None => {}
            }
        }
        c.after = page.next();
        c.left = doomed.len();
        for key in doomed {
            self.issue(StoreOp::Delete { key }, Purpose::CompactDelete);
        }
        self.compaction_page_done();
    }

    fn compaction_deleted(&mut self) {
        if let Some(c) = self.compaction.as_mut() {
            c.left = c.left.saturating_sub(1);
        }
        self.compaction_page_done();
    }

    /// Once a page's deletes are done: the next page, the next prefix, or the end.
    fn compaction_page_done(&mut self) {
        let Some(c) = self.compaction.as_mut().filter(|c| c.left == 0) else { return };
        if !c.last_page {
            return self.list_compaction();
        }
        if c.prefix == JOURNAL_PREFIX {
            c.prefix = SNAPSHOT_PREFIX;
            c.after = None;
            c.last_page = false;
            return self.list_compaction();
        }
        self.compaction = None;
    }

    // ---- rule A: the append ----

    fn pump_appends(&mut self) {
        while self.appending.is_none() && !self.behind && self.broken.is_none() {
            let Some(from) = self.appends.pop_front() else { return };
            let (request, command) = match &from {
                Appendable::Client(request, command) => (*request, command.clone()),
                Appendable::Removed(topic) => {
                    // Another node's completion may be folded already: then nothing to add.
                    if self.catalog.validate_removed(*topic) || self.planted(Bug::ClusterDoubleCompletion) {
                        self.append(from.clone(), EntryKind::Removed { topic: *topic });
                    }
                    continue;
                }
            };
            let kind = match &command {
                Command::CreateTopic { name, partitions, settings } => {
                    match self.catalog.validate_create(name, *partitions, settings, &self.options.config) {
                        Ok(()) => EntryKind::Create {
                            name: name.clone(),
                            partitions: *partitions,
                            settings: settings.clone(),
                        },
                        Err(e) => {
                            self.reply(request, Err(e));
                            continue;
                        }
                    }
                }
                Command::DeleteTopic { name } => match self.catalog.validate_delete(name) {
                    Ok(DeleteOf::Live(topic)) => {
                        if self.planted(Bug::ClusterDeleteAcksDeleting) {
                            let deleting = self.catalog.deleting().filter(|(_, t)| t.name == *name).map(|(id, _)| id);
                            if let Some(old) = deleting.last() {
                                self.reply(request, Ok(Reply::DeleteAccepted { topic: old }));
                                continue;
                            }
                        }
                        EntryKind::Delete { name: name.clone(), topic }
                    }
                    Ok(DeleteOf::AlreadyDeleted(topic)) => {
                        self.reply(request, Ok(Reply::DeleteAccepted { topic }));
                        continue;
                    }
                    Err(e) => {
                        self.reply(request, Err(e));
                        continue;
                    }
                },
                other => {
                    let e = BrokerError::InvalidRequest(format!("{other:?} is not appended to the journal"));
                    self.reply(request, Err(e));
                    continue;
                }
            };
            self.append(from, kind);
        }
    }

    fn append(&mut self, from: Appendable, kind: EntryKind) {
        let Some(seq) = self.catalog.position().checked_add(1) else {
            // Only a forged store holds entry u64::MAX (or a snapshot as of it).
            self.appends.push_front(from);
            let last = self.catalog.position();
            return self.break_down(format!("the journal holds entry {last}, and no entry can follow it"));
        };
        let writer = EntryWriter { node: self.options.node, boot: self.options.boot, nonce: self.next_nonce };
        self.next_nonce += 1;
        let entry = Entry { writer, kind };
        let op = StoreOp::Create { key: journal_key(seq), bytes: entry::encode(seq, &entry) };
        self.appending = Some(Append { from, seq, entry, found_ours: None });
        self.issue(op, Purpose::Append);
    }

    fn check_append(&mut self) {
        if let Some(a) = &self.appending {
            let key = journal_key(a.seq);
            self.issue(StoreOp::Get { key }, Purpose::AppendCheck);
        }
    }

    fn append_checked(&mut self, bytes: &[u8]) {
        let Some(a) = &self.appending else { return };
        match entry::decode(a.seq, bytes) {
            Ok(found) => {
                let ours = found.writer == a.entry.writer;
                self.verify_append(ours);
            }
            Err(e) => self.break_down(format!("journal entry {} is corrupt: {e}", a.seq)),
        }
    }

    /// Another node's entry holds the append's seq: fold it, then validate again.
    fn append_lost(&mut self) {
        if let Some(a) = self.appending.take() {
            self.appends.push_front(a.from);
        }
        self.behind = true;
        if self.round.is_none() {
            // No command waits on this round: `rounds` grows, nothing is served.
            self.begin_round();
        }
    }

    fn appended(&mut self) {
        let Some(a) = self.appending.take() else { return };
        // A fence round may have folded it already; otherwise it is the next entry, and a
        // round waiting to read it reads on without it.
        if self.catalog.position() < a.seq {
            self.fold(&a.entry);
            if self.round.as_ref().is_some_and(|r| r.reads.contains_key(&a.seq)) {
                self.advance_round();
            }
        }
        if let Appendable::Client(request, _) = a.from {
            let reply = match a.entry.kind {
                EntryKind::Create { .. } => Reply::Created { topic: TopicId(a.seq) },
                EntryKind::Delete { topic, .. } | EntryKind::Removed { topic } => Reply::DeleteAccepted { topic },
            };
            self.reply(request, Ok(reply));
        }
        self.pump_appends();
    }
}

/// A live incarnation as list and describe show it. The high watermarks are the ends
/// this node has learned by its own produces and fetches, which may lag behind what
/// other nodes appended since (reading every partition's last segment on each list is
/// not built yet).
fn describe(
    name: &str,
    id: TopicId,
    t: &crate::cluster::catalog::Incarnation,
    ends: &BTreeMap<(TopicId, u32), u64>,
) -> TopicDescription {
    TopicDescription {
        name: name.to_string(),
        id,
        partitions: t.partitions,
        settings: t.settings.clone(),
        high_watermarks: (0..t.partitions).map(|p| ends.get(&(id, p)).copied().unwrap_or(0)).collect(),
        // The cluster's partitions begin at 0 (DESIGN.md section 10: not yet offset bases).
        log_start: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memstore::MemStore;
    use crate::cluster::snapshot;
    use crate::command::TopicSettings;

    /// Nodes over one [`MemStore`], store operations carried out in the order issued.
    struct Net {
        store: MemStore,
        nodes: Vec<Node>,
        pending: VecDeque<(usize, StoreOpId, StoreOp)>,
        replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
        next_request: u64,
        now: Time,
        /// The first bytes ever created under each journal key: the journal as every
        /// node must fold it, although compaction deletes keys (and a late create may
        /// write under a deleted one).
        history: BTreeMap<u64, Vec<u8>>,
        /// Writes whose answer was lost and that land later, in this order.
        late: VecDeque<StoreOp>,
    }

    impl Net {
        fn new(nodes: u32) -> Net {
            let nodes = (0..nodes)
                .map(|node| {
                    Node::new(NodeOptions {
                        node,
                        boot: 100 + u64::from(node),
                        config: Config::default(),
                        list_limit: 3,
                        tail_every_ms: 0,
                        reconcile_every_ms: 0,
                        compact_after_entries: 0,
                        request_timeout_ms: 0,
                    })
                })
                .collect();
            Net {
                store: MemStore::default(),
                nodes,
                pending: VecDeque::new(),
                replies: BTreeMap::new(),
                next_request: 0,
                now: Time::ZERO,
                history: BTreeMap::new(),
                late: VecDeque::new(),
            }
        }

        /// `nodes` nodes that compact after `every` entries.
        fn compacting(nodes: u32, every: u64) -> Net {
            let mut net = Net::new(nodes);
            for node in &mut net.nodes {
                *node = Node::new(NodeOptions { compact_after_entries: every, ..node.options.clone() });
            }
            net
        }

        /// Records a journal key's first creation.
        fn record(&mut self, op: &StoreOp) {
            if let StoreOp::Create { key, .. } = op {
                if let (Some(seq), Some(bytes)) = (parse_journal_key(key), self.store.get(key)) {
                    self.history.entry(seq).or_insert_with(|| bytes.to_vec());
                }
            }
        }

        /// Lands the oldest late write.
        fn land_late(&mut self) {
            if let Some(op) = self.late.pop_front() {
                self.store.apply(&op);
                self.record(&op);
            }
        }

        fn submit(&mut self, node: usize, command: Command) -> RequestId {
            let request = RequestId(self.next_request);
            self.next_request += 1;
            self.nodes[node].handle_command(self.now, request, command);
            self.collect();
            request
        }

        fn collect(&mut self) {
            for (i, node) in self.nodes.iter_mut().enumerate() {
                while let Some(effect) = node.poll_effect() {
                    match effect {
                        NodeEffect::Store { id, op } => self.pending.push_back((i, id, op)),
                        NodeEffect::Reply { request, reply } => {
                            assert!(self.replies.insert(request, reply).is_none(), "{request:?} answered twice");
                        }
                    }
                }
            }
        }

        /// Carries out the oldest pending operation; `result` may replace its outcome.
        fn step_with(&mut self, result: impl FnOnce(&mut MemStore, &StoreOp) -> StoreResult) -> bool {
            let Some((node, id, op)) = self.pending.pop_front() else { return false };
            let r = result(&mut self.store, &op);
            self.record(&op);
            self.nodes[node].handle_store(self.now, id, r);
            self.collect();
            true
        }

        fn run(&mut self) {
            while self.step_with(|store, op| Ok(store.apply(op))) {}
        }

        fn reply(&self, request: RequestId) -> &Result<Reply, BrokerError> {
            self.replies.get(&request).unwrap_or_else(|| panic!("{request:?} has no reply"))
        }
    }

    fn create(name: &str) -> Command {
        Command::CreateTopic { name: name.into(), partitions: 2, settings: TopicSettings::default() }
    }

    fn describe(name: &str) -> Command {
        Command::DescribeTopic { name: name.into() }
    }

    fn delete(name: &str) -> Command {
        Command::DeleteTopic { name: name.into() }
    }

    fn produce(name: &str, partition: Option<u32>, values: &[&str]) -> Command {
        let records = values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec() }).collect();
        Command::Produce { topic: name.into(), partition, records }
    }

    fn fetch(name: &str, partition: u32, offset: u64) -> Command {
        Command::Fetch { topic: name.into(), partition, offset, max_records: 100, max_bytes: None }
    }

    fn values(reply: &Result<Reply, BrokerError>) -> Vec<(u64, String)> {
        let Ok(Reply::Fetched { records, .. }) = reply else { panic!("not fetched: {reply:?}") };
        records.iter().map(|r| (r.offset, String::from_utf8(r.value.clone()).unwrap())).collect()
    }

    impl Net {
        /// Carries out the oldest pending operation of `node`.
        fn step_node(&mut self, node: usize) -> bool {
            let Some(i) = self.pending.iter().position(|(n, _, _)| *n == node) else { return false };
            let op = self.pending.remove(i).unwrap();
            self.pending.push_front(op);
            self.step_with(|store, op| Ok(store.apply(op)))
        }
    }

    impl Net {
        /// Lets `ms` pass on every node, then runs what that started.
        fn advance(&mut self, ms: u64) {
            self.now = self.now.plus_millis(ms);
            for node in &mut self.nodes {
                node.handle_timeout(self.now);
            }
            self.collect();
            self.run();
        }

        fn journal(&self) -> Vec<EntryKind> {
            self.store
                .keys()
                .filter_map(|k| parse_journal_key(k).map(|seq| (seq, k)))
                .map(|(seq, k)| entry::decode(seq, self.store.get(k).unwrap()).unwrap().kind)
                .collect()
        }

        fn segments(&self) -> usize {
            self.store.keys().filter(|k| parse_segment_key(k).is_some()).count()
        }
    }

    impl Net {
        /// Carries out `node`'s operations until it has none left.
        fn run_node(&mut self, node: usize) {
            while self.step_node(node) {}
        }

        fn snapshots(&self) -> Vec<u64> {
            self.store.keys().filter_map(parse_snapshot_key).collect()
        }

        fn has_entry(&self, seq: u64) -> bool {
            self.store.get(&journal_key(seq)).is_some()
        }
    }

    /// A node that last read the journal at entry 2 catches up over a journal another
    /// node compacted: it meets the gap, loads the snapshot, folds the entries after it,
    /// forgets what it knew of an incarnation the snapshot shows removed, and takes on
    /// the removal of one the snapshot shows being deleted.
    #[test]
    fn a_node_far_behind_catches_up_over_a_compacted_journal() {
        let mut net = Net::new(2);
        net.nodes[0] = Node::new(NodeOptions { compact_after_entries: 4, ..net.nodes[0].options.clone() });
        let grace = TopicSettings { deletion_grace_ms: 100 };
        net.submit(0, Command::CreateTopic { name: "doomed".into(), partitions: 1, settings: grace });
        net.submit(0, create("gone"));
        net.run();
        net.submit(1, produce("doomed", Some(0), &["x"]));
        net.submit(1, produce("gone", None, &["y"]));
        net.run();
        assert_eq!(net.nodes[1].catalog().position(), 2);
        assert!(net.nodes[1].ends.contains_key(&(TopicId(2), 0)) && net.nodes[1].cursors.contains_key(&TopicId(2)));
        // Node 0 deletes and removes "gone" (no grace), deletes "doomed", creates more.
        net.submit(0, delete("gone"));
        net.run();
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        net.run();
        net.submit(0, delete("doomed"));
        net.run();
        for i in 0..8 {
            net.submit(0, create(&format!("t{i}")));
            net.run();
        }
        net.submit(0, Command::ListTopics);
        net.run();
        assert_eq!(net.nodes[0].catalog().position(), 13);
        assert_eq!(net.snapshots(), vec![12], "compacted at 4, 8 and 12; each snapshot replaced the one before");
        assert!((1..12).all(|seq| !net.has_entry(seq)) && (12..=13).all(|seq| net.has_entry(seq)));
        let expected = net.nodes[0].catalog().clone();
        // Node 0 dies: only node 1 can finish deleting "doomed".
        net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
        let list = net.submit(1, Command::ListTopics);
        net.run();
        let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
        assert_eq!(topics.len(), 8);
        assert_eq!(net.nodes[1].catalog(), &expected);
        let node = &net.nodes[1];
        assert!(!node.ends.contains_key(&(TopicId(2), 0)) && !node.cursors.contains_key(&TopicId(2)), "removed");
        assert!(node.ends.contains_key(&(TopicId(1), 0)), "being deleted: still known");
        assert_eq!(net.segments(), 1);
        net.advance(50);
        assert_eq!(net.segments(), 1, "its grace delay runs from when node 1 loaded the snapshot");
        net.advance(60);
        assert_eq!(net.segments(), 0);
        let removed: Vec<EntryKind> = net
            .history
            .iter()
            .map(|(seq, b)| entry::decode(*seq, b).unwrap().kind)
            .filter(|k| matches!(k, EntryKind::Removed { .. }))
            .collect();
        assert_eq!(removed, vec![EntryKind::Removed { topic: TopicId(2) }, EntryKind::Removed { topic: TopicId(1) }]);
        net.submit(0, Command::ListTopics);
        net.run();
        assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
    }

    /// A node that starts with nothing folded, over a compacted journal, starts from the
    /// snapshot, and appends after the journal's end.
    #[test]
    fn a_new_node_starts_from_a_snapshot() {
        let mut net = Net::compacting(1, 3);
        for i in 0..7 {
            net.submit(0, create(&format!("t{i}")));
            net.run();
        }
        net.submit(0, delete("t0"));
        net.run();
        assert_eq!(net.snapshots(), vec![6]);
        assert!(!net.has_entry(1));
        let options = NodeOptions { node: 2, boot: 102, ..net.nodes[0].options.clone() };
        net.nodes.push(Node::new(options));
        let d = net.submit(1, describe("t6"));
        net.run();
        assert!(matches!(net.reply(d), Ok(Reply::Described(t)) if t.id == TopicId(7)), "{:?}", net.reply(d));
        assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
        let c = net.submit(1, create("new"));
        net.run();
        assert_eq!(net.reply(c), &Ok(Reply::Created { topic: TopicId(9) }));
        net.submit(0, Command::ListTopics);
        net.run();
        assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
    }

    /// A node reading the journal from an old position while another compacts: its
    /// reads find entries gone (it loads the snapshot), or succeed before the entries are
    /// deleted and the listing of `s/` that follows them finds the snapshot (it loads
    /// it rather than fold what it read).
    #[test]
    fn compaction_while_another_node_reads_from_an_old_position() {
        for reads_done in [false, true] {
            let mut net = Net::new(2);
            for i in 0..6 {
                net.submit(0, create(&format!("t{i}")));
                net.run();
            }
            // Node 0 now compacts: its next fence ends at 6.
            net.nodes[0] = Node::new(NodeOptions { compact_after_entries: 6, ..net.nodes[0].options.clone() });
            let list = net.submit(1, Command::ListTopics);
            net.step_node(1); // the listing: entries 1 to 3
            if reads_done {
                for _ in 0..3 {
                    net.step_node(1);
                }
                let next = net.pending.iter().find(|(n, _, _)| *n == 1).map(|(_, _, op)| op.clone());
                assert!(matches!(&next, Some(StoreOp::List { prefix, .. }) if prefix == SNAPSHOT_PREFIX), "{next:?}");
            }
            net.submit(0, Command::ListTopics);
            net.run_node(0);
            assert_eq!(net.snapshots(), vec![6], "reads done: {reads_done}");
            assert!(!net.has_entry(1));
            net.run();
            let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
            assert_eq!(topics.len(), 6, "reads done: {reads_done}");
            assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog(), "reads done: {reads_done}");
        }
    }

    /// A node's create is delayed while another appends at the same seq and compacts past
    /// it; then the create lands, on a deleted key, and reports success. A snapshot past
    /// the seq judges: the incarnation there is another's, so the node validates again
    /// (here: appends at a later seq); or it is removed, and the outcome is unknown.
    #[test]
    fn an_append_landing_on_a_compacted_seq_is_judged_by_a_snapshot() {
        for removed in [false, true] {
            let mut net = Net::new(2);
            let every = if removed { 3 } else { 2 };
            net.nodes[0] = Node::new(NodeOptions { compact_after_entries: every, ..net.nodes[0].options.clone() });
            let x = net.submit(1, create("x"));
            net.step_node(1); // its fence: nothing in the journal
            let held = net.pending.iter().position(|(n, _, _)| *n == 1).unwrap();
            let held = net.pending.remove(held).unwrap();
            assert!(matches!(&held.2, StoreOp::Create { key, .. } if *key == journal_key(1)));
            net.submit(0, create("y"));
            net.run();
            if removed {
                net.submit(0, delete("y"));
                net.run();
                net.nodes[0].handle_timeout(net.now);
                net.collect();
                net.run();
                assert_eq!(net.nodes[0].catalog().position(), 3, "y removed");
            } else {
                net.submit(0, create("z"));
                net.run();
            }
            net.submit(0, Command::ListTopics);
            net.run();
            assert!(!net.has_entry(1) && net.snapshots() == vec![every], "removed: {removed}");
            // The held create lands on the deleted key.
            net.pending.push_front(held);
            net.run();
            let first = entry::decode(1, &net.history[&1]).unwrap();
            assert!(matches!(first.kind, EntryKind::Create { ref name, .. } if name == "y"));
            let landed = entry::decode(1, net.store.get(&journal_key(1)).unwrap()).unwrap();
            assert!(matches!(landed.kind, EntryKind::Create { ref name, .. } if name == "x"), "created again");
            if removed {
                assert!(matches!(net.reply(x), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(x));
            } else {
                assert_eq!(net.reply(x), &Ok(Reply::Created { topic: TopicId(3) }));
            }
            net.submit(0, Command::ListTopics);
            net.run();
            assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog(), "removed: {removed}");
            assert_eq!(net.nodes[0].catalog().live("x").is_some(), !removed);
        }
    }

    /// A snapshot that does not decode, or a gap with no snapshot past it, makes a node
    /// refuse to serve, saying why, rather than guess.
    #[test]
    fn a_corrupt_or_missing_snapshot_makes_the_node_refuse_rather_than_guess() {
        for (damage, why) in [("corrupt", "snapshot 4 is corrupt"), ("missing", "no snapshot past it")] {
            let mut net = Net::compacting(1, 4);
            for i in 0..5 {
                net.submit(0, create(&format!("t{i}")));
                net.run();
            }
            assert_eq!(net.snapshots(), vec![4]);
            net.store.apply(&StoreOp::Delete { key: snapshot_key(4) });
            if damage == "corrupt" {
                let mut bytes = snapshot::encode(net.nodes[0].catalog());
                bytes[20] ^= 1;
                net.store.apply(&StoreOp::Create { key: snapshot_key(4), bytes });
            }
            net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
            let r = net.submit(0, Command::ListTopics);
            net.run();
            assert!(matches!(net.reply(r), Err(BrokerError::Unavailable(w)) if w.contains(why)), "{:?}", net.reply(r));
        }
    }

    /// A snapshot as of entry u64::MAX, which only a forged store holds, is loaded: reads
    /// are served, and an append, which no entry can follow, makes the node refuse to
    /// serve. Computing the next seq after loading it once overflowed.
    #[test]
    fn a_snapshot_as_of_the_last_seq_is_served_and_nothing_is_appended_after_it() {
        let mut net = Net::new(1);
        let last = Catalog::restore(u64::MAX, BTreeMap::new()).unwrap();
        net.store.apply(&StoreOp::Create { key: snapshot_key(u64::MAX), bytes: snapshot::encode(&last) });
        // Entry 2 without entry 1: a gap, so the node looks for a snapshot past it.
        let e = Entry {
            writer: EntryWriter { node: 7, boot: 7, nonce: 7 },
            kind: EntryKind::Removed { topic: TopicId(9) },
        };
        net.store.apply(&StoreOp::Create { key: journal_key(2), bytes: entry::encode(2, &e) });
        let r = net.submit(0, Command::ListTopics);
        net.run();
        assert_eq!(net.reply(r), &Ok(Reply::Topics(vec![])));
        assert_eq!(net.nodes[0].catalog().position(), u64::MAX);
        let r = net.submit(0, create("t"));
        net.run();
        let refused = matches!(net.reply(r), Err(BrokerError::Unavailable(w)) if w.contains("no entry can follow"));
        assert!(refused, "{:?}", net.reply(r));
    }

    /// A partition whose last segment ends at offset u64::MAX (only a forged store
    /// holds one) has run out of offsets: a produce to it is refused, as on one node.
    /// Computing the end of the segment it would write once overflowed.
    #[test]
    fn a_produce_to_a_partition_out_of_offsets_is_refused() {
        let mut net = Net::new(1);
        net.submit(0, create("t"));
        net.run();
        let last = u64::MAX - 1;
        let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
        let records = [ProduceRecord { key: None, value: b"last".to_vec() }];
        let bytes = segment::encode(TopicId(1), 0, last, writer, &records);
        net.store.apply(&StoreOp::Create { key: segment_key(TopicId(1), 0, last), bytes });
        let r = net.submit(0, produce("t", Some(0), &["v"]));
        net.run();
        let refused = matches!(net.reply(r), Err(BrokerError::Storage(w)) if w.contains("run out of offsets"));
        assert!(refused, "{:?}", net.reply(r));
        assert_eq!(net.segments(), 1, "nothing written");
    }

    /// Every node removes a deleted incarnation's segments once its grace delay ends,
    /// and the completion is recorded once, however many nodes removed at once.
    #[test]
    fn a_deleted_incarnation_is_removed_by_every_node_and_completed_once() {
        let mut net = Net::new(3);
        let grace = TopicSettings { deletion_grace_ms: 100 };
        net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 3, settings: grace });
        net.run();
        for p in 0..3 {
            for node in 0..3 {
                net.submit(node, produce("t", Some(p), &["v"]));
                net.run();
            }
        }
        net.submit(0, create("other"));
        net.run();
        net.submit(0, produce("other", Some(0), &["kept"]));
        net.run();
        assert_eq!(net.segments(), 10);
        net.submit(1, delete("t"));
        net.run();
        // Every node folds the tombstone (a fence each).
        for node in 0..3 {
            net.submit(node, Command::ListTopics);
        }
        net.run();
        net.advance(50);
        assert_eq!(net.segments(), 10, "still in its grace delay");
        net.advance(60);
        assert_eq!(net.segments(), 1, "only the other topic's segment is left");
        let removed = net.journal().iter().filter(|k| matches!(k, EntryKind::Removed { .. })).count();
        assert_eq!(removed, 1, "{:?}", net.journal());
        net.advance(1000);
        assert!(net.nodes.iter().all(|n| n.poll_timeout().is_none()), "nothing left to do");
    }

    /// A node that folded a tombstone and died before removing leaves the work to
    /// another; a node starting afresh resumes every pending removal it folds.
    #[test]
    fn a_removal_left_by_a_dead_node_is_finished_by_another() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        net.submit(0, produce("t", Some(0), &["a"]));
        net.run();
        net.submit(0, delete("t"));
        net.run();
        // Node 0 starts removing, then dies with its delete in flight.
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        net.step_node(0);
        net.pending.retain(|(n, _, _)| *n != 0);
        net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
        assert_eq!(net.segments(), 1);
        // The new life of node 0 folds the journal and resumes.
        net.submit(0, Command::ListTopics);
        net.run();
        net.advance(10);
        assert_eq!(net.segments(), 0);
        assert!(net.journal().iter().any(|k| matches!(k, EntryKind::Removed { .. })));
    }

    /// A segment landing after its incarnation's removal (a node that wrote before it
    /// learned of the tombstone) is an orphan: the reconciler deletes it, and nothing
    /// else: not a live topic's segments, not an id the node has not folded yet, not a
    /// key outside the layout.
    #[test]
    fn the_reconciler_deletes_orphans_and_nothing_else() {
        let mut net = Net::new(1);
        net.nodes[0] = Node::new(NodeOptions { reconcile_every_ms: 100, ..net.nodes[0].options.clone() });
        net.submit(0, create("gone"));
        net.submit(0, create("live"));
        net.run();
        for _ in 0..4 {
            net.submit(0, produce("live", Some(1), &["v"]));
            net.run();
        }
        net.submit(0, delete("gone"));
        net.run();
        net.advance(10);
        assert!(net.journal().iter().any(|k| matches!(k, EntryKind::Removed { topic: TopicId(1) })));
        let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
        let rec = [ProduceRecord { key: None, value: b"late".to_vec() }];
        let put = |net: &mut Net, key: String, bytes: Vec<u8>| {
            net.store.apply(&StoreOp::Create { key, bytes });
        };
        put(&mut net, segment_key(TopicId(1), 0, 0), segment::encode(TopicId(1), 0, 0, writer, &rec));
        put(&mut net, segment_key(TopicId(1), 1, 5), segment::encode(TopicId(1), 1, 5, writer, &rec));
        put(&mut net, segment_key(TopicId(99), 0, 0), segment::encode(TopicId(99), 0, 0, writer, &rec));
        put(&mut net, "d/not-ours".into(), b"x".to_vec());
        put(&mut net, "z/other".into(), b"y".to_vec());
        let before: Vec<String> = net.store.keys().map(String::from).collect();
        net.advance(100);
        let after: Vec<String> = net.store.keys().map(String::from).collect();
        let gone: Vec<&String> = before.iter().filter(|k| !after.contains(k)).collect();
        assert_eq!(gone, vec![&segment_key(TopicId(1), 0, 0), &segment_key(TopicId(1), 1, 5)]);
        assert_eq!(net.nodes[0].orphans_removed(), 2);
        assert_eq!(after.iter().filter(|k| k.starts_with(&topic_prefix(TopicId(2)))).count(), 4, "live segments kept");
    }

    /// With background tailing, a node folds a tombstone without being asked anything.
    #[test]
    fn a_tailing_node_learns_of_a_delete_on_its_own() {
        let mut net = Net::new(2);
        net.nodes[1] = Node::new(NodeOptions { tail_every_ms: 50, ..net.nodes[1].options.clone() });
        net.submit(0, create("t"));
        net.run();
        net.submit(1, describe("t"));
        net.run();
        net.submit(0, delete("t"));
        net.run();
        assert!(net.nodes[1].catalog().live("t").is_some(), "not read yet");
        net.advance(60);
        assert!(net.nodes[1].catalog().live("t").is_none(), "folded by its own tail read");
    }

    #[test]
    fn records_produced_on_one_node_are_fetched_from_another() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        let p1 = net.submit(0, produce("t", Some(1), &["a", "b"]));
        net.run();
        let p2 = net.submit(1, produce("t", Some(1), &["c"]));
        net.run();
        assert!(
            matches!(net.reply(p1), Ok(Reply::Produced { positions, .. }) if positions.iter().map(|p| p.offset).collect::<Vec<_>>() == [0, 1])
        );
        assert!(
            matches!(net.reply(p2), Ok(Reply::Produced { positions, .. }) if positions[0].offset == 2),
            "{:?}",
            net.reply(p2)
        );
        for (node, offset) in [(0, 0), (1, 0), (1, 1), (0, 2)] {
            let f = net.submit(node, fetch("t", 1, offset));
            net.run();
            let want: Vec<(u64, String)> = [(0, "a"), (1, "b"), (2, "c")]
                .iter()
                .filter(|(o, _)| *o >= offset)
                .map(|(o, v)| (*o, v.to_string()))
                .collect();
            // A fetch reads one segment: it may stop at a segment's end.
            let got = values(net.reply(f));
            assert!(!got.is_empty() && want.starts_with(&got), "node {node} from {offset}: {got:?}");
        }
        let past = net.submit(1, fetch("t", 1, 4));
        let at_end = net.submit(1, fetch("t", 1, 3));
        let empty = net.submit(1, fetch("t", 0, 0));
        net.run();
        assert_eq!(net.reply(past), &Err(BrokerError::OffsetOutOfRange { offset: 4, high_watermark: 3 }));
        assert_eq!(values(net.reply(at_end)), vec![]);
        assert_eq!(values(net.reply(empty)), vec![]);
    }

    #[test]
    fn two_nodes_appending_to_one_partition_at_once_get_their_own_offsets() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        // Both learn the end first.
        net.submit(0, produce("t", Some(0), &["x"]));
        net.submit(1, produce("t", Some(0), &["y"]));
        net.run();
        let a = net.submit(0, produce("t", Some(0), &["a1", "a2"]));
        let b = net.submit(1, produce("t", Some(0), &["b1"]));
        net.run();
        let offsets = |r: &Result<Reply, BrokerError>| match r {
            Ok(Reply::Produced { positions, .. }) => positions.iter().map(|p| p.offset).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let mut all = [offsets(net.reply(a)), offsets(net.reply(b))].concat();
        all.sort_unstable();
        assert_eq!(all, vec![2, 3, 4], "dense, and none twice");
    }

    /// The second fence of a produce finds its topic deleted: the segment may have been
    /// read before the deletion, so the answer is an unknown outcome, not "not found".
    #[test]
    fn a_produce_overtaken_by_a_delete_has_an_unknown_outcome() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        let p = net.submit(0, produce("t", Some(0), &["v"]));
        // Node 0: its first fence (one empty listing), the listing of the partition, the
        // segment's creation.
        for _ in 0..3 {
            assert!(net.step_node(0));
        }
        assert!(net.store.keys().any(|k| k.starts_with("d/")), "the segment exists");
        let d = net.submit(1, delete("t"));
        while net.step_node(1) {}
        assert_eq!(net.reply(d), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
        net.run();
        assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
        let after = net.submit(0, produce("t", Some(0), &["w"]));
        net.run();
        assert_eq!(net.reply(after), &Err(BrokerError::TopicNotFound { name: "t".into() }));
    }

    #[test]
    fn a_create_on_one_node_is_seen_by_another() {
        let mut net = Net::new(2);
        let r = net.submit(0, create("t"));
        net.run();
        assert_eq!(net.reply(r), &Ok(Reply::Created { topic: TopicId(1) }));
        let d = net.submit(1, describe("t"));
        net.run();
        assert!(matches!(net.reply(d), Ok(Reply::Described(t)) if t.id == TopicId(1) && t.partitions == 2));
        assert_eq!(net.nodes[0].catalog(), net.nodes[1].catalog());
    }

    #[test]
    fn two_nodes_creating_one_name_at_once_exactly_one_succeeds() {
        let mut net = Net::new(2);
        let a = net.submit(0, create("t"));
        let b = net.submit(1, create("t"));
        net.run();
        let mut replies = vec![net.reply(a).clone(), net.reply(b).clone()];
        replies.sort_by_key(|r| r.is_err());
        assert_eq!(
            replies,
            vec![Ok(Reply::Created { topic: TopicId(1) }), Err(BrokerError::TopicAlreadyExists { name: "t".into() })]
        );
        assert_eq!(net.store.keys().collect::<Vec<_>>(), vec![journal_key(1)], "one entry");
        assert_eq!(net.nodes[0].catalog(), net.nodes[1].catalog());
    }

    /// The append's create lands but its answer is lost, or does not land: either way
    /// the node reads the key back and appends exactly once.
    #[test]
    fn an_append_with_an_unknown_outcome_is_read_back() {
        for lands in [true, false] {
            let mut net = Net::new(1);
            let r = net.submit(0, create("t"));
            net.step_with(|store, op| Ok(store.apply(op))); // the fence's listing
            assert!(matches!(net.pending.front(), Some((_, _, StoreOp::Create { .. }))));
            net.step_with(|store, op| {
                if lands {
                    store.apply(op);
                }
                Err(StoreError::Unknown("timed out".into()))
            });
            net.run();
            assert_eq!(net.reply(r), &Ok(Reply::Created { topic: TopicId(1) }), "lands: {lands}");
            assert_eq!(net.store.keys().count(), 1, "lands: {lands}");
        }
    }

    #[test]
    fn a_delete_acknowledged_on_one_node_hides_the_topic_on_every_other() {
        let mut net = Net::new(3);
        net.submit(0, create("t"));
        net.run();
        let seen = net.submit(2, describe("t"));
        net.run();
        assert!(net.reply(seen).is_ok());
        let d = net.submit(1, delete("t"));
        net.run();
        assert_eq!(net.reply(d), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
        // Invoked after the acknowledgement: node 2's fence folds the tombstone first.
        let after = net.submit(2, describe("t"));
        let list = net.submit(2, Command::ListTopics);
        net.run();
        assert_eq!(net.reply(after), &Err(BrokerError::TopicNotFound { name: "t".into() }));
        assert_eq!(net.reply(list), &Ok(Reply::Topics(vec![])));
        // Deleting it again answers for the incarnation being deleted; creating the name
        // again makes a new incarnation at once.
        let again = net.submit(0, delete("t"));
        net.run();
        let recreate = net.submit(2, create("t"));
        net.run();
        assert_eq!(net.reply(again), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
        assert_eq!(net.reply(recreate), &Ok(Reply::Created { topic: TopicId(3) }));
    }

    #[test]
    fn one_fence_round_serves_every_command_that_arrived_before_it() {
        let mut net = Net::new(1);
        let requests: Vec<_> = (0..10).map(|_| net.submit(0, Command::ListTopics)).collect();
        let lists = net.pending.iter().filter(|(_, _, op)| matches!(op, StoreOp::List { .. })).count();
        assert_eq!(lists, 1, "one listing for ten commands");
        net.run();
        assert!(requests.iter().all(|r| net.reply(*r) == &Ok(Reply::Topics(vec![]))));
    }

    /// A journal longer than one listing is read in several, in order.
    #[test]
    fn a_node_far_behind_catches_up_listing_after_listing() {
        let mut net = Net::new(2);
        for i in 0..8 {
            net.submit(0, create(&format!("t{i}")));
            net.run();
        }
        let list = net.submit(1, Command::ListTopics);
        net.run();
        let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
        assert_eq!(topics.len(), 8);
        assert_eq!(net.nodes[1].catalog().position(), 8);
    }

    #[test]
    fn a_failed_operation_is_retried_after_its_backoff() {
        let mut net = Net::new(1);
        let r = net.submit(0, Command::ListTopics);
        net.step_with(|_, _| Err(StoreError::Failed("503".into())));
        assert!(net.pending.is_empty() && !net.replies.contains_key(&r));
        let at = net.nodes[0].poll_timeout().expect("a retry is due");
        assert!(at > Time::ZERO);
        net.now = at;
        net.nodes[0].handle_timeout(at);
        net.collect();
        net.run();
        assert_eq!(net.reply(r), &Ok(Reply::Topics(vec![])));
    }

    #[test]
    fn a_request_the_store_does_not_answer_in_time_is_answered_at_its_deadline() {
        let mut net = Net::new(1);
        net.nodes[0] = Node::new(NodeOptions { request_timeout_ms: 1_000, ..net.nodes[0].options.clone() });
        let c = net.submit(0, create("a"));
        net.run();
        assert!(matches!(net.reply(c), Ok(Reply::Created { .. })));
        // A produce passes its fence; its segment's create is held.
        let p = net.submit(0, produce("a", Some(0), &["x"]));
        let writing = |net: &Net| {
            net.pending.iter().any(|(_, _, op)| matches!(op, StoreOp::Create { key, .. } if key.starts_with("d/")))
        };
        while !writing(&net) {
            assert!(net.step_with(|store, op| Ok(store.apply(op))), "the produce never wrote");
        }
        // A describe waits for a fence the store does not answer either.
        let d = net.submit(0, describe("a"));
        net.now = net.now.plus_millis(999);
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        assert!(!net.replies.contains_key(&d) && !net.replies.contains_key(&p), "answered before the deadline");
        net.now = net.now.plus_millis(1);
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        assert!(
            matches!(net.reply(d), Err(BrokerError::Unavailable(why)) if why.contains("nothing was written")),
            "{:?}",
            net.reply(d)
        );
        assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
        // While the write goes on, its id stays taken.
        net.nodes[0].handle_command(net.now, p, describe("a"));
        let again = net.nodes[0].poll_effect();
        assert!(
            matches!(again, Some(NodeEffect::Reply { reply: Err(BrokerError::DuplicateRequestId(_)), .. })),
            "{again:?}"
        );
        // The write lands; its late answer is dropped (`collect` fails on a second reply).
        net.run();
        assert_eq!(net.segments(), 1);
        // A request the store answers in time is answered as usual.
        let f = net.submit(0, fetch("a", 0, 0));
        net.run();
        assert_eq!(values(net.reply(f)), vec![(0, "x".to_string())]);
    }

    #[test]
    fn a_corrupt_entry_makes_the_node_refuse_rather_than_guess() {
        let mut net = Net::new(1);
        net.store.apply(&StoreOp::Create { key: journal_key(1), bytes: b"not an entry".to_vec() });
        let r = net.submit(0, Command::ListTopics);
        net.run();
        assert!(matches!(net.reply(r), Err(BrokerError::Unavailable(why)) if why.contains("corrupt")));
        let later = net.submit(0, create("t"));
        assert!(matches!(net.reply(later), Err(BrokerError::Unavailable(_))));
    }

    /// Seeded runs: several nodes, commands on random nodes, store operations completed
    /// in random order, some failing and some with unknown outcomes (landed or not).
    /// Two seeds in three compact (after 2 or 5 entries), and some of their writes with
    /// unknown outcomes land later, after other operations. Every request is answered;
    /// the journal never holds an entry its catalog ignores; every Created and
    /// DeleteAccepted names a journal entry that says so; every node ends with the same
    /// catalog, which the store's newest snapshot and the entries after it fold to; and
    /// no describe invoked after a delete's acknowledgement shows the deleted
    /// incarnation.
    #[test]
    fn random_interleavings_and_faults_keep_the_journal_and_the_lifecycle_straight() {
        let seeds: u64 = std::env::var("BROKER_CLUSTER_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
        let mut compacted = 0;
        for seed in 1..=seeds {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut rand = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n.max(1)
            };
            // Drawn from the seed, not the stream, so seeds without compaction run as
            // they did before compaction was built.
            let compact = [0, 2, 5][(seed % 3) as usize];
            let mut net = Net::compacting(1 + rand(4) as u32, compact);
            let names = ["a", "b"];
            let mut issued: BTreeMap<RequestId, (Command, u64)> = BTreeMap::new();
            let mut answered_at: BTreeMap<RequestId, u64> = BTreeMap::new();
            let mut step = 0u64;
            for _ in 0..60 {
                step += 1;
                if rand(3) == 0 {
                    let name = names[rand(2) as usize];
                    let command = match rand(7) {
                        0 => create(name),
                        1 => delete(name),
                        2 => describe(name),
                        3 => Command::ListTopics,
                        4 | 5 => {
                            let value = format!("v{step}");
                            produce(name, (rand(3) > 0).then(|| rand(2) as u32), &[value.as_str(), "w"])
                        }
                        _ => fetch(name, rand(2) as u32, rand(3)),
                    };
                    let node = rand(net.nodes.len() as u64) as usize;
                    let r = net.submit(node, command.clone());
                    issued.insert(r, (command, step));
                } else if !net.pending.is_empty() {
                    let i = rand(net.pending.len() as u64) as usize;
                    let op = net.pending.remove(i).unwrap();
                    net.pending.push_front(op);
                    let fault = rand(20);
                    let mut late = std::mem::take(&mut net.late);
                    let mut land = false;
                    net.step_with(|store, op| match fault {
                        0 => Err(StoreError::Failed("503".into())),
                        1 => {
                            store.apply(op);
                            Err(StoreError::Unknown("timed out after landing".into()))
                        }
                        2 => Err(StoreError::Unknown("timed out before landing".into())),
                        3 if compact > 0 => {
                            if matches!(op, StoreOp::Create { .. } | StoreOp::Delete { .. }) {
                                late.push_back(op.clone());
                            }
                            Err(StoreError::Unknown("timed out, to land later".into()))
                        }
                        4 if compact > 0 => {
                            land = true;
                            Ok(store.apply(op))
                        }
                        _ => Ok(store.apply(op)),
                    });
                    net.late = late;
                    if land {
                        net.land_late();
                    }
                } else {
                    net.now = net.now.plus_millis(10);
                    for node in &mut net.nodes {
                        node.handle_timeout(net.now);
                    }
                    net.collect();
                }
                for r in net.replies.keys() {
                    answered_at.entry(*r).or_insert(step);
                }
            }
            // Faults stop: late writes land, everything drains.
            while !net.late.is_empty() {
                net.land_late();
            }
            for _ in 0..1000 {
                net.run();
                net.now = net.now.plus_millis(10_000);
                for node in &mut net.nodes {
                    node.handle_timeout(net.now);
                }
                net.collect();
                if net.pending.is_empty() && net.nodes.iter().all(|n| n.poll_timeout().is_none()) {
                    break;
                }
            }
            step += 1;
            for r in net.replies.keys() {
                answered_at.entry(*r).or_insert(step);
            }
            for r in issued.keys() {
                assert!(net.replies.contains_key(r), "seed {seed}: {r:?} ({:?}) never answered", issued[r].0);
            }
            // The journal, folded afresh from every entry ever appended (compaction
            // deleted some), ignores nothing.
            let mut journal = Catalog::default();
            let mut entries = BTreeMap::new();
            let mut folded_at = BTreeMap::new();
            for (seq, bytes) in &net.history {
                assert_eq!(*seq, journal.position() + 1, "seed {seed}: the journal skips a seq");
                let e = entry::decode(*seq, bytes).expect("a valid entry");
                assert_eq!(journal.fold(&e), Folded::Applied, "seed {seed}: entry {seq}");
                entries.insert(*seq, e.kind);
                folded_at.insert(*seq, journal.clone());
            }
            // The store holds the same: every snapshot is that catalog at its seq, and
            // the newest one with the entries after it folds to the whole journal.
            let mut from_store = Catalog::default();
            for key in net.store.keys() {
                let Some(seq) = parse_snapshot_key(key) else { continue };
                let c = snapshot::decode(seq, net.store.get(key).unwrap()).expect("a valid snapshot");
                assert_eq!(Some(&c), folded_at.get(&seq), "seed {seed}: snapshot {seq}");
                from_store = c;
            }
            if from_store.position() > 0 {
                compacted += 1;
            }
            for key in net.store.keys() {
                let Some(seq) = parse_journal_key(key) else { continue };
                if seq > from_store.position() {
                    assert_eq!(seq, from_store.position() + 1, "seed {seed}: entry {seq} after a gap");
                    assert_eq!(Some(net.store.get(key).unwrap()), net.history.get(&seq).map(Vec::as_slice));
                    let e = entry::decode(seq, net.store.get(key).unwrap()).expect("a valid entry");
                    from_store.fold(&e);
                }
            }
            assert_eq!(from_store, journal, "seed {seed}: the store's journal");
            for (r, reply) in &net.replies {
                match reply {
                    Ok(Reply::Created { topic }) => {
                        assert!(matches!(entries.get(&topic.0), Some(EntryKind::Create { .. })), "seed {seed}: {r:?}");
                    }
                    Ok(Reply::DeleteAccepted { topic }) => {
                        let tombstone =
                            entries.values().any(|k| matches!(k, EntryKind::Delete { topic: t, .. } if t == topic));
                        assert!(tombstone, "seed {seed}: {r:?} acknowledged a delete of {topic} with no tombstone");
                    }
                    _ => {}
                }
            }
            // No position is acknowledged twice, and a fetch shows at each position the
            // record acknowledged there (or one produced there whose answer was lost).
            let mut at: BTreeMap<(TopicId, u32, u64), Vec<u8>> = BTreeMap::new();
            for (r, reply) in &net.replies {
                if let (Ok(Reply::Produced { topic, positions }), Command::Produce { records, .. }) =
                    (reply, &issued[r].0)
                {
                    for (p, rec) in positions.iter().zip(records) {
                        let old = at.insert((*topic, p.partition, p.offset), rec.value.clone());
                        assert!(old.is_none(), "seed {seed}: {topic}/{}@{} acknowledged twice", p.partition, p.offset);
                    }
                }
            }
            for (r, reply) in &net.replies {
                if let (Ok(Reply::Fetched { topic, records, high_watermark }), Command::Fetch { partition, .. }) =
                    (reply, &issued[r].0)
                {
                    for rec in records {
                        assert!(rec.offset < *high_watermark, "seed {seed}: {r:?}");
                        if let Some(v) = at.get(&(*topic, *partition, rec.offset)) {
                            assert_eq!(v, &rec.value, "seed {seed}: {r:?} at {}", rec.offset);
                        }
                    }
                }
            }
            // No describe or fetch invoked after a delete's acknowledgement shows the
            // incarnation, and no produce invoked after it is acknowledged to it.
            for (d, reply) in &net.replies {
                let Ok(Reply::DeleteAccepted { topic }) = reply else { continue };
                for (r, (command, invoked)) in &issued {
                    if *invoked > answered_at[d] {
                        let shown = match &net.replies[r] {
                            Ok(Reply::Described(t)) => Some(t.id),
                            Ok(Reply::Fetched { topic, .. } | Reply::Produced { topic, .. }) => Some(*topic),
                            _ => None,
                        };
                        assert_ne!(
                            shown,
                            Some(*topic),
                            "seed {seed}: {r:?} ({command:?}) invoked after {d:?} was acknowledged"
                        );
                    }
                }
            }
            // At most one completion per incarnation, and every deletion completed.
            let removed: Vec<TopicId> = entries
                .values()
                .filter_map(|k| match k {
                    EntryKind::Removed { topic } => Some(*topic),
                    _ => None,
                })
                .collect();
            let distinct: BTreeSet<TopicId> = removed.iter().copied().collect();
            assert_eq!(removed.len(), distinct.len(), "seed {seed}: a second Removed: {removed:?}");
            assert_eq!(journal.deleting().count(), 0, "seed {seed}: deletions left unfinished");
            // Once quiet, one reconciliation leaves segments of live incarnations only.
            net.nodes[0] = Node::new(NodeOptions { reconcile_every_ms: 1, boot: 1000, ..net.nodes[0].options.clone() });
            net.submit(0, Command::ListTopics);
            net.run();
            net.advance(10);
            for key in net.store.keys() {
                if let Some((topic, _, _)) = parse_segment_key(key) {
                    assert!(journal.live_topics().any(|(_, id, _)| id == topic), "seed {seed}: orphan {key} left");
                }
            }
            // Every node, fenced once more, holds the journal's catalog.
            for node in 0..net.nodes.len() {
                net.submit(node, Command::ListTopics);
            }
            net.run();
            for node in &net.nodes {
                assert_eq!(node.catalog(), &journal, "seed {seed}: broken {:?}", node.broken);
            }
        }
        if seeds >= 30 {
            assert!(compacted > seeds / 10, "only {compacted} of {seeds} runs compacted");
        }
    }

    // ---- removals racing requests, and listings as unkind as S3's ----

    impl Net {
        /// Carries out the oldest pending operation of `node` that `which` picks.
        fn step_picked(&mut self, node: usize, which: impl Fn(&StoreOp) -> bool) {
            let i = self.pending.iter().position(|(n, _, op)| *n == node && which(op));
            let i = i.unwrap_or_else(|| panic!("node {node} has no such operation pending: {:?}", self.pending));
            let op = self.pending.remove(i).unwrap();
            self.pending.push_front(op);
            self.step_with(|store, op| Ok(store.apply(op)));
        }

        /// Creates a key outside the layout, as an operator or another program might.
        fn plant_foreign(&mut self, key: String) {
            self.store.apply(&StoreOp::Create { key, bytes: b"not ours".to_vec() });
        }

        /// Runs every operation with each page of a listing cut to at most `keep(n)`
        /// keys of the `n` the store would give (none, sometimes), `more` set wherever
        /// keys were cut: what S3 may do.
        fn run_cut(&mut self, keep: &impl Fn(usize) -> usize) {
            while self.step_with(|store, op| match store.apply(op) {
                StoreOutput::Listed { mut keys, more } => {
                    let n = keys.len();
                    keys.truncate(keep(n));
                    Ok(StoreOutput::Listed { more: more || keys.len() < n, keys })
                }
                other => Ok(other),
            }) {}
        }
    }

    fn is_list(prefix: &'static str) -> impl Fn(&StoreOp) -> bool {
        move |op| matches!(op, StoreOp::List { prefix: p, .. } if p.starts_with(prefix))
    }

    /// A produce over two partitions creates its segment in one, then finds the other's
    /// last segment removed while reading it (the topic was deleted with no grace): its
    /// first record may have landed before the tombstone, and was indeed served, so it
    /// is answered with an unknown outcome, never "not found" (which says nothing was
    /// written).
    #[test]
    fn a_produce_that_wrote_before_meeting_a_removal_has_an_unknown_outcome() {
        let mut net = Net::new(3);
        let no_grace = TopicSettings { deletion_grace_ms: 0 };
        net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 2, settings: no_grace });
        net.run();
        net.submit(1, produce("t", Some(0), &["a"])); // node 1 knows partition 0's end
        net.submit(2, produce("t", Some(1), &["b"]));
        net.run();
        let p = net.submit(1, produce("t", None, &["x", "y"])); // keyless: x to 0, y to 1
        net.step_picked(1, is_list("j/"));
        net.step_picked(1, |op| matches!(op, StoreOp::Create { .. })); // x's segment
        net.step_picked(1, is_list("d/")); // partition 1 listed; its read is pending
        let f = net.submit(2, fetch("t", 0, 1));
        net.run_node(2);
        assert_eq!(values(net.reply(f)), [(1, "x".to_string())], "x is served before any delete");
        let d = net.submit(0, delete("t"));
        net.run_node(0);
        assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        net.run_node(0);
        assert_eq!(net.segments(), 0, "removed");
        net.run();
        assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
    }

    /// A fetch whose listing runs while a removal deletes the partition's later segments
    /// sees an end below offsets acknowledged before it was invoked: that "out of range"
    /// is answered only after a second fence, which finds the topic deleted.
    #[test]
    fn out_of_range_from_a_half_removed_partition_passes_the_second_fence() {
        let mut net = Net::new(3);
        let no_grace = TopicSettings { deletion_grace_ms: 0 };
        net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace });
        net.run();
        for v in ["a", "b", "c"] {
            let r = net.submit(1, produce("t", Some(0), &[v]));
            net.run();
            assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })));
        }
        net.submit(2, Command::ListTopics); // node 2 catches up
        net.run();
        let f = net.submit(2, fetch("t", 0, 2));
        net.step_picked(2, is_list("j/")); // fenced: t is live
        assert!(net.pending.iter().any(|(n, _, op)| *n == 2 && is_list("d/")(op)), "the partition's listing is next");
        net.submit(0, delete("t"));
        net.run_node(0);
        net.nodes[0].handle_timeout(net.now);
        net.collect();
        net.step_picked(0, is_list("d/"));
        for last in ["2", "1"] {
            net.step_picked(0, |op| matches!(op, StoreOp::Delete { key } if key.ends_with(last)));
        }
        net.run_node(2); // lists segment 0 alone: an end of 1, below the fetch's offset 2
        net.run();
        assert!(matches!(net.reply(f), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(f));
    }

    /// Keys outside the layout that fill a page under `j/` are walked past: a describe
    /// invoked after a delete's acknowledgement does not see the topic.
    #[test]
    fn foreign_keys_under_the_journal_never_end_a_fence_early() {
        let mut net = Net::new(2); // pages of 3
        net.submit(0, create("t"));
        net.run();
        let seen = net.submit(1, describe("t"));
        net.run();
        assert!(matches!(net.reply(seen), Ok(Reply::Described(_))));
        for k in ["a", "b", "c", "d"] {
            net.plant_foreign(format!("{}.{k}", journal_key(1)));
        }
        let d = net.submit(0, delete("t"));
        net.run();
        assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
        let gone = net.submit(1, describe("t"));
        net.run();
        assert!(matches!(net.reply(gone), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(gone));
        assert_eq!(net.store.keys().filter(|k| k.contains(".")).count(), 4, "foreign keys are left alone");
    }

    /// A walk of the journal that keys outside the layout lead past the next entry's
    /// key, before that entry lands, takes the entries after it for what they are: it
    /// reads the missed entry rather than taking the gap for compaction (the node broke
    /// down so in the simulator, with pages cut short).
    #[test]
    fn an_entry_that_lands_behind_the_walk_is_no_gap() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        net.submit(1, Command::ListTopics);
        net.run();
        net.plant_foreign(format!("{}.a", journal_key(2)));
        let seen = net.submit(1, describe("t"));
        // The fence's first page: the foreign key past entry 2's key, more said to follow.
        assert!(is_list("j/")(&net.pending[0].2));
        net.step_with(|store, op| match store.apply(op) {
            StoreOutput::Listed { keys, .. } => Ok(StoreOutput::Listed { keys, more: true }),
            other => Ok(other),
        });
        // Meanwhile entries 2 and 3 land.
        net.submit(0, delete("t"));
        net.run_node(0);
        net.submit(0, create("u"));
        net.run_node(0);
        net.run();
        // Before or after the delete (they are concurrent), but never unavailable.
        let answer = net.reply(seen);
        assert!(matches!(answer, Ok(Reply::Described(_)) | Err(BrokerError::TopicNotFound { .. })), "{answer:?}");
        let later = net.submit(1, describe("u"));
        net.run();
        assert!(matches!(net.reply(later), Ok(Reply::Described(_))), "the node reads on: {:?}", net.reply(later));
    }

    /// Segments that land behind a fetch's walk of the partition (a key outside the
    /// layout led it past their keys) are found again: the fetch never answers with an
    /// end past its offset and nothing at it (seen in the simulator, 1 seed in 20,000).
    #[test]
    fn segments_that_land_behind_a_fetchs_walk_are_found() {
        let mut net = Net::new(2);
        net.submit(0, create("t"));
        net.run();
        net.submit(1, Command::ListTopics);
        net.run();
        net.plant_foreign(format!("{}.part", segment_key(TopicId(1), 0, 3)));
        let f = net.submit(1, fetch("t", 0, 4));
        net.step_picked(1, is_list("j/"));
        // The partition's first page: only the foreign key, more said to follow.
        assert!(net.pending.iter().any(|(n, _, op)| *n == 1 && is_list("d/")(op)));
        let i = net.pending.iter().position(|(n, _, op)| *n == 1 && is_list("d/")(op)).unwrap();
        let op = net.pending.remove(i).unwrap();
        net.pending.push_front(op);
        net.step_with(|store, op| match store.apply(op) {
            StoreOutput::Listed { keys, .. } => Ok(StoreOutput::Listed { keys, more: true }),
            other => Ok(other),
        });
        // Segments 0 and 3 land behind the walk, 5 ahead of it.
        for values in [&["a", "b", "c"][..], &["d", "e"], &["f", "g"]] {
            let r = net.submit(0, produce("t", Some(0), values));
            net.run_node(0);
            assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
        }
        net.run();
        assert_eq!(values(net.reply(f)), [(4, "e".to_string())]);
    }

    /// Keys outside the layout that fill a page of a partition's listing are walked
    /// past: each fetch is answered (from one segment, as always), with the partition's
    /// whole end.
    #[test]
    fn foreign_keys_under_a_partition_never_stall_a_fetch() {
        let mut net = Net::new(1);
        net.submit(0, create("t"));
        net.run();
        for v in ["a", "b"] {
            let r = net.submit(0, produce("t", Some(0), &[v]));
            net.run();
            assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })));
        }
        for k in ["!a", "!b", "!c", "!d"] {
            net.plant_foreign(format!("{}{k}", partition_prefix(TopicId(1), 0)));
        }
        for (offset, value) in [(0, "a"), (1, "b")] {
            let f = net.submit(0, fetch("t", 0, offset));
            for _ in 0..1_000 {
                if !net.step_with(|store, op| Ok(store.apply(op))) {
                    break;
                }
            }
            assert_eq!(values(net.reply(f)), [(offset, value.to_string())]);
            assert!(matches!(net.reply(f), Ok(Reply::Fetched { high_watermark: 2, .. })));
        }
    }

    /// Keys outside the layout under an incarnation's prefix never make its removal
    /// complete early: `Removed` is journaled only once no segment is left.
    #[test]
    fn foreign_keys_under_a_topic_never_complete_its_removal_early() {
        let mut net = Net::new(1);
        let no_grace = TopicSettings { deletion_grace_ms: 0 };
        net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace });
        net.run();
        net.submit(0, produce("t", Some(0), &["a"]));
        net.run();
        for k in ["!a", "!b", "!c"] {
            net.plant_foreign(format!("{}{k}", topic_prefix(TopicId(1))));
        }
        net.submit(0, delete("t"));
        net.run();
        net.advance(1);
        assert!(net.journal().contains(&EntryKind::Removed { topic: TopicId(1) }), "{:?}", net.journal());
        assert_eq!(net.segments(), 0, "Removed journaled with segments left");
    }

    /// Every listing follows a page's `more`, never its length: with each page cut to one
    /// key, or to none every other time, a fence still reads the whole journal, a fetch
    /// sees every acknowledged record, a removal leaves no segment, compaction deletes
    /// what it should, and the reconciler walks the whole data prefix.
    #[test]
    fn short_and_empty_pages_that_are_not_the_last_are_followed() {
        for empty_every in [0, 2] {
            let mut net = Net::compacting(2, 4);
            let turn = std::cell::Cell::new(0usize);
            let keep = |n: usize| {
                turn.set(turn.get() + 1);
                if empty_every > 0 && turn.get().is_multiple_of(empty_every) {
                    0
                } else {
                    n.min(1)
                }
            };
            let no_grace = TopicSettings { deletion_grace_ms: 0 };
            net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace.clone() });
            net.run_cut(&keep);
            for v in ["a", "b", "c", "d"] {
                let r = net.submit(0, produce("t", Some(0), &[v]));
                net.run_cut(&keep);
                assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
            }
            let f = net.submit(1, fetch("t", 0, 0));
            net.run_cut(&keep);
            let Ok(Reply::Fetched { high_watermark, .. }) = net.reply(f) else { panic!("{:?}", net.reply(f)) };
            assert_eq!(*high_watermark, 4, "every acknowledged offset is seen");
            for name in ["u", "v", "w"] {
                net.submit(0, Command::CreateTopic { name: name.into(), partitions: 1, settings: no_grace.clone() });
                net.run_cut(&keep);
            }
            let d = net.submit(0, delete("t"));
            net.run_cut(&keep);
            assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
            let gone = net.submit(1, describe("t"));
            net.run_cut(&keep);
            assert!(matches!(net.reply(gone), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(gone));
            for _ in 0..5 {
                net.now = net.now.plus_millis(1);
                for node in &mut net.nodes {
                    node.handle_timeout(net.now);
                }
                net.collect();
                net.run_cut(&keep);
            }
            assert_eq!(net.segments(), 0, "the removal walked every page");
            assert!(net.journal().contains(&EntryKind::Removed { topic: TopicId(1) }));
            assert!(!net.snapshots().is_empty(), "compaction ran");
            assert!(!net.has_entry(1), "compaction walked the journal's pages");
        }
    }
}
