//! What clients sent and were told of idempotent producers: every producer id handed
//! out, every idempotent send with its outcome so far, every batch (what its retries
//! share) with the positions it was acknowledged at in each incarnation, where its
//! records were seen, and what a crash or a cut tail may have taken from the broker's
//! producer state. The model records; [`crate::checkers`] judge (appended-once).
//!
//! One broker admits commands one at a time, as they arrive, in request order, and
//! takes a batch's sequence state at admission: so request ids, which ascend in issue
//! order, order the batches of a producer on a partition as the broker judged them.
//!
//! Under durability log-sync a batch's state is journaled with the first journal
//! commit issued after its acknowledgement ([`Producers::storage_issued`] and
//! [`Producers::storage_executed`] follow the commits): a crash before that commit
//! is durable may take the state back, and a batch cut off by a crash may have left
//! its records in the log without its state (they are synced before the state is
//! journaled). Such batches are marked: their state may be lost, their records may
//! appear twice (DESIGN.md, section 2, idempotent producers).

use broker_core::{sequence_after, BrokerError, Command, LogId, OpId, Reply, RequestId, StorageOp, TopicId};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The longest label a value's id keeps (`v123-`, at most this many bytes).
pub const LABEL_MAX: usize = 24;

/// How many of a producer's latest batches on a partition a broker keeps, as Kafka
/// does (the model's own figure, not read from the core it judges).
pub const BATCHES_KEPT: usize = 5;

/// What a batch's sends share, and what names it: topic name, partition, producer id,
/// epoch, first sequence number and record count.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchKey {
    /// The topic's name.
    pub topic: Rc<str>,
    /// The partition.
    pub partition: u32,
    /// The producer id.
    pub producer_id: u64,
    /// Its epoch.
    pub epoch: u16,
    /// The first record's sequence number.
    pub first_sequence: u32,
    /// How many records.
    pub records: u32,
}

impl BatchKey {
    /// The last record's sequence number (the first's, for a batch of none).
    pub fn last_sequence(&self) -> u32 {
        sequence_after(self.first_sequence, self.records.saturating_sub(1))
    }

    /// The sequence number after its last.
    pub fn next_sequence(&self) -> u32 {
        sequence_after(self.last_sequence(), 1)
    }
}

impl std::fmt::Display for BatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/p{} producer {} epoch {} seq {}+{}",
            self.topic, self.partition, self.producer_id, self.epoch, self.first_sequence, self.records
        )
    }
}

/// How one send turned out, as far as the clients know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Not answered yet.
    InFlight,
    /// Cut off by a crash or a halt: it may have been appended, or not.
    Unknown,
    /// Acknowledged, in this incarnation, from this offset.
    Acked {
        /// The incarnation.
        topic: TopicId,
        /// Its first record's offset.
        first_offset: u64,
    },
    /// Refused. `maybe_admitted`: the refusal (topic not found) may have come after
    /// the batch was admitted, its topic deleted while it was in flight.
    Refused {
        /// Whether it may have been admitted all the same.
        maybe_admitted: bool,
    },
}

impl SendOutcome {
    /// Whether the send may have been appended (or found a duplicate) without the
    /// clients knowing where.
    pub fn maybe(self) -> bool {
        matches!(self, SendOutcome::InFlight | SendOutcome::Unknown | SendOutcome::Refused { maybe_admitted: true })
    }
}

/// One idempotent send.
#[derive(Clone, Debug)]
pub struct Send {
    /// Its batch.
    pub batch: BatchKey,
    /// The life of the broker it was sent to (1 for the first).
    pub life: u32,
    /// The incarnation its topic's name certainly led to when it was issued, if the
    /// model knows one ([`super::Model::definitely_live`]).
    pub live_at_issue: Option<TopicId>,
    /// InitProducer requests issued before it.
    pub inits_before: u64,
    /// How it turned out.
    pub outcome: SendOutcome,
}

/// An acknowledgement of a batch in one incarnation.
#[derive(Clone, Copy, Debug)]
pub struct BatchAck {
    /// The first record's offset.
    pub first_offset: u64,
    /// The request it answered.
    pub request: RequestId,
    /// The broker's life it came from.
    pub life: u32,
}

