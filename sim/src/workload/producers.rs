//! Idempotent producers' clients: each asks for a producer id, then sends batches to
//! partitions of the topics the clients know, with Kafka's sequence numbers, several in
//! flight per partition; and retries, as a Kafka producer does: a batch right after
//! sending it (its reply is slow), a batch whose reply a crash cut off (after the
//! restart), and batches already acknowledged (after a restart, the case where a
//! broker that forgot its producers' state appends a batch twice). A few batches are
//! hostile: a gap or an overlap in the sequence, a stale epoch, a new epoch that does
//! not start at 0, an id never handed out, a sequence past `i32::MAX`, no record, past
//! the size limits, a partition the topic lacks. A producer also bumps its epoch (as
//! one does after an error), and some start a partition near `i32::MAX`, so sequences
//! wrap.
//!
//! Every choice is drawn from the workload's stream; what the producers learn (ids,
//! acknowledgements, refusals, crashes) comes from the replies and the runner, in a
//! seed's deterministic order.

use super::{Clients, Producer, Records, Sent, Workload};
use crate::model::ValueId;
use broker_core::{sequence_after, BrokerError, Command, ProducerBatch, Reply, MAX_SEQUENCE};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// The most producers (ids) the clients keep: a new one replaces the oldest.
const PRODUCERS: usize = 4;
/// How many batches each list of retry candidates keeps.
const KEPT: usize = 12;
/// Batches larger than this are not kept for retries (values of up to megabytes).
const KEPT_BYTES: u64 = 64 << 10;

impl Sent {
    fn command(&self) -> Command {
        Command::ProduceIdempotent {
            topic: self.topic.clone(),
            partition: self.partition,
            producer: self.producer,
            records: self.records.clone(),
        }
    }

    /// Whether `command` sends this batch (the same topic, partition, producer, epoch,
    /// first sequence and record count).
    fn is(&self, command: &Command) -> bool {
        matches!(command, Command::ProduceIdempotent { topic, partition, producer, records }
            if *topic == self.topic && *partition == self.partition && *producer == self.producer
                && records.len() == self.records.len())
    }

    /// One past its last sequence number.
    fn next_sequence(&self) -> u32 {
        sequence_after(self.producer.first_sequence, self.records.len() as u32)
    }

    fn small(&self) -> bool {
        broker_core::batch_bytes(&self.records) <= KEPT_BYTES
    }

    /// This batch, sent again.
    fn again(&self) -> Sent {
        Sent { retry: true, ..self.clone() }
    }

    /// Whether it is a batch of `producer_id` at `epoch` to `topic`/`partition` from
    /// sequence `from` on (within half the sequence space after it).
    fn reuses_from(&self, producer_id: u64, epoch: u16, topic: &str, partition: u32, from: u32) -> bool {
        let space = u64::from(MAX_SEQUENCE) + 1;
        let ahead = (u64::from(self.producer.first_sequence) + space - u64::from(from)) % space;
        self.producer.producer_id == producer_id
            && self.producer.epoch == epoch
            && self.topic == topic
            && self.partition == partition
            && ahead < space / 2
    }
}

impl Clients {
    /// The producer will send new batches from sequence `from` on there: no retry may
    /// send an older batch that used those sequence numbers (another batch will).
    fn reuse_from(&mut self, producer_id: u64, epoch: u16, topic: &str, partition: u32, from: u32) {
        let stale = |s: &Sent| s.reuses_from(producer_id, epoch, topic, partition, from);
        self.acked.retain(|s| !stale(s));
        self.recent.retain(|s| !stale(s));
        self.lost.retain(|s| !stale(s));
        self.queued.retain(|s| !stale(s));
    }
}

fn keep(list: &mut VecDeque<Sent>, sent: Sent) {
    if sent.small() {
        list.push_back(sent);
        while list.len() > KEPT {
            list.pop_front();
        }
    }
}

impl Workload {
    /// Hands `command` out with the ids of its values `values`.
    fn hand_out(&mut self, command: Command, values: Rc<[ValueId]>) -> Command {
        self.issue_values = Some(values);
        command
    }

    /// The batch queued to go out next, if any: it goes before any other command.
    pub(super) fn next_queued(&mut self) -> Option<Command> {
        let sent = self.producers.queued.pop_front()?;
        Some(self.send(sent))
    }

    /// The process died: the batches in flight have an unknown outcome, and are retried
    /// once it serves again, first of all.
    pub fn process_died(&mut self) {
        if !self.idempotent {
            return;
        }
        let c = &mut self.producers;
        let cut_off: Vec<Sent> = std::mem::take(&mut c.in_flight);
        for sent in cut_off {
            if sent.small() && !c.lost.iter().any(|l| l.is(&sent.command())) {
                c.lost.push(sent);
            }
        }
        let excess = c.lost.len().saturating_sub(KEPT);
        c.lost.drain(..excess);
        c.queued.clear();
        c.retry_burst = 4;
    }

