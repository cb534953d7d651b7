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
//!
//! Every other reply is judged too. An out-of-range fetch is judged like the high
//! watermark of a fetched one, against some life of the name that overlaps the call; a
//! partition not found must be past the partition count of such a life. A delete is
//! never acknowledged for one incarnation while another was live all along. And a
//! definite failure had no effect: no record of a produce answered with any error but
//! an unknown outcome is in a segment the store held, and no entry a create or delete
//! answered unavailable could alone have written landed.

use crate::cluster::history::{Call, History};
use crate::cluster::store::{Life, SimStore};
use crate::violation::Checker;
use broker_core::{BrokerError, Command, Reply, RequestId, Time, TopicId};
use std::collections::BTreeMap;

/// Per partition, acknowledged produces: (when answered, the end they reached).
type Acked = BTreeMap<(TopicId, u32), Vec<(Time, u64)>>;

/// Judges every answered call; returns what it found, in request order (then the
/// entries that only calls answered unavailable could have written).
pub fn judge(history: &History, store: &SimStore) -> Vec<(Time, Checker, String)> {
    let mut out = Vec::new();
    let mut acked: Acked = BTreeMap::new();
    for call in history.calls.values() {
        if let Some((at, Ok(Reply::Produced { topic, positions }))) = &call.answer {
            for p in positions {
                acked.entry((*topic, p.partition)).or_default().push((*at, p.offset + 1));
            }
        }
    }
    let written = failed_records_written(history, store);
    for (request, call) in &history.calls {
        let Some((answered, reply)) = &call.answer else { continue };
        let j = Judge { store, call, request: *request, from: call.invoked, to: *answered, out: &mut out };
        j.reply(reply, &acked, written.get(request).map_or(&[][..], Vec::as_slice));
    }
    unavailable_entries_landed(history, store, &mut out);
    out
}

/// Whether a reply is a definite failure: an error that says the command did nothing
/// (every error but an unknown outcome).
fn definite_failure(reply: &Result<Reply, BrokerError>) -> bool {
    matches!(reply, Err(e) if !matches!(e, BrokerError::OutcomeUnknown(_)))
}

/// For each produce answered with a definite failure, the records of it that a segment
/// the store held (before its incarnation's tombstone) shows, with where. Only values
/// that no other produce carries are judged (the seeded workload makes every value
/// unique; a scripted one may repeat one).
fn failed_records_written(history: &History, store: &SimStore) -> BTreeMap<RequestId, Vec<(TopicId, u32, u64)>> {
    let mut carried: BTreeMap<&[u8], u32> = BTreeMap::new();
    for call in history.calls.values() {
        if let Command::Produce { records, .. } = &*call.command {
            for r in records {
                *carried.entry(&r.value[..]).or_default() += 1;
            }
        }
    }
    let mut failed: BTreeMap<&[u8], RequestId> = BTreeMap::new();
    for (request, call) in &history.calls {
        let (Command::Produce { records, .. }, Some((_, reply))) = (&*call.command, &call.answer) else { continue };
        if definite_failure(reply) {
            failed.extend(records.iter().map(|r| &r.value[..]).filter(|v| carried[v] == 1).map(|v| (v, *request)));
        }
    }
    let mut written: BTreeMap<RequestId, Vec<(TopicId, u32, u64)>> = BTreeMap::new();
    if failed.is_empty() {
        return written;
    }
    for (&(topic, partition), segments) in &store.segments {
        for (base, values) in segments {
            for (offset, value) in (*base..).zip(values) {
                if let Some(request) = failed.get(&value[..]) {
                    written.entry(*request).or_default().push((topic, partition, offset));
                }
            }
        }
    }
    written
}

