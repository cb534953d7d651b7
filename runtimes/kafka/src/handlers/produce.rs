//! Produce: each partition's batches checked and appended whole ([`crate::stored`]).

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use crate::{batches, stored};
use broker_core::{batch_bytes, Command, ProducerBatch, Reply};
use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// One partition of a produce: refused at once, or submitted to the core.
enum Appending {
    Refused(i16, String),
    Submitted(Answer),
}

pub(super) fn produce(ctx: &Context, v: i16, r: ProduceRequest) -> Pending {
    let acks = r.acks;
    let valid_acks = matches!(acks, -1..=1);
    let mut named: BTreeMap<(&str, i32), usize> = BTreeMap::new();
    for topic in &r.topic_data {
        for p in &topic.partition_data {
            *named.entry((topic.name.0.as_str(), p.index)).or_default() += 1;
        }
    }
    let mut topics = Vec::new();
    for topic in &r.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in &topic.partition_data {
            let appending = if !valid_acks {
                Appending::Refused(E::InvalidRequiredAcks.code(), format!("acks={acks}: use 0, 1 or -1 (all)"))
            } else if named[&(topic.name.0.as_str(), p.index)] > 1 {
                // Kafka keeps one of them; which one a client meant is anyone's guess, so
                // neither is appended.
                let message = format!("partition {} of {name:?} is named twice in one request", p.index);
                Appending::Refused(E::InvalidRequest.code(), message)
            } else {
                append(ctx, v, &name, p.index, p.records.as_ref())
            };
            partitions.push((p.index, appending));
        }
        topics.push((topic.name.clone(), partitions));
    }
    Box::pin(async move {
        let mut responses = Vec::new();
        for (name, partitions) in topics {
            let mut answers = Vec::new();
            for (index, appending) in partitions {
                let response = PartitionProduceResponse::default()
                    .with_index(index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1);
                let response = match appending {
                    Appending::Refused(error, message) => {
                        response.with_error_code(error).with_error_message(Some(text(message)))
                    }
                    Appending::Submitted(answer) => match answer.get().await {
                        // The log start offset stays -1 (unknown): the core's reply does not
                        // carry it, and no client acts on it.
                        Ok(Reply::Produced { positions, .. }) => {
                            response.with_base_offset(positions.first().map_or(-1, |p| p.offset as i64))
                        }
                        Ok(other) => response
                            .with_error_code(E::UnknownServerError.code())
                            .with_error_message(Some(text(format!("unexpected reply {other:?}")))),
                        Err(e) => response.with_error_code(code(&e)).with_error_message(Some(text(e.to_string()))),
                    },
                };
                answers.push(response);
            }
            responses.push(TopicProduceResponse::default().with_name(name).with_partition_responses(answers));
        }
        if acks != 0 {
            return Outcome::Respond(Response::Produce(ProduceResponse::default().with_responses(responses)));
        }
        // acks=0: the client waits for nothing, and learns of a failure only by the
        // connection closing (it then refreshes its metadata), as Kafka tells it.
        let failed = responses.iter().flat_map(|t| t.partition_responses.iter()).find(|p| p.error_code != 0);
        match failed {
            None => Outcome::Silent,
            Some(p) => Outcome::Close(format!(
                "a produce with acks=0 failed (error {}: {}); closing the connection, the only way to tell the client",
                p.error_code,
                p.error_message.as_deref().unwrap_or("")
            )),
        }
    })
}

/// Checks one partition's records and submits them.
fn append(ctx: &Context, v: i16, topic: &str, index: i32, records: Option<&Bytes>) -> Appending {
    let Ok(partition) = u32::try_from(index) else {
        return Appending::Refused(E::UnknownTopicOrPartition.code(), format!("partition {index}"));
    };
    let limits = &ctx.limits;
    let bounds = batches::Bounds {
        batch_bytes: limits.core.max_record_bytes,
        records: limits.core.max_batch_records,
        zstd: v >= batches::ZSTD_PRODUCE_VERSION,
    };
    let batches::Accepted { batches, producer } = match batches::accept(&records.cloned().unwrap_or_default(), bounds) {
        Ok(accepted) => accepted,
        Err(e) => {
            let error = match e {
                batches::BatchError::Corrupt(_) => E::CorruptMessage,
                batches::BatchError::Unsupported(_) => E::UnsupportedCompressionType,
                batches::BatchError::TooLarge(_) => E::MessageTooLarge,
                batches::BatchError::Refused(_) | batches::BatchError::Invalid(_) => E::InvalidRecord,
            };
            return Appending::Refused(error.code(), e.to_string());
        }
    };
    let records = stored::core_records(batches);
    // By bytes too: continuations take room in the core's batch.
    let bytes = batch_bytes(&records);
    if bytes > limits.core.batch_bytes_limit() {
        let message = format!(
            "{} records take {bytes} bytes as stored, over the limit of {} bytes for one partition of one request",
            records.len(),
            limits.core.batch_bytes_limit()
        );
        return Appending::Refused(E::MessageTooLarge.code(), message);
    }
    let command = match producer {
        None => Command::Produce { topic: topic.to_string(), partition: Some(partition), records },
        // `split` checked all three at least 0, and they fit: an id below 2^63, an epoch
        // below 2^15, a sequence below 2^31.
        Some(p) => Command::ProduceIdempotent {
            topic: topic.to_string(),
            partition,
            producer: ProducerBatch {
                producer_id: p.id as u64,
                epoch: p.epoch as u16,
                first_sequence: p.base_sequence as u32,
            },
            records,
        },
    };
    Appending::Submitted(ctx.core.submit(command))
}
