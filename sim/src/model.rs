//! The reference model: what clients were told, and what every later reply must agree
//! with. Requests cut off by a crash or halt are indeterminate: they may or may not
//! have happened, and the model allows both.

use crate::violation::{Checker, Violation};
use broker_core::partitioner::partition_for_key;
use broker_core::{BrokerError, Command, LogId, Reply, RequestId, Time, TopicId};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// A record as a client produced it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordBytes {
    /// The key.
    pub key: Option<Vec<u8>>,
    /// The value (unique across a run).
    pub value: Vec<u8>,
}

/// A value as the model's indexes know it: its unique label (`v123-`, at most 24
/// bytes), its length and its CRC32C, never megabytes of padding. Two values of a run
/// share one only if they share label, length and checksum.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ValueId {
    label: Vec<u8>,
    len: usize,
    crc: u32,
}

impl ValueId {
    /// The id of `value`.
    pub fn of(value: &[u8]) -> ValueId {
        let end = value.iter().position(|b| *b == b'-').map_or(value.len(), |i| i + 1).min(24);
        ValueId { label: value[..end].to_vec(), len: value.len(), crc: crc32c::crc32c(value) }
    }
}

/// Names a value in a violation: its unique prefix (`v123-`) and its length, never
/// megabytes of padding.
pub fn label(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == b'-').map_or(value.len().min(16), |i| i + 1);
    format!("{}({} bytes)", String::from_utf8_lossy(&value[..end]), value.len())
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
    /// Acknowledged records by position.
    pub acked: BTreeMap<(TopicId, u32, u64), RecordBytes>,
    /// Records a fetch served that were never acknowledged (a restarted broker serves
    /// what it found in the log): served below the high watermark, they count as
    /// committed, and must read back the same for the rest of the run.
    pub served: BTreeMap<(TopicId, u32, u64), RecordBytes>,
    /// Where each acknowledged value landed.
    value_home: BTreeMap<ValueId, (TopicId, u32, u64)>,
    /// Every value ever sent, with the topic name it was sent to.
    produced: BTreeMap<ValueId, String>,
    /// Requests in flight: the command and when it was issued.
    inflight: BTreeMap<RequestId, (Rc<Command>, Time)>,
    names: BTreeMap<String, NameState>,
    /// Names with a delete whose outcome is unknown (cut off by a crash or halt).
    pub uncertain_deletes: BTreeSet<String>,
    /// Every delete issued, by name (request ids ascend in issue order).
    delete_requests: BTreeMap<String, BTreeSet<RequestId>>,
    /// The create request each incarnation answered `Created` to.
    created_by: BTreeMap<TopicId, RequestId>,
    /// Creates and deletes acknowledged (for the summary).
    pub deletes_acked: u64,
    violations: Vec<Violation>,
}

impl Model {
    /// Records an issued request.
    pub fn issued(&mut self, now: Time, request: RequestId, command: &Rc<Command>) {
        match &**command {
            Command::DeleteTopic { name } => {
                let st = self.names.entry(name.clone()).or_default();
                st.definitely_live = None;
                st.last_delete_issued = Some(now);
                self.delete_requests.entry(name.clone()).or_default().insert(request);
            }
            Command::Produce { topic, records } => {
                for r in records {
                    self.produced.insert(ValueId::of(&r.value), topic.clone());
                }
            }
            _ => {}
        }
        self.inflight.insert(request, (Rc::clone(command), now));
    }

    /// Every request in flight was cut off by a crash: their outcomes are unknown.
    pub fn crashed(&mut self) {
        for (cmd, _) in std::mem::take(&mut self.inflight).into_values() {
            self.cut_off(&cmd);
        }
    }

    fn cut_off(&mut self, cmd: &Command) {
        if let Command::DeleteTopic { name } = cmd {
            self.uncertain_deletes.insert(name.clone());
        }
    }

    fn flag(&mut self, now: Time, checker: Checker, detail: String) {
        self.violations.push(Violation { checker, at: now, detail });
    }

