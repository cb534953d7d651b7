//! DescribeConfigs: a topic's settings as this broker keeps and enforces them, and the
//! few broker-wide values it can state, under Kafka's names where Kafka has one that
//! means the same. Nothing can be altered (AlterConfigs is not served), so every entry
//! is read-only.

use super::context::{text, Context, Outcome, Pending};
use super::create_topics::GRACE_CONFIG;
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{Command, Config, Reply, TopicDescription};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError as E;

/// Kafka's resource types (`ConfigResource.Type`) described here.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's config sources (`ConfigSource`): a topic's own setting, one given to the
/// broker at its start, and the default.
const TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Kafka's config types (`ConfigType`).
const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const LIST: i8 = 7;

/// One config as described: its name, value, source, type, and what it means here.
struct Entry {
    name: &'static str,
    value: String,
    source: i8,
    kind: i8,
    doc: &'static str,
}

pub(super) fn describe_configs(ctx: &Context, r: DescribeConfigsRequest) -> Pending {
    let (synonyms, documentation) = (r.include_synonyms, r.include_documentation);
    let describing: Vec<(DescribeConfigsResource, Describing)> = r
        .resources
        .into_iter()
        .map(|resource| {
            let describing = describing(ctx, &resource);
            (resource, describing)
        })
        .collect();
    let core = ctx.limits.core.clone();
    Box::pin(async move {
        let mut results = Vec::new();
        for (resource, describing) in describing {
            let outcome = match describing {
                Describing::Done(outcome) => outcome,
                Describing::Topic(answer) => match answer.get().await {
                    Ok(Reply::Described(t)) => Ok(topic_configs(&t, &core)),
                    Ok(other) => Err((E::UnknownServerError.code(), format!("unexpected reply {other:?}"))),
                    Err(e) => Err((code(&e), e.to_string())),
                },
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name);
            results.push(match outcome {
                Ok(entries) => {
                    let keys = resource.configuration_keys.unwrap_or_default();
                    // No names, or an empty list, asks for every config, as Kafka reads it.
                    let wanted = |e: &Entry| keys.is_empty() || keys.iter().any(|k| k.as_str() == e.name);
                    let configs =
                        entries.into_iter().filter(wanted).map(|e| described(e, synonyms, documentation)).collect();
                    result.with_error_message(None).with_configs(configs)
                }
                Err((error, message)) => result.with_error_code(error).with_error_message(Some(text(message))),
            });
        }
        Outcome::Respond(Response::DescribeConfigs(DescribeConfigsResponse::default().with_results(results)))
    })
}

/// One resource of a describe: answered at once (a broker's configs, or a refusal), or
/// a topic's description submitted to the core.
enum Describing {
    Done(Result<Vec<Entry>, (i16, String)>),
    Topic(Answer),
}

fn describing(ctx: &Context, resource: &DescribeConfigsResource) -> Describing {
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        TOPIC => match broker_core::validate_topic_name(name) {
            Ok(()) => Describing::Topic(ctx.core.submit(Command::DescribeTopic { name: name.to_string() })),
            Err(e) => Describing::Done(Err((code(&e), e.to_string()))),
        },
        BROKER => Describing::Done(broker(ctx, name)),
        other => {
            let message = format!(
                "resource type {other} has no configs here: this broker describes topics (type {TOPIC}) and \
                 brokers (type {BROKER})"
            );
            Describing::Done(Err((E::InvalidRequest.code(), message)))
        }
    }
}

/// A broker's configs, as Kafka answers for the resource `name`: "" asks for the
/// cluster's dynamic defaults, of which there are none here; this broker's id for its
/// own; any other name is refused.
fn broker(ctx: &Context, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    let node = ctx.limits.node_id;
    if name.is_empty() {
        return Ok(Vec::new());
    }
    match name.parse::<i32>() {
        Ok(id) if id == node => Ok(broker_configs(node, &ctx.limits.core)),
        Ok(id) => Err((
            E::InvalidRequest.code(),
            format!(
                "broker {id} is not this one: ask broker {node} for its own configs, or give \"\" for the defaults"
            ),
        )),
        Err(_) => Err((
            E::InvalidRequest.code(),
            format!("broker id {name:?} is not a number: give this broker's id, {node}, or \"\" for the defaults"),
        )),
    }
}

/// Where a limit of the core's comes from: its default, or the broker's configuration.
fn source_of<T: PartialEq>(value: T, default: T) -> i8 {
    if value == default {
        DEFAULT_CONFIG
    } else {
        STATIC_BROKER_CONFIG
    }
}

