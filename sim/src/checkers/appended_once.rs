//! **appended-once**: an idempotent producer's batch is appended once, whatever its
//! retries and the crashes between them; producer ids are handed out once; every
//! refusal is the typed error the batch earns, and changes nothing.
//!
//! A batch is what its retries share: topic name, partition, producer id, epoch, first
//! sequence number and record count ([`BatchKey`]). Judged against the model
//! ([`crate::model::producers`]):
//!
//! - a batch acknowledged in an incarnation at positions `P` is never answered there
//!   with other positions (a retry is answered with `P`, in flight, after a crash, in
//!   a later life of the broker), and its records are never acknowledged or served at
//!   two offsets of the incarnation's partition;
//! - a batch appended for the first time follows the producer's state there when the
//!   model knows it for certain ([`Known`]): the same epoch and the sequence after the
//!   last batch's, or a newer epoch from sequence 0, or no state at all;
//! - a refusal names a cause the batch has: an out-of-order sequence or a fenced epoch
//!   with the figures of the producer's state when that is known for certain, else of
//!   some batch the producer sent there before; an id no InitProducer had handed out
//!   when it was sent; a sequence past `i32::MAX`, no record, too many, a record or the
//!   batch past its limit; a partition the topic lacks. A batch with one of those
//!   causes is never acknowledged, and a retry of a batch the broker keeps for certain
//!   (acknowledged there, fewer than five batches of the producer since, none of
//!   another epoch) is never refused for its sequence or epoch;
//! - the records of a batch refused every time it was sent never show;
//! - every producer id is handed out once, at epoch 0, and ids come from 0 upward (so
//!   an id at or past the number of InitProducer requests sent was never handed out).
//!
//! The exceptions are the documented ones: under durability log-sync a crash before
//! the first journal commit after an acknowledgement is durable may take the batch's
//! state back, and a batch cut off by a crash may have left its records without its
//! state, so such a batch may be appended again (the runner follows the journal
//! commits; [`crate::model::producers::Producers::storage_executed`]); and a start
//! that cuts a log's tail (rot, reported) forgets the producers of that partition.
//! The broker's bound on producer states (`max_producer_states`, 100,000) is never
//! reached by a seed's workload, so no state is evicted.

use crate::model::producers::{BatchKey, Known, Send, SendOutcome, BATCHES_KEPT};
use crate::model::{label, Model, RecordBytes, Seen};
use crate::violation::{Checker, Flags};
use broker_core::{
    batch_bytes, sequence_after, BrokerError, Command, Config, ProduceRecord, RecordPosition, Reply, RequestId,
    TopicId, MAX_SEQUENCE,
};

/// The broker's limits on a produce.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    record_bytes: usize,
    batch_bytes: u64,
    batch_records: usize,
}

impl Limits {
    pub(super) fn of(config: &Config) -> Limits {
        Limits {
            record_bytes: config.max_record_bytes,
            batch_bytes: config.batch_bytes_limit(),
            batch_records: config.max_batch_records,
        }
    }

    /// Why the broker refuses this batch whatever its producer's state, if it does.
    fn breaks(&self, key: &BatchKey, records: &[ProduceRecord]) -> Option<String> {
        if key.first_sequence > MAX_SEQUENCE {
            return Some(format!("its sequence {} is past {MAX_SEQUENCE}", key.first_sequence));
        }
        if records.is_empty() {
            return Some("it holds no record".into());
        }
        if records.len() > self.batch_records {
            return Some(format!("it holds {} records, over {}", records.len(), self.batch_records));
        }
        if let Some(i) =
            records.iter().position(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.len() > self.record_bytes)
        {
            return Some(format!("its record {i} is over {} bytes", self.record_bytes));
        }
        let bytes = batch_bytes(records);
        (bytes > self.batch_bytes).then(|| format!("it takes {bytes} bytes, over {}", self.batch_bytes))
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::of(&Config::default())
    }
}

