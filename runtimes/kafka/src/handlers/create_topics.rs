//! CreateTopics: a topic's partitions and its one config, the deletion grace delay.

use super::context::{text, topic_uuid, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{BrokerError, Command, Reply, TopicSettings};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// The topic config that sets the deletion grace delay.
pub const GRACE_CONFIG: &str = "deletion.grace.ms";

/// Names Kafka keeps for its own internal topics. A client that creates one means
/// Kafka's use of it (committed offsets, transaction state), which this broker does not
/// give it, so the create is refused rather than made into a plain topic.
pub const INTERNAL_TOPICS: [&str; 4] =
    ["__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"];

/// One topic of a create as asked, past the front end's own checks.
struct Asked {
    partitions: u32,
    settings: TopicSettings,
    /// Whether the request set the grace delay (else it is the default, 0).
    given: bool,
}

/// One topic of a create: refused at once, valid (a create that only validates), or
/// submitted to the core.
enum Creating {
    Refused(i16, String),
    /// Within the limits; whether the name is free is known once the live topics are.
    Valid(Asked),
    Submitted(Answer, Asked),
}

pub(super) fn create_topics(ctx: &Context, r: CreateTopicsRequest) -> Pending {
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &r.topics {
        *named.entry(t.name.0.as_str()).or_default() += 1;
    }
    // A create that only validates checks the name against the live topics, as the
    // core would at this point in the connection's order.
    let live = r.validate_only.then(|| ctx.core.submit(Command::ListTopics));
    let creating: Vec<(TopicName, Creating)> = r
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let creating = if named[name] > 1 {
                Creating::Refused(E::InvalidRequest.code(), format!("topic {name:?} is named twice in one request"))
            } else {
                match asked(t) {
                    Err((error, message)) => Creating::Refused(error, message),
                    Ok(asked) if r.validate_only => {
                        match ctx.limits.core.check_new_topic(name, asked.partitions, &asked.settings) {
                            Ok(()) => Creating::Valid(asked),
                            Err(e) => Creating::Refused(code(&e), e.to_string()),
                        }
                    }
                    Ok(asked) => {
                        let answer = ctx.core.submit(Command::CreateTopic {
                            name: name.to_string(),
                            partitions: asked.partitions,
                            settings: asked.settings.clone(),
                        });
                        Creating::Submitted(answer, asked)
                    }
                }
            };
            (t.name.clone(), creating)
        })
        .collect();
    Box::pin(async move {
        let live: Option<Result<Vec<String>, BrokerError>> = match live {
            None => None,
            Some(answer) => Some(match answer.get().await {
                Ok(Reply::Topics(topics)) => Ok(topics.into_iter().map(|t| t.name).collect()),
                Ok(other) => Err(BrokerError::Unavailable(format!("unexpected reply {other:?}"))),
                Err(e) => Err(e),
            }),
        };
        let mut results = Vec::new();
        for (name, creating) in creating {
            let result = CreatableTopicResult::default().with_name(name.clone());
            let outcome = match creating {
                Creating::Refused(error, message) => Err((error, message)),
                Creating::Valid(asked) => {
                    let free = match &live {
                        Some(Ok(live)) => name_is_free(name.0.as_str(), live),
                        Some(Err(e)) => Err(e.clone()),
                        None => Ok(()),
                    };
                    free.map(|()| created(result.clone(), &asked)).map_err(|e| (code(&e), e.to_string()))
                }
                Creating::Submitted(answer, asked) => match answer.get().await {
                    Ok(Reply::Created { topic }) => {
                        Ok(created(result.clone(), &asked).with_topic_id(topic_uuid(topic)))
                    }
                    Ok(other) => Err((E::UnknownServerError.code(), format!("unexpected reply {other:?}"))),
                    Err(e) => Err((code(&e), e.to_string())),
                },
            };
            results.push(match outcome {
                Ok(result) => result,
                Err((error, message)) => result.with_error_code(error).with_error_message(Some(text(message))),
            });
        }
        Outcome::Respond(Response::CreateTopics(CreateTopicsResponse::default().with_topics(results)))
    })
}

/// Whether `name` may be created beside the `live` names: not taken, and no collision.
fn name_is_free(name: &str, live: &[String]) -> Result<(), BrokerError> {
    if live.iter().any(|l| l == name) {
        return Err(BrokerError::TopicAlreadyExists { name: name.to_string() });
    }
    broker_core::check_collision(name, live.iter().map(String::as_str))
}

/// The result of a topic created (or that a create which only validates would create).
fn created(result: CreatableTopicResult, asked: &Asked) -> CreatableTopicResult {
    // Kafka's ConfigSource: 1 for a topic's own config, 5 for a default.
    let config = CreatableTopicConfigs::default()
        .with_name(text(GRACE_CONFIG))
        .with_value(Some(text(asked.settings.deletion_grace_ms.to_string())))
        .with_config_source(if asked.given { 1 } else { 5 });
    result.with_num_partitions(asked.partitions as i32).with_replication_factor(1).with_configs(Some(vec![config]))
}

/// The front end's own checks of one topic of a create: what Kafka's request can ask
/// and this broker cannot give. The core checks the rest.
fn asked(t: &CreatableTopic) -> Result<Asked, (i16, String)> {
    let name = t.name.0.as_str();
    if INTERNAL_TOPICS.contains(&name) {
        let message = format!("{name:?} is reserved for Kafka's internal topics, which this broker does not keep");
        return Err((E::InvalidRequest.code(), message));
    }
    if !matches!(t.replication_factor, -1 | 1) {
        let message =
            format!("replication factor {}: this broker is one node; use 1 or -1 (the default)", t.replication_factor);
        return Err((E::InvalidReplicationFactor.code(), message));
    }
    if !t.assignments.is_empty() {
        let message = "manual replica assignment is not supported: give a partition count".to_string();
        return Err((E::InvalidReplicaAssignment.code(), message));
    }
    let mut grace_ms = 0;
    for config in &t.configs {
        let value = config.value.as_deref().unwrap_or("");
        if config.name.as_str() != GRACE_CONFIG {
            let message = format!("unknown topic config {:?}: the only one is {GRACE_CONFIG}", config.name.as_str());
            return Err((E::InvalidConfig.code(), message));
        }
        match value.parse::<u64>() {
            Ok(ms) => grace_ms = ms,
            Err(_) => {
                let message = format!("{GRACE_CONFIG}={value:?}: give a whole number of milliseconds");
                return Err((E::InvalidConfig.code(), message));
            }
        }
    }
    // -1 asks for the broker's default, which is one partition as in Kafka.
    let partitions = if t.num_partitions == -1 { 1 } else { t.num_partitions };
    let Ok(partitions) = u32::try_from(partitions) else {
        return Err((E::InvalidPartitions.code(), format!("partition count {partitions}")));
    };
    Ok(Asked { partitions, settings: TopicSettings { deletion_grace_ms: grace_ms }, given: !t.configs.is_empty() })
}
