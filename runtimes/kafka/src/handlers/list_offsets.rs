//! ListOffsets: where a partition's offsets begin and end, and where the records of a
//! given time begin.

use super::context::{described, described_partition, leader_epoch, Context, Outcome, Pending};
use crate::apis::Response;
use crate::time_index::{Partition, MAX_TIMESTAMP};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// The ListOffsets version from which [`MAX_TIMESTAMP`] may be asked.
const MAX_TIMESTAMP_VERSION: i16 = 7;

/// ListOffsets; the leader epoch goes in the answer from version 4 on (it is not a field
/// of earlier versions, which then could not be encoded).
/// A partition named twice in one request is answered `INVALID_REQUEST` at each
/// mention, as Kafka answers it. For each partition, by its timestamp:
/// - -1 (latest): the high watermark; -2 (earliest): the first offset; timestamp -1.
/// - `T >= 0`: the first offset whose record's timestamp is at least `T`, with that
///   timestamp (the time index's lookup, [`crate::time_index`]); if no record
///   qualifies, offset -1 and timestamp -1 with no error, as Kafka answers.
/// - -3 (the largest timestamp, version 7 on): the first record holding it, and it.
/// - Any other negative timestamp, or -3 before version 7: `UNSUPPORTED_VERSION`, as
///   Kafka answers a lookup its version does not know.
pub(super) fn list_offsets(ctx: &Context, v: i16, r: ListOffsetsRequest) -> Pending {
    let mut named: BTreeMap<(TopicName, i32), usize> = BTreeMap::new();
    for t in &r.topics {
        for p in &t.partitions {
            *named.entry((t.name.clone(), p.partition_index)).or_default() += 1;
        }
    }
    let topics = described(ctx, r.topics, |t| &t.name);
    let (core, times) = (ctx.core.clone(), ctx.times.clone());
    Box::pin(async move {
        let mut responses = Vec::new();
        for (topic, answer) in topics {
            let described = answer.get().await;
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let response =
                    ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index).with_timestamp(-1);
                let found = match named[&(topic.name.clone(), p.partition_index)] {
                    1 => described_partition(&described, p.partition_index, p.current_leader_epoch),
                    _ => Err(E::InvalidRequest.code()),
                };
                let (t, hw) = match found {
                    Ok(found) => found,
                    Err(error) => {
                        partitions.push(response.with_error_code(error).with_offset(-1));
                        continue;
                    }
                };
                let epoch = if v >= 4 { leader_epoch(t.id) } else { -1 };
                let response = match p.timestamp {
                    // Latest, the high watermark.
                    -1 => response.with_offset(hw as i64).with_leader_epoch(epoch),
                    // Earliest: the first offset (nothing is ever cut from the front).
                    -2 => response.with_offset(t.log_start as i64).with_leader_epoch(epoch),
                    ts if ts >= 0 || (ts == MAX_TIMESTAMP && v >= MAX_TIMESTAMP_VERSION) => {
                        let partition = Partition {
                            topic: &t.name,
                            id: t.id,
                            // `described_partition` found it, so it is not negative.
                            partition: p.partition_index as u32,
                            log_start: t.log_start,
                            high_watermark: hw,
                        };
                        match times.lookup(&core, &partition, ts).await {
                            Ok(Some(found)) => response
                                .with_offset(found.offset as i64)
                                .with_timestamp(found.timestamp)
                                .with_leader_epoch(epoch),
                            Ok(None) => response.with_offset(-1),
                            Err(error) => response.with_error_code(error).with_offset(-1),
                        }
                    }
                    _ => response.with_error_code(E::UnsupportedVersion.code()).with_offset(-1),
                };
                partitions.push(response);
            }
            responses.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
        }
        Outcome::Respond(Response::ListOffsets(ListOffsetsResponse::default().with_topics(responses)))
    })
}
