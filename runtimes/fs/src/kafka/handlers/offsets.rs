//! ListOffsets and OffsetForLeaderEpoch: where a partition's offsets begin and end,
//! and where a leader epoch (an incarnation) ends.

use super::{epoch_mismatch, leader_epoch, Context, Outcome, Pending};
use crate::kafka::apis::Response;
use crate::kafka::errors::code;
use crate::kafka::Answer;
use broker_core::{Command, Reply};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// ListOffsets; the leader epoch goes in the answer from version 4 on (it is not a field
/// of earlier versions, which then could not be encoded).
/// A partition named twice in one request is answered `INVALID_REQUEST` at each
/// mention, as Kafka answers it.
pub(super) fn list_offsets(ctx: &Context, v: i16, r: ListOffsetsRequest) -> Pending {
    let mut named: BTreeMap<(TopicName, i32), usize> = BTreeMap::new();
    for t in &r.topics {
        for p in &t.partitions {
            *named.entry((t.name.clone(), p.partition_index)).or_default() += 1;
        }
    }
    let topics = described(ctx, r.topics, |t| &t.name);
    Box::pin(async move {
        let mut responses = Vec::new();
        for (topic, answer) in topics {
            let described = answer.get().await;
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1);
                    let found = match &described {
                        _ if named[&(topic.name.clone(), p.partition_index)] > 1 => Err(E::InvalidRequest.code()),
                        Ok(Reply::Described(t)) => usize::try_from(p.partition_index)
                            .ok()
                            .and_then(|i| t.high_watermarks.get(i).copied())
                            .ok_or(E::UnknownTopicOrPartition.code())
                            .and_then(|hw| match epoch_mismatch(p.current_leader_epoch, t.id) {
                                Some(error) => Err(error),
                                None => Ok((hw, t.log_start, leader_epoch(t.id))),
                            }),
                        Ok(_) => Err(E::UnknownServerError.code()),
                        Err(e) => Err(code(e)),
                    };
                    let found = found.map(|(hw, start, epoch)| (hw, start, if v >= 4 { epoch } else { -1 }));
                    match (found, p.timestamp) {
                        (Err(error), _) => response.with_error_code(error).with_offset(-1),
                        // Latest, and the offset of the newest timestamp: the high watermark.
                        (Ok((hw, _, epoch)), -1) => response.with_offset(hw as i64).with_leader_epoch(epoch),
                        // Earliest: the first offset (nothing is ever cut from the front).
                        (Ok((_, start, epoch)), -2) => response.with_offset(start as i64).with_leader_epoch(epoch),
                        // Lookups by time need a time index, which this broker does not keep.
                        (Ok(_), _) => response.with_error_code(E::UnsupportedForMessageFormat.code()).with_offset(-1),
                    }
                })
                .collect();
            responses.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
        }
        Outcome::Respond(Response::ListOffsets(ListOffsetsResponse::default().with_topics(responses)))
    })
}

/// OffsetForLeaderEpoch: where a leader epoch ends. Each incarnation has one epoch (its
/// id): the current one ends at the high watermark; an older one (a deleted incarnation
/// of the name) ends where this incarnation begins, as Kafka answers for an epoch older
/// than its log's first (every position of it lies below, so a consumer that validates
/// its position then meets `OFFSET_OUT_OF_RANGE` and resets); a newer one is unknown.
pub(super) fn offsets_for_epochs(ctx: &Context, r: OffsetForLeaderEpochRequest) -> Pending {
    use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    let topics = described(ctx, r.topics, |t| &t.topic);
    Box::pin(async move {
        let mut results = Vec::new();
        for (topic, answer) in topics {
            let described = answer.get().await;
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let out =
                        EpochEndOffset::default().with_partition(p.partition).with_leader_epoch(-1).with_end_offset(-1);
                    let t = match &described {
                        Ok(Reply::Described(t)) => t,
                        Ok(_) => return out.with_error_code(E::UnknownServerError.code()),
                        Err(e) => return out.with_error_code(code(e)),
                    };
                    let hw = usize::try_from(p.partition).ok().and_then(|i| t.high_watermarks.get(i).copied());
                    let Some(hw) = hw else { return out.with_error_code(E::UnknownTopicOrPartition.code()) };
                    if let Some(error) = epoch_mismatch(p.current_leader_epoch, t.id) {
                        return out.with_error_code(error);
                    }
                    let epoch = leader_epoch(t.id);
                    match p.leader_epoch {
                        e if e == epoch => out.with_leader_epoch(epoch).with_end_offset(hw as i64),
                        e if e < epoch => out.with_leader_epoch(e).with_end_offset(t.log_start as i64),
                        _ => out,
                    }
                })
                .collect();
            results.push(OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions));
        }
        Outcome::Respond(Response::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(results)))
    })
}

/// Each topic of a request with a DescribeTopic submitted for it, in order.
fn described<T>(ctx: &Context, topics: Vec<T>, name: impl Fn(&T) -> &TopicName) -> Vec<(T, Answer)> {
    topics
        .into_iter()
        .map(|t| {
            let answer = ctx.core.submit(Command::DescribeTopic { name: name(&t).0.to_string() });
            (t, answer)
        })
        .collect()
}
