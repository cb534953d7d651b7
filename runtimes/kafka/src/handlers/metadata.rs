//! Metadata: this broker (and, on a cluster node that knows them, the other live ones,
//! with the partitions' leadership spread over all), and the live topics asked for
//! (never created by asking).

use super::context::{
    brokers, leader_epoch, operations, text, topic_uuid, Context, Outcome, Pending, CLUSTER_ID, CLUSTER_OPERATIONS,
};
use crate::apis::Response;
use crate::errors::code;
use broker_core::{Command, Reply, TopicDescription};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn metadata(ctx: &Context, v: i16, r: MetadataRequest) -> Pending {
    let list = ctx.core.submit(Command::ListTopics);
    let node = ctx.limits.node_id;
    let brokers = brokers(ctx);
    let ids: Vec<i32> = brokers.iter().map(|(id, _, _)| *id).collect();
    Box::pin(async move {
        let brokers = brokers
            .into_iter()
            .map(|(id, host, port)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id))
                    .with_host(text(host))
                    .with_port(i32::from(port))
            })
            .collect();
        let mut response = MetadataResponse::default()
            .with_brokers(brokers)
            .with_cluster_id(Some(text(CLUSTER_ID)))
            .with_controller_id(BrokerId(node));
        // A field of versions 8 to 10 only.
        if (8..=10).contains(&v) && r.include_cluster_authorized_operations {
            response.cluster_authorized_operations = operations(&CLUSTER_OPERATIONS);
        }
        let topic_operations = (v >= 8 && r.include_topic_authorized_operations).then(|| operations(&TOPIC_OPERATIONS));
        let live = match list.get().await {
            Ok(Reply::Topics(live)) => live,
            other => {
                let error = other.err().as_ref().map_or(E::UnknownServerError.code(), code);
                let topics = r.topics.unwrap_or_default();
                let failed = topics
                    .into_iter()
                    .map(|t| MetadataResponseTopic::default().with_name(t.name).with_error_code(error))
                    .collect();
                return Outcome::Respond(Response::Metadata(response.with_topics(failed)));
            }
        };
        // Version 0 asks for every topic with an empty list; later versions with none.
        let every = match &r.topics {
            None => true,
            Some(t) => t.is_empty() && v == 0,
        };
        let topics = if every {
            live.iter().map(|t| describe_topic(t, &ids, topic_operations)).collect()
        } else {
            // A topic asked for twice is answered once, as Kafka answers it.
            let mut asked = r.topics.unwrap_or_default();
            let mut seen = BTreeSet::new();
            asked.retain(|t| seen.insert((t.name.clone(), t.topic_id)));
            // Indexed once, so that a request naming many topics costs no more than
            // its names times a lookup.
            let by_name: BTreeMap<&str, &TopicDescription> = live.iter().map(|t| (t.name.as_str(), t)).collect();
            let by_id: BTreeMap<_, &TopicDescription> = live.iter().map(|t| (topic_uuid(t.id), t)).collect();
            asked
                .into_iter()
                .map(|wanted| {
                    let found = match &wanted.name {
                        Some(name) => by_name.get(name.0.as_str()).copied(),
                        None => by_id.get(&wanted.topic_id).copied(),
                    };
                    match (found, wanted.name) {
                        (Some(t), _) => describe_topic(t, &ids, topic_operations),
                        // Never created by asking: an unknown name is an error.
                        (None, Some(name)) => MetadataResponseTopic::default()
                            .with_name(Some(name))
                            .with_error_code(E::UnknownTopicOrPartition.code()),
                        (None, None) => MetadataResponseTopic::default()
                            .with_name(None)
                            .with_topic_id(wanted.topic_id)
                            .with_error_code(E::UnknownTopicId.code()),
                    }
                })
                .collect()
        };
        Outcome::Respond(Response::Metadata(response.with_topics(topics)))
    })
}

/// Kafka's ACL operations (`AclOperation`) that apply to a topic: read, write, create,
/// delete, alter, describe, describe configs, alter configs.
const TOPIC_OPERATIONS: [u8; 8] = [3, 4, 5, 6, 7, 8, 10, 11];

/// A live topic's metadata, its partitions led in turn by `brokers` (in id order), from
/// one that the incarnation picks, so that topics do not all begin on the same broker;
/// `operations`: its authorized operations, if asked for.
fn describe_topic(t: &TopicDescription, brokers: &[i32], operations: Option<i32>) -> MetadataResponseTopic {
    let n = brokers.len().max(1) as u64;
    let partitions = (0..t.partitions as i32)
        .map(|p| {
            let node = brokers.get((t.id.0.wrapping_add(p as u64) % n) as usize).copied().unwrap_or(0);
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(node))
                .with_leader_epoch(leader_epoch(t.id))
                .with_replica_nodes(vec![BrokerId(node)])
                .with_isr_nodes(vec![BrokerId(node)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(text(t.name.clone()))))
        .with_topic_id(topic_uuid(t.id))
        .with_partitions(partitions)
        .with_topic_authorized_operations(operations.unwrap_or(i32::MIN))
}
