//! One simulated cluster run: the real [`Node`] state machines over the simulated
//! shared store, driven by the seed's clients, with store faults, cuts of a node from
//! the store, node crashes and restarts, then the checks.
//!
//! Phases, as for one broker: *chaos* (the workload runs; faults are on), *settle*
//! (faults stop, cut nodes reach the store again, crashed nodes restart; every deletion
//! must complete within a bound, and once all else has settled the nodes stop polling
//! on their timers, so that the run quiesces), then the *final checks*: the lifecycle judged from
//! the whole history, every node's catalog against the journal, every partition read
//! back from every node, and one reconciliation that must leave no orphan. The checks
//! are [`crate::cluster::checkers`]; the runner calls them, and owns only the
//! violations they report.
//!
//! A [`ClusterScript`] replaces the seed's clients and faults with fixed groups of
//! commands, each to a named node, and [`RunOptions::store_fault_at`] injects one fault
//! at one store operation: the exhaustive mode (`broker-sim exhaust`) runs both.

use crate::client_wakes::ClientWakes;
pub use crate::cluster::checkers::heals_in_bound::HEAL_BOUND_MS;
use crate::cluster::checkers::heals_in_bound::{self, HealCheck, HealsInBound, Standing};
use crate::cluster::checkers::{self, every_request_answered, liveness};
use crate::cluster::history::History;
pub use crate::cluster::metrics::ClusterMetrics;
use crate::cluster::params::ClusterParams;
pub use crate::cluster::script::{arrived_ops, ClusterScript, StoreFault, LANDS_LAST_US};
use crate::cluster::store::SimStore;
use crate::events::EventQueue;
use crate::rng::SimRng;
use crate::run::{RunOptions, RunReport, RunStats, CHAOS_LIMIT_MS, LIVENESS_BOUND_MS};
use crate::swarm::SwarmParams;
use crate::trace::{IssueText, ReplyText, Trace};
use crate::violation::{Flags, Violation};
use crate::workload::{Issue, Workload};
use broker_core::cluster::keys::{
    journal_key, parse_data_key, partition_prefix, segment_key, snapshot_key, topic_prefix,
};
use broker_core::cluster::node::{Node, NodeEffect, NodeOptions, StoreOpId};
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use broker_core::{BrokerError, Command, Config, Reply, RequestId, Time, TopicId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod final_checks;

/// The most keys one page of an S3 listing holds, whatever the request asks.
const S3_PAGE_CAP: usize = 1_000;

/// What happens to one store operation.
#[derive(Clone, Debug)]
enum Fate {
    /// Carried out and answered.
    Normal,
    /// Refused: nothing happens.
    Fail,
    /// A write carried out, then answered with an error of unknown outcome at once
    /// (S3's 5xx after the write); a read is refused.
    FailAfterWrite,
    /// No answer in time; a write lands at once, after this many microseconds, or never.
    Timeout(Option<u64>),
}

#[derive(Clone, Debug)]
enum Ev {
    ClientWake(usize),
    /// A node's operation reaches the store.
    Arrive {
        node: usize,
        life: u32,
        id: StoreOpId,
        op: StoreOp,
        fate: Fate,
    },
    /// A write that timed out lands late.
    Land {
        node: usize,
        op: StoreOp,
    },
    /// An answer reaches a node.
    Answer {
        node: usize,
        life: u32,
        id: StoreOpId,
        result: StoreResult,
    },
    Timeout {
        node: usize,
        life: u32,
        at: Time,
    },
    Crash,
    Restart(usize),
    Cut,
    CutEnd(usize),
    /// The bound of heal check `id` ends.
    HealCheck(u64),
    EndChaos,
}

/// A node's own clock: the simulation's, set off by `offset_us` and running fast (or
/// slow) by `drift_ppm`, as the clocks of real machines are. Every time a node is
/// given, and every deadline it asks for, is on its clock.
#[derive(Clone, Copy, Debug, Default)]
struct Clock {
    offset_us: i64,
    drift_ppm: i64,
}

impl Clock {
    /// The node's time when the simulation's is `t` (never before zero).
    fn local(&self, t: Time) -> Time {
        // In 64 bits where nothing overflows (every time a run reaches), as a 128-bit
        // division costs more than the rest of the event; the same sum otherwise.
        let narrow = i64::try_from(t.0).ok().and_then(|t| {
            let skew = t.checked_mul(self.drift_ppm)? / 1_000_000;
            t.checked_add(self.offset_us)?.checked_add(skew)
        });
        if let Some(local) = narrow {
            return Time(local.max(0) as u64);
        }
        let t = i128::from(t.0);
        let local = t + i128::from(self.offset_us) + t * i128::from(self.drift_ppm) / 1_000_000;
        Time(local.clamp(0, i128::from(u64::MAX)) as u64)
    }

    /// The first instant of the simulation at which the node's clock reads `local` or
    /// later.
    fn global(&self, local: Time) -> Time {
        let narrow = i64::try_from(local.0).ok().and_then(|local| {
            local.checked_sub(self.offset_us)?.checked_mul(1_000_000).map(|d| d / (1_000_000 + self.drift_ppm))
        });
        let guess = match narrow {
            Some(guess) => i128::from(guess),
            None => {
                let rate = 1_000_000 + i128::from(self.drift_ppm);
                (i128::from(local.0) - i128::from(self.offset_us)) * 1_000_000 / rate
            }
        };
        let mut t = Time(guess.clamp(0, i128::from(u64::MAX)) as u64);
        while self.local(t) < local {
            t = t.plus_micros(1);
        }
        t
    }
}

/// One node's place in the cluster.
struct Slot {
    node: Option<Node>,
    /// Its clock, which a restart keeps (the same machine).
    clock: Clock,
    /// Bumped at each crash and restart: events of an earlier life are dropped.
    life: u32,
    /// Cut off from the store until then.
    cut_until: Option<Time>,
    /// When its last cut began.
    cut_at: Time,
    /// Requests in flight, by the client that sent them.
    requests: BTreeMap<RequestId, usize>,
    /// Deadlines with a `Timeout` event scheduled.
    wakes: BTreeSet<Time>,
}

struct Sim {
    now: Time,
    params: SwarmParams,
    cp: ClusterParams,
    config: Config,
    rng: SimRng,
    queue: EventQueue<Ev>,
    seq: u64,
    store: SimStore,
    slots: Vec<Slot>,
    boots: u64,
    workload: Workload,
    /// A scripted run's groups not yet sent (then no random faults).
    script: Option<VecDeque<Vec<(usize, Command)>>>,
    /// The fault to inject, and the number of the operation it strikes.
    fault_at: Option<(u64, StoreFault)>,
    /// Operations that reached the store so far.
    arrivals: u64,
    outstanding: Vec<u32>,
    /// The clients' wakes, parked while a client could send nothing.
    client_wakes: ClientWakes,
    next_request: u64,
    chaos: bool,
    /// Store events scheduled and not yet processed.
    store_pending: u64,
    /// Of those, writes that timed out and have yet to land.
    landings_pending: u64,
    crash_now: Option<usize>,
    /// Heal checks not yet due.
    heals: HealsInBound,
    history: History,
    trace: Trace,
    stats: RunStats,
    metrics: ClusterMetrics,
    /// Tombstones some node that is up has not folded yet, with when they landed; and
    /// how many of the store's tombstones have been taken in.
    fanout: BTreeMap<TopicId, Time>,
    tombstones_seen: usize,
    violations: Vec<Violation>,
}

/// Runs one cluster seed to the end and checks it.
pub fn run(opts: &RunOptions, params: SwarmParams, cp: ClusterParams) -> RunReport {
    let config = crate::run::core_config(&params, opts.bug);
    let clients = params.clients as usize;
    let think_us = params.think_us;
    let nodes = cp.nodes as usize;
    let mut sim = Sim {
        now: Time::ZERO,
        workload: Workload::new(opts.seed, &params),
        script: opts.cluster_script.as_ref().map(|s| s.groups.iter().cloned().collect()),
        fault_at: opts.store_fault_at,
        arrivals: 0,
        config,
        rng: SimRng::fork(opts.seed, "cluster-scheduler"),
        queue: EventQueue::default(),
        seq: 0,
        store: SimStore::default(),
        slots: (0..nodes)
            .map(|_| Slot {
                node: None,
                clock: Clock::default(),
                life: 0,
                cut_until: None,
                cut_at: Time::ZERO,
                requests: BTreeMap::new(),
                wakes: BTreeSet::new(),
            })
            .collect(),
        boots: 0,
        outstanding: vec![0; clients],
        client_wakes: ClientWakes::new(clients, think_us),
        next_request: 1,
        chaos: true,
        store_pending: 0,
        landings_pending: 0,
        crash_now: None,
        heals: HealsInBound::default(),
        history: History::default(),
        trace: Trace::new(opts.keep_trace),
        stats: RunStats { nodes: cp.nodes, ..RunStats::default() },
        metrics: ClusterMetrics::default(),
        fanout: BTreeMap::new(),
        tombstones_seen: 0,
        violations: Vec::new(),
        params,
        cp,
    };
    sim.skew_clocks();
    sim.plant_foreign_keys();
    for n in 0..nodes {
        sim.start(n);
    }
    for c in 0..clients {
        let at = Time(sim.rng.below(sim.params.think_us.max(1)));
        sim.schedule(at, Ev::ClientWake(c));
    }
    if sim.cp.crash_every_us > 0 {
        let at = Time(sim.rng.between(1, 2 * sim.cp.crash_every_us));
        sim.schedule(at, Ev::Crash);
    }
    if sim.cp.cut_every_us > 0 {
        let at = Time(sim.rng.between(1, 2 * sim.cp.cut_every_us));
        sim.schedule(at, Ev::Cut);
    }
    sim.run_events();
    sim.final_checks();
    sim.stats.rides += sim.slots.iter().filter_map(|s| s.node.as_ref()).map(Node::rides).sum::<u64>();
    sim.stats.lost_races = sim.store.lost_races;
    sim.stats.stale_landings = sim.store.stale_landings;
    sim.stats.deletions_completed = sim.store.lives.values().filter(|l| l.completions > 0).count() as u64;
    let mut violations = std::mem::take(&mut sim.violations);
    violations.sort_by_key(|v| v.at);
    RunReport {
        seed: opts.seed,
        trace_hash: sim.trace.hash(),
        events: sim.trace.events(),
        sim_time: sim.now,
        stats: sim.stats.clone(),
        faults: Default::default(),
        violations,
        journal_lost_to_rot: None,
        excused: Vec::new(),
        params: sim.params.clone(),
        trace: sim.trace.into_lines(),
        cluster: Some(sim.metrics),
    }
}

/// A store operation, rendered compactly for the trace.
struct StoreOpText<'a>(&'a StoreOp);

