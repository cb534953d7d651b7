//! One cluster node: commands and store results in, store operations and replies out,
//! with no I/O of its own, as [`crate::Broker`] is.
//!
//! The node keeps the rules of DESIGN.md, section 10, one file each, all of them
//! methods of [`Node`] (a rule that needs another's state gets it through the node):
//!
//! - `fence.rs`, rule F: every command waits for a fence, a round of listing `j/` after
//!   the node's position and folding what it finds until a listing finds nothing new; a
//!   round serves every command that arrived before it began, so a busy node pays one
//!   round per group of commands. After its fence, list and describe answer from the
//!   catalog.
//! - `append.rs`, rule A: a create or delete is validated and appended at
//!   `position + 1` with a conditional create; an append that meets another's entry
//!   folds it and runs again, and one whose outcome is unknown reads the key back and
//!   knows its own entry by its writer.
//! - `data.rs`, rule D: a produce places its records as one node does and writes one
//!   topic object holding every partition it writes, with a conditional create of the
//!   incarnation's next object number, learning the newest object again after a lost
//!   race, then waits for a second fence: acknowledged if the topic is still live, else
//!   answered with an unknown outcome. A fetch lists the incarnation's objects past the
//!   newest it knows, reads the newest header (every partition's end) and the object
//!   holding its offset, then waits for a second fence before it answers. `lanes.rs`
//!   keeps one object write under way per incarnation: the produces that arrive
//!   meanwhile ride in the next one (group commit).
//! - `removal.rs`, rule R: the objects of an incarnation whose grace delay ended are
//!   deleted by every node that folded its tombstone, and the removal completed once.
//! - `reconcile.rs`, rule O: objects under the data prefix that no incarnation owns are
//!   deleted.
//! - `compaction.rs`, rule C: a node that has folded `compact_after_entries` entries
//!   past the newest snapshot it knows creates `s/{S}` at its position `S`, then deletes
//!   the entries and snapshots below it. A fence round that meets a gap, or an entry
//!   gone, loads the newest snapshot; one that read entries folds them only if a listing
//!   of `s/` issued after the reads finds no snapshot past its position (else it loads
//!   the newest), and an append is taken as done only if no snapshot past its seq exists
//!   (else a snapshot says whose entry the seq holds): a deleted key may be created
//!   again by a create that was delayed.
//! - `healing.rs`, rule H: a request is answered at its deadline, a failed operation
//!   retried after its backoff, and a node that cannot read the journal on refuses to
//!   serve.
//!
//! This file holds the node's types, its state (one part per rule, as [`Node`] shows),
//! and the `handle_*`/`poll_*` surface that routes each store result to its rule;
//! `tests/` holds the tests, one file per rule over one harness (`tests/mod.rs`).

use crate::cluster::catalog::{Catalog, DeleteOf, Folded};
use crate::cluster::entry::{self, Entry, EntryKind, EntryWriter};
use crate::cluster::keys::{
    journal_key, object_key, parse_data_key, parse_journal_key, parse_object_key, parse_segment_key,
    parse_snapshot_key, snapshot_key, topic_prefix, DATA_PREFIX, JOURNAL_PREFIX, SNAPSHOT_PREFIX,
};
use crate::cluster::object_index::{Locate, ObjectIndex};
use crate::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use crate::cluster::{snapshot, topic_object};
use crate::command::{Command, ProduceRecord, RecordPosition, Reply, StoredRecord, TopicDescription};
use crate::config::Config;
use crate::error::BrokerError;
use crate::ids::{RequestId, TopicId};
use crate::placement::{check_produce, place, Placement};
use crate::time::Time;
use crate::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod append;
mod compaction;
mod data;
mod fence;
mod healing;
mod lanes;
mod reconcile;
mod removal;

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
    /// How long a partition's next segment write waits, once the node knows where it
    /// goes, for more produces to ride in it (`lanes.rs`), in milliseconds; 0: it starts
    /// at once (produces still ride in the write after one under way).
    pub gather_ms: u64,
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
    /// Listing an incarnation's objects past the newest known so far (`newest`).
    Objects { request: RequestId, newest: Option<u64> },
    /// Reading object `n`.
    ReadObject { request: RequestId, n: u64 },
    /// Creating a produce's object.
    WriteObject { request: RequestId },
    /// Reading a produce's object key back after a lost race or an unknown outcome.
    CheckObject { request: RequestId },
    /// Listing what is left of an incarnation being removed.
    RemoveList(TopicId),
    /// Deleting one of its objects.
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
    /// A produce whose object exists: acknowledged if its topic is still live.
    Produced,
    /// A fetch that has read its records, or found its offset past the end, or a
    /// describe that has learned every partition's end: answered so if its topic is
    /// still live.
    Fetched(Result<Reply, BrokerError>),
}

