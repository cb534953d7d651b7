//! Metadata: the one broker, and the live topics asked for (never created by asking).

use super::{leader_epoch, text, topic_uuid, Context, Outcome, Pending, CLUSTER_ID, NODE};
use crate::kafka::apis::Response;
use crate::kafka::errors::code;
use broker_core::{Command, Reply, TopicDescription};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError as E;

pub(super) fn metadata(ctx: &Context, v: i16, r: MetadataRequest) -> Pending {
    let list = ctx.core.submit(Command::ListTopics);
    let local = ctx.local;
    Box::pin(async move {
        let broker = MetadataResponseBroker::default()
            .with_node_id(BrokerId(NODE))
            .with_host(text(local.ip().to_string()))
            .with_port(i32::from(local.port()));
        let response = MetadataResponse::default()
            .with_brokers(vec![broker])
            .with_cluster_id(Some(text(CLUSTER_ID)))
            .with_controller_id(BrokerId(NODE));
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
            live.iter().map(describe_topic).collect()
        } else {
            r.topics
                .unwrap_or_default()
                .into_iter()
                .map(|wanted| {
                    let found = match &wanted.name {
                        Some(name) => live.iter().find(|t| t.name == name.0.as_str()),
                        None => live.iter().find(|t| topic_uuid(t.id) == wanted.topic_id),
                    };
                    match (found, wanted.name) {
                        (Some(t), _) => describe_topic(t),
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

fn describe_topic(t: &TopicDescription) -> MetadataResponseTopic {
    let partitions = (0..t.partitions as i32)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(NODE))
                .with_leader_epoch(leader_epoch(t.id))
                .with_replica_nodes(vec![BrokerId(NODE)])
                .with_isr_nodes(vec![BrokerId(NODE)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(text(t.name.clone()))))
        .with_topic_id(topic_uuid(t.id))
        .with_partitions(partitions)
}