/// One batch, whatever its sends.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Where it was acknowledged, by incarnation (the latest acknowledgement).
    pub acks: BTreeMap<TopicId, BatchAck>,
    /// Its sends, in request order.
    pub sends: Vec<RequestId>,
    /// A crash or a cut tail may have taken its state from the broker since its last
    /// acknowledgement (log-sync's window, or rot): a retry may be appended again.
    pub state_lost: bool,
    /// Its records may be in a log twice (the documented exceptions of log-sync and rot).
    pub may_repeat: bool,
}

/// A value's unique label (the workload begins every value with one, `v123-`) and its
/// length: how a record's batch is found without checksumming its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label {
    bytes: [u8; LABEL_MAX],
    label_len: u8,
    len: usize,
}

impl Label {
    /// The label of `value`.
    pub fn of(value: &[u8]) -> Label {
        let head = &value[..value.len().min(LABEL_MAX)];
        let end = head.iter().position(|b| *b == b'-').map_or(head.len(), |i| i + 1);
        let mut bytes = [0; LABEL_MAX];
        bytes[..end].copy_from_slice(&value[..end]);
        Label { bytes, label_len: end as u8, len: value.len() }
    }

    /// The label `label` (at most [`LABEL_MAX`] bytes) of a value of `len` bytes.
    pub fn new(label: &[u8], len: usize) -> Label {
        let label = &label[..label.len().min(LABEL_MAX)];
        let mut bytes = [0; LABEL_MAX];
        bytes[..label.len()].copy_from_slice(label);
        Label { bytes, label_len: label.len() as u8, len }
    }
}

/// What the knowledge of a producer's state on a partition of an incarnation is, just
/// before the broker admitted a batch ([`Producers::state_before`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known {
    /// The producer has no state there, for certain: any sequence starts it.
    Empty,
    /// Its latest batch there is known for certain.
    Last {
        /// The state's epoch (its latest batch's).
        epoch: u16,
        /// The latest batches of that epoch, newest first, as (first sequence, last
        /// sequence, first offset): up to the five the broker keeps.
        window: Vec<(u32, u32, u64)>,
        /// Whether `window` holds every batch the broker keeps (else older ones may
        /// be kept too).
        complete: bool,
    },
    /// Not known: a send whose outcome is unknown, a state that may be lost.
    Unknown,
}

/// Counters of what the producers did, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Producer ids handed out (acknowledged).
    pub ids: u64,
    /// Idempotent batches acknowledged (the first acknowledgement of each, per
    /// incarnation).
    pub batches_acked: u64,
    /// Retries answered with the positions of an earlier acknowledgement.
    pub duplicates: u64,
    /// Of those, answered by a later life of the broker than the one that gave the
    /// positions first (the state survived a crash or halt).
    pub duplicates_across_crash: u64,
    /// Retries acknowledged after an earlier send of the batch was cut off by a crash.
    pub acked_after_cut_off: u64,
    /// Sends refused.
    pub refused: u64,
}

/// The idempotent producers' part of the reference model.
#[derive(Debug, Default)]
pub struct Producers {
    /// Whether the broker runs under durability log-sync.
    pub log_sync: bool,
    /// The broker's life (1 for the first; a crash or halt starts the next).
    life: u32,
    /// InitProducer requests issued so far.
    inits_issued: u64,
    /// Every producer id a reply handed out, with the first request it answered.
    handed_out: BTreeMap<u64, RequestId>,
    /// Every idempotent send.
    sends: BTreeMap<RequestId, Send>,
    /// The sends of each producer to each partition of a topic name, in request order.
    by_producer: BTreeMap<(Rc<str>, u32, u64), Vec<RequestId>>,
    /// Every batch sent.
    batches: BTreeMap<BatchKey, Batch>,
    /// The batch of each value an idempotent send carried (the first that carried it).
    value_batch: BTreeMap<Label, BatchKey>,
    /// Where each such value was seen (acknowledged or served), by incarnation and
    /// partition: at most one offset each, unless the broker appended it twice.
    seen_at: BTreeMap<(Label, TopicId, u32), u64>,
    /// Acknowledgements of idempotent sends so far.
    acks: u64,
    /// Every acknowledgement up to this number is in a durable journal commit.
    durable_acks: u64,
    /// The acknowledgements a journal write in flight makes durable once it succeeds:
    /// as many as there were when it was issued (their records were queued by then).
    /// A sync's entry names its append, whose failure voids it.
    journal_writes: BTreeMap<OpId, (u64, Option<OpId>)>,
    /// The last journal append issued, and the acknowledgements there were then.
    last_append: Option<(OpId, u64)>,
    /// Journal appends that failed (their sync makes nothing durable).
    failed_appends: std::collections::BTreeSet<OpId>,
    /// Acknowledgements (by number) not yet known durable, with their batch.
    undurable: Vec<(u64, BatchKey)>,
    /// Counters.
    pub stats: ProducerStats,
}