/// A produce, fetch or describe between its two fences.
#[derive(Debug)]
enum Work {
    Produce {
        name: String,
        topic: TopicId,
        partitions: u32,
        /// Where each record goes; offsets count from 0 in each partition until its
        /// object's bases are known.
        positions: Vec<RecordPosition>,
        /// Its records by partition (and, once it leads a write, its riders' after them).
        parts: BTreeMap<u32, Vec<ProduceRecord>>,
        write: Write,
    },
    Fetch {
        name: String,
        topic: TopicId,
        partitions: u32,
        partition: u32,
        offset: u64,
        max_records: u32,
        /// The most bytes of keys and values to return (the first record whatever its size).
        max_bytes: u64,
        /// The high watermark, once the newest object's header is known.
        high_watermark: Option<u64>,
    },
    /// A describe learning every partition's end from the newest object's header, as a
    /// fetch learns its high watermark.
    Describe {
        name: String,
        topic: TopicId,
        /// The answer, its high watermarks filled in once learned.
        shown: TopicDescription,
    },
}

/// A produce's object write.
#[derive(Debug)]
struct Write {
    writer: EntryWriter,
    /// The object number its create was issued at (its leader's, for a rider).
    n: Option<u64>,
    /// The bytes of that create, until it is known to have landed: an unknown outcome is
    /// issued again with the same bytes.
    bytes: Option<Bytes>,
    /// Its first offset in each partition it writes, once a create holding its records
    /// was issued.
    bases: BTreeMap<u32, u64>,
    written: bool,
    /// Its parts hold the riders' records too (`lanes.rs`), as they stay until written.
    sealed: bool,
    /// Its first create has waited out the gathering window.
    waited: bool,
    /// The produces whose records follow its own in its object, each with where its
    /// records begin in each partition's part.
    riders: Vec<(RequestId, BTreeMap<u32, u64>)>,
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
    bytes: Option<Bytes>,
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

/// A cluster node: what every rule shares (its options, the catalog it has folded, the
/// effects it has not yet handed out, the store operations in flight and the time),
/// then one part per rule, each read and written by its rule's file and reached by
/// another rule only through the node.
#[derive(Debug)]
pub struct Node {
    options: NodeOptions,
    catalog: Catalog,
    effects: VecDeque<NodeEffect>,
    next_op: u64,
    next_nonce: u64,
    ops: BTreeMap<StoreOpId, (StoreOp, Purpose)>,
    /// The latest time a caller gave.
    now: Time,
    /// Rule F (`fence.rs`).
    fence: FenceState,
    /// Rule A (`append.rs`).
    append: AppendState,
    /// Rule D (`data.rs`).
    data: DataState,
    /// Rule H (`healing.rs`): requests and their deadlines.
    requests: RequestState,
    /// Rule H (`healing.rs`): failed operations and a journal that cannot be read on.
    healing: HealingState,
    /// Rule R (`removal.rs`).
    removal: RemovalState,
    /// Rule O (`reconcile.rs`).
    reconcile: ReconcileState,
    /// Rule C (`compaction.rs`).
    compaction: CompactionState,
}

/// Rule F: fence rounds and the commands waiting for them.
#[derive(Debug, Default)]
struct FenceState {
    /// Fence rounds begun so far.
    rounds: u64,
    round: Option<Round>,
    /// Requests waiting for a fence, with the number of rounds begun when they arrived.
    waiting: Vec<(RequestId, After, u64)>,
    /// When the node next reads the journal's tail on its own.
    next_tail: Option<Time>,
}

/// Rule A: entries to append, one at a time.
#[derive(Debug, Default)]
struct AppendState {
    /// Entries to append, in arrival order.
    queue: VecDeque<Appendable>,
    /// The entry being appended.
    current: Option<Append>,
    /// The append lost its seq: fold before validating again.
    behind: bool,
}

/// Rule D: produces and fetches, and what the node knows of partitions' ends.
#[derive(Debug, Default)]
struct DataState {
    /// Produces and fetches between their two fences.
    work: BTreeMap<RequestId, Work>,
    /// Per incarnation, the headers of its objects this node last read or wrote.
    objects: BTreeMap<TopicId, ObjectIndex>,
    /// Per incarnation, where the next keyless record goes (round-robin).
    cursors: BTreeMap<TopicId, u32>,
    /// Per incarnation, the object write under way and the produces waiting for it.
    lanes: BTreeMap<TopicId, lanes::Lane>,
    /// Leaders whose writes start once every command of their fence round is placed.
    starting: Vec<(RequestId, TopicId)>,
    /// Leaders waiting out the gathering window: when their first create goes.
    held: BTreeSet<(Time, RequestId)>,
    /// Produces whose records rode in another's object, over the node's life.
    rides: u64,
}

/// Rule H: the requests not yet answered, and when each is answered at the latest.
#[derive(Debug, Default)]
struct RequestState {
    /// Requests not yet answered.
    open: BTreeSet<RequestId>,
    /// When each open request is answered at the latest, by request and by time.
    deadline: BTreeMap<RequestId, Time>,
    deadlines: BTreeSet<(Time, RequestId)>,
    /// Requests answered at their deadline whose write goes on: their late answer is
    /// dropped, and their id stays taken until then.
    expired: BTreeSet<RequestId>,
}

/// Rule H: failed operations waiting for their backoff, and the node's refusal to serve.
#[derive(Debug, Default)]
struct HealingState {
    /// Failed operations by when they are issued again (then by arrival).
    retries: BTreeMap<(Time, u64), Retry>,
    /// Failures in a row, for the backoff; a success resets it.
    failures: u32,
    /// Set when the journal cannot be read on (an undecodable entry, a gap): every
    /// command is refused with it.
    broken: Option<String>,
}

/// Rule R: incarnations to remove.
#[derive(Debug, Default)]
struct RemovalState {
    /// Incarnations to remove, with when their grace delay (counted from when this node
    /// folded the tombstone) ends.
    due: BTreeMap<TopicId, Time>,
    /// The removal in flight, and how many of its deletes are.
    in_flight: Option<(TopicId, usize)>,
}

/// Rule O: the reconciler's passes.
#[derive(Debug, Default)]
struct ReconcileState {
    /// When the reconciler next runs.
    next_pass: Option<Time>,
    /// The pass in flight: where its listing goes on once the page in hand is done,
    /// and how many of that page's deletes are in flight.
    pass: Option<(Then, usize)>,
    /// Orphans the reconciler has deleted, over the node's life.
    orphans_removed: u64,
}

/// Rule C: snapshots and the compaction in flight.
#[derive(Debug, Default)]
struct CompactionState {
    /// The newest snapshot this node wrote or loaded (0: none).
    snapshot_at: u64,
    /// The compaction in flight.
    in_flight: Option<Compaction>,
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
            now: Time::ZERO,
            fence: FenceState::default(),
            append: AppendState::default(),
            data: DataState::default(),
            requests: RequestState::default(),
            healing: HealingState::default(),
            removal: RemovalState::default(),
            reconcile: ReconcileState::default(),
            compaction: CompactionState::default(),
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
    /// read of the journal's tail, the end of a removal's grace delay, the reconciler's
    /// next pass, or a request's deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        // A node that refuses to serve does nothing more on a timer.
        if self.healing.broken.is_some() {
            return None;
        }
        let retry = self.healing.retries.keys().next().map(|(at, _)| *at);
        let removal = self.removal.in_flight.is_none().then(|| self.removal.due.values().min().copied()).flatten();
        let reconcile = self.reconcile.next_pass.filter(|_| self.reconcile.pass.is_none());
        let deadline = self.requests.deadlines.first().map(|(at, _)| *at);
        let held = self.data.held.first().map(|(at, ..)| *at);
        [retry, self.fence.next_tail, removal, reconcile, deadline, held].into_iter().flatten().min()
    }

