//! OffsetForLeaderEpoch: where a leader epoch (an incarnation) ends.

use super::context::{described, described_partition, leader_epoch, Context, Outcome, Pending};
use crate::apis::Response;
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

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
                    let (t, hw) = match described_partition(&described, p.partition, p.current_leader_epoch) {
                        Ok(found) => found,
                        Err(error) => return out.with_error_code(error),
                    };
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