impl std::fmt::Display for StoreOpText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            StoreOp::Create { key, bytes } => {
                write!(f, "create {key} {} bytes crc={:08x}", bytes.len(), crc32c::crc32c(bytes))
            }
            StoreOp::Get { key } => write!(f, "get {key}"),
            StoreOp::List { prefix, after, limit } => {
                write!(f, "list {prefix} after {} limit {limit}", DebugKey(after.as_deref()))
            }
            StoreOp::Delete { key } => write!(f, "delete {key}"),
        }
    }
}

/// An optional key, rendered as `{:?}` renders it (`None`, `Some("d/1/0/5")`), without
/// the escaping machinery for keys that need none: every key of the layout.
struct DebugKey<'a>(Option<&'a str>);

impl std::fmt::Display for DebugKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(k) if k.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\') => {
                write!(f, "Some(\"{k}\")")
            }
            other => write!(f, "{other:?}"),
        }
    }
}

/// A store operation's result, rendered compactly for the trace.
struct StoreResultText<'a>(&'a StoreResult);

impl std::fmt::Display for StoreResultText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Ok(StoreOutput::Found(bytes)) => write!(f, "found {} bytes", bytes.len()),
            Ok(StoreOutput::Listed { keys, more }) => {
                write!(
                    f,
                    "listed {} keys, last {}{}",
                    keys.len(),
                    DebugKey(keys.last().map(String::as_str)),
                    if *more { ", more follow" } else { "" }
                )
            }
            other => write!(f, "{other:?}"),
        }
    }
}

