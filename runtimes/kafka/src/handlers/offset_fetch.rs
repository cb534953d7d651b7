//! OffsetFetch: a group's committed positions in the live incarnation of each topic
//! named, or of every live topic. A partition with none (of a topic unknown, or
//! created again since the commit) gets offset -1, as Kafka answers; a position carries
//! its incarnation's leader epoch. A group, topic or partition named twice is answered
//! once: a request cannot multiply its response, each position of which may hold 4 KiB
//! of metadata, by repeating a name.

use super::context::{leader_epoch, text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{BrokerError, Command, CommittedOffset, Reply};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::{BTreeMap, BTreeSet};

/// A partition's answer: index, offset, leader epoch, metadata, error.
type Position = (i32, i64, i32, String, i16);

/// The topics and partitions a request names for one group; `None`: every topic.
type Named = Option<Vec<(TopicName, Vec<i32>)>>;

/// One group's answer: its topics' positions, and its error.
type GroupAnswer = (GroupId, Vec<(TopicName, Vec<Position>)>, i16);

/// What one group asks for: the topics and partitions named, or (`None`) every topic.
enum Asked {
    Named(Vec<(TopicName, Vec<i32>, Answer)>),
    Every(Answer),
}

pub(super) fn offset_fetch(ctx: &Context, v: i16, r: OffsetFetchRequest) -> Pending {
    let asked: Vec<(GroupId, Named)> = if v >= 8 {
        r.groups
            .into_iter()
            .map(|g| (g.group_id, g.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect())))
            .collect()
    } else {
        let topics = r.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
        vec![(r.group_id, topics)]
    };
    let asked = once(asked);
    let submitted: Vec<(GroupId, Asked)> = asked
        .into_iter()
        .map(|(group, topics)| {
            let asked = match topics {
                Some(topics) => Asked::Named(
                    topics
                        .into_iter()
                        .map(|(name, partitions)| {
                            let command =
                                Command::FetchOffsets { group: group.0.to_string(), topic: name.0.to_string() };
                            let answer = ctx.core.submit(command);
                            (name, partitions, answer)
                        })
                        .collect(),
                ),
                None => Asked::Every(ctx.core.submit(Command::ListTopics)),
            };
            (group, asked)
        })
        .collect();
    let core = ctx.core.clone();
    Box::pin(async move {
        let mut groups = Vec::new();
        for (group, asked) in submitted {
            let (topics, error) = match asked {
                Asked::Named(topics) => {
                    let mut out = Vec::new();
                    for (name, partitions, answer) in topics {
                        let positions = named_positions(answer.get().await, &partitions);
                        out.push((name, positions));
                    }
                    (out, 0)
                }
                Asked::Every(list) => every_position(&core, &group, list).await,
            };
            groups.push((group, topics, error));
        }
        Outcome::Respond(Response::OffsetFetch(response(v, groups)))
    })
}

/// Each group once, with each of its topics once and each topic's partitions once, in
/// the order first named; a group named once for every topic (`None`) asks for every
/// topic, however else it is named.
fn once(asked: Vec<(GroupId, Named)>) -> Vec<(GroupId, Named)> {
    let mut groups: Vec<(GroupId, Named)> = Vec::new();
    let mut at = BTreeMap::new();
    for (group, topics) in asked {
        let i = *at.entry(group.clone()).or_insert_with(|| {
            groups.push((group, Some(Vec::new())));
            groups.len() - 1
        });
        match (&mut groups[i].1, topics) {
            (Some(named), Some(topics)) => named.extend(topics),
            (named, None) => *named = None,
            (None, Some(_)) => {}
        }
    }
    for (_, topics) in &mut groups {
        let Some(named) = topics else { continue };
        let mut merged: Vec<(TopicName, Vec<i32>)> = Vec::new();
        let mut at = BTreeMap::new();
        for (name, partitions) in named.drain(..) {
            let i = *at.entry(name.clone()).or_insert_with(|| {
                merged.push((name, Vec::new()));
                merged.len() - 1
            });
            merged[i].1.extend(partitions);
        }
        for (_, partitions) in &mut merged {
            let mut seen = BTreeSet::new();
            partitions.retain(|p| seen.insert(*p));
        }
        *named = merged;
    }
    groups
}

