//! Idempotent producers: handing out producer ids, and produces deduplicated by their
//! producer's sequence numbers ([`crate::producers`] has the rules).
//!
//! A batch's state is taken at admission, so that a producer's next batch, sent before
//! this one is acknowledged, is judged against it, as Kafka's pipelined producers need;
//! it is journaled (`ProducerAppended`) once the batch is synced, in the same group
//! commit as the log's new end, so that every acknowledged batch's state is durable
//! when the produce is acknowledged, and a snapshot holds only journaled state. A retry
//! of a batch still in flight is answered when the batch is.

use super::{Broker, PendingRetry};
use crate::command::{ProduceRecord, RecordPosition, Reply};
use crate::error::BrokerError;
use crate::ids::{LogId, RequestId};
use crate::journal::JournalRecord;
use crate::producers::{ProducerBatch, Sequencing, MAX_SEQUENCE};

impl Broker {
    pub(super) fn init_producer(&mut self, request: RequestId) -> Result<Option<Reply>, BrokerError> {
        let id = self.next_producer_id;
        // Kafka's producer ids are signed 64-bit: the front ends never see a larger one.
        if id >= i64::MAX as u64 {
            return Err(BrokerError::Unavailable("no producer id is left".into()));
        }
        self.next_producer_id += 1;
        self.journal.push(JournalRecord::ProducerIdAllocated { id });
        self.answer_when_durable(request, Reply::ProducerInitialized { producer_id: id, epoch: 0 });
        Ok(None)
    }

    pub(super) fn produce_idempotent(
        &mut self,
        request: RequestId,
        topic: &str,
        partition: u32,
        producer: ProducerBatch,
        records: Vec<ProduceRecord>,
    ) -> Result<Option<Reply>, BrokerError> {
        let t = self.visible(topic)?;
        let (id, partitions) = (t.meta.id, t.meta.partitions);
        let Some(part) = t.partitions.get(partition as usize) else {
            return Err(BrokerError::PartitionNotFound { name: topic.to_string(), partition, partitions });
        };
        if producer.producer_id >= self.next_producer_id {
            return Err(BrokerError::UnknownProducer { producer_id: producer.producer_id });
        }
        if producer.first_sequence > MAX_SEQUENCE {
            return Err(BrokerError::InvalidRequest(format!(
                "sequence number {} is past the largest, {MAX_SEQUENCE}",
                producer.first_sequence
            )));
        }
        let Ok(count) = u32::try_from(records.len()) else {
            return Err(BrokerError::InvalidRequest("more records than sequence numbers".into()));
        };
        // The records are held to every limit before the sequence is looked at, as Kafka
        // does: a batch with no record, or one past a limit, is refused even where its
        // sequence numbers are those of a batch kept, never answered as its retry.
        crate::placement::check_produce(&self.config, topic, partitions, Some(partition), &records)?;
        let log = LogId { topic: id, partition };
        let (first_offset, high_watermark) = (part.next_offset, part.high_watermark);
        match self.producers.check(log, producer, count)? {
            Sequencing::Duplicate { first_offset } => {
                let positions =
                    (0..u64::from(count)).map(|i| RecordPosition { partition, offset: first_offset + i }).collect();
                let end = first_offset + u64::from(count);
                if end <= high_watermark {
                    return Ok(Some(Reply::Produced { topic: id, positions }));
                }
                // The first send is still in flight: answer with it.
                self.waiting_retries.entry((id, partition)).or_default().push(PendingRetry { end, request, positions });
                Ok(None)
            }
            Sequencing::Append => {
                let answered = self.produce(request, topic, Some(partition), records)?;
                self.producers.append(log, producer, count, first_offset);
                let record = JournalRecord::ProducerAppended { log, batch: producer, records: count, first_offset };
                let write = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(partition as usize));
                if let Some(w) = write.and_then(|p| p.writes.back_mut()) {
                    w.producer = Some(record);
                }
                Ok(answered)
            }
        }
    }

    /// Answers the retries of batches of partition `partition` of `id` that are now
    /// acknowledged, or that will never be (the topic is deleted).
    pub(super) fn answer_retries(&mut self, id: crate::ids::TopicId, partition: u32) {
        let Some(waiting) = self.waiting_retries.get_mut(&(id, partition)) else { return };
        let topic = self.topics.get(&id);
        let gone = topic.is_none_or(|t| t.deletion.is_some());
        let hw = topic.and_then(|t| t.partitions.get(partition as usize)).map_or(0, |p| p.high_watermark);
        let (done, left): (Vec<_>, Vec<_>) = std::mem::take(waiting).into_iter().partition(|r| gone || r.end <= hw);
        if left.is_empty() {
            self.waiting_retries.remove(&(id, partition));
        } else {
            *waiting = left;
        }
        let name = topic.map(|t| t.meta.name.clone()).unwrap_or_default();
        for r in done {
            let reply = if gone {
                Err(BrokerError::TopicNotFound { name: name.clone() })
            } else {
                Ok(Reply::Produced { topic: id, positions: r.positions })
            };
            self.reply(r.request, reply);
        }
    }
}