/// Carries out `op` on the store at `now`, and shows the checkers what it did.
fn apply(store: &mut SimStore, violations: &mut Vec<Violation>, now: Time, op: &StoreOp) -> StoreOutput {
    let (output, facts) = store.apply(now, op);
    checkers::store_did(&mut Flags::new(now, violations), &facts);
    output
}

/// Where node `n` stands at `now`, if it is up (for its heal checks).
fn standing(slots: &[Slot], now: Time, n: usize) -> Option<Standing> {
    let slot = &slots[n];
    let node = slot.node.as_ref()?;
    let cut_off = slot.cut_until.is_some_and(|t| t > now);
    Some(Standing { life: slot.life, cut_at: slot.cut_at, cut_off, position: node.catalog().position() })
}

impl Sim {
    fn schedule(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        if matches!(ev, Ev::Arrive { .. } | Ev::Land { .. } | Ev::Answer { .. }) {
            self.store_pending += 1;
        }
        if matches!(ev, Ev::Land { .. }) {
            self.landings_pending += 1;
        }
        self.queue.push(at.max(self.now), ev);
    }

    /// Carries out `op` on the store now, and shows the checkers what it did.
    fn apply(&mut self, op: &StoreOp) -> StoreOutput {
        apply(&mut self.store, &mut self.violations, self.now, op)
    }

    fn options(&mut self, node: usize) -> NodeOptions {
        self.boots += 1;
        NodeOptions {
            node: node as u32,
            boot: self.boots,
            config: self.config.clone(),
            list_limit: self.cp.list_limit,
            tail_every_ms: self.cp.tail_every_ms,
            reconcile_every_ms: self.cp.reconcile_every_ms,
            compact_after_entries: self.cp.compact_after_entries,
            request_timeout_ms: self.cp.request_timeout_ms,
            gather_ms: self.cp.gather_ms,
        }
    }

    /// Starts (or restarts) node `n` with nothing folded; it must catch up in bound.
    fn start(&mut self, n: usize) {
        if self.slots[n].node.is_some() {
            return;
        }
        let options = self.options(n);
        let mut node = Node::new(options);
        node.handle_timeout(self.slots[n].clock.local(self.now));
        let slot = &mut self.slots[n];
        slot.life += 1;
        slot.node = Some(node);
        let (life, since) = (slot.life, slot.cut_at);
        self.trace.record(self.now, "start", format_args!("node {n} life {life}"));
        self.heal_check(n, life, since, 0);
        self.drain(n);
    }