/// The checker.
#[derive(Debug, Default)]
pub(super) struct AppendedOnce {
    limits: Limits,
}

/// What the broker should have answered a batch, by its producer's state.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    Append,
    Duplicate(u64),
    Fenced(u16),
    OutOfOrder(u32),
}

impl AppendedOnce {
    pub(super) fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Judges one part of a reply, against the model as folded up to it.
    pub(super) fn saw(&mut self, flags: &mut Flags, model: &Model, seen: &Seen<'_>) {
        match seen {
            Seen::Reply { request, command: Command::InitProducer, reply, .. } => init(flags, model, *request, reply),
            Seen::Reply { request, command: Command::ProduceIdempotent { records, .. }, reply, .. } => {
                let Some(send) = model.producers.send(*request) else { return };
                let mut judge = Judge { flags, model, request: *request, send, limits: self.limits };
                match reply {
                    Ok(Reply::Produced { topic, positions }) => judge.acked(records, *topic, positions),
                    Ok(_) => {} // model-agreement's
                    Err(e) => judge.refused(records, e),
                }
            }
            Seen::Produced { at, record, .. } | Seen::Fetched { at, record, .. } => shows(flags, model, *at, record),
            _ => {}
        }
    }
}

/// An InitProducer's reply: a fresh id, at epoch 0, from 0 upward.
fn init(flags: &mut Flags, model: &Model, request: RequestId, reply: &Result<Reply, BrokerError>) {
    let detail = match reply {
        Ok(Reply::ProducerInitialized { producer_id, epoch }) => {
            let sent = model.producers.inits_issued();
            if let Some(before) = model.producers.handed_out(*producer_id) {
                format!("req{} got producer id {producer_id}, which req{} got before", request.0, before.0)
            } else if *epoch != 0 {
                format!("req{} got producer id {producer_id} at epoch {epoch}, not 0", request.0)
            } else if *producer_id >= sent {
                format!(
                    "req{} got producer id {producer_id}, though only {sent} InitProducer requests were sent (ids \
                     are handed out from 0 upward)",
                    request.0
                )
            } else {
                return;
            }
        }
        Ok(_) | Err(BrokerError::Halted(_) | BrokerError::Unavailable(_)) => return,
        Err(e) => format!("req{} (InitProducer) was refused with {e:?}", request.0),
    };
    flags.flag(Checker::AppendedOnce, detail);
}

/// A record acknowledged or served at `at`: if an idempotent batch carried it, it is
/// at one offset of its partition, and its batch was not refused every time.
fn shows(flags: &mut Flags, model: &Model, at: (TopicId, u32, u64), record: &RecordBytes) {
    let Some((key, batch)) = model.producers.batch_of(&record.value) else { return };
    let (topic, partition, offset) = at;
    if let Some(before) = model.producers.seen_at(&record.value, topic, partition) {
        if before != offset && !batch.may_repeat {
            let detail = format!(
                "{} of {key} is at {topic}/p{partition}@{before} and @{offset}: the batch was appended twice",
                label(&record.value)
            );
            flags.flag(Checker::AppendedOnce, detail);
        }
    }
    let refused = |r: &RequestId| {
        matches!(model.producers.send(*r).map(|s| s.outcome), Some(SendOutcome::Refused { maybe_admitted: false }))
    };
    if batch.sends.iter().all(refused) {
        let detail = format!(
            "{} of {key}, refused every time it was sent, is at {topic}/p{partition}@{offset}",
            label(&record.value)
        );
        flags.flag(Checker::AppendedOnce, detail);
    }
}

/// One reply's judgement.
struct Judge<'a, 'f> {
    flags: &'a mut Flags<'f>,
    model: &'a Model,
    request: RequestId,
    send: &'a Send,
    limits: Limits,
}