    /// Takes the violations found so far.
    pub fn take_violations(&mut self) -> Vec<Violation> {
        std::mem::take(&mut self.violations)
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

    /// The incarnation of `name` whose creation was acknowledged and that no delete
    /// issued since its create can have touched: it is live now, crashes or not.
    pub fn definitely_live(&self, name: &str) -> Option<TopicId> {
        self.names.get(name).and_then(|s| s.definitely_live).map(|(id, _)| id)
    }

    /// Checks a reply against the model, given the logs that suffered injected bit rot.
    pub fn replied(
        &mut self,
        now: Time,
        request: RequestId,
        reply: &Result<Reply, BrokerError>,
        rotted: &dyn Fn(LogId) -> bool,
    ) {
        let Some((cmd, issued_at)) = self.inflight.remove(&request) else {
            return self.flag(now, Checker::ModelAgreement, format!("reply to unknown request {}", request.0));
        };
        match (reply, &*cmd) {
            (Ok(Reply::Produced { topic: id, .. }), Command::Produce { topic: name, .. })
            | (Ok(Reply::Fetched { topic: id, .. }), Command::Fetch { topic: name, .. })
            | (Ok(Reply::Created { topic: id }), Command::CreateTopic { name, .. })
            | (Ok(Reply::DeleteAccepted { topic: id }), Command::DeleteTopic { name }) => {
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
        match (reply, &*cmd) {
            (Err(BrokerError::Halted(_)), _) => self.cut_off(&cmd),
            (Ok(Reply::Created { topic }), Command::CreateTopic { name, partitions, .. }) => {
                if self.topics.contains_key(topic) {
                    return self.flag(now, Checker::ModelAgreement, format!("create of {name} reused id {topic}"));
                }
                self.topics.insert(*topic, (name.clone(), *partitions));
                self.created_by.insert(*topic, request);
                let st = self.names.entry(name.clone()).or_default();
                if st.last_delete_issued.is_none_or(|t| t < issued_at) {
                    st.definitely_live = Some((*topic, now));
                }
            }
            (Ok(Reply::DeleteAccepted { topic }), Command::DeleteTopic { name }) => {
                if let Some((known, _)) = self.topics.get(topic) {
                    if known != name {
                        let detail = format!("delete of {name} accepted for {topic}, which is {known}");
                        return self.flag(now, Checker::ModelAgreement, detail);
                    }
                }
                self.deletes_acked += 1;
                self.deleted.insert(*topic);
            }
            (Ok(Reply::Produced { topic, positions }), Command::Produce { records, .. }) => {
                self.produced_reply(now, *topic, positions, records);
            }
            (Ok(Reply::Fetched { topic, records, .. }), Command::Fetch { partition, offset, .. }) => {
                for (i, r) in records.iter().enumerate() {
                    if r.offset != offset + i as u64 {
                        let detail =
                            format!("fetch of {topic}/p{partition} from {offset} returned offset {}", r.offset);
                        self.flag(now, Checker::ModelAgreement, detail);
                    }
                    let bytes = RecordBytes { key: r.key.clone(), value: r.value.clone() };
                    self.check_fetched(now, *topic, *partition, r.offset, &bytes);
                }
            }
            (Ok(Reply::Topics(list)), Command::ListTopics) => {
                for d in list {
                    self.check_visible(now, d.id, &d.name, d.partitions);
                }
            }
            (Ok(Reply::Described(d)), Command::DescribeTopic { .. }) => {
                self.check_visible(now, d.id, &d.name, d.partitions);
            }
            (Err(BrokerError::TopicNotFound { name }), _) => {
                let live = self.names.get(name).and_then(|s| s.definitely_live);
                if let Some((id, acked_at)) = live {
                    if acked_at <= issued_at && !matches!(*cmd, Command::CreateTopic { .. }) {
                        let detail = format!(
                            "{name} ({id}) is live since {acked_at}, but a request issued at {issued_at} got not-found"
                        );
                        self.flag(now, Checker::ModelAgreement, detail);
                    }
                }
            }
            (Err(BrokerError::CorruptRecord { log, offset, .. }), Command::Fetch { .. }) => {
                let Some(log_id) = LogId::parse_file_name(log) else { return };
                if !rotted(log_id) && self.acked.contains_key(&(log_id.topic, log_id.partition, *offset)) {
                    let detail =
                        format!("acknowledged record {log_id}@{offset} reported corrupt without injected corruption");
                    self.flag(now, Checker::Durability, detail);
                }
            }
            (Err(_), _) => {}
            (Ok(other), cmd) => {
                let detail = format!("reply {other:?} does not answer {cmd:?}");
                self.flag(now, Checker::ModelAgreement, detail);
            }
        }
    }

    fn produced_reply(
        &mut self,
        now: Time,
        topic: TopicId,
        positions: &[broker_core::RecordPosition],
        records: &[broker_core::ProduceRecord],
    ) {
        if positions.len() != records.len() {
            let detail = format!("produce of {} records acknowledged {} positions", records.len(), positions.len());
            return self.flag(now, Checker::ModelAgreement, detail);
        }
        let partitions = self.topics.get(&topic).map(|t| t.1);
        for (pos, rec) in positions.iter().zip(records) {
            if let (Some(n), Some(key)) = (partitions, &rec.key) {
                let want = partition_for_key(key, n);
                if pos.partition != want {
                    let detail =
                        format!("keyed record went to partition {} of {topic}, murmur2 says {want}", pos.partition);
                    self.flag(now, Checker::ModelAgreement, detail);
                }
            }
            let at = (topic, pos.partition, pos.offset);
            let bytes = RecordBytes { key: rec.key.clone(), value: rec.value.clone() };
            if let Some(served) = self.served.get(&at).filter(|s| **s != bytes) {
                let detail = format!(
                    "{topic}/p{}@{} was served as {}, then acknowledged for {}",
                    pos.partition,
                    pos.offset,
                    label(&served.value),
                    label(&rec.value)
                );
                self.flag(now, Checker::Durability, detail);
            }
            if let Some(prev) = self.acked.insert(at, bytes) {
                let detail = format!(
                    "offset {}/p{}@{} acknowledged twice (first {}, then {})",
                    topic,
                    pos.partition,
                    pos.offset,
                    label(&prev.value),
                    label(&rec.value)
                );
                self.flag(now, Checker::ModelAgreement, detail);
            }
            self.value_home.insert(ValueId::of(&rec.value), at);
        }
    }

    /// A record read back at `(topic, partition, offset)` must be the acknowledged one,
    /// or an unacknowledged record produced to the same name, never another incarnation's.
    pub fn check_fetched(&mut self, now: Time, topic: TopicId, partition: u32, offset: u64, got: &RecordBytes) {
        let at = (topic, partition, offset);
        if let Some(want) = self.acked.get(&at) {
            if want != got {
                let detail = format!(
                    "{topic}/p{partition}@{offset} reads {}, acknowledged {}",
                    label(&got.value),
                    label(&want.value)
                );
                self.flag(now, Checker::Durability, detail);
            }
            return;
        }
        if let Some(served) = self.served.get(&at) {
            if served != got {
                let detail = format!(
                    "{topic}/p{partition}@{offset} was served as {}, later reads {}",
                    label(&served.value),
                    label(&got.value)
                );
                self.flag(now, Checker::Durability, detail);
            }
            return;
        }
        self.served.insert(at, got.clone());
        if let Some(home) = self.value_home.get(&ValueId::of(&got.value)) {
            if *home != at {
                let detail = format!(
                    "{topic}/p{partition}@{offset} holds {}, acknowledged at {}/p{}@{}",
                    label(&got.value),
                    home.0,
                    home.1,
                    home.2
                );
                self.flag(now, Checker::NoResurrection, detail);
            }
            return;
        }
        let name = self.topics.get(&topic).map(|t| t.0.clone());
        match self.produced.get(&ValueId::of(&got.value)) {
            None => {
                let detail =
                    format!("{topic}/p{partition}@{offset} holds {}, which no client produced", label(&got.value));
                self.flag(now, Checker::ModelAgreement, detail);
            }
            Some(sent_to) if name.as_ref().is_some_and(|n| n != sent_to) => {
                let detail = format!("{topic}/p{partition}@{offset} holds a record produced to {sent_to}");
                self.flag(now, Checker::NoResurrection, detail);
            }
            Some(_) => {}
        }
    }

    fn check_visible(&mut self, now: Time, id: TopicId, name: &str, partitions: u32) {
        if self.deleted.contains(&id) {
            let detail = format!("{name} ({id}) is visible after its deletion was acknowledged");
            return self.flag(now, Checker::NoResurrection, detail);
        }
        match self.topics.get(&id) {
            Some((n, p)) if n != name || *p != partitions => {
                let detail = format!("{id} shows as {name}/{partitions}, created as {n}/{p}");
                self.flag(now, Checker::ModelAgreement, detail);
            }
            Some(_) => {}
            None => {
                self.topics.insert(id, (name.to_string(), partitions));
            }
        }
    }

    /// Checks the broker's live topics after a restart: no acknowledged deletion undone.
    pub fn check_live_after_recovery(&mut self, now: Time, live: &[TopicId]) {
        for id in live {
            if self.deleted.contains(id) {
                self.flag(
                    now,
                    Checker::NoResurrection,
                    format!("{id} is live again after recovery; its deletion was acknowledged"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::TopicSettings;

    #[test]
    fn only_a_delete_issued_after_its_create_excuses_a_vanished_incarnation() {
        let mut m = Model::default();
        let clean = |_: LogId| false;
        let (t, name) = (Time::ZERO, "a".to_string());
        m.issued(t, RequestId(1), &Rc::new(Command::DeleteTopic { name: name.clone() }));
        m.replied(t, RequestId(1), &Err(BrokerError::TopicNotFound { name: name.clone() }), &clean);
        let create = Command::CreateTopic { name: name.clone(), partitions: 1, settings: TopicSettings::default() };
        m.issued(t, RequestId(2), &Rc::new(create));
        m.replied(t, RequestId(2), &Ok(Reply::Created { topic: TopicId(0) }), &clean);
        assert!(!m.may_be_deleted(TopicId(0)), "the delete came before the create");
        // A later delete, cut off by a crash: it may have happened.
        m.issued(t, RequestId(3), &Rc::new(Command::DeleteTopic { name }));
        m.crashed();
        assert!(m.may_be_deleted(TopicId(0)));
    }
}
