//! Idempotent producers' state: for each partition log and producer, its epoch and its
//! latest batches' sequence numbers and offsets, so that a retried batch is answered
//! with the offsets it got the first time instead of being appended again, and a batch
//! out of sequence is refused, as Kafka does.
//!
//! Kafka's rules ([`ProducerStates::check`]): a producer with no state on a partition
//! may start at any sequence (its state may have been evicted, or its topic created
//! again); an older epoch is fenced; a newer epoch starts at sequence 0; within an
//! epoch, a batch is a duplicate of one of the last [`BATCHES_KEPT`] batches (same first
//! and last sequence) or follows the last one exactly. Sequences wrap from `i32::MAX`
//! to 0.
//!
//! The state is bounded: at most a configured number of (partition, producer) entries
//! are kept, and the one touched least recently is forgotten first. A forgotten
//! producer is one with no state: its next batch is accepted whatever its sequence, so
//! a retry of its last batch would be appended again.

use crate::error::BrokerError;
use crate::ids::{LogId, TopicId};
use std::collections::{BTreeMap, VecDeque};

/// How many of a producer's latest batches are kept per partition: Kafka's, which is
/// also the most batches a Kafka producer has in flight to one partition.
pub const BATCHES_KEPT: usize = 5;

/// The largest sequence number; the next one is 0.
pub const MAX_SEQUENCE: u32 = i32::MAX as u32;

/// Who sent a produce, for deduplication: a producer id from
/// [`crate::Command::InitProducer`], its epoch and the sequence number of the batch's
/// first record (each record takes one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerBatch {
    /// The producer id.
    pub producer_id: u64,
    /// The producer's epoch.
    pub epoch: u16,
    /// The first record's sequence number, `0..=`[`MAX_SEQUENCE`].
    pub first_sequence: u32,
}

/// One batch a producer appended to a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SequencedBatch {
    /// The first record's sequence number.
    pub first_sequence: u32,
    /// The last record's sequence number.
    pub last_sequence: u32,
    /// The first record's offset; the others follow it densely.
    pub first_offset: u64,
}

impl SequencedBatch {
    /// One past its last record's offset.
    pub fn end(&self) -> u64 {
        let records = (u64::from(self.last_sequence) + u64::from(MAX_SEQUENCE) + 1 - u64::from(self.first_sequence))
            % (u64::from(MAX_SEQUENCE) + 1)
            + 1;
        self.first_offset + records
    }
}

/// One producer's state on one partition, as a snapshot records it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerState {
    /// The partition's log (by incarnation).
    pub log: LogId,
    /// The producer id.
    pub producer_id: u64,
    /// Its epoch.
    pub epoch: u16,
    /// Its latest batches, oldest first, at most [`BATCHES_KEPT`].
    pub batches: Vec<SequencedBatch>,
}

/// What [`ProducerStates::check`] found a batch to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequencing {
    /// New: append it.
    Append,
    /// A retry of a batch already appended at this first offset.
    Duplicate {
        /// Where the first time put its first record.
        first_offset: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    epoch: u16,
    batches: VecDeque<SequencedBatch>,
    /// When it was last touched, in [`ProducerStates::clock`] ticks.
    touched: u64,
}

/// Every kept (partition, producer) state, bounded in number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStates {
    entries: BTreeMap<(LogId, u64), Entry>,
    /// The entries by when they were last touched, oldest first.
    by_age: BTreeMap<u64, (LogId, u64)>,
    clock: u64,
    max_entries: usize,
}

impl Default for ProducerStates {
    /// No state, unbounded (as replay keeps it, before the broker bounds it).
    fn default() -> ProducerStates {
        ProducerStates::new(usize::MAX)
    }
}

impl ProducerStates {
    /// No state, keeping at most `max_entries` (partition, producer) entries.
    pub fn new(max_entries: usize) -> ProducerStates {
        ProducerStates { entries: BTreeMap::new(), by_age: BTreeMap::new(), clock: 0, max_entries }
    }

    /// Keeps at most `max_entries` from now on, forgetting the oldest past it.
    pub fn bound(&mut self, max_entries: usize) {
        self.max_entries = max_entries;
        self.evict();
    }