impl Judge<'_, '_> {
    fn flag(&mut self, detail: String) {
        let key = &self.send.batch;
        self.flags.flag(Checker::AppendedOnce, format!("req{} ({key}) {detail}", self.request.0));
    }

    fn key(&self) -> &BatchKey {
        &self.send.batch
    }

    /// Whether no InitProducer had handed the batch's producer id out when it was sent.
    fn never_handed_out(&self) -> bool {
        let id = self.key().producer_id;
        id >= self.send.inits_before && self.model.producers.handed_out(id).is_none_or(|r| r > self.request)
    }

    /// The producer's state in incarnation `topic` when the broker admitted the batch.
    fn state_in(&self, topic: TopicId) -> Known {
        let key = self.key();
        let created = self.model.created_by(topic);
        self.model.producers.state_before(&key.topic, key.partition, key.producer_id, topic, self.request, created)
    }

    /// Whether an earlier send of this batch may have appended it, unseen.
    fn maybe_sent_before(&self) -> bool {
        let Some(batch) = self.model.producers.batch(self.key()) else { return false };
        batch
            .sends
            .iter()
            .take_while(|r| **r < self.request)
            .any(|r| self.model.producers.send(*r).is_some_and(|s| s.outcome.maybe()))
    }

    /// An acknowledged batch: within every limit, of a producer id handed out, at the
    /// positions it was acknowledged at before, or, the first time, in sequence.
    fn acked(&mut self, records: &[ProduceRecord], topic: TopicId, positions: &[RecordPosition]) {
        if let Some(why) = self.limits.breaks(self.key(), records) {
            self.flag(format!("was acknowledged though {why}"));
        }
        if self.never_handed_out() {
            let sent = self.send.inits_before;
            self.flag(format!(
                "was acknowledged, though no InitProducer had handed its producer id out ({sent} had been sent)"
            ));
        }
        if let Some(w) = positions.windows(2).find(|w| w[1].offset != w[0].offset + 1) {
            self.flag(format!("was acknowledged at offsets {} then {}", w[0].offset, w[1].offset));
        }
        let first_offset = positions.first().map_or(0, |p| p.offset);
        let Some(batch) = self.model.producers.batch(self.key()) else { return };
        match batch.acks.get(&topic) {
            Some(before) if before.first_offset != first_offset && !batch.state_lost => {
                let detail = format!(
                    "was acknowledged at {topic}@{first_offset}, though req{} was acknowledged at @{}: the batch \
                     was appended again",
                    before.request.0, before.first_offset
                );
                self.flag(detail);
            }
            Some(_) => {}
            None if self.maybe_sent_before() => {} // possibly its earlier send's positions
            None => {
                let answered = |w: &Want| *w == Want::Append || *w == Want::Duplicate(first_offset);
                if let Some(want) = self.want(self.state_in(topic)).filter(|w| !answered(w)) {
                    let detail = format!("was acknowledged at {topic}@{first_offset}, where {}", self.says(&want));
                    self.flag(detail);
                }
            }
        }
    }

    /// What the broker should answer the batch by the producer's state, if it is known.
    fn want(&self, known: Known) -> Option<Want> {
        let key = self.key();
        match known {
            Known::Empty => Some(Want::Append),
            Known::Unknown => None,
            Known::Last { epoch, window, .. } => {
                let (_, last, _) = window[0];
                let dup = window.iter().find(|(f, l, _)| *f == key.first_sequence && *l == key.last_sequence());
                Some(if key.epoch < epoch {
                    Want::Fenced(epoch)
                } else if key.epoch > epoch {
                    if key.first_sequence == 0 {
                        Want::Append
                    } else {
                        Want::OutOfOrder(0)
                    }
                } else if let Some((_, _, offset)) = dup {
                    Want::Duplicate(*offset)
                } else if key.first_sequence != sequence_after(last, 1) {
                    Want::OutOfOrder(sequence_after(last, 1))
                } else {
                    Want::Append
                })
            }
        }
    }