/// A create's or delete's journal entry that landed although every call that could
/// have written it was answered unavailable ("nothing was written"). The calls that
/// could have written an entry: those of its command (the name and partition count of
/// a create, the name of a delete) invoked before it landed and not answered otherwise
/// for sure (unanswered, an unknown outcome, unavailable, or acknowledged as that very
/// incarnation). Any other answer is one that wrote no entry, or another one.
fn unavailable_entries_landed(history: &History, store: &SimStore, out: &mut Vec<(Time, Checker, String)>) {
    for (id, life) in &store.lives {
        let landings = [(life.created, true), (life.deleted.unwrap_or(Time::ZERO), false)];
        for (landed, create) in landings.into_iter().filter(|(_, create)| *create || life.deleted.is_some()) {
            let writers: Vec<(&RequestId, &Call)> = history
                .calls
                .iter()
                .filter(|(_, c)| c.invoked <= landed)
                .filter(|(_, c)| match &*c.command {
                    Command::CreateTopic { name, partitions, .. } => {
                        create && *name == life.name && *partitions == life.partitions
                    }
                    Command::DeleteTopic { name } => !create && *name == life.name,
                    _ => false,
                })
                .filter(|(_, c)| match c.answer.as_ref().map(|(_, r)| r) {
                    None | Some(Err(BrokerError::OutcomeUnknown(_) | BrokerError::Unavailable(_))) => true,
                    Some(Ok(Reply::Created { topic } | Reply::DeleteAccepted { topic })) => topic == id,
                    Some(_) => false,
                })
                .collect();
            let unavailable = |c: &Call| matches!(c.answer, Some((_, Err(BrokerError::Unavailable(_)))));
            if writers.is_empty() || !writers.iter().all(|(_, c)| unavailable(c)) {
                continue;
            }
            let (request, call) = writers[0];
            let Some((answered, _)) = &call.answer else { continue };
            let others: Vec<String> = writers[1..].iter().map(|(r, _)| format!("req{}", r.0)).collect();
            let entry = if create { format!("the create of {id}") } else { format!("the tombstone of {id}") };
            let or =
                if others.is_empty() { String::new() } else { format!(" (or {}, unavailable too)", others.join(", ")) };
            let j = Judge { store, call, request: *request, from: call.invoked, to: *answered, out: &mut *out };
            j.flag_once(
                Checker::FailedWritesNoEffect,
                format!("answered unavailable, nothing written, but {entry}, which only it{or} could write, landed at {landed}"),
            );
        }
    }
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
    fn flag_once(mut self, checker: Checker, what: String) {
        self.flag(checker, what);
    }

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

    /// The highest end acknowledged for a partition before the call was invoked.
    fn acked_before(&self, acked: &Acked, topic: TopicId, partition: u32) -> Option<u64> {
        let before = acked.get(&(topic, partition)).into_iter().flatten();
        before.filter(|(at, _)| *at < self.from).map(|(_, end)| *end).max()
    }

    /// Says `partition` of `name` does not exist, as `partitions` are all it has: some
    /// life of the name overlapping the call must have that many.
    fn partition_absent(&mut self, name: &str, partition: u32, partitions: u32) {
        let (from, to) = (self.from, self.to);
        let fits = |l: &Life| l.overlaps(from, to) && l.partitions == partitions && partition >= partitions;
        if !self.store.lives_of(name).any(|(_, l)| fits(l)) {
            let lives: Vec<String> = self
                .store
                .lives_of(name)
                .filter(|(_, l)| l.overlaps(from, to))
                .map(|(id, l)| format!("{id} with {}", l.partitions))
                .collect();
            self.flag(
                Checker::LinearizableLifecycle,
                format!(
                    "says partition {partition} is past the {partitions} of {name:?}, whose lives during the call \
                     were [{}]",
                    lives.join(", ")
                ),
            );
        }
    }

    /// Says `offset` of `partition` of `name` is past the end, `hw`: judged like a
    /// fetched high watermark, against some life of the name overlapping the call.
    fn out_of_range(&mut self, name: &str, partition: u32, offset: u64, hw: u64, acked: &Acked) {
        if offset <= hw {
            return self.flag(
                Checker::AckedOffsetsServed,
                format!("answered offset {offset} out of range below its high watermark {hw}"),
            );
        }
        let (from, to) = (self.from, self.to);
        let mut why = Vec::new();
        for (id, l) in self.store.lives_of(name).filter(|(_, l)| l.overlaps(from, to)) {
            let end = self.store.end(id, partition);
            match self.acked_before(acked, id, partition) {
                _ if partition >= l.partitions => why.push(format!("{id} has {} partitions", l.partitions)),
                _ if hw > end => why.push(format!("{id} held {end} records there")),
                Some(acked) if hw < acked => {
                    why.push(format!("{id} had offsets up to {acked} acknowledged before the call"))
                }
                _ => return,
            }
        }
        if why.is_empty() {
            why.push(format!("no life of {name:?} overlaps the call"));
        }
        self.flag(
            Checker::LinearizableLifecycle,
            format!("answered {offset} out of range, high watermark {hw}, but {}", why.join("; ")),
        );
    }

    /// The high watermarks a describe or list shows of `t`, a life of its name: one per
    /// partition, none past what the store held. Not judged from below: a node shows
    /// the ends it learned itself, which may lag behind other nodes' produces. Nor from
    /// above once the tombstone landed before the reply: the node may have learned the
    /// end of an orphan by then (a segment its produce created after the tombstone,
    /// which the store's record leaves out).
    fn watermarks(&mut self, t: &broker_core::TopicDescription) {
        let Some(l) = self.life(t.id, &t.name) else { return };
        let tombstoned = l.deleted.is_some_and(|d| d <= self.to);
        if t.partitions != l.partitions || t.high_watermarks.len() != l.partitions as usize {
            let (n, shown) = (l.partitions, t.high_watermarks.len());
            return self.flag(
                Checker::LinearizableLifecycle,
                format!(
                    "shows {} with {} partitions and {shown} high watermarks, created with {n}",
                    t.id, t.partitions
                ),
            );
        }
        for (p, hw) in (0..).zip(&t.high_watermarks) {
            let end = self.store.end(t.id, p);
            if *hw > end && !tombstoned {
                self.flag(
                    Checker::AckedOffsetsServed,
                    format!("shows {}/{p} with high watermark {hw}, past every record written ({end})", t.id),
                );
            }
        }
    }

    fn reply(mut self, reply: &Result<Reply, BrokerError>, acked: &Acked, written: &[(TopicId, u32, u64)]) {
        let command = std::rc::Rc::clone(&self.call.command);
        if let Some(&(topic, partition, offset)) = written.first() {
            let more = if written.len() > 1 {
                format!(" (and {} more of its records)", written.len() - 1)
            } else {
                String::new()
            };
            let err = match reply {
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            };
            self.flag(
                Checker::FailedWritesNoEffect,
                format!("failed ({err}), but its record is at {topic}/{partition}@{offset}{more}"),
            );
        }
        match (&*command, reply) {
            (_, Err(BrokerError::TopicNotFound { name })) => self.absent(name),
            (
                Command::Produce { topic: name, partition: Some(asked), .. }
                | Command::Fetch { topic: name, partition: asked, .. },
                Err(BrokerError::PartitionNotFound { partition, partitions, .. }),
            ) => {
                if asked != partition {
                    self.flag(
                        Checker::LinearizableLifecycle,
                        format!("answered partition {partition} not found, for partition {asked}"),
                    );
                }
                self.partition_absent(name, *partition, *partitions);
            }
            (
                Command::Fetch { topic: name, partition, offset, .. },
                Err(BrokerError::OffsetOutOfRange { offset: o, high_watermark }),
            ) => {
                if o != offset {
                    self.flag(
                        Checker::LinearizableLifecycle,
                        format!("answered offset {o} out of range, for {offset}"),
                    );
                }
                self.out_of_range(name, *partition, *offset, *high_watermark, acked);
            }
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
                // At its linearization point the delete tombstoned the incarnation live
                // then, or found none live: never while another was live all along.
                let (from, to) = (self.from, self.to);
                if let Some((id, l)) = self
                    .store
                    .lives_of(name)
                    .find(|(id, l)| id != topic && l.created < from && l.deleted.is_none_or(|d| d > to))
                {
                    let (created, deleted) = (l.created, l.deleted);
                    self.flag(
                        Checker::LinearizableLifecycle,
                        format!(
                            "acknowledged the delete of {topic} while {id} was live all along, from {created} to \
                             {deleted:?}"
                        ),
                    );
                }
            }
            (Command::DescribeTopic { name }, Ok(Reply::Described(t))) => {
                if !self.shows(t.id, name) {
                    return;
                }
                self.watermarks(t);
            }
            (Command::ListTopics, Ok(Reply::Topics(topics))) => {
                for t in topics {
                    if self.shows(t.id, &t.name) {
                        self.watermarks(t);
                    }
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
                if let Some(end) = self.acked_before(acked, *topic, *partition) {
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