    /// Learns from the reply to a producer's command.
    pub(super) fn producer_answered(
        &mut self,
        command: Option<&Command>,
        reply: &Result<broker_core::Reply, BrokerError>,
    ) {
        let c = &mut self.producers;
        match (command, reply) {
            (Some(Command::InitProducer), Ok(Reply::ProducerInitialized { producer_id, epoch })) => {
                c.largest_id = Some(c.largest_id.map_or(*producer_id, |l| l.max(*producer_id)));
                c.producers.push(Producer { id: *producer_id, epoch: *epoch, next: BTreeMap::new() });
                if c.producers.len() > PRODUCERS {
                    c.producers.remove(0);
                }
            }
            (Some(command @ Command::ProduceIdempotent { .. }), reply) => {
                let Some(i) = c.in_flight.iter().position(|s| s.is(command)) else { return };
                let sent = c.in_flight.remove(i);
                match reply {
                    Ok(_) => keep(&mut c.acked, sent),
                    Err(BrokerError::Halted(_)) => {
                        if sent.small() {
                            c.lost.push(sent);
                        }
                    }
                    Err(e) if sent.in_sequence && !sent.retry => {
                        let Some(p) = c.producers.iter_mut().find(|p| p.id == sent.producer.producer_id) else {
                            return;
                        };
                        let key = (sent.topic.clone(), sent.partition);
                        let from = match e {
                            // Where the broker stands, as a client learns it.
                            BrokerError::OutOfOrderSequence { expected, .. } if p.epoch == sent.producer.epoch => {
                                p.next.insert(key, *expected);
                                *expected
                            }
                            // Another instance took over: a new epoch, every sequence anew.
                            BrokerError::ProducerFenced { current, .. } if p.epoch == sent.producer.epoch => {
                                p.epoch = p.epoch.max(current.saturating_add(1));
                                p.next.clear();
                                return;
                            }
                            // Refused whole: its sequence numbers were not taken, if
                            // none was sent after it.
                            _ if p.epoch == sent.producer.epoch && p.next.get(&key) == Some(&sent.next_sequence()) => {
                                p.next.insert(key, sent.producer.first_sequence);
                                sent.producer.first_sequence
                            }
                            _ => return,
                        };
                        let (id, epoch) = (p.id, p.epoch);
                        c.reuse_from(id, epoch, &sent.topic, sent.partition, from);
                    }
                    Err(_) => {}
                }
            }
            _ => {}
        }
    }

    /// An idempotent producer's command: a new producer, a batch in sequence (with
    /// more pipelined after it, and now and then a retry of it right away), a retry, or
    /// a hostile batch.
    pub(super) fn producer_command(&mut self) -> Command {
        let n = self.producers.producers.len();
        if n == 0 || (n < PRODUCERS && self.rng.chance(0.05)) || self.rng.chance(0.01) {
            return Command::InitProducer;
        }
        if self.producers.retry_burst > 0 {
            self.producers.retry_burst -= 1;
            let lost = self.rng.below(2) == 0;
            if let Some(command) = self.retry(lost) {
                return command;
            }
        }
        match self.rng.below(100) {
            0..=9 => self.retry(true),
            10..=17 => self.retry(false),
            18..=21 => self.retry_recent(),
            22..=37 => Some(self.hostile()),
            _ => None,
        }
        .unwrap_or_else(|| self.in_sequence())
    }

    /// Sends `sent` (again, if it is a retry), noting it in flight.
    fn send(&mut self, sent: Sent) -> Command {
        let command = sent.command();
        let values = Rc::clone(&sent.values);
        self.producers.in_flight.push(sent);
        self.hand_out(command, values)
    }

    /// Queues `sent` to go out right after the command being handed out.
    fn queue(&mut self, sent: Sent) {
        self.producers.queued.push_back(sent);
    }

    /// A retry of a batch a crash cut off (`lost`), else of one acknowledged.
    fn retry(&mut self, lost: bool) -> Option<Command> {
        let c = &mut self.producers;
        let sent = if lost && !c.lost.is_empty() {
            let i = self.rng.below(c.lost.len() as u64) as usize;
            c.lost.remove(i).again()
        } else if !c.acked.is_empty() {
            // Mostly one of the latest, which the broker still keeps.
            let len = c.acked.len() as u64;
            let back = if self.rng.chance(0.8) { self.rng.below(len.min(4)) } else { self.rng.below(len) };
            c.acked[(len - 1 - back) as usize].again()
        } else {
            return None;
        };
        Some(self.send(sent))
    }