    /// `want`, in words.
    fn says(&self, want: &Want) -> String {
        match want {
            Want::Append => "the producer's state takes it".into(),
            Want::Duplicate(offset) => format!("it is a retry of the batch acknowledged at @{offset}"),
            Want::Fenced(epoch) => format!("the partition had seen epoch {epoch}: it is fenced"),
            Want::OutOfOrder(expected) => format!("sequence {expected} was expected"),
        }
    }

    /// A refused batch: the error names a cause it has.
    fn refused(&mut self, records: &[ProduceRecord], e: &BrokerError) {
        let key = self.key().clone();
        let wrong = match e {
            // An unknown outcome, model-agreement's not-found, a partition that failed.
            BrokerError::Halted(_)
            | BrokerError::Unavailable(_)
            | BrokerError::TopicNotFound { .. }
            | BrokerError::Storage(_) => None,
            BrokerError::InvalidRequest(_) => match self.limits.breaks(&key, records) {
                Some(_) => None,
                None => Some("it breaks no limit".to_string()),
            },
            BrokerError::BatchTooLarge { bytes, max } => {
                let real = batch_bytes(records);
                (*bytes != real || bytes <= max || *max != self.limits.batch_bytes)
                    .then(|| format!("it takes {real} bytes, and the limit is {}", self.limits.batch_bytes))
            }
            BrokerError::PartitionNotFound { name, partition, partitions } => {
                let known = self.send.live_at_issue.and_then(|l| self.model.topics.get(&l)).map(|(_, p)| *p);
                if **name != *key.topic || *partition != key.partition || partition < partitions {
                    Some(format!("it was sent to {}/p{}", key.topic, key.partition))
                } else {
                    known.filter(|k| k != partitions).map(|k| format!("the topic has {k} partitions"))
                }
            }
            BrokerError::UnknownProducer { producer_id } => {
                if *producer_id != key.producer_id {
                    Some(format!("it was sent by producer {}", key.producer_id))
                } else {
                    let by = self.model.producers.handed_out(*producer_id).filter(|r| *r < self.request);
                    by.map(|r| format!("req{} had handed the id out", r.0))
                }
            }
            BrokerError::ProducerFenced { producer_id, epoch, current } => {
                if *producer_id != key.producer_id || *epoch != key.epoch || current <= epoch {
                    Some("its producer or epoch differ".to_string())
                } else {
                    self.sequence_refusal(Want::Fenced(*current))
                }
            }
            BrokerError::OutOfOrderSequence { producer_id, expected, got } => {
                if *producer_id != key.producer_id || *got != key.first_sequence || expected == got {
                    Some("its producer or sequence differ".to_string())
                } else {
                    self.sequence_refusal(Want::OutOfOrder(*expected))
                }
            }
            _ => Some("no such refusal is due to an idempotent batch".to_string()),
        };
        if let Some(why) = wrong {
            self.flag(format!("was refused with {e:?}, but {why}"));
        }
    }

    /// Judges a refusal for the batch's sequence or epoch, `got`: against the
    /// producer's state when it is known for certain, else against the batches the
    /// producer sent there before; and a retry of a batch the broker keeps for certain
    /// is never refused so.
    fn sequence_refusal(&self, got: Want) -> Option<String> {
        let key = self.key();
        if let Some(live) = self.send.live_at_issue {
            if let Some(why) = self.kept_for_certain(live) {
                return Some(why);
            }
            if let Some(want) = self.want(self.state_in(live)) {
                return (want != got).then(|| self.says(&want));
            }
        }
        // Some batch the producer sent there before explains it.
        let explains = |s: &Send| {
            let b = &s.batch;
            match got {
                Want::Fenced(current) => b.epoch == current,
                Want::OutOfOrder(expected) => {
                    (b.epoch == key.epoch && expected == b.next_sequence())
                        || (expected == 0 && key.first_sequence != 0 && b.epoch < key.epoch)
                }
                _ => false,
            }
        };
        let before = self.model.producers.sends_before(&key.topic, key.partition, key.producer_id, self.request);
        let mut earlier = before.filter(|(_, s)| s.outcome != SendOutcome::Refused { maybe_admitted: false });
        (!earlier.any(|(_, s)| explains(s))).then(|| "no batch the producer sent there before explains it".to_string())
    }

