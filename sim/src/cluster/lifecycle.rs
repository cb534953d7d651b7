//! The linearizable lifecycle, judged once a cluster run is over: every reply against
//! the real-time order of invocations, replies and the instants journal entries landed.
//!
//! An incarnation is live from the instant its `Create` landed in the store until the
//! instant its tombstone did. A reply that shows an incarnation (a create, describe,
//! list, produce or fetch) must overlap its life: invoked before the tombstone landed,
//! answered after the create did. A reply that says a name is absent must come from a
//! call that no life of the name covers entirely. Records are judged against what the
//! store ever held at their offsets, and a fetch must show every record acknowledged
//! before it was invoked. So no command invoked after a delete's acknowledgement (which
//! comes after its tombstone landed) observes the deleted incarnation, and none invoked
//! after a create's acknowledgement misses it.

use crate::cluster::history::{Call, History};
use crate::cluster::store::{Life, SimStore};
use crate::violation::Checker;
use broker_core::{BrokerError, Command, Reply, RequestId, Time, TopicId};
use std::collections::BTreeMap;

/// Judges every answered call; returns what it found, in request order.
pub fn judge(history: &History, store: &SimStore) -> Vec<(Time, Checker, String)> {
    let mut out = Vec::new();
    // Per partition, acknowledged produces: (when answered, the end they reached).
    let mut acked: BTreeMap<(TopicId, u32), Vec<(Time, u64)>> = BTreeMap::new();
    for call in history.calls.values() {
        if let Some((at, Ok(Reply::Produced { topic, positions }))) = &call.answer {
            for p in positions {
                acked.entry((*topic, p.partition)).or_default().push((*at, p.offset + 1));
            }
        }
    }
    for (request, call) in &history.calls {
        let Some((answered, reply)) = &call.answer else { continue };
        let j = Judge { store, call, request: *request, from: call.invoked, to: *answered, out: &mut out };
        j.reply(reply, &acked);
    }
    out
}

struct Judge<'a> {
    store: &'a SimStore,
    call: &'a Call,
    request: RequestId,
    from: Time,
    to: Time,
    out: &'a mut Vec<(Time, Checker, String)>,
}

