//! The reference model: what clients were told, and what every later reply must agree
//! with. Requests cut off by a crash or halt are indeterminate: they may or may not
//! have happened, and the model allows both.
//!
//! The model judges nothing: it folds in requests and replies, and shows each part of a
//! reply to the checkers ([`crate::checkers`]) before it folds that part in.

pub mod groups;
pub mod producers;

use broker_core::{BrokerError, Bytes, Command, LogId, Reply, RequestId, Time, TopicId};
use broker_testkit::ledger::Ledger;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::rc::Rc;

/// A record as a client produced it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordBytes {
    /// The key.
    pub key: Option<Vec<u8>>,
    /// The value (unique across a run), sharing the buffer it came in.
    pub value: Bytes,
}

/// A value as the model's indexes know it: its unique label (`v123-`, at most 24
/// bytes), its length and its CRC32C, never megabytes of padding. Two values of a run
/// share one only if they share label, length and checksum. The label is kept inline,
/// so that an id is copied, never allocated.
#[derive(Clone, Debug)]
pub struct ValueId {
    label: [u8; LABEL_MAX],
    label_len: u8,
    len: usize,
    crc: u32,
}

/// The longest label a [`ValueId`] keeps.
pub(crate) const LABEL_MAX: usize = producers::LABEL_MAX;

impl ValueId {
    fn label(&self) -> &[u8] {
        &self.label[..usize::from(self.label_len)]
    }

    fn key(&self) -> (&[u8], usize, u32) {
        (self.label(), self.len, self.crc)
    }

    /// Its label and length, as the producers' model finds a value's batch by.
    fn label_of(&self) -> producers::Label {
        producers::Label::new(self.label(), self.len)
    }
}

impl PartialEq for ValueId {
    fn eq(&self, other: &ValueId) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ValueId {}

impl PartialOrd for ValueId {
    fn partial_cmp(&self, other: &ValueId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Its checksum and length only, which equal ids share.
impl Hash for ValueId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.crc) | (self.len as u64) << 32);
    }
}

/// The hasher of a map keyed by [`ValueId`]s: their CRC32C is a hash already, and one
/// multiplication mixes it with the length. Fixed, with no per-process random state.
/// Such maps are only looked up, or walked into something whose order is not theirs.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// A map from value ids, hashed by [`IdHasher`].
pub type ByValueId<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// By label, then length, then checksum.
impl Ord for ValueId {
    fn cmp(&self, other: &ValueId) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl ValueId {
    /// The id of `value`.
    pub fn of(value: &[u8]) -> ValueId {
        ValueId::with_crc(value, crc32c::crc32c(value))
    }

    /// The id of `value`, whose CRC32C the caller knows to be `crc` (the workload, which
    /// put the value together).
    pub fn with_crc(value: &[u8], crc: u32) -> ValueId {
        let head = &value[..value.len().min(LABEL_MAX)];
        let end = head.iter().position(|b| *b == b'-').map_or(head.len(), |i| i + 1);
        let mut label = [0; LABEL_MAX];
        label[..end].copy_from_slice(&value[..end]);
        ValueId { label, label_len: end as u8, len: value.len(), crc }
    }

    /// The value's length and CRC32C.
    pub fn len_and_crc(&self) -> (usize, u32) {
        (self.len, self.crc)
    }

    /// The ids of a produce's values, in record order (none for any other command):
    /// taken once as the command is issued and shared by the model and the checkers, as
    /// a produce may carry megabytes.
    pub fn of_command(command: &Command) -> Rc<[ValueId]> {
        match command {
            Command::Produce { records, .. } | Command::ProduceIdempotent { records, .. } => {
                records.iter().map(|r| ValueId::of(&r.value)).collect()
            }
            _ => Rc::from([]),
        }
    }
}

/// Names a value in a violation: its unique prefix (`v123-`) and its length, never
/// megabytes of padding.
pub fn label(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == b'-').map_or(value.len().min(16), |i| i + 1);
    format!("{}({} bytes)", String::from_utf8_lossy(&value[..end]), value.len())
}

/// A request in flight, as the model knows it.
#[derive(Clone, Debug)]
struct InFlight {
    command: Rc<Command>,
    issued_at: Time,
    /// The ids of the values it produces ([`ValueId::of_command`]).
    values: Rc<[ValueId]>,
}