    /// A retry of any batch sent lately: at times one the broker no longer keeps.
    fn retry_recent(&mut self) -> Option<Command> {
        let recent = &self.producers.recent;
        if recent.is_empty() {
            return None;
        }
        let sent = recent[self.rng.below(recent.len() as u64) as usize].again();
        Some(self.send(sent))
    }

    /// A producer (by index), a topic (nearly always one the clients last saw live, if
    /// any) and a partition to write to.
    fn target(&mut self) -> (usize, String, u32) {
        let p = self.rng.below(self.producers.producers.len() as u64) as usize;
        let live: Vec<&String> = self.known.iter().filter(|(_, k)| k.live).map(|(name, _)| name).collect();
        let topic = match self.rng.chance(0.95) {
            true if !live.is_empty() => live[self.rng.below(live.len() as u64) as usize].clone(),
            _ => self.name(),
        };
        let partitions = self
            .known
            .get(&topic)
            .map(|k| k.high_watermarks.len() as u64)
            .filter(|n| *n > 0)
            .unwrap_or(u64::from(self.params.max_partitions));
        (p, topic, self.rng.below(partitions) as u32)
    }

    /// The sequence number producer `p` sends next to `topic`/`partition`: where it
    /// stands, or, the first time, 0, a number just below `i32::MAX` (the sequence
    /// then wraps) or any (a producer with no state there starts where it likes).
    fn next_sequence(&mut self, p: usize, topic: &str, partition: u32) -> u32 {
        let key = (topic.to_string(), partition);
        if let Some(next) = self.producers.producers[p].next.get(&key) {
            return *next;
        }
        let start = match self.rng.below(20) {
            0..=1 => MAX_SEQUENCE - self.rng.below(4) as u32,
            2 => self.rng.below(1_000) as u32,
            _ => 0,
        };
        self.producers.producers[p].next.insert(key, start);
        start
    }

    /// The records a batch of `batch` to `topic`/`partition` carries: those of the batch
    /// of the same name sent before, else `records` (made one record longer while
    /// their name is that of a batch too large to keep, whose records are lost).
    fn records_named(&mut self, topic: &str, partition: u32, batch: ProducerBatch, records: Records) -> Records {
        let (mut records, mut values) = records;
        loop {
            let name =
                (topic.to_string(), partition, batch.producer_id, batch.epoch, batch.first_sequence, records.len());
            match self.producers.contents.get(&name) {
                Some(Some(kept)) => return kept.clone(),
                Some(None) => {
                    let (more, ids) = self.new_records(1);
                    records.extend(more);
                    values = values.iter().chain(ids.iter()).cloned().collect();
                }
                None => {
                    let small = broker_core::batch_bytes(&records) <= KEPT_BYTES;
                    let kept = small.then(|| (records.clone(), Rc::clone(&values)));
                    self.producers.contents.insert(name, kept);
                    return (records, values);
                }
            }
        }
    }

    /// `count` new records, and their values' ids.
    fn new_records(&mut self, count: u64) -> Records {
        let from = self.ids.len();
        let records = (0..count)
            .map(|_| {
                let pad = self.rng.below(self.params.value_pad + 1);
                self.record(pad)
            })
            .collect();
        let values: Rc<[ValueId]> = self.ids.drain(from..).collect();
        (records, values)
    }

    /// A new batch of producer `p` to `topic`/`partition` in sequence, taking its
    /// sequence numbers; `records` if given, else a few new ones.
    fn batch_in_sequence(&mut self, p: usize, topic: &str, partition: u32, records: Option<Records>) -> Sent {
        let first_sequence = self.next_sequence(p, topic, partition);
        let records = match records {
            Some(r) => r,
            None => {
                let n = self.rng.between(1, u64::from(self.params.max_batch));
                self.new_records(n)
            }
        };
        let producer = &self.producers.producers[p];
        let batch = ProducerBatch { producer_id: producer.id, epoch: producer.epoch, first_sequence };
        let (records, values) = self.records_named(topic, partition, batch, records);
        let producer = &mut self.producers.producers[p];
        let sent = Sent {
            topic: topic.to_string(),
            partition,
            producer: batch,
            records,
            values,
            in_sequence: true,
            retry: false,
        };
        producer.next.insert((topic.to_string(), partition), sent.next_sequence());
        keep(&mut self.producers.recent, sent.clone());
        sent
    }