/// Kafka's type for an integer: an int if it fits one, else a long.
fn int_kind(value: usize) -> i8 {
    if i32::try_from(value).is_ok() {
        INT
    } else {
        LONG
    }
}

/// A topic's configs, in name order: each says what this broker does with the topic.
fn topic_configs(t: &TopicDescription, core: &Config) -> Vec<Entry> {
    let grace = t.settings.deletion_grace_ms;
    vec![
        Entry {
            name: "cleanup.policy",
            value: "delete".into(),
            source: DEFAULT_CONFIG,
            kind: LIST,
            doc: "Logs are never compacted; and no record of a live topic is removed (retention.ms and \
                  retention.bytes are -1).",
        },
        Entry {
            name: "compression.type",
            value: "producer".into(),
            source: DEFAULT_CONFIG,
            kind: STRING,
            doc: "A batch is stored and served as its producer compressed it (or not), never compressed again.",
        },
        Entry {
            name: GRACE_CONFIG,
            value: grace.to_string(),
            // The core keeps the delay, not whether it was given: 0 is the default.
            source: if grace == 0 { DEFAULT_CONFIG } else { TOPIC_CONFIG },
            kind: LONG,
            doc: "How long the logs of a deleted topic are kept before they are removed, in milliseconds; \
                  set when the topic is created.",
        },
        max_batch_bytes("max.message.bytes", core),
        Entry {
            name: "message.timestamp.type",
            value: "CreateTime".into(),
            source: DEFAULT_CONFIG,
            kind: STRING,
            doc: "Records keep the timestamp their producer gave them.",
        },
        Entry {
            name: "retention.bytes",
            value: "-1".into(),
            source: DEFAULT_CONFIG,
            kind: LONG,
            doc: "No partition is trimmed by size: every record of a live topic is kept.",
        },
        Entry {
            name: "retention.ms",
            value: "-1".into(),
            source: DEFAULT_CONFIG,
            kind: LONG,
            doc: "No record expires: every record of a live topic is kept until the topic is deleted.",
        },
    ]
}

/// The largest batch a produce may carry, under a topic's name for it (`name`) or the
/// broker's: the same limit.
fn max_batch_bytes(name: &'static str, core: &Config) -> Entry {
    Entry {
        name,
        value: core.max_record_bytes.to_string(),
        source: source_of(core.max_record_bytes, Config::default().max_record_bytes),
        kind: int_kind(core.max_record_bytes),
        doc: "The largest record batch, in bytes, as produced (compressed, if it is); a larger one gets \
              MESSAGE_TOO_LARGE.",
    }
}

/// This broker's configs, in name order: what it does whatever the topic.
fn broker_configs(node: i32, core: &Config) -> Vec<Entry> {
    vec![
        Entry {
            name: "auto.create.topics.enable",
            value: "false".into(),
            source: DEFAULT_CONFIG,
            kind: BOOLEAN,
            doc: "Metadata never creates a topic: create topics with CreateTopics.",
        },
        Entry {
            name: "default.replication.factor",
            value: "1".into(),
            source: DEFAULT_CONFIG,
            kind: INT,
            doc: "Every partition has one replica, on the broker that serves it.",
        },
        Entry {
            name: "delete.topic.enable",
            value: "true".into(),
            source: DEFAULT_CONFIG,
            kind: BOOLEAN,
            doc: "DeleteTopics deletes topics.",
        },
        max_batch_bytes("message.max.bytes", core),
        Entry {
            name: "node.id",
            value: node.to_string(),
            source: source_of(node, 0),
            kind: INT,
            doc: "This broker's id, as Metadata names it.",
        },
        Entry {
            name: "num.partitions",
            value: "1".into(),
            source: DEFAULT_CONFIG,
            kind: INT,
            doc: "The partition count of a topic created without one (-1).",
        },
    ]
}

/// An entry as the response carries it: read-only, with itself as its one synonym and
/// its documentation if asked for.
fn described(e: Entry, synonyms: bool, documentation: bool) -> DescribeConfigsResourceResult {
    let synonyms = if synonyms {
        vec![DescribeConfigsSynonym::default()
            .with_name(text(e.name))
            .with_value(Some(text(e.value.clone())))
            .with_source(e.source)]
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(text(e.name))
        .with_value(Some(text(e.value)))
        .with_read_only(true)
        .with_config_source(e.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(e.kind)
        .with_documentation(documentation.then(|| text(e.doc)))
}