/// Per-name knowledge used to judge `TopicNotFound`.
#[derive(Clone, Debug, Default)]
struct NameState {
    /// An incarnation whose creation was acknowledged, with the time of the ack, while
    /// no delete of this name has been issued since its create was issued.
    definitely_live: Option<(TopicId, Time)>,
    /// Time of the last delete issued for this name.
    last_delete_issued: Option<Time>,
}

/// The reference model of topics, offsets and deletions.
#[derive(Debug, Default)]
pub struct Model {
    /// Incarnations seen in replies: name and partition count.
    pub topics: BTreeMap<TopicId, (String, u32)>,
    /// The name of every incarnation any reply revealed (produce and fetch replies
    /// reveal an id without its partition count).
    names_of: BTreeMap<TopicId, String>,
    /// Incarnations whose deletion was acknowledged.
    pub deleted: BTreeSet<TopicId>,
    /// Records acknowledged, and records a fetch served that were never acknowledged
    /// (a restarted broker serves what it found in the log: served below the high
    /// watermark, they count as committed, and must read back the same for the rest of
    /// the run).
    pub records: Ledger<RecordBytes>,
    /// Where each acknowledged value landed (looked up only).
    value_home: ByValueId<ValueId, (TopicId, u32, u64)>,
    /// Every value ever sent, with the topic name it was sent to (one name shared by
    /// every value of a produce; looked up only).
    produced: ByValueId<ValueId, Rc<str>>,
    /// Requests in flight.
    inflight: BTreeMap<RequestId, InFlight>,
    names: BTreeMap<String, NameState>,
    /// Names with a delete whose outcome is unknown (cut off by a crash or halt).
    pub uncertain_deletes: BTreeSet<String>,
    /// Every delete issued, by name (request ids ascend in issue order).
    delete_requests: BTreeMap<String, BTreeSet<RequestId>>,
    /// The create request each incarnation answered `Created` to.
    created_by: BTreeMap<TopicId, RequestId>,
    /// Creates and deletes acknowledged (for the summary).
    pub deletes_acked: u64,
    /// Consumer groups' commits and deletions, with their outcomes.
    pub groups: groups::Groups,
    /// Idempotent producers: ids handed out, sends with their outcomes, batches.
    pub producers: producers::Producers,
}

impl Model {
    /// Records an issued request, whose produced values have the ids `values`
    /// ([`ValueId::of_command`]).
    pub fn issued(&mut self, now: Time, request: RequestId, command: &Rc<Command>, values: &Rc<[ValueId]>) {
        self.groups.issued(request, command);
        let (live, labels) = match &**command {
            Command::ProduceIdempotent { topic, .. } => {
                let labels: Vec<producers::Label> = values.iter().map(|id| id.label_of()).collect();
                (self.definitely_live(topic), labels)
            }
            _ => (None, Vec::new()),
        };
        self.producers.issued(request, command, &labels, live);
        match &**command {
            Command::DeleteTopic { name } => {
                let st = self.names.entry(name.clone()).or_default();
                st.definitely_live = None;
                st.last_delete_issued = Some(now);
                self.delete_requests.entry(name.clone()).or_default().insert(request);
            }
            Command::Produce { topic, records, .. } | Command::ProduceIdempotent { topic, records, .. } => {
                assert_eq!(values.len(), records.len(), "an id for every value of a produce");
                let topic: Rc<str> = Rc::from(topic.as_str());
                for id in values.iter() {
                    self.produced.insert(id.clone(), Rc::clone(&topic));
                }
            }
            _ => {}
        }
        self.inflight
            .insert(request, InFlight { command: Rc::clone(command), issued_at: now, values: Rc::clone(values) });
    }

    /// A start cut `log` from `offset` on ([`broker_core::Notice::TailCut`]): what
    /// clients were told is there is gone, and the offsets will be given again.
    pub fn tail_cut(&mut self, log: LogId, offset: u64) {
        let name = self.names_of.get(&log.topic).map(String::as_str);
        self.producers.tail_cut(log, name);
        let from = (log.topic, log.partition, offset);
        let to = (log.topic, log.partition, u64::MAX);
        for ledger in [&mut self.records.acked, &mut self.records.served] {
            let gone: Vec<_> = ledger.range(from..=to).map(|(at, _)| *at).collect();
            for at in gone {
                ledger.remove(&at);
            }
        }
    }

