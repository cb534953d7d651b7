//! OffsetCommit: a group's positions, checked against its membership (generation and
//! member, as Kafka's classic groups check them), then stored by the core, one
//! `CommitOffsets` per topic and incarnation named.

use super::context::{Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{Command, CommittedOffset, Reply, TopicId};
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// The incarnation a commit names by its leader epoch (the incarnation's id, see
/// [`super::leader_epoch`]): none for -1 (the client knows none), nor for `i32::MAX`,
/// which every incarnation from that id on saturates to.
fn incarnation(epoch: i32) -> Option<TopicId> {
    u64::try_from(epoch).ok().filter(|_| epoch != i32::MAX).map(TopicId)
}

/// OffsetCommit. Each partition's answer: the group's refusal if the membership check
/// fails (nothing is committed); `INVALID_REQUEST` for each mention of a partition named
/// twice; `UNKNOWN_TOPIC_OR_PARTITION` for a negative partition, `OFFSET_OUT_OF_RANGE`
/// for a negative offset; otherwise its topic's commit's. The partitions of a topic
/// that name the same leader epoch (or none) are committed together, all or nothing;
/// those naming another epoch in another command, refused by the core if it is not the
/// live incarnation's.
pub(super) fn offset_commit(ctx: &Context, v: i16, r: OffsetCommitRequest) -> Pending {
    let group = r.group_id.0.to_string();
    let (member, instance) = (r.member_id.to_string(), r.group_instance_id.is_some());
    let generation = r.generation_id_or_member_epoch;
    let allowed = ctx.groups.with(|c, now| c.check_commit(now, &group, generation, &member, instance));
    // Each mention's answer: known now, or the index of the command that decides it.
    let mut commits: Vec<Answer> = Vec::new();
    let decided: Vec<Vec<Result<i16, usize>>> = match allowed {
        Err(e) => r.topics.iter().map(|t| vec![Ok(e.code()); t.partitions.len()]).collect(),
        Ok(()) => {
            let mut named: BTreeMap<(&str, i32), usize> = BTreeMap::new();
            for t in &r.topics {
                for p in &t.partitions {
                    *named.entry((t.name.0.as_str(), p.partition_index)).or_default() += 1;
                }
            }
            let mut batches: BTreeMap<(String, Option<TopicId>), (usize, Vec<CommittedOffset>)> = BTreeMap::new();
            let mut mentions = Vec::new();
            for t in &r.topics {
                let mut answers = Vec::with_capacity(t.partitions.len());
                for p in &t.partitions {
                    let answer = if named[&(t.name.0.as_str(), p.partition_index)] > 1 {
                        Ok(E::InvalidRequest.code())
                    } else if p.partition_index < 0 {
                        Ok(E::UnknownTopicOrPartition.code())
                    } else if p.committed_offset < 0 {
                        Ok(E::OffsetOutOfRange.code())
                    } else {
                        let epoch = if v >= 6 { incarnation(p.committed_leader_epoch) } else { None };
                        let next = batches.len();
                        let (index, offsets) =
                            batches.entry((t.name.0.to_string(), epoch)).or_insert((next, Vec::new()));
                        offsets.push(CommittedOffset {
                            partition: p.partition_index as u32,
                            offset: p.committed_offset as u64,
                            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                        });
                        Err(*index)
                    };
                    answers.push(answer);
                }
                mentions.push(answers);
            }
            let mut ordered: Vec<_> = batches.into_iter().collect();
            ordered.sort_by_key(|(_, (index, _))| *index);
            for ((topic, incarnation), (_, offsets)) in ordered {
                let command = Command::CommitOffsets { group: group.clone(), topic, incarnation, offsets };
                commits.push(ctx.core.submit(command));
            }
            mentions
        }
    };
    Box::pin(async move {
        let mut outcomes = Vec::with_capacity(commits.len());
        for answer in commits {
            outcomes.push(match answer.get().await {
                Ok(Reply::OffsetsCommitted { .. }) => 0,
                Ok(_) => E::UnknownServerError.code(),
                Err(e) => code(&e),
            });
        }
        let topics = r
            .topics
            .into_iter()
            .zip(decided)
            .map(|(t, answers)| {
                let partitions = t
                    .partitions
                    .iter()
                    .zip(answers)
                    .map(|(p, answer)| {
                        let error = answer.unwrap_or_else(|i| outcomes[i]);
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(error)
                    })
                    .collect();
                OffsetCommitResponseTopic::default().with_name(t.name).with_partitions(partitions)
            })
            .collect();
        Outcome::Respond(Response::OffsetCommit(OffsetCommitResponse::default().with_topics(topics)))
    })
}
