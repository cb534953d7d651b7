//! ListOffsets: where a partition's offsets begin and end.

use super::context::{described, described_partition, leader_epoch, Context, Outcome, Pending};
use crate::apis::Response;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
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
                    let found = match named[&(topic.name.clone(), p.partition_index)] {
                        1 => described_partition(&described, p.partition_index, p.current_leader_epoch)
                            .map(|(t, hw)| (hw, t.log_start, leader_epoch(t.id))),
                        _ => Err(E::InvalidRequest.code()),
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