    /// Lets time pass to `now`: answers every request whose deadline passed, issues
    /// again every failed operation whose backoff has ended, starts the segment writes
    /// whose gathering window ended, reads the journal's tail if it is time, starts a
    /// removal whose grace delay has ended, and starts the reconciler if its pass is due.
    pub fn handle_timeout(&mut self, now: Time) {
        self.clock(now);
        self.answer_overdue(now);
        self.retry_due(now);
        self.release_held(now);
        if self.fence.next_tail.is_some_and(|at| at <= now) && self.healing.broken.is_none() {
            self.fence.next_tail = Some(now.plus_millis(self.options.tail_every_ms));
            if self.fence.round.is_none() && !planted!(self.options.config, ClusterNoTailing) {
                self.begin_round();
            }
        }
        self.start_removal();
        if self.reconcile.next_pass.is_some_and(|at| at <= now)
            && self.reconcile.pass.is_none()
            && self.healing.broken.is_none()
        {
            self.reconcile.next_pass = Some(now.plus_millis(self.options.reconcile_every_ms));
            self.reconcile.pass = Some((Then::From(None), 0));
            self.list_orphans(None);
        }
    }

    fn clock(&mut self, now: Time) {
        self.now = self.now.max(now);
        if self.fence.next_tail.is_none() && self.options.tail_every_ms > 0 {
            self.fence.next_tail = Some(self.now.plus_millis(self.options.tail_every_ms));
        }
        if self.reconcile.next_pass.is_none() && self.options.reconcile_every_ms > 0 {
            self.reconcile.next_pass = Some(self.now.plus_millis(self.options.reconcile_every_ms));
        }
    }