    /// How `batch`, of `records` records, stands against the state of `log`: to append,
    /// a duplicate, or refused (fenced epoch, sequence out of order). Changes nothing.
    pub fn check(&self, log: LogId, batch: ProducerBatch, records: u32) -> Result<Sequencing, BrokerError> {
        let last_sequence = sequence_after(batch.first_sequence, records.saturating_sub(1));
        let Some(e) = self.entries.get(&(log, batch.producer_id)) else { return Ok(Sequencing::Append) };
        if batch.epoch < e.epoch {
            return Err(BrokerError::ProducerFenced {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current: e.epoch,
            });
        }
        if batch.epoch > e.epoch {
            if batch.first_sequence != 0 {
                return Err(BrokerError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected: 0,
                    got: batch.first_sequence,
                });
            }
            return Ok(Sequencing::Append);
        }
        if let Some(b) = e.batches.iter().find(|b| b.first_sequence == batch.first_sequence) {
            if b.last_sequence == last_sequence {
                return Ok(Sequencing::Duplicate { first_offset: b.first_offset });
            }
        }
        let expected = e.batches.back().map_or(0, |b| sequence_after(b.last_sequence, 1));
        if batch.first_sequence != expected {
            return Err(BrokerError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected,
                got: batch.first_sequence,
            });
        }
        Ok(Sequencing::Append)
    }

    /// Records that `batch` of `records` records was appended to `log` from
    /// `first_offset` (after [`ProducerStates::check`] said to append it).
    pub fn append(&mut self, log: LogId, batch: ProducerBatch, records: u32, first_offset: u64) {
        let appended = SequencedBatch {
            first_sequence: batch.first_sequence,
            last_sequence: sequence_after(batch.first_sequence, records.saturating_sub(1)),
            first_offset,
        };
        let key = (log, batch.producer_id);
        let touched = self.tick();
        let e = match self.entries.get_mut(&key) {
            Some(e) => {
                self.by_age.remove(&e.touched);
                e
            }
            None => self.entries.entry(key).or_insert(Entry { epoch: batch.epoch, batches: VecDeque::new(), touched }),
        };
        if batch.epoch != e.epoch {
            e.epoch = batch.epoch;
            e.batches.clear();
        }
        e.batches.push_back(appended);
        while e.batches.len() > BATCHES_KEPT {
            e.batches.pop_front();
        }
        e.touched = touched;
        self.by_age.insert(touched, key);
        self.evict();
    }

    /// Forgets every producer of every partition of `topic` (its tombstone is written).
    pub fn drop_topic(&mut self, topic: TopicId) {
        let from = (LogId { topic, partition: 0 }, 0);
        let gone: Vec<(LogId, u64)> =
            self.entries.range(from..).map(|(k, _)| *k).take_while(|(log, _)| log.topic == topic).collect();
        for key in gone {
            if let Some(e) = self.entries.remove(&key) {
                self.by_age.remove(&e.touched);
            }
        }
    }

    /// Forgets every producer of `log` with a batch reaching past `end` (the log was cut
    /// there); whether one was.
    pub fn forget_beyond(&mut self, log: LogId, end: u64) -> bool {
        let from = (log, 0);
        let gone: Vec<(LogId, u64)> = self
            .entries
            .range(from..)
            .take_while(|((l, _), _)| *l == log)
            .filter(|(_, e)| e.batches.iter().any(|b| b.end() > end))
            .map(|(k, _)| *k)
            .collect();
        for key in &gone {
            if let Some(e) = self.entries.remove(key) {
                self.by_age.remove(&e.touched);
            }
        }
        !gone.is_empty()
    }

    /// How many (partition, producer) entries are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, least recently touched first: replayed in this order, a snapshot
    /// keeps which one is forgotten next.
    pub fn to_snapshot(&self) -> Vec<ProducerState> {
        self.by_age
            .values()
            .filter_map(|key| self.entries.get(key).map(|e| (key, e)))
            .map(|(&(log, producer_id), e)| ProducerState {
                log,
                producer_id,
                epoch: e.epoch,
                batches: e.batches.iter().copied().collect(),
            })
            .collect()
    }

    /// Puts back one entry of a snapshot, as the most recently touched.
    pub fn restore(&mut self, s: &ProducerState) {
        let key = (s.log, s.producer_id);
        if let Some(old) = self.entries.remove(&key) {
            self.by_age.remove(&old.touched);
        }
        let touched = self.tick();
        let batches = s.batches.iter().rev().take(BATCHES_KEPT).rev().copied().collect();
        self.entries.insert(key, Entry { epoch: s.epoch, batches, touched });
        self.by_age.insert(touched, key);
        self.evict();
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn evict(&mut self) {
        while self.entries.len() > self.max_entries {
            let Some((_, key)) = self.by_age.pop_first() else { return };
            self.entries.remove(&key);
        }
    }
}