impl Judge<'_> {
    fn flag(&mut self, checker: Checker, what: String) {
        let detail = format!(
            "req{} to node {} ({}), invoked {} and answered {}: {what}",
            self.request.0,
            self.call.node,
            crate::trace::render_command(&self.call.command),
            self.from,
            self.to
        );
        self.out.push((self.to, checker, detail));
    }

    /// The life of `topic`, if it is an incarnation of `name`.
    fn life(&self, topic: TopicId, name: &str) -> Option<&Life> {
        self.store.lives.get(&topic).filter(|l| l.name == name)
    }

    /// Shows `topic` as an incarnation of `name`: it must be one, live during the call.
    fn shows(&mut self, topic: TopicId, name: &str) -> bool {
        match self.life(topic, name) {
            None => {
                self.flag(
                    Checker::OneLiveIncarnation,
                    format!("shows {topic} as {name:?}, which the journal does not"),
                );
                false
            }
            Some(l) if !l.overlaps(self.from, self.to) => {
                let (created, deleted) = (l.created, l.deleted);
                self.flag(
                    Checker::LinearizableLifecycle,
                    format!("shows {topic}, live from {created} to {deleted:?} only"),
                );
                false
            }
            Some(_) => true,
        }
    }

    /// Says `name` is absent: no life of it may cover the whole call.
    fn absent(&mut self, name: &str) {
        let (from, to) = (self.from, self.to);
        if let Some((id, l)) =
            self.store.lives_of(name).find(|(_, l)| l.created < from && l.deleted.is_none_or(|d| d > to))
        {
            let (created, deleted) = (l.created, l.deleted);
            self.flag(
                Checker::LinearizableLifecycle,
                format!("says {name:?} is absent while {id} was live, from {created} to {deleted:?}"),
            );
        }
    }

    fn reply(mut self, reply: &Result<Reply, BrokerError>, acked: &BTreeMap<(TopicId, u32), Vec<(Time, u64)>>) {
        let command = std::rc::Rc::clone(&self.call.command);
        match (&*command, reply) {
            (_, Err(BrokerError::TopicNotFound { name })) => self.absent(name),
            (Command::CreateTopic { name, .. }, Ok(Reply::Created { topic })) => {
                match self.life(*topic, name).map(|l| l.created) {
                    Some(at) if at >= self.from && at <= self.to => {}
                    Some(at) => {
                        self.flag(Checker::LinearizableLifecycle, format!("created {topic}, which landed at {at}"))
                    }
                    None => self.flag(
                        Checker::OneLiveIncarnation,
                        format!("acknowledged as {topic}, but journal entry {} is not a create of {name:?}", topic.0),
                    ),
                }
            }
            (Command::CreateTopic { name, .. }, Err(BrokerError::TopicAlreadyExists { .. })) => {
                let (from, to) = (self.from, self.to);
                if !self.store.lives_of(name).any(|(_, l)| l.overlaps(from, to)) {
                    self.flag(Checker::LinearizableLifecycle, format!("refused as existing while {name:?} was absent"));
                }
            }
            (Command::DeleteTopic { name }, Ok(Reply::DeleteAccepted { topic })) => {
                match self.life(*topic, name).and_then(|l| l.deleted) {
                    Some(at) if at <= self.to => {}
                    deleted => self.flag(
                        Checker::LinearizableLifecycle,
                        format!("acknowledged the delete of {topic}, whose tombstone landed at {deleted:?}"),
                    ),
                }
            }
            (Command::DescribeTopic { name }, Ok(Reply::Described(t))) => {
                self.shows(t.id, name);
            }
            (Command::ListTopics, Ok(Reply::Topics(topics))) => {
                for t in topics {
                    self.shows(t.id, &t.name);
                }
                let (from, to) = (self.from, self.to);
                let missing: Vec<TopicId> = self
                    .store
                    .lives
                    .iter()
                    .filter(|(id, l)| {
                        l.created < from && l.deleted.is_none_or(|d| d > to) && !topics.iter().any(|t| t.id == **id)
                    })
                    .map(|(id, _)| *id)
                    .collect();
                for id in missing {
                    self.flag(Checker::LinearizableLifecycle, format!("lists no {id}, live all along"));
                }
            }
            (Command::Produce { topic: name, records, .. }, Ok(Reply::Produced { topic, positions })) => {
                if !self.shows(*topic, name) {
                    return;
                }
                for (p, r) in positions.iter().zip(records) {
                    if self.store.value_at(*topic, p.partition, p.offset) != Some(&r.value[..]) {
                        self.flag(
                            Checker::AckedOffsetsServed,
                            format!("acknowledged at {topic}/{}@{}, which holds another record", p.partition, p.offset),
                        );
                    }
                }
            }
            (
                Command::Fetch { topic: name, partition, offset, .. },
                Ok(Reply::Fetched { topic, records, high_watermark }),
            ) => {
                if !self.shows(*topic, name) {
                    return;
                }
                let hw = *high_watermark;
                for (expected, r) in (*offset..).zip(records) {
                    if r.offset != expected || r.offset >= hw {
                        self.flag(
                            Checker::AckedOffsetsServed,
                            format!("served offset {} where {expected} was due (high watermark {hw})", r.offset),
                        );
                        return;
                    }
                    if self.store.value_at(*topic, *partition, r.offset) != Some(&r.value[..]) {
                        self.flag(
                            Checker::FetchIncarnation,
                            format!("served at {topic}/{partition}@{} a record never written there", r.offset),
                        );
                    }
                }
                if records.is_empty() && *offset < hw {
                    self.flag(
                        Checker::AckedOffsetsServed,
                        format!("served nothing at {offset} below the high watermark {hw}"),
                    );
                }
                if hw > self.store.end(*topic, *partition) {
                    self.flag(Checker::AckedOffsetsServed, format!("high watermark {hw} past every record written"));
                }
                let before = acked.get(&(*topic, *partition)).into_iter().flatten();
                if let Some(end) = before.filter(|(at, _)| *at < self.from).map(|(_, end)| *end).max() {
                    if hw < end {
                        self.flag(
                            Checker::LinearizableLifecycle,
                            format!("high watermark {hw}, while offsets up to {end} were acknowledged before it"),
                        );
                    }
                }
            }
            _ => {}
        }
    }
}