    /// Starts no more work of its own on a timer: no more reads of the journal's tail
    /// while idle (rule H) and no more reconciler passes (rule O). What is under way
    /// finishes, commands still fence, and failed operations are still retried. The
    /// simulator calls it once a cluster has settled: with short timers and small
    /// listing pages its nodes would otherwise poll the store for ever and never all be
    /// [`Node::idle`] at once.
    pub fn stop_background(&mut self) {
        if planted!(self.options.config, ClusterBackgroundNeverStops) {
            return;
        }
        self.options.tail_every_ms = 0;
        self.options.reconcile_every_ms = 0;
        self.fence.next_tail = None;
        self.reconcile.next_pass = None;
    }

    /// Whether all the node has under way is its own polling: a fence round no command
    /// waits for, or a reconciler pass (and the compaction folding may start); no
    /// command, append, segment write or removal unfinished, and no operation waiting for
    /// its retry.
    pub fn only_polling(&self) -> bool {
        self.healing.retries.is_empty()
            && self.fence.waiting.is_empty()
            && self.data.work.is_empty()
            && self.append.queue.is_empty()
            && self.append.current.is_none()
            && self.removal.in_flight.is_none()
    }

    /// Whether the node has nothing under way: no store operation in flight or waiting
    /// for its retry, no fence round, and no command, append or removal unfinished
    /// (timers for tailing and the reconciler aside).
    pub fn idle(&self) -> bool {
        self.only_polling() && self.ops.is_empty() && self.fence.round.is_none()
    }

    /// How many produces' records rode in another produce's segment (group commit, per
    /// partition) in this life of the node.
    pub fn rides(&self) -> u64 {
        self.data.rides
    }

    /// How many orphan segments the reconciler has deleted in this life of the node.
    pub fn orphans_removed(&self) -> u64 {
        self.reconcile.orphans_removed
    }

    /// A client command.
    pub fn handle_command(&mut self, now: Time, request: RequestId, command: Command) {
        self.clock(now);
        if self.requests.expired.contains(&request) || !self.requests.open.insert(request) {
            return self
                .effects
                .push_back(NodeEffect::Reply { request, reply: Err(BrokerError::DuplicateRequestId(request.0)) });
        }
        if self.options.request_timeout_ms > 0 {
            let at = now.plus_millis(self.options.request_timeout_ms);
            self.requests.deadline.insert(request, at);
            self.requests.deadlines.insert((at, request));
        }
        if let Some(why) = &self.healing.broken {
            let reply = Err(BrokerError::Unavailable(why.clone()));
            return self.reply(request, reply);
        }
        if command.is_group_offsets() {
            let why = "a cluster node keeps no consumer group offsets: commit them on a single broker (broker-fs)";
            return self.reply(request, Err(BrokerError::InvalidRequest(why.into())));
        }
        if command.is_idempotent_producing() {
            let why = "a cluster node keeps no idempotent producer state: produce without a producer id";
            return self.reply(request, Err(BrokerError::InvalidRequest(why.into())));
        }
        let produce = matches!(command, Command::Produce { .. });
        let unverified = produce && planted!(self.options.config, ClusterProduceUnverified);
        if (unverified || planted!(self.options.config, ClusterSkipFence)) && self.catalog.position() > 0 {
            self.fenced(request, command);
            self.start_lanes();
            return self.pump_appends();
        }
        self.await_fence(request, After::Command(command));
    }