impl Producers {
    /// A request is issued; `labels`: those of the values it produces; `live`: the
    /// incarnation its topic's name certainly leads to.
    pub fn issued(&mut self, request: RequestId, command: &Command, labels: &[Label], live: Option<TopicId>) {
        self.life = self.life.max(1);
        match command {
            Command::InitProducer => self.inits_issued += 1,
            Command::ProduceIdempotent { topic, partition, producer, records } => {
                let key = BatchKey {
                    topic: Rc::from(topic.as_str()),
                    partition: *partition,
                    producer_id: producer.producer_id,
                    epoch: producer.epoch,
                    first_sequence: producer.first_sequence,
                    records: records.len() as u32,
                };
                for label in labels {
                    self.value_batch.entry(*label).or_insert_with(|| key.clone());
                }
                self.batches.entry(key.clone()).or_default().sends.push(request);
                self.by_producer
                    .entry((Rc::clone(&key.topic), key.partition, key.producer_id))
                    .or_default()
                    .push(request);
                let send = Send {
                    batch: key,
                    life: self.life,
                    live_at_issue: live,
                    inits_before: self.inits_issued,
                    outcome: SendOutcome::InFlight,
                };
                self.sends.insert(request, send);
            }
            _ => {}
        }
    }

    /// A reply arrives.
    pub fn replied(&mut self, request: RequestId, command: &Command, reply: &Result<Reply, BrokerError>) {
        if let (Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id, .. })) = (command, reply) {
            if self.handed_out.insert(*producer_id, request).is_none() {
                self.stats.ids += 1;
            }
            return;
        }
        let Some(send) = self.sends.get_mut(&request) else { return };
        send.outcome = match reply {
            Ok(Reply::Produced { topic, positions }) => {
                let first_offset = positions.first().map_or(0, |p| p.offset);
                SendOutcome::Acked { topic: *topic, first_offset }
            }
            Err(BrokerError::Halted(_)) => SendOutcome::Unknown,
            Err(BrokerError::TopicNotFound { .. }) => SendOutcome::Refused { maybe_admitted: true },
            Err(_) => SendOutcome::Refused { maybe_admitted: false },
            // A reply of another kind (model-agreement flags it) tells nothing.
            Ok(_) => SendOutcome::Unknown,
        };
        let SendOutcome::Acked { topic, first_offset } = send.outcome else {
            match send.outcome {
                SendOutcome::Refused { .. } => self.stats.refused += 1,
                // Cut off by a halt, as by a crash: under log-sync its records may
                // have been synced, its state never journaled.
                SendOutcome::Unknown if self.log_sync => {
                    if let Some(b) = self.batches.get_mut(&send.batch) {
                        b.may_repeat = true;
                    }
                }
                _ => {}
            }
            return;
        };
        let key = send.batch.clone();
        self.acks += 1;
        let (acks, life) = (self.acks, self.life);
        let sends = &self.sends;
        let Some(batch) = self.batches.get_mut(&key) else { return };
        match batch.acks.get(&topic) {
            Some(before) if before.first_offset == first_offset => {
                self.stats.duplicates += 1;
                if before.life < life {
                    self.stats.duplicates_across_crash += 1;
                }
            }
            Some(_) => {}
            None => {
                self.stats.batches_acked += 1;
                let cut_off = batch
                    .sends
                    .iter()
                    .take_while(|r| **r < request)
                    .any(|r| sends.get(r).is_some_and(|s| s.outcome == SendOutcome::Unknown));
                if cut_off {
                    self.stats.acked_after_cut_off += 1;
                }
            }
        }
        if batch.acks.get(&topic).is_none_or(|b| b.first_offset != first_offset) {
            batch.acks.insert(topic, BatchAck { first_offset, request, life });
        }
        // The broker answered from its state, or appended the batch into it: it holds
        // the batch now.
        batch.state_lost = false;
        if self.log_sync {
            self.undurable.push((acks, key));
        }
    }

    /// The process died: every send in flight has an unknown outcome, and under
    /// log-sync what was not journaled yet may be lost.
    pub fn crashed(&mut self) {
        self.life = self.life.max(1) + 1;
        for send in self.sends.values_mut().filter(|s| s.outcome == SendOutcome::InFlight) {
            send.outcome = SendOutcome::Unknown;
            if self.log_sync {
                // Its records may have been synced, its state never journaled.
                if let Some(b) = self.batches.get_mut(&send.batch) {
                    b.may_repeat = true;
                }
            }
        }
        for (n, key) in std::mem::take(&mut self.undurable) {
            if n > self.durable_acks {
                if let Some(b) = self.batches.get_mut(&key) {
                    b.state_lost = true;
                    b.may_repeat = true;
                }
            }
        }
        self.journal_writes.clear();
        self.failed_appends.clear();
        self.last_append = None;
    }

    /// The broker issued storage operation `id`: a journal write carries every record
    /// queued by then, the states of the batches acknowledged so far among them.
    pub fn storage_issued(&mut self, id: OpId, op: &StorageOp) {
        match op {
            StorageOp::AppendJournal { .. } => self.last_append = Some((id, self.acks)),
            StorageOp::SyncJournal => {
                if let Some((append, n)) = self.last_append.take() {
                    self.journal_writes.insert(id, (n, Some(append)));
                }
            }
            StorageOp::ReplaceJournal { .. } => {
                self.journal_writes.insert(id, (self.acks, None));
            }
            _ => {}
        }
    }

    /// Storage operation `id` ran; `ok`: it succeeded (a journal replace, or a sync
    /// whose append succeeded, is then durable).
    pub fn storage_executed(&mut self, id: OpId, ok: bool) {
        if !ok && self.last_append.is_some_and(|(a, _)| a == id) {
            self.failed_appends.insert(id);
        }
        if !ok && self.journal_writes.values().any(|(_, a)| *a == Some(id)) {
            self.failed_appends.insert(id);
        }
        let Some((n, append)) = self.journal_writes.remove(&id) else { return };
        let voided = append.is_some_and(|a| self.failed_appends.remove(&a));
        if ok && !voided && n > self.durable_acks {
            self.durable_acks = n;
            let durable = self.durable_acks;
            self.undurable.retain(|(a, _)| *a > durable);
        }
    }

    /// A start cut `log` (of topic name `name`, if known) from some offset on, and
    /// forgot the producers whose batches it lost: any batch there may be appended
    /// again.
    pub fn tail_cut(&mut self, log: LogId, name: Option<&str>) {
        for (key, b) in self.batches.iter_mut() {
            let here = key.partition == log.partition
                && (b.acks.contains_key(&log.topic) || name.is_some_and(|n| *key.topic == *n));
            if here {
                b.state_lost = true;
                b.may_repeat = true;
            }
        }
    }

    /// A record of `value` was acknowledged or served at `at` (call after the checkers
    /// saw it).
    pub fn saw_record(&mut self, value: &[u8], at: (TopicId, u32, u64)) {
        let label = Label::of(value);
        if self.value_batch.contains_key(&label) {
            self.seen_at.entry((label, at.0, at.1)).or_insert(at.2);
        }
    }

    /// The batch `value` was sent in, if an idempotent send carried it.
    pub fn batch_of(&self, value: &[u8]) -> Option<(&BatchKey, &Batch)> {
        let key = self.value_batch.get(&Label::of(value))?;
        self.batches.get_key_value(key)
    }

    /// Where `value` was seen before in partition `partition` of `topic`.
    pub fn seen_at(&self, value: &[u8], topic: TopicId, partition: u32) -> Option<u64> {
        self.seen_at.get(&(Label::of(value), topic, partition)).copied()
    }

    /// Whether `value`, of an idempotent batch, may be in a log twice.
    pub fn may_repeat(&self, value: &[u8]) -> bool {
        self.batch_of(value).is_some_and(|(_, b)| b.may_repeat)
    }

    /// Whether `value` was sent by more than one idempotent send (a retried batch's).
    pub fn resent(&self, value: &[u8]) -> bool {
        self.batch_of(value).is_some_and(|(_, b)| b.sends.len() > 1)
    }

    /// The send of `request`.
    pub fn send(&self, request: RequestId) -> Option<&Send> {
        self.sends.get(&request)
    }

    /// The batch of `key`.
    pub fn batch(&self, key: &BatchKey) -> Option<&Batch> {
        self.batches.get(key)
    }

    /// The request that first showed producer id `id` handed out, if a reply did.
    pub fn handed_out(&self, id: u64) -> Option<RequestId> {
        self.handed_out.get(&id).copied()
    }

    /// InitProducer requests issued so far.
    pub fn inits_issued(&self) -> u64 {
        self.inits_issued
    }

    /// The broker's life now.
    pub fn life(&self) -> u32 {
        self.life
    }

    /// The sends of producer `producer_id` to `partition` of topic name `topic` issued
    /// before `before`, latest first.
    pub fn sends_before<'a>(
        &'a self,
        topic: &str,
        partition: u32,
        producer_id: u64,
        before: RequestId,
    ) -> impl Iterator<Item = (RequestId, &'a Send)> + 'a {
        let key: (Rc<str>, u32, u64) = (Rc::from(topic), partition, producer_id);
        self.by_producer
            .get(&key)
            .into_iter()
            .flat_map(move |all| all.iter().rev().filter(move |r| **r < before))
            .filter_map(|r| self.sends.get(r).map(|s| (*r, s)))
    }

    /// What is known for certain of the state of producer `producer_id` on `partition`
    /// of incarnation `topic` (of name `name`) just before the broker admitted
    /// `request`; `created`: the request that created the incarnation, if known (no
    /// send issued before it went there).
    ///
    /// Walks back over the producer's sends there: a refused send changed nothing, nor
    /// did a send acknowledged in another incarnation or certainly sent to one, nor a
    /// retry answered with an earlier acknowledgement's positions; a send acknowledged
    /// first, with no earlier send of its batch of unknown outcome, appended its batch;
    /// any other send (in flight, cut off, refused as not found) leaves the state
    /// unknown from there on, as does a batch whose state a crash or a cut may have
    /// taken. The walk ends at the incarnation's creation, at an older epoch, or after
    /// five batches.
    pub fn state_before(
        &self,
        name: &str,
        partition: u32,
        producer_id: u64,
        topic: TopicId,
        request: RequestId,
        created: Option<RequestId>,
    ) -> Known {
        let mut window = Vec::new();
        let mut epoch = None;
        let mut complete = true;
        for (r, send) in self.sends_before(name, partition, producer_id, request) {
            if created.is_some_and(|c| r < c) {
                break;
            }
            let elsewhere = send.live_at_issue.is_some_and(|l| l != topic);
            let first_offset = match send.outcome {
                SendOutcome::Refused { maybe_admitted: false } => continue,
                SendOutcome::Acked { topic: t, .. } if t != topic => continue,
                outcome if outcome.maybe() => {
                    if elsewhere {
                        continue;
                    }
                    complete = false;
                    break;
                }
                SendOutcome::Acked { first_offset, .. } => first_offset,
                _ => continue,
            };
            let Some(batch) = self.batches.get(&send.batch) else { continue };
            // A retry answered from an earlier acknowledgement here changed nothing.
            let earlier: Vec<&Send> =
                batch.sends.iter().take_while(|e| **e < r).filter_map(|e| self.sends.get(e)).collect();
            if earlier.iter().any(|e| matches!(e.outcome, SendOutcome::Acked { topic: t, .. } if t == topic)) {
                continue;
            }
            let unsure = earlier.iter().any(|e| e.outcome.maybe() && e.live_at_issue.is_none_or(|l| l == topic));
            if batch.state_lost || unsure {
                complete = false;
                break;
            }
            let e = *epoch.get_or_insert(send.batch.epoch);
            if send.batch.epoch != e {
                // An older epoch's batches were cleared when this one began.
                break;
            }
            window.push((send.batch.first_sequence, send.batch.last_sequence(), first_offset));
            if window.len() == BATCHES_KEPT {
                break;
            }
        }
        match epoch {
            None if complete => Known::Empty,
            None => Known::Unknown,
            Some(epoch) => Known::Last { epoch, window, complete },
        }
    }
}
