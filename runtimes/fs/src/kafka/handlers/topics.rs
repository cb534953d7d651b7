//! CreateTopics and DeleteTopics.

use super::{text, topic_uuid, Context, Outcome, Pending};
use crate::kafka::apis::Response;
use crate::kafka::errors::code;
use crate::kafka::Answer;
use broker_core::{Command, Reply, TopicSettings};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::ResponseError as E;

/// The topic config that sets the deletion grace delay.
pub const GRACE_CONFIG: &str = "deletion.grace.ms";

/// One topic of a create: refused at once, or submitted to the core.
enum Creating {
    Refused(i16, String),
    Submitted {
        answer: Answer,
        partitions: i32,
        grace_ms: u64,
        /// Whether the request set the grace delay (else it is the default, 0).
        given: bool,
    },
}

pub(super) fn create_topics(ctx: &Context, r: CreateTopicsRequest) -> Pending {
    let names: Vec<&str> = r.topics.iter().map(|t| t.name.0.as_str()).collect();
    let creating: Vec<(TopicName, Creating)> = r
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let creating = if names.iter().filter(|n| **n == name).count() > 1 {
                Creating::Refused(E::InvalidRequest.code(), format!("topic {name:?} is named twice in one request"))
            } else if r.validate_only {
                Creating::Refused(E::InvalidRequest.code(), "validate_only is not supported".into())
            } else {
                creating_one(ctx, t)
            };
            (t.name.clone(), creating)
        })
        .collect();
    Box::pin(async move {
        let mut results = Vec::new();
        for (name, creating) in creating {
            let result = CreatableTopicResult::default().with_name(name);
            let result = match creating {
                Creating::Refused(error, message) => {
                    result.with_error_code(error).with_error_message(Some(text(message)))
                }
                Creating::Submitted { answer, partitions, grace_ms, given } => match answer.get().await {
                    Ok(Reply::Created { topic }) => {
                        // Kafka's ConfigSource: 1 for a topic's own config, 5 for a default.
                        let config = CreatableTopicConfigs::default()
                            .with_name(text(GRACE_CONFIG))
                            .with_value(Some(text(grace_ms.to_string())))
                            .with_config_source(if given { 1 } else { 5 });
                        result
                            .with_topic_id(topic_uuid(topic))
                            .with_num_partitions(partitions)
                            .with_replication_factor(1)
                            .with_configs(Some(vec![config]))
                    }
                    Ok(other) => result
                        .with_error_code(E::UnknownServerError.code())
                        .with_error_message(Some(text(format!("unexpected reply {other:?}")))),
                    Err(e) => result.with_error_code(code(&e)).with_error_message(Some(text(e.to_string()))),
                },
            };
            results.push(result);
        }
        Outcome::Respond(Response::CreateTopics(CreateTopicsResponse::default().with_topics(results)))
    })
}

fn creating_one(ctx: &Context, t: &CreatableTopic) -> Creating {
    if !matches!(t.replication_factor, -1 | 1) {
        let message =
            format!("replication factor {}: this broker is one node; use 1 or -1 (the default)", t.replication_factor);
        return Creating::Refused(E::InvalidReplicationFactor.code(), message);
    }
    if !t.assignments.is_empty() {
        let message = "manual replica assignment is not supported: give a partition count".to_string();
        return Creating::Refused(E::InvalidReplicaAssignment.code(), message);
    }
    let mut grace_ms = 0;
    for config in &t.configs {
        let value = config.value.as_deref().unwrap_or("");
        if config.name.as_str() != GRACE_CONFIG {
            let message = format!("unknown topic config {:?}: the only one is {GRACE_CONFIG}", config.name.as_str());
            return Creating::Refused(E::InvalidConfig.code(), message);
        }
        match value.parse::<u64>() {
            Ok(ms) => grace_ms = ms,
            Err(_) => {
                let message = format!("{GRACE_CONFIG}={value:?}: give a whole number of milliseconds");
                return Creating::Refused(E::InvalidConfig.code(), message);
            }
        }
    }
    // -1 asks for the broker's default, which is one partition as in Kafka.
    let partitions = if t.num_partitions == -1 { 1 } else { t.num_partitions };
    let Ok(count) = u32::try_from(partitions) else {
        return Creating::Refused(E::InvalidPartitions.code(), format!("partition count {partitions}"));
    };
    let answer = ctx.core.submit(Command::CreateTopic {
        name: t.name.0.to_string(),
        partitions: count,
        settings: TopicSettings { deletion_grace_ms: grace_ms },
    });
    Creating::Submitted { answer, partitions, grace_ms, given: !t.configs.is_empty() }
}

pub(super) fn delete_topics(ctx: &Context, r: DeleteTopicsRequest) -> Pending {
    let deleting: Vec<_> = r
        .topic_names
        .into_iter()
        .map(|name| {
            let answer = ctx.core.submit(Command::DeleteTopic { name: name.0.to_string() });
            (name, answer)
        })
        .collect();
    Box::pin(async move {
        let mut results = Vec::new();
        for (name, answer) in deleting {
            let result = DeletableTopicResult::default().with_name(Some(name));
            results.push(match answer.get().await {
                Ok(Reply::DeleteAccepted { topic }) => result.with_topic_id(topic_uuid(topic)),
                Ok(other) => result
                    .with_error_code(E::UnknownServerError.code())
                    .with_error_message(Some(text(format!("unexpected reply {other:?}")))),
                Err(e) => result.with_error_code(code(&e)).with_error_message(Some(text(e.to_string()))),
            });
        }
        Outcome::Respond(Response::DeleteTopics(DeleteTopicsResponse::default().with_responses(results)))
    })
}