    fn crash(&mut self, n: usize, why: &str) {
        let slot = &mut self.slots[n];
        let Some(node) = slot.node.take() else { return };
        self.stats.rides += node.rides();
        slot.life += 1;
        slot.wakes.clear();
        let requests = std::mem::take(&mut slot.requests);
        self.history.cut_off(requests.keys());
        for c in requests.values() {
            self.outstanding[*c] = self.outstanding[*c].saturating_sub(1);
            self.unpark(*c);
        }
        self.stats.node_crashes += 1;
        self.trace.record(self.now, "crash", format_args!("node {n}: {why}"));
        let down = self.rng.between(self.cp.down_for_us.0, self.cp.down_for_us.1);
        self.schedule(self.now.plus_micros(down), Ev::Restart(n));
    }

    fn run_events(&mut self) {
        let mut chaos_end_scheduled = false;
        let mut deadline = None;
        let mut background_stopped = false;
        while let Some((at, ev)) = self.queue.pop() {
            self.now = at;
            if deadline.is_some_and(|d| at > d) {
                break;
            }
            self.event(ev);
            if let Some(n) = self.crash_now.take() {
                self.crash(n, "targeted crash");
            }
            self.measure_fanout();
            let too_long = self.now > Time::from_millis(CHAOS_LIMIT_MS);
            if self.chaos && !chaos_end_scheduled && (self.workload_done() || too_long) {
                chaos_end_scheduled = true;
                self.schedule(self.now, Ev::EndChaos);
            }
            if !self.chaos {
                deadline.get_or_insert(self.now.plus_millis(LIVENESS_BOUND_MS));
                if !background_stopped && self.settled_but_for_polling() {
                    background_stopped = true;
                    self.stop_background();
                }
                if self.quiescent() {
                    break;
                }
            }
        }
    }

    /// Takes in new tombstones, and records how long each took to reach every node up.
    fn measure_fanout(&mut self) {
        for &(topic, at) in &self.store.tombstones[self.tombstones_seen..] {
            self.fanout.insert(topic, at);
        }
        self.tombstones_seen = self.store.tombstones.len();
        let slots = &self.slots;
        let lives = &self.store.lives;
        let everywhere: Vec<TopicId> = self
            .fanout
            .keys()
            .copied()
            .filter(|topic| {
                let name = lives.get(topic).map_or("", |l| l.name.as_str());
                slots
                    .iter()
                    .filter_map(|s| s.node.as_ref())
                    .all(|n| n.catalog().live(name).map(|(id, _)| id) != Some(*topic))
            })
            .collect();
        for topic in everywhere {
            if let Some(at) = self.fanout.remove(&topic) {
                self.metrics.fanout_us.push(self.now.as_micros() - at.as_micros());
            }
        }
    }

    /// Every command has been sent (or handed out by the seed's workload).
    fn workload_done(&self) -> bool {
        match &self.script {
            Some(groups) => groups.is_empty(),
            None => self.workload.exhausted(),
        }
    }

    /// Faults are over, every request is answered, every deletion complete, no write
    /// that timed out is still to land (a late entry may be a tombstone the nodes must
    /// read), and every node is up, reaches the store, has read what its heal checks ask
    /// and has nothing under way but its polling ([`Node::only_polling`]): all the nodes
    /// would still do is read the journal's tail and reconcile, on their timers.
    /// With short timers, small listing pages and several nodes, that polling never
    /// leaves every node idle at once, and [`Sim::quiescent`] would wait for the
    /// liveness bound (most of the heaviest seeds' events, with the final read-back and
    /// reconciliation never run).
    fn settled_but_for_polling(&self) -> bool {
        self.landings_pending == 0
            && self.heals.all_met(|n| standing(&self.slots, self.now, n))
            && self.store.truth.deleting().next().is_none()
            && self.slots.iter().all(|s| {
                s.node.as_ref().is_some_and(Node::only_polling) && s.requests.is_empty() && s.cut_until.is_none()
            })
    }

    /// The cluster has settled but for its polling: every node starts no more of it
    /// (what is under way finishes), so that the run quiesces.
    fn stop_background(&mut self) {
        self.trace.record(self.now, "settled", format_args!("the nodes stop polling on their timers"));
        for node in self.slots.iter_mut().filter_map(|s| s.node.as_mut()) {
            node.stop_background();
        }
    }

    /// Faults are over, every request is answered, every deletion complete, no store
    /// operation in flight, every node idle (a write whose client heard an unknown
    /// outcome may still be retried), and every node has read what its heal checks ask.
    fn quiescent(&self) -> bool {
        self.store_pending == 0
            && self.heals.all_met(|n| standing(&self.slots, self.now, n))
            && self
                .slots
                .iter()
                .all(|s| s.node.as_ref().is_some_and(Node::idle) && s.requests.is_empty() && s.cut_until.is_none())
            && self.store.truth.deleting().next().is_none()
    }