    /// Records clients were told are on `log` at `offset` or after it.
    pub fn told_from(&self, log: LogId, offset: u64) -> usize {
        let range = (log.topic, log.partition, offset)..=(log.topic, log.partition, u64::MAX);
        self.records.acked.range(range.clone()).count() + self.records.served.range(range).count()
    }

    /// Every request in flight was cut off by a crash: their outcomes are unknown.
    pub fn crashed(&mut self) {
        for InFlight { command: cmd, .. } in std::mem::take(&mut self.inflight).into_values() {
            self.cut_off(&cmd);
        }
        self.groups.crashed();
        self.producers.crashed();
    }

    /// The command of request `request`, while it is in flight.
    pub fn command_of(&self, request: RequestId) -> Option<&Command> {
        self.inflight.get(&request).map(|f| &*f.command)
    }

    /// The create request an incarnation answered `Created` to, if that reply was seen.
    pub fn created_by(&self, id: TopicId) -> Option<RequestId> {
        self.created_by.get(&id).copied()
    }

    fn cut_off(&mut self, cmd: &Command) {
        if let Command::DeleteTopic { name } = cmd {
            self.uncertain_deletes.insert(name.clone());
        }
    }

    /// The largest offset acknowledged or served in any earlier incarnation of `id`'s
    /// name, and that incarnation: a name is live once at a time, so every earlier one
    /// was deleted before `id` was created.
    pub fn last_position_before(&self, id: TopicId) -> Option<(TopicId, u64)> {
        let name = self.names_of.get(&id)?;
        let earlier = self.names_of.range(..id).filter(|(_, n)| *n == name).map(|(old, _)| *old);
        earlier
            .filter_map(|old| {
                let range = (old, 0, 0)..=(old, u32::MAX, u64::MAX);
                let acked = self.records.acked.range(range.clone()).map(|(k, _)| k.2);
                let served = self.records.served.range(range).map(|(k, _)| k.2);
                acked.chain(served).max().map(|last| (old, last))
            })
            .max_by_key(|(_, last)| *last)
    }

    /// Whether an incarnation may legitimately be gone: its deletion was acknowledged,
    /// or a delete of its name was issued after its create was (a delete issued before
    /// the create cannot have removed it). Requests cut off by a crash count as issued.
    /// An incarnation whose `Created` reply was never seen has no known create request:
    /// then any delete of its name excuses it.
    pub fn may_be_deleted(&self, id: TopicId) -> bool {
        if self.deleted.contains(&id) {
            return true;
        }
        let Some(deletes) = self.names_of.get(&id).and_then(|name| self.delete_requests.get(name)) else {
            return false;
        };
        match self.created_by.get(&id) {
            Some(create) => deletes.range(*create..).next().is_some(),
            None => !deletes.is_empty(),
        }
    }

    /// Whether a delete of `name` was issued after `request` (requests cut off by a
    /// crash count as issued).
    pub fn delete_issued_after(&self, name: &str, request: RequestId) -> bool {
        self.delete_requests.get(name).is_some_and(|d| d.range(request..).next().is_some())
    }

    /// The incarnation of `name` whose creation was acknowledged and that no delete
    /// issued since its create can have touched: it is live now, crashes or not.
    pub fn definitely_live(&self, name: &str) -> Option<TopicId> {
        self.definitely_live_since(name).map(|(id, _)| id)
    }

    /// The incarnation of `name` that [`Model::definitely_live`] names, with when its
    /// creation was acknowledged.
    pub fn definitely_live_since(&self, name: &str) -> Option<(TopicId, Time)> {
        self.names.get(name).and_then(|s| s.definitely_live)
    }

    /// Whether the model holds a record at this position: acknowledged, or served.
    pub fn holds(&self, at: &(TopicId, u32, u64)) -> bool {
        self.records.holds(at)
    }

    /// The topic name every record of a run's value was sent to.
    pub fn produced_to(&self, value: &[u8]) -> Option<&str> {
        self.produced.get(&ValueId::of(value)).map(|t| &**t)
    }

    /// Where a value was acknowledged, if it was.
    pub fn home_of(&self, value: &[u8]) -> Option<(TopicId, u32, u64)> {
        self.value_home.get(&ValueId::of(value)).copied()
    }