/// The positions of `partitions` in a FetchOffsets' reply.
fn named_positions(reply: Result<Reply, BrokerError>, partitions: &[i32]) -> Vec<Position> {
    let none = |p: i32, error: i16| (p, -1, -1, String::new(), error);
    match reply {
        Ok(Reply::Offsets { topic, offsets }) => {
            let by_partition: BTreeMap<i64, &CommittedOffset> =
                offsets.iter().map(|o| (i64::from(o.partition), o)).collect();
            partitions
                .iter()
                .map(|&p| match by_partition.get(&i64::from(p)) {
                    Some(o) => position(o, leader_epoch(topic)),
                    None => none(p, 0),
                })
                .collect()
        }
        Ok(_) => partitions.iter().map(|&p| none(p, E::UnknownServerError.code())).collect(),
        // Nothing is committed under a topic that does not exist, or a group id the
        // core cannot hold: no position, as Kafka answers.
        Err(
            BrokerError::TopicNotFound { .. } | BrokerError::InvalidGroup { .. } | BrokerError::InvalidTopicName { .. },
        ) => partitions.iter().map(|&p| none(p, 0)).collect(),
        Err(e) => partitions.iter().map(|&p| none(p, code(&e))).collect(),
    }
}

fn position(o: &CommittedOffset, epoch: i32) -> Position {
    (o.partition as i32, o.offset as i64, epoch, o.metadata.clone(), 0)
}

/// Every live topic where `group` holds a position, with its positions; or the
/// group's error.
async fn every_position(core: &crate::Core, group: &GroupId, list: Answer) -> (Vec<(TopicName, Vec<Position>)>, i16) {
    let topics = match list.get().await {
        Ok(Reply::Topics(topics)) => topics,
        Ok(_) => return (Vec::new(), E::UnknownServerError.code()),
        Err(e) => return (Vec::new(), code(&e)),
    };
    if broker_core::check_group(&group.0).is_err() {
        return (Vec::new(), 0);
    }
    let answers: Vec<_> = topics
        .iter()
        .map(|t| core.submit(Command::FetchOffsets { group: group.0.to_string(), topic: t.name.clone() }))
        .collect();
    let mut out = Vec::new();
    for (t, answer) in topics.into_iter().zip(answers) {
        match answer.get().await {
            Ok(Reply::Offsets { topic, offsets }) if !offsets.is_empty() => {
                let epoch = leader_epoch(topic);
                out.push((TopicName(text(t.name)), offsets.iter().map(|o| position(o, epoch)).collect()));
            }
            // Deleted since it was listed, or no position: not listed.
            Ok(_) | Err(BrokerError::TopicNotFound { .. }) => {}
            Err(e) => return (Vec::new(), code(&e)),
        }
    }
    (out, 0)
}

/// The response at `v`: one group's topics (and its error from version 2 on) before
/// version 8; every group's from it on.
fn response(v: i16, groups: Vec<GroupAnswer>) -> OffsetFetchResponse {
    if v >= 8 {
        let groups = groups
            .into_iter()
            .map(|(group, topics, error)| {
                let topics = topics
                    .into_iter()
                    .map(|(name, positions)| {
                        let partitions = positions
                            .into_iter()
                            .map(|(p, offset, epoch, metadata, error)| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(text(metadata)))
                                    .with_error_code(error)
                            })
                            .collect();
                        OffsetFetchResponseTopics::default().with_name(name).with_partitions(partitions)
                    })
                    .collect();
                OffsetFetchResponseGroup::default().with_group_id(group).with_topics(topics).with_error_code(error)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let (topics, error) = groups.into_iter().next().map(|(_, t, e)| (t, e)).unwrap_or_default();
    let topics = topics
        .into_iter()
        .map(|(name, positions)| {
            let partitions = positions
                .into_iter()
                .map(|(p, offset, epoch, metadata, error)| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(if v >= 5 { epoch } else { -1 })
                        .with_metadata(Some(text(metadata)))
                        .with_error_code(error)
                })
                .collect();
            OffsetFetchResponseTopic::default().with_name(name).with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics).with_error_code(if v >= 2 { error } else { 0 })
}