/// The sequence number `n` after `s`, wrapping past [`MAX_SEQUENCE`] to 0.
pub fn sequence_after(s: u32, n: u32) -> u32 {
    ((u64::from(s) + u64::from(n)) % (u64::from(MAX_SEQUENCE) + 1)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: LogId = LogId { topic: TopicId(3), partition: 1 };

    fn batch(producer_id: u64, epoch: u16, first_sequence: u32) -> ProducerBatch {
        ProducerBatch { producer_id, epoch, first_sequence }
    }

    #[test]
    fn kafka_s_sequence_rules() {
        let mut s = ProducerStates::new(100);
        // No state: any first sequence starts it.
        assert_eq!(s.check(LOG, batch(7, 0, 40), 3), Ok(Sequencing::Append));
        s.append(LOG, batch(7, 0, 40), 3, 100);
        // A retry of it, and of none other, is a duplicate.
        assert_eq!(s.check(LOG, batch(7, 0, 40), 3), Ok(Sequencing::Duplicate { first_offset: 100 }));
        assert!(matches!(s.check(LOG, batch(7, 0, 40), 2), Err(BrokerError::OutOfOrderSequence { expected: 43, .. })));
        assert_eq!(s.check(LOG, batch(7, 0, 43), 1), Ok(Sequencing::Append));
        assert!(matches!(s.check(LOG, batch(7, 0, 44), 1), Err(BrokerError::OutOfOrderSequence { got: 44, .. })));
        // An older epoch is fenced; a newer one starts at 0.
        s.append(LOG, batch(7, 2, 0), 1, 103);
        assert!(matches!(s.check(LOG, batch(7, 1, 1), 1), Err(BrokerError::ProducerFenced { current: 2, .. })));
        assert!(matches!(s.check(LOG, batch(7, 3, 5), 1), Err(BrokerError::OutOfOrderSequence { expected: 0, .. })));
        assert_eq!(s.check(LOG, batch(7, 3, 0), 1), Ok(Sequencing::Append));
        // The epoch's batches replaced the old ones.
        assert!(matches!(s.check(LOG, batch(7, 2, 40), 3), Err(BrokerError::OutOfOrderSequence { .. })));
        // Producers and partitions are apart.
        assert_eq!(s.check(LOG, batch(8, 0, 9), 1), Ok(Sequencing::Append));
        assert_eq!(s.check(LogId { partition: 0, ..LOG }, batch(7, 0, 9), 1), Ok(Sequencing::Append));
    }

    #[test]
    fn sequences_wrap_and_only_the_last_five_batches_are_duplicates() {
        let mut s = ProducerStates::new(100);
        s.append(LOG, batch(1, 0, MAX_SEQUENCE - 1), 3, 0);
        assert_eq!(s.check(LOG, batch(1, 0, 1), 1), Ok(Sequencing::Append), "wrapped past i32::MAX");
        let mut next = 1;
        for i in 0..6 {
            s.append(LOG, batch(1, 0, next), 2, 3 + 2 * i);
            next += 2;
        }
        assert!(s.check(LOG, batch(1, 0, 1), 2).is_err(), "the first of six is no longer known");
        assert_eq!(s.check(LOG, batch(1, 0, 3), 2), Ok(Sequencing::Duplicate { first_offset: 5 }));
    }

    #[test]
    fn the_least_recently_touched_entry_goes_first_and_a_snapshot_keeps_the_order() {
        let mut s = ProducerStates::new(2);
        s.append(LOG, batch(1, 0, 0), 1, 0);
        s.append(LOG, batch(2, 0, 0), 1, 1);
        s.append(LOG, batch(1, 0, 1), 1, 2); // touches 1 again
        s.append(LOG, batch(3, 0, 0), 1, 3); // evicts 2
        assert_eq!(s.check(LOG, batch(2, 0, 5), 1), Ok(Sequencing::Append), "2 was forgotten");
        assert!(s.check(LOG, batch(1, 0, 5), 1).is_err(), "1 is kept");
        let mut back = ProducerStates::new(2);
        for e in s.to_snapshot() {
            back.restore(&e);
        }
        assert_eq!(back.to_snapshot(), s.to_snapshot());
        back.append(LOG, batch(4, 0, 0), 1, 4); // evicts 1, the older of 1 and 3
        assert_eq!(back.check(LOG, batch(1, 0, 9), 1), Ok(Sequencing::Append));
        assert_eq!(back.check(LOG, batch(3, 0, 0), 1), Ok(Sequencing::Duplicate { first_offset: 3 }));
    }

    #[test]
    fn a_cut_log_forgets_the_producers_whose_batches_it_lost() {
        let mut s = ProducerStates::new(10);
        s.append(LOG, batch(1, 0, MAX_SEQUENCE), 2, 10); // wraps: offsets 10 and 11
        s.append(LOG, batch(2, 0, 0), 1, 12);
        assert!(!s.forget_beyond(LOG, 13));
        assert!(s.forget_beyond(LOG, 12));
        assert_eq!(s.check(LOG, batch(2, 0, 0), 1), Ok(Sequencing::Append), "2's batch at 12 was cut");
        assert_eq!(s.check(LOG, batch(1, 0, MAX_SEQUENCE), 2), Ok(Sequencing::Duplicate { first_offset: 10 }));
    }

    #[test]
    fn a_dropped_topic_keeps_no_producer() {
        let mut s = ProducerStates::new(10);
        s.append(LOG, batch(1, 0, 0), 1, 0);
        s.append(LogId { topic: TopicId(4), partition: 0 }, batch(1, 0, 0), 1, 0);
        s.drop_topic(TopicId(3));
        assert_eq!(s.len(), 1);
        assert_eq!(s.check(LOG, batch(1, 0, 0), 1), Ok(Sequencing::Append));
    }
}