    /// Holds `after` until a fence round that begins from now on has completed.
    fn await_fence(&mut self, request: RequestId, after: After) {
        self.fence.waiting.push((request, after, self.fence.rounds));
        if self.fence.round.is_none() {
            self.begin_round();
        }
    }

    /// The result of store operation `id`.
    pub fn handle_store(&mut self, now: Time, id: StoreOpId, result: StoreResult) {
        self.clock(now);
        let Some((op, purpose)) = self.ops.remove(&id) else { return };
        let output = match result {
            Ok(output) => {
                self.healing.failures = 0;
                output
            }
            // An unknown outcome of the append is resolved by reading its key back.
            Err(StoreError::Unknown(_)) if matches!(purpose, Purpose::Append) => {
                return self.check_append();
            }
            Err(StoreError::Unknown(_)) if matches!(purpose, Purpose::WriteObject { .. }) => {
                let Purpose::WriteObject { request } = purpose else { return };
                return self.check_object(request);
            }
            // Nothing happened (or, for a read, nothing was learned): try again.
            Err(_) => return self.retry_later(now, id, op, purpose),
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
            (Purpose::Append, StoreOutput::Exists) if planted!(self.options.config, ClusterUnconditionalAppend) => {
                self.appended()
            }
            (Purpose::Append, StoreOutput::Exists) => self.check_append(),
            (Purpose::AppendCheck, StoreOutput::Found(bytes)) => self.append_checked(&bytes),
            (Purpose::Objects { request, newest }, StoreOutput::Listed { keys, more }) => {
                self.objects_listed(request, newest, Page::of(keys, more, &op));
            }
            (Purpose::ReadObject { request, n }, StoreOutput::Found(bytes)) => self.object_read(request, n, &bytes),
            (Purpose::ReadObject { request, .. }, StoreOutput::Missing) => {
                // Removed: its topic's tombstone is in the journal, so the request is
                // answered as after the delete (a produce has written nothing yet).
                self.data_not_found(request);
            }
            (Purpose::WriteObject { request }, StoreOutput::Created) => self.object_written(request),
            (Purpose::WriteObject { request }, StoreOutput::Exists) => self.check_object(request),
            (Purpose::CheckObject { request }, StoreOutput::Found(bytes)) => self.object_checked(request, &bytes),
            (Purpose::CheckObject { request }, StoreOutput::Missing) => self.write_again(request),
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
            (Purpose::CompactCheck(_), StoreOutput::Missing) => self.compaction.in_flight = None,
            (Purpose::CompactList, StoreOutput::Listed { keys, more }) => {
                self.compaction_listed(Page::of(keys, more, &op))
            }
            (Purpose::CompactDelete, StoreOutput::Deleted) => self.compaction_deleted(),
            (Purpose::AppendCheck, StoreOutput::Missing) => {
                // The unknown create did not land (yet), or landed and was compacted:
                // create again; should the first land after all, the second finds it and
                // reads it back as ours, and either way a snapshot past the seq, if any,
                // judges (rule C).
                if let Some(a) = &self.append.current {
                    let op = StoreOp::Create { key: journal_key(a.seq), bytes: entry::encode(a.seq, &a.entry).into() };
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
        if self.requests.expired.remove(&request) {
            return;
        }
        self.requests.open.remove(&request);
        if let Some(at) = self.requests.deadline.remove(&request) {
            self.requests.deadlines.remove(&(at, request));
        }
        self.effects.push_back(NodeEffect::Reply { request, reply });
    }
}

/// A live incarnation as list shows it. The high watermarks are the ends this node has
/// learned by its own produces, fetches and describes, which may lag behind what other
/// nodes appended since; a describe reads every partition's end before it answers
/// (`data.rs`).
fn describe(name: &str, id: TopicId, t: &crate::cluster::catalog::Incarnation, ends: Vec<u64>) -> TopicDescription {
    TopicDescription {
        name: name.to_string(),
        id,
        partitions: t.partitions,
        settings: t.settings.clone(),
        high_watermarks: ends,
        // The cluster's partitions begin at 0 (DESIGN.md section 10: not yet offset bases).
        log_start: 0,
    }
}

#[cfg(test)]
mod tests;