    fn cut_off(&self, n: usize) -> bool {
        self.slots[n].cut_until.is_some_and(|t| t > self.now)
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::ClientWake(c) => self.client_wake(c),
            Ev::Arrive { node, life, id, op, fate } => {
                self.store_pending -= 1;
                self.arrive(node, life, id, op, fate);
            }
            Ev::Land { node, op } => {
                self.store_pending -= 1;
                self.landings_pending -= 1;
                self.trace.record(self.now, "land", format_args!("node {node} {}", StoreOpText(&op)));
                self.stats.late_landings += 1;
                self.apply(&op);
            }
            Ev::Answer { node, life, id, result } => {
                self.store_pending -= 1;
                if self.slots[node].life != life {
                    return;
                }
                let result =
                    if self.cut_off(node) { Err(StoreError::Unknown("cut off from the store".into())) } else { result };
                self.trace.record(
                    self.now,
                    "answer",
                    format_args!("node {node} #{} {}", id.0, StoreResultText(&result)),
                );
                let local = self.slots[node].clock.local(self.now);
                if let Some(n) = self.slots[node].node.as_mut() {
                    n.handle_store(local, id, result);
                }
                self.drain(node);
            }
            Ev::Timeout { node, life, at } => {
                if self.slots[node].life != life {
                    return;
                }
                let local = self.slots[node].clock.local(self.now);
                if let Some(n) = self.slots[node].node.as_mut() {
                    if n.poll_timeout().is_some_and(|due| due <= local) {
                        n.handle_timeout(local);
                    }
                }
                // A node that leaves a deadline due once woken at it would spin in a real
                // runtime: it is flagged, and not woken at that deadline again (that would
                // repeat this instant forever).
                let slot = &mut self.slots[node];
                if slot.node.as_ref().and_then(Node::poll_timeout).is_none_or(|due| due > local) {
                    slot.wakes.remove(&at);
                } else {
                    liveness::spins(&mut Flags::new(self.now, &mut self.violations), node, at);
                }
                self.drain(node);
            }
            Ev::Crash => {
                if !self.chaos {
                    return;
                }
                let up: Vec<usize> = (0..self.slots.len()).filter(|n| self.slots[*n].node.is_some()).collect();
                if let Some(&n) = self.rng.pick(&up) {
                    self.crash(n, "random crash");
                }
                let next = self.now.plus_micros(self.rng.between(1, 2 * self.cp.crash_every_us));
                self.schedule(next, Ev::Crash);
            }
            Ev::Restart(n) => self.start(n),
            Ev::Cut => {
                if !self.chaos {
                    return;
                }
                let n = self.rng.below(self.slots.len() as u64) as usize;
                let until = self.now.plus_micros(self.rng.between(self.cp.cut_for_us.0, self.cp.cut_for_us.1));
                let slot = &mut self.slots[n];
                slot.cut_until = Some(slot.cut_until.map_or(until, |u| u.max(until)));
                slot.cut_at = self.now;
                self.stats.cuts += 1;
                self.trace.record(self.now, "cut", format_args!("node {n} until {until}"));
                self.schedule(until, Ev::CutEnd(n));
                let next = self.now.plus_micros(self.rng.between(1, 2 * self.cp.cut_every_us));
                self.schedule(next, Ev::Cut);
            }
            Ev::CutEnd(n) => self.heal(n),
            Ev::HealCheck(id) => {
                let (slots, now) = (&self.slots, self.now);
                self.heals.due(&mut Flags::new(now, &mut self.violations), id, |n| standing(slots, now, n));
            }
            Ev::EndChaos => {
                self.chaos = false;
                self.trace.record(self.now, "end-chaos", format_args!(""));
                for n in 0..self.slots.len() {
                    if self.slots[n].cut_until.is_some() {
                        self.slots[n].cut_until = Some(self.now);
                        self.heal(n);
                    }
                    self.start(n);
                }
            }
        }
    }

    /// Node `n` reaches the store again if its cut is over.
    fn heal(&mut self, n: usize) {
        let slot = &mut self.slots[n];
        if slot.cut_until.is_none_or(|t| t > self.now) {
            return;
        }
        slot.cut_until = None;
        let (life, since) = (slot.life, slot.cut_at);
        let position = slot.node.as_ref().map_or(0, |node| node.catalog().position());
        self.trace.record(self.now, "heal", format_args!("node {n}"));
        self.heal_check(n, life, since, position);
    }

    /// Schedules the check that node `n`, at `position` now, has read every entry the
    /// journal holds now within the bound.
    fn heal_check(&mut self, n: usize, life: u32, since: Time, position: u64) {
        let tail = self.store.truth.position();
        let bound = heals_in_bound::bound_us(&self.cp, position, tail);
        self.seq += 1;
        self.heals.expect(self.seq, HealCheck { node: n, life, since, tail });
        self.schedule(self.now.plus_micros(bound), Ev::HealCheck(self.seq));
    }

    fn arrive(&mut self, node: usize, life: u32, id: StoreOpId, op: StoreOp, fate: Fate) {
        let back = self.latency();
        if self.cut_off(node) {
            // The request never reaches the store.
            self.stats.unknown_outcomes += 1;
            let result = Err(StoreError::Unknown("cut off from the store".into()));
            return self.schedule(self.now.plus_micros(self.cp.timeout_us), Ev::Answer { node, life, id, result });
        }
        self.arrivals += 1;
        let injected = self.fault_at.filter(|(k, _)| *k == self.arrivals).map(|(_, f)| f);
        let fate = match injected {
            None => fate,
            Some(StoreFault::CrashAfter | StoreFault::CrashBefore) => Fate::Normal,
            Some(StoreFault::TimeoutLanded) => Fate::Timeout(Some(0)),
            Some(StoreFault::TimeoutLost) => Fate::Timeout(None),
            Some(StoreFault::TimeoutLandsLate) => Fate::Timeout(Some(self.cp.timeout_us + 2 * self.cp.latency_us.1)),
            Some(StoreFault::TimeoutLandsLast) => Fate::Timeout(Some(LANDS_LAST_US)),
            Some(StoreFault::Fail) => Fate::Fail,
            Some(fault @ StoreFault::Overtaken { by_us }) => {
                let detail = format_args!("node {node} #{} {} (held back, injected {fault:?})", id.0, StoreOpText(&op));
                self.trace.record(self.now, "store", detail);
                self.stats.held_back += 1;
                let at = self.now.plus_micros(by_us);
                return self.schedule(at, Ev::Arrive { node, life, id, op, fate: Fate::Normal });
            }
        };
        let fault = injected.map(|f| format!(", injected {f:?}")).unwrap_or_default();
        self.trace.record(
            self.now,
            "store",
            format_args!("node {node} #{} {} ({fate:?}{fault})", id.0, StoreOpText(&op)),
        );
        if let Some(crash @ (StoreFault::CrashAfter | StoreFault::CrashBefore)) = injected {
            if crash == StoreFault::CrashAfter {
                self.apply(&op);
            }
            if self.slots[node].life == life {
                self.crash(node, &format!("injected {crash:?} store operation {}", self.arrivals));
            }
            return;
        }
        let result = match fate {
            Fate::Normal => match self.apply(&op) {
                StoreOutput::Listed { keys, more } => Ok(self.page(keys, more)),
                output => Ok(output),
            },
            Fate::Fail => {
                self.stats.store_errors += 1;
                Err(StoreError::Failed("503 Service Unavailable".into()))
            }
            Fate::FailAfterWrite if matches!(op, StoreOp::Get { .. } | StoreOp::List { .. }) => {
                self.stats.store_errors += 1;
                Err(StoreError::Failed("500 Internal Server Error".into()))
            }
            Fate::FailAfterWrite => {
                self.apply(&op);
                self.stats.errors_after_landing += 1;
                self.stats.unknown_outcomes += 1;
                Err(StoreError::Unknown("500 Internal Server Error, after the write".into()))
            }
            Fate::Timeout(landing) => {
                self.stats.unknown_outcomes += 1;
                match landing {
                    Some(0) => {
                        self.apply(&op);
                    }
                    Some(later) => self.schedule(self.now.plus_micros(later), Ev::Land { node, op: op.clone() }),
                    None => {}
                }
                let result = Err(StoreError::Unknown("timed out".into()));
                return self.schedule(self.now.plus_micros(self.cp.timeout_us), Ev::Answer { node, life, id, result });
            }
        };
        self.schedule(self.now.plus_micros(back), Ev::Answer { node, life, id, result });
    }

    /// A listing's page as the store gives it back: at most 1,000 keys (S3's cap,
    /// whatever the limit asked), and, with the seed's chance, cut to any number of its
    /// keys (none included) with more said to follow.
    fn page(&mut self, mut keys: Vec<String>, mut more: bool) -> StoreOutput {
        if keys.len() > S3_PAGE_CAP {
            keys.truncate(S3_PAGE_CAP);
            more = true;
        }
        if self.chaos && self.script.is_none() && self.rng.chance(self.cp.short_pages) {
            let keep = self.rng.below(keys.len() as u64 + 1) as usize;
            if keep < keys.len() || !more {
                self.stats.short_pages += 1;
            }
            keys.truncate(keep);
            more = true;
        }
        StoreOutput::Listed { keys, more }
    }

    /// Sets each node's clock off the simulation's, as the seed says.
    fn skew_clocks(&mut self) {
        let (offset, drift) = (self.cp.clock_offset_us, self.cp.clock_drift_ppm);
        if offset == 0 && drift == 0 {
            return;
        }
        for n in 0..self.slots.len() {
            let off = self.rng.below(2 * offset + 1) as i64 - offset as i64;
            let ppm = self.rng.below(2 * drift + 1) as i64 - drift as i64;
            self.slots[n].clock = Clock { offset_us: off, drift_ppm: ppm };
            self.stats.skewed_clocks += 1;
        }
    }

    /// Keys outside the layout under every prefix the protocol lists (the journal, the
    /// snapshots, the data, and each of the first incarnations and their partitions),
    /// sorting before, between and after its own keys. Nothing may delete them, and no
    /// answer may change because of them.
    fn plant_foreign_keys(&mut self) {
        if !self.cp.foreign_keys {
            return;
        }
        let mut keys = vec!["j/".to_string(), "j/~".into(), "s/!".into(), "s/~".into(), "d/!".into(), "d/~".into()];
        for seq in 0..12 {
            keys.push(format!("{}.tmp", journal_key(seq)));
            keys.push(format!("{}.tmp", snapshot_key(seq)));
            let topic = TopicId(seq);
            keys.push(format!("{}!", topic_prefix(topic)));
            keys.push(format!("{}~", topic_prefix(topic)));
            for partition in 0..3 {
                let p = partition_prefix(topic, partition);
                keys.extend([
                    format!("{p}!a"),
                    format!("{}.part", segment_key(topic, partition, seq)),
                    format!("{p}~"),
                ]);
            }
        }
        for key in keys {
            self.store.plant_foreign(key);
            self.stats.foreign_keys += 1;
        }
    }

    /// One way between a node and the store.
    fn latency(&mut self) -> u64 {
        let (lo, hi) = self.cp.latency_us;
        let l = self.rng.between(lo, hi);
        if self.chaos && self.rng.chance(self.cp.slow) {
            self.stats.slow_ops += 1;
            l * 20
        } else {
            l
        }
    }

    fn fate(&mut self, op: &StoreOp) -> Fate {
        if !self.chaos || self.script.is_some() {
            return Fate::Normal;
        }
        if self.rng.chance(self.cp.error) {
            return Fate::Fail;
        }
        if self.rng.chance(self.cp.error_after_write) {
            return Fate::FailAfterWrite;
        }
        if self.rng.chance(self.cp.timeout) {
            let write = !matches!(op, StoreOp::Get { .. } | StoreOp::List { .. });
            let timeout = self.cp.timeout_us;
            let landing = match self.rng.below(4) {
                _ if !write => None,
                0 => Some(0),
                1 => Some(self.rng.between(1, 2 * timeout)),
                // Long after the timeout: the node has retried, or given up, meanwhile.
                2 => Some(self.rng.between(2 * timeout, 50 * timeout)),
                _ => None,
            };
            return Fate::Timeout(landing);
        }
        Fate::Normal
    }

    /// Carries out every effect node `n` has, then asks for its next timeout.
    fn drain(&mut self, n: usize) {
        loop {
            let life = self.slots[n].life;
            let Some(effect) = self.slots[n].node.as_mut().and_then(Node::poll_effect) else { break };
            match effect {
                NodeEffect::Store { id, op } => {
                    self.stats.storage_ops += 1;
                    if matches!(&op, StoreOp::List { prefix, .. } if prefix == "j/") {
                        self.metrics.journal_lists += 1;
                    }
                    let removes_segment = matches!(&op, StoreOp::Delete { key } if parse_data_key(key).is_some());
                    if self.chaos && removes_segment && self.rng.chance(self.cp.targeted_crash) {
                        self.crash_now = Some(n);
                    }
                    let fate = self.fate(&op);
                    let at = self.now.plus_micros(self.latency());
                    self.schedule(at, Ev::Arrive { node: n, life, id, op, fate });
                }
                NodeEffect::Reply { request, reply } => self.reply(n, request, reply),
            }
        }
        let slot = &mut self.slots[n];
        if let Some(at) = slot.node.as_ref().and_then(Node::poll_timeout).map(|due| slot.clock.global(due)) {
            if slot.wakes.insert(at) {
                let life = slot.life;
                self.schedule(at, Ev::Timeout { node: n, life, at });
            }
        }
    }

    fn client_wake(&mut self, c: usize) {
        if !self.chaos || self.workload_done() {
            return;
        }
        if self.script.is_some() {
            return self.script_wake(c);
        }
        while self.outstanding[c] < self.params.depth {
            let up: Vec<usize> = (0..self.slots.len()).filter(|n| self.slots[*n].node.is_some()).collect();
            let Some(&n) = self.rng.pick(&up) else { break };
            let Some(command) = self.workload.next_command(self.outstanding[c] == 0) else { break };
            self.send(c, n, command);
        }
        self.next_wake(c);
    }

    /// Draws client `c`'s next wake, a think time from now. If it could send nothing
    /// then (it has all it may have in flight), the wake is parked: [`Sim::unpark`]
    /// schedules it once a reply or a cut-off frees the client, which then does not wake for
    /// nothing meanwhile.
    fn next_wake(&mut self, c: usize) {
        let can_send = self.outstanding[c] < self.params.depth;
        if let Some(at) = self.client_wakes.next(&mut self.rng, self.now, c, can_send) {
            self.schedule(at, Ev::ClientWake(c));
        }
    }

    /// Client `c` has a request fewer in flight: if it was waiting for that, it wakes as
    /// it would have, had it woken all along ([`ClientWakes::unpark`]).
    fn unpark(&mut self, c: usize) {
        if let Some(at) = self.client_wakes.unpark(&mut self.rng, self.now, c) {
            self.schedule(at, Ev::ClientWake(c));
        }
    }

    /// A scripted client sends its next group once every command of the one before is
    /// answered or cut off, and every node the group names is up.
    fn script_wake(&mut self, c: usize) {
        let Some(groups) = self.script.as_mut() else { return };
        let ready = self.outstanding[c] == 0
            && groups.front().is_some_and(|g| g.iter().all(|(n, _)| self.slots[*n].node.is_some()));
        if let Some(group) = ready.then(|| groups.pop_front()).flatten() {
            for (n, command) in group {
                self.send(c, n, Issue::new(command));
            }
        }
        self.schedule(self.now.plus_micros(self.params.think_us), Ev::ClientWake(c));
    }

    /// Client `c` sends `issue` to node `n`.
    fn send(&mut self, c: usize, n: usize, issue: Issue) {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.outstanding[c] += 1;
        self.stats.commands += 1;
        self.trace.record(self.now, "command", format_args!("req{} c{c} node {n} {}", request.0, IssueText(&issue)));
        self.history.invoked(self.now, request, n, &issue);
        let command = issue.command;
        self.slots[n].requests.insert(request, c);
        let local = self.slots[n].clock.local(self.now);
        if let Some(node) = self.slots[n].node.as_mut() {
            node.handle_command(local, request, command);
        }
        self.drain(n);
    }

    fn reply(&mut self, n: usize, request: RequestId, reply: Result<Reply, BrokerError>) {
        self.stats.replies += 1;
        self.workload.observe(&reply);
        if let Some(c) = self.slots[n].requests.remove(&request) {
            self.outstanding[c] = self.outstanding[c].saturating_sub(1);
            self.unpark(c);
        }
        self.trace.record(self.now, "reply", format_args!("node {n} req{} {}", request.0, ReplyText(&reply)));
        if matches!(reply, Ok(Reply::DeleteAccepted { .. })) {
            self.stats.deletions_started += 1;
            // Between the logical and the physical step.
            if self.chaos && self.rng.chance(self.cp.targeted_crash) {
                self.crash_now = Some(n);
            }
        }
        let invoked = self.history.calls.get(&request).map_or(self.now, |c| c.invoked);
        let took = self.now.as_micros() - invoked.as_micros();
        match &reply {
            Ok(Reply::DeleteAccepted { topic })
                if self.store.lives.get(topic).and_then(|l| l.deleted) >= Some(invoked) =>
            {
                self.metrics.delete_ack_us.push(took);
            }
            Ok(Reply::Produced { .. }) => self.metrics.produce_us.push(took),
            Err(BrokerError::Unavailable(_) | BrokerError::OutcomeUnknown(_)) => self.stats.uncertain_replies += 1,
            _ => {}
        }
        self.metrics.last_reply = self.now;
        if !self.history.answered(self.now, request, reply) {
            every_request_answered::answered_again(&mut Flags::new(self.now, &mut self.violations), n, request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, DebugKey};
    use broker_core::Time;

    #[test]
    fn a_clock_reads_and_inverts_as_in_128_bits() {
        let reference = |c: &Clock, t: u64| {
            let t = i128::from(t);
            let local = t + i128::from(c.offset_us) + t * i128::from(c.drift_ppm) / 1_000_000;
            local.clamp(0, i128::from(u64::MAX)) as u64
        };
        for (offset_us, drift_ppm) in [(0, 0), (4_382_138, 0), (-3_000_000, 9_198), (2_986_485, -20_000), (-1, 1)] {
            let c = Clock { offset_us, drift_ppm };
            for t in [0, 1, 999_999, 73_019_412, 1 << 40, (1 << 62) + 12_345, i64::MAX as u64, u64::MAX - 1, u64::MAX] {
                let local = c.local(Time(t));
                assert_eq!(local.0, reference(&c, t), "{offset_us} {drift_ppm} {t}");
                if t < 1 << 40 {
                    let rate = 1_000_000 + i128::from(drift_ppm);
                    let guess = (i128::from(local.0) - i128::from(offset_us)) * 1_000_000 / rate;
                    let mut want = guess.clamp(0, i128::from(u64::MAX)) as u64;
                    while reference(&c, want) < local.0 {
                        want += 1;
                    }
                    assert_eq!(c.global(local).0, want, "{offset_us} {drift_ppm} {t}");
                }
            }
        }
    }

    #[test]
    fn a_key_renders_as_debug_renders_it() {
        for key in [None, Some(""), Some("d/12/0/34"), Some("j/00000000000000000007"), Some("a\"b"), Some("a\\b")]
            .into_iter()
            .chain([Some("tab\there"), Some("é~"), Some("\u{7f}"), Some("new\nline"), Some("it's")])
        {
            assert_eq!(DebugKey(key).to_string(), format!("{key:?}"), "{key:?}");
        }
    }
}