    /// Folds a reply into the model. `observe` sees each part of the reply against the
    /// model as folded up to that part (see [`Seen`]): the checkers of
    /// [`crate::checkers`] judge there; the model only learns.
    pub fn replied(
        &mut self,
        now: Time,
        request: RequestId,
        reply: &Result<Reply, BrokerError>,
        observe: &mut dyn FnMut(&Model, Seen<'_>),
    ) {
        let Some(InFlight { command: cmd, issued_at, values }) = self.inflight.remove(&request) else {
            return observe(self, Seen::UnknownRequest(request));
        };
        match (reply, &*cmd) {
            (Ok(Reply::Produced { topic: id, .. }), Command::Produce { topic: name, .. })
            | (Ok(Reply::Produced { topic: id, .. }), Command::ProduceIdempotent { topic: name, .. })
            | (Ok(Reply::Fetched { topic: id, .. }), Command::Fetch { topic: name, .. })
            | (Ok(Reply::Created { topic: id }), Command::CreateTopic { name, .. })
            | (Ok(Reply::DeleteAccepted { topic: id }), Command::DeleteTopic { name })
            | (Ok(Reply::OffsetsCommitted { topic: id }), Command::CommitOffsets { topic: name, .. })
            | (Ok(Reply::Offsets { topic: id, .. }), Command::FetchOffsets { topic: name, .. }) => {
                self.names_of.entry(*id).or_insert_with(|| name.clone());
            }
            (Ok(Reply::Topics(list)), _) => {
                for d in list {
                    self.names_of.entry(d.id).or_insert_with(|| d.name.clone());
                }
            }
            (Ok(Reply::Described(d)), _) => {
                self.names_of.entry(d.id).or_insert_with(|| d.name.clone());
            }
            _ => {}
        }
        observe(self, Seen::Reply { request, command: &cmd, issued_at, reply });
        self.groups.replied(request, reply);
        self.producers.replied(request, &cmd, reply);
        match (reply, &*cmd) {
            (Err(BrokerError::Halted(_)), _) => self.cut_off(&cmd),
            (Ok(Reply::Created { topic }), Command::CreateTopic { name, partitions, .. }) => {
                // A reply that reuses an id teaches the model nothing.
                if self.topics.contains_key(topic) {
                    return;
                }
                self.topics.insert(*topic, (name.clone(), *partitions));
                self.created_by.insert(*topic, request);
                let st = self.names.entry(name.clone()).or_default();
                if st.last_delete_issued.is_none_or(|t| t < issued_at) {
                    st.definitely_live = Some((*topic, now));
                }
            }
            (Ok(Reply::DeleteAccepted { topic }), Command::DeleteTopic { name }) => {
                // Nor does one that accepts the delete of a name for another name's id.
                if self.topics.get(topic).is_some_and(|(known, _)| known != name) {
                    return;
                }
                self.deletes_acked += 1;
                self.deleted.insert(*topic);
                self.groups.topic_deleted(*topic);
            }
            (Ok(Reply::Produced { topic, positions }), Command::Produce { partition: named, records, .. }) => {
                self.acknowledged(observe, *topic, positions, records, &values, *named, false);
            }
            (
                Ok(Reply::Produced { topic, positions }),
                Command::ProduceIdempotent { partition: named, records, .. },
            ) => {
                self.acknowledged(observe, *topic, positions, records, &values, Some(*named), true);
            }
            (Ok(Reply::Fetched { topic, records, .. }), Command::Fetch { partition, offset, .. }) => {
                for (i, r) in records.iter().enumerate() {
                    let at = (*topic, *partition, r.offset);
                    let record = RecordBytes { key: r.key.clone(), value: r.value.clone() };
                    observe(self, Seen::Fetched { at, from: *offset, index: i as u64, record: &record });
                    self.producers.saw_record(&record.value, at);
                    self.records.serve(at, record);
                }
            }
            (Ok(Reply::Topics(list)), Command::ListTopics) => {
                for d in list {
                    self.visible(observe, d.id, &d.name, d.partitions);
                }
            }
            (Ok(Reply::Described(d)), Command::DescribeTopic { .. }) => {
                self.visible(observe, d.id, &d.name, d.partitions);
            }
            _ => {}
        }
    }

    /// Folds in the positions a produce was acknowledged at. `idempotent`: a retry
    /// answered with the positions of its batch's first send acknowledges again what
    /// the model holds there, which is no second acknowledgement.
    #[allow(clippy::too_many_arguments)]
    fn acknowledged(
        &mut self,
        observe: &mut dyn FnMut(&Model, Seen<'_>),
        topic: TopicId,
        positions: &[broker_core::RecordPosition],
        records: &[broker_core::ProduceRecord],
        values: &[ValueId],
        named: Option<u32>,
        idempotent: bool,
    ) {
        // Nor one that acknowledges another number of records than were sent.
        if positions.len() != records.len() {
            return;
        }
        // One id per record: `issued` holds every produce to that.
        for ((pos, rec), id) in positions.iter().zip(records).zip(values.iter()) {
            let at = (topic, pos.partition, pos.offset);
            let bytes = RecordBytes { key: rec.key.clone(), value: rec.value.clone() };
            observe(self, Seen::Produced { at, record: &bytes, named });
            if idempotent {
                self.producers.saw_record(&bytes.value, at);
                if self.records.acked.get(&at) == Some(&bytes) {
                    continue;
                }
            }
            if let Some(before) = self.records.acknowledge(at, bytes) {
                let record = &self.records.acked[&at];
                observe(self, Seen::AckedAgain { at, before: &before, record });
            }
            self.value_home.insert(id.clone(), at);
        }
    }

    fn visible(&mut self, observe: &mut dyn FnMut(&Model, Seen<'_>), id: TopicId, name: &str, partitions: u32) {
        observe(self, Seen::Visible { id, name, partitions });
        if !self.deleted.contains(&id) && !self.topics.contains_key(&id) {
            self.topics.insert(id, (name.to_string(), partitions));
        }
    }
}

/// A part of a reply, as [`Model::replied`] shows it to its observer, always against the
/// model as folded up to (not including) that part.
#[derive(Debug)]
pub enum Seen<'a> {
    /// A reply to a request the model does not know (never issued, or answered before).
    UnknownRequest(RequestId),
    /// A reply, with the command it answers and when that was issued; seen first, before
    /// any of it is folded in.
    Reply {
        /// The request.
        request: RequestId,
        /// The command.
        command: &'a Command,
        /// When it was issued.
        issued_at: Time,
        /// The reply.
        reply: &'a Result<Reply, BrokerError>,
    },
    /// One record of a produce reply (whose record count matched the produce's) at the
    /// position it was acknowledged at.
    Produced {
        /// Incarnation, partition and offset.
        at: (TopicId, u32, u64),
        /// The record.
        record: &'a RecordBytes,
        /// The partition the produce named, if it named one.
        named: Option<u32>,
    },
    /// A position acknowledged again, seen after the later acknowledgement is folded in.
    AckedAgain {
        /// Incarnation, partition and offset.
        at: (TopicId, u32, u64),
        /// What the position held before.
        before: &'a RecordBytes,
        /// What it holds now.
        record: &'a RecordBytes,
    },
    /// One record of a fetch reply.
    Fetched {
        /// Incarnation, the partition fetched, and the offset the record carries.
        at: (TopicId, u32, u64),
        /// The offset the fetch asked from.
        from: u64,
        /// The record's place in the reply.
        index: u64,
        /// The record.
        record: &'a RecordBytes,
    },
    /// A topic a list or describe reply shows.
    Visible {
        /// Its incarnation.
        id: TopicId,
        /// Its name.
        name: &'a str,
        /// Its partition count.
        partitions: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::TopicSettings;

    #[test]
    fn only_a_delete_issued_after_its_create_excuses_a_vanished_incarnation() {
        let mut m = Model::default();
        let mut ignore = |_: &Model, _: Seen<'_>| {};
        let none: Rc<[ValueId]> = Rc::from([]);
        let (t, name) = (Time::ZERO, "a".to_string());
        m.issued(t, RequestId(1), &Rc::new(Command::DeleteTopic { name: name.clone() }), &none);
        m.replied(t, RequestId(1), &Err(BrokerError::TopicNotFound { name: name.clone() }), &mut ignore);
        let create = Command::CreateTopic { name: name.clone(), partitions: 1, settings: TopicSettings::default() };
        m.issued(t, RequestId(2), &Rc::new(create), &none);
        m.replied(t, RequestId(2), &Ok(Reply::Created { topic: TopicId(0) }), &mut ignore);
        assert!(!m.may_be_deleted(TopicId(0)), "the delete came before the create");
        // A later delete, cut off by a crash: it may have happened.
        m.issued(t, RequestId(3), &Rc::new(Command::DeleteTopic { name }), &none);
        m.crashed();
        assert!(m.may_be_deleted(TopicId(0)));
    }
}