    /// A batch in sequence, with one or two more pipelined behind it now and then, and
    /// now and then a retry of it right away (its reply is slow).
    fn in_sequence(&mut self) -> Command {
        let (p, topic, partition) = self.target();
        let first = self.batch_in_sequence(p, &topic, partition, None);
        if self.rng.chance(0.12) {
            self.queue(first.again());
        }
        if self.rng.chance(0.45) {
            for _ in 0..self.rng.between(1, 2) {
                let next = self.batch_in_sequence(p, &topic, partition, None);
                self.queue(next);
            }
        }
        self.send(first)
    }

    /// A batch a broker must refuse (or, for a few, may take): see the module's docs.
    fn hostile(&mut self) -> Command {
        let (p, topic, partition) = self.target();
        let key = (topic.clone(), partition);
        let new_here = !self.producers.producers[p].next.contains_key(&key);
        let next = self.next_sequence(p, &topic, partition);
        let producer = self.producers.producers[p].clone();
        let last = self
            .producers
            .recent
            .iter()
            .rev()
            .find(|s| s.producer.producer_id == producer.id && s.topic == topic && s.partition == partition)
            .cloned();
        let fresh = |w: &mut Workload, n: u64| w.new_records(n);
        let mut batch = ProducerBatch { producer_id: producer.id, epoch: producer.epoch, first_sequence: next };
        let mut partition = partition;
        let (records, values) = match self.rng.below(12) {
            // A gap.
            0 => {
                batch.first_sequence = sequence_after(next, self.rng.between(1, 5) as u32);
                fresh(self, 1)
            }
            // An overlap: from the last sequence sent, or from the last batch's first
            // with another record count.
            1 => {
                batch.first_sequence = sequence_after(next, MAX_SEQUENCE);
                fresh(self, 2)
            }
            2 => {
                let Some(last) = last else { return self.in_sequence() };
                batch.first_sequence = last.producer.first_sequence;
                let n = last.records.len() as u64 + 1;
                fresh(self, n)
            }
            // A stale epoch, once the producer has a newer one.
            3 if producer.epoch > 0 => {
                batch.epoch = producer.epoch - 1;
                fresh(self, 1)
            }
            // The producer bumps its epoch: every partition starts again at 0.
            3 | 4 => {
                let producer = &mut self.producers.producers[p];
                producer.epoch = producer.epoch.saturating_add(1);
                producer.next.clear();
                let sent = self.batch_in_sequence(p, &topic, partition, None);
                return self.send(sent);
            }
            // A new epoch that does not start at 0.
            5 => {
                batch.epoch = producer.epoch.saturating_add(1);
                batch.first_sequence = next.max(1);
                fresh(self, 1)
            }
            // An id never handed out: far off, or the next one the broker would give.
            6 => {
                batch.producer_id = match self.rng.chance(0.5) {
                    true => (1 << 40) + self.rng.below(1 << 20),
                    false => self.producers.largest_id.map_or(0, |l| l + 1 + self.rng.below(3)),
                };
                batch.first_sequence = 0;
                fresh(self, 1)
            }
            // A sequence number past the largest.
            7 => {
                batch.first_sequence = match self.rng.chance(0.5) {
                    true => MAX_SEQUENCE + 1 + self.rng.below(8) as u32,
                    false => u32::MAX,
                };
                fresh(self, 1)
            }
            // No record, at the sequence of the last batch (of one record, a retry of
            // it would be a duplicate) or at the next.
            8 => {
                if let Some(last) = last.filter(|_| self.rng.chance(0.7)) {
                    batch.first_sequence = last.producer.first_sequence;
                }
                (Vec::new(), Rc::from([]))
            }
            // Past the size limits, in sequence: taken if it fits after all.
            9 => {
                let from = self.ids.len();
                let records = self.big_batch();
                let values: Rc<[ValueId]> = self.ids.drain(from..).collect();
                let sent = self.batch_in_sequence(p, &topic, partition, Some((records, values)));
                return self.send(sent);
            }
            // A partition the topic lacks.
            10 => {
                partition = self
                    .known
                    .get(&topic)
                    .map(|k| k.high_watermarks.len() as u32)
                    .filter(|n| *n > 0)
                    .unwrap_or(self.params.max_partitions);
                fresh(self, 1)
            }
            // Sequence numbers about to wrap past `i32::MAX`, for a partition the
            // producer has not written to yet (no state: it starts anywhere).
            _ => {
                if new_here {
                    let start = MAX_SEQUENCE - self.rng.below(3) as u32;
                    self.producers.producers[p].next.insert(key, start);
                }
                let sent = self.batch_in_sequence(p, &topic, partition, None);
                return self.send(sent);
            }
        };
        let (records, values) = self.records_named(&topic, partition, batch, (records, values));
        let sent = Sent { topic, partition, producer: batch, records, values, in_sequence: false, retry: false };
        self.send(sent)
    }
}