    /// Why the broker keeps this batch for certain in incarnation `topic` (it was
    /// acknowledged there, its state lost to nothing, and fewer than five batches of the
    /// producer there, none of another epoch, may have followed it), if it does.
    fn kept_for_certain(&self, topic: TopicId) -> Option<String> {
        let key = self.key();
        let producers = &self.model.producers;
        let batch = producers.batch(key)?;
        let ack = batch.acks.get(&topic)?;
        if batch.state_lost {
            return None;
        }
        // Where it was appended: its earliest send that may have gone there.
        let went_there = |s: &Send| match s.outcome {
            SendOutcome::Refused { maybe_admitted: false } => false,
            SendOutcome::Acked { topic: t, .. } => t == topic,
            _ => s.live_at_issue.is_none_or(|l| l == topic),
        };
        let appended = *batch.sends.iter().find(|r| producers.send(**r).is_some_and(went_there))?;
        let mut since = 0;
        for (r, s) in producers.sends_before(&key.topic, key.partition, key.producer_id, self.request) {
            if r <= appended {
                break;
            }
            if s.batch == *key || !went_there(s) {
                continue;
            }
            if s.batch.epoch != key.epoch {
                return None;
            }
            since += 1;
        }
        (since < BATCHES_KEPT).then(|| {
            format!(
                "it is a retry of the batch req{} acknowledged at {topic}@{}, which the broker keeps ({since} \
                 batches of the producer there since)",
                ack.request.0, ack.first_offset
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::hand_fed::HandFed;
    use crate::violation::Checker;
    use broker_core::{
        BrokerError, Command, OpId, ProduceRecord, ProducerBatch, RecordPosition, Reply, StorageOp, StoredRecord,
        TopicId, TopicSettings,
    };

    /// One client and the checkers, fed by hand: topic `t` is incarnation 1, of one
    /// partition; producer 0 was handed out.
    struct Run(HandFed);

    impl std::ops::Deref for Run {
        type Target = HandFed;
        fn deref(&self) -> &HandFed {
            &self.0
        }
    }

    impl std::ops::DerefMut for Run {
        fn deref_mut(&mut self) -> &mut HandFed {
            &mut self.0
        }
    }

    impl Run {
        fn new(log_sync: bool) -> Run {
            let mut run = Run(HandFed::new());
            run.model.producers.log_sync = log_sync;
            let create = Command::CreateTopic { name: "t".into(), partitions: 1, settings: TopicSettings::default() };
            run.ask(create, Ok(Reply::Created { topic: TopicId(1) }));
            run.ask(Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id: 0, epoch: 0 }));
            run
        }

        /// A fetch of `t`/p0 from `offset` showing these values.
        fn fetched(&mut self, offset: u64, values: &[&str]) {
            let fetch = Command::Fetch { topic: "t".into(), partition: 0, offset, max_records: 10, max_bytes: None };
            let records = (offset..)
                .zip(values)
                .map(|(offset, v)| StoredRecord { offset, key: None, value: v.as_bytes().to_vec().into() })
                .collect();
            let high_watermark = offset + values.len() as u64;
            self.ask(fetch, Ok(Reply::Fetched { topic: TopicId(1), records, high_watermark }));
        }

        /// What appended-once flagged since the last call.
        fn flagged(&mut self) -> Vec<String> {
            let all = self.checkers.take_violations().into_iter();
            all.filter(|v| v.checker == Checker::AppendedOnce).map(|v| v.detail).collect()
        }
    }

    fn batch(producer_id: u64, epoch: u16, first_sequence: u32, values: &[&str]) -> Command {
        Command::ProduceIdempotent {
            topic: "t".into(),
            partition: 0,
            producer: ProducerBatch { producer_id, epoch, first_sequence },
            records: values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect(),
        }
    }

    fn at(first: u64, count: u64) -> Result<Reply, BrokerError> {
        let positions = (first..first + count).map(|offset| RecordPosition { partition: 0, offset }).collect();
        Ok(Reply::Produced { topic: TopicId(1), positions })
    }

    fn out_of_order(expected: u32, got: u32) -> Result<Reply, BrokerError> {
        Err(BrokerError::OutOfOrderSequence { producer_id: 0, expected, got })
    }

    #[test]
    fn a_retry_is_answered_with_its_first_positions_across_a_crash() {
        let mut run = Run::new(false);
        run.ask(batch(0, 0, 0, &["v1-", "v2-"]), at(0, 2));
        run.crash();
        run.ask(batch(0, 0, 0, &["v1-", "v2-"]), at(0, 2));
        assert_eq!(run.flagged(), Vec::<String>::new());
        assert_eq!(run.model.producers.stats.duplicates_across_crash, 1);
        // Appended again after the restart, as a broker that forgot its state would.
        run.ask(batch(0, 0, 0, &["v1-", "v2-"]), at(2, 2));
        let flagged = run.flagged();
        assert!(flagged.iter().any(|f| f.contains("appended again")), "{flagged:?}");
        assert!(flagged.iter().any(|f| f.contains("appended twice")), "{flagged:?}");
        // Its records found at another offset by a fetch, too.
        run.fetched(4, &["v1-"]);
        assert_eq!(run.flagged().len(), 1);
    }

    #[test]
    fn under_log_sync_only_a_crash_before_the_next_journal_commit_excuses_a_second_append() {
        let mut run = Run::new(true);
        run.ask(batch(0, 0, 0, &["v1-"]), at(0, 1));
        run.crash();
        run.ask(batch(0, 0, 0, &["v1-"]), at(1, 1));
        assert_eq!(run.flagged(), Vec::<String>::new(), "its state was never journaled");
        // This one's state is journaled (an append and its sync, issued after the
        // acknowledgement, ran) before the crash: a retry must find it.
        run.ask(batch(0, 0, 1, &["v2-"]), at(2, 1));
        let append = StorageOp::AppendJournal { epoch: 1, records: Vec::new() };
        run.model.producers.storage_issued(OpId(10), &append);
        run.model.producers.storage_issued(OpId(11), &StorageOp::SyncJournal);
        run.model.producers.storage_executed(OpId(10), true);
        run.model.producers.storage_executed(OpId(11), true);
        run.crash();
        run.ask(batch(0, 0, 1, &["v2-"]), at(3, 1));
        assert_eq!(run.flagged().len(), 2, "appended again, and its record twice");
        // A journal append that failed makes nothing durable, though its sync ran.
        run.ask(batch(0, 0, 2, &["v3-"]), at(4, 1));
        run.model.producers.storage_issued(OpId(12), &append);
        run.model.producers.storage_issued(OpId(13), &StorageOp::SyncJournal);
        run.model.producers.storage_executed(OpId(12), false);
        run.model.producers.storage_executed(OpId(13), true);
        run.crash();
        run.ask(batch(0, 0, 2, &["v3-"]), at(5, 1));
        assert_eq!(run.flagged(), Vec::<String>::new());
    }

    #[test]
    fn refusals_name_a_cause_the_batch_has() {
        let mut run = Run::new(false);
        run.ask(batch(0, 0, 0, &["v1-", "v2-"]), at(0, 2));
        // A gap, refused with the sequence the state expects, and with another.
        run.ask(batch(0, 0, 5, &["v3-"]), out_of_order(2, 5));
        assert_eq!(run.flagged(), Vec::<String>::new());
        run.ask(batch(0, 0, 5, &["v4-"]), out_of_order(3, 5));
        // The next batch in sequence, and a retry of the one the broker keeps, refused.
        run.ask(batch(0, 0, 2, &["v5-"]), out_of_order(2, 2));
        run.ask(batch(0, 0, 2, &["v6-"]), out_of_order(3, 2));
        run.ask(batch(0, 0, 0, &["v1-", "v2-"]), out_of_order(2, 0));
        // A stale epoch where none newer was seen; a handed-out id refused as unknown.
        run.ask(batch(0, 0, 2, &["v7-"]), Err(BrokerError::ProducerFenced { producer_id: 0, epoch: 0, current: 1 }));
        run.ask(batch(0, 0, 2, &["v8-"]), Err(BrokerError::UnknownProducer { producer_id: 0 }));
        // A batch within every limit refused as invalid, one too large acknowledged.
        run.ask(batch(0, 0, 2, &["v9-"]), Err(BrokerError::InvalidRequest("no".into())));
        run.ask(batch(0, 0, 2, &[]), at(2, 0));
        assert_eq!(run.flagged().len(), 8, "every refusal but the first, and the empty batch's acknowledgement");
        // What is right: an id never handed out, a sequence past the largest, no record.
        run.ask(batch(7, 0, 0, &["v10-"]), Err(BrokerError::UnknownProducer { producer_id: 7 }));
        run.ask(batch(0, 0, u32::MAX, &["v11-"]), Err(BrokerError::InvalidRequest("past".into())));
        run.ask(batch(0, 0, 2, &[]), Err(BrokerError::InvalidRequest("empty".into())));
        assert_eq!(run.flagged(), Vec::<String>::new());
        // A refused batch's records never show.
        run.fetched(2, &["v10-"]);
        assert_eq!(run.flagged().len(), 1);
    }

    #[test]
    fn a_new_batch_follows_the_state_it_is_judged_against() {
        let mut run = Run::new(false);
        run.ask(batch(0, 0, 40, &["v1-"]), at(0, 1)); // no state: any sequence starts it
        run.ask(batch(0, 0, 42, &["v2-"]), at(1, 1));
        let flagged = run.flagged();
        assert!(flagged.len() == 1 && flagged[0].contains("sequence 41 was expected"), "{flagged:?}");
        run.ask(batch(0, 1, 0, &["v3-"]), at(2, 1)); // a new epoch from 0
                                                     // In flight when the next was admitted: what the broker judged that one against
                                                     // is not known, and nothing is flagged.
        let first = run.send(batch(0, 1, 1, &["v4-"]));
        run.ask(batch(0, 1, 9, &["v5-"]), out_of_order(2, 9));
        run.answer(first, at(3, 1));
        assert_eq!(run.flagged(), Vec::<String>::new());
        run.ask(batch(0, 0, 43, &["v6-"]), at(4, 1)); // the old epoch, fenced
        run.ask(batch(0, 2, 5, &["v7-"]), at(5, 1)); // a newer epoch, not from 0
        assert_eq!(run.flagged().len(), 2);
    }

    #[test]
    fn producer_ids_are_handed_out_once_from_0_at_epoch_0() {
        let mut run = Run::new(false);
        run.ask(Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id: 1, epoch: 0 }));
        assert_eq!(run.flagged(), Vec::<String>::new());
        run.crash();
        run.ask(Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id: 1, epoch: 0 }));
        run.ask(Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id: 3, epoch: 1 }));
        run.ask(Command::InitProducer, Ok(Reply::ProducerInitialized { producer_id: 9, epoch: 0 }));
        assert_eq!(run.flagged().len(), 3, "twice, at epoch 1, past the requests sent");
        // An id no InitProducer could have handed out is never acknowledged.
        run.ask(batch(1 << 40, 0, 0, &["v1-"]), at(0, 1));
        assert_eq!(run.flagged().len(), 1);
    }
}
