//! What each Kafka request does to the broker core, and the response it gets.
//!
//! Every handler submits its core commands at once, while the connection's requests are
//! read (so a connection's commands reach the core in the order it sent them), and
//! returns a future that waits for their replies and builds the response.

use super::apis::{api_versions, Request, Response};
use super::batches;
use super::errors::code;
use super::{Answer, Core, Limits};
use broker_core::{Command, ProduceRecord, Reply, TopicDescription, TopicId, TopicSettings};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;
use uuid::Uuid;

/// A response still being worked out; `None`: the request gets no response (acks=0).
pub type Pending = Pin<Box<dyn Future<Output = Option<Response>> + Send>>;

/// The only broker of this cluster of one.
const NODE: i32 = 0;
/// The cluster id Metadata reports.
const CLUSTER_ID: &str = "broker-core";
/// The topic config that sets the deletion grace delay.
pub const GRACE_CONFIG: &str = "deletion.grace.ms";
/// How long a fetch that found nothing waits between two looks, while its
/// `max_wait_ms` lasts.
const FETCH_POLL: Duration = Duration::from_millis(20);
/// The longest a fetch waits for records, whatever it asks.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(30);
/// The fewest bytes a stored record takes in a fetch response: its batch header and the
/// smallest record.
const MIN_SERVED_RECORD: i64 = batches::BATCH_HEADER as i64 + 7;

/// Where a request is handled: the core, its limits, and the address the client reached.
#[derive(Clone)]
pub struct Context {
    /// The broker core.
    pub core: Core,
    /// The core's limits, so that oversized records get Kafka's own errors.
    pub limits: Limits,
    /// The listener address this connection came in on: what Metadata advertises.
    pub local: SocketAddr,
}

/// The Kafka topic id of an incarnation: its core id in the low 64 bits, under a fixed
/// prefix (never the nil id Kafka reserves for "no id").
pub fn topic_uuid(id: TopicId) -> Uuid {
    Uuid::from_u64_pair(0x6272_6f6b_6572_2d63, id.0)
}

/// The leader epoch of every partition of an incarnation: its id (saturated), which
/// grows with every create. A consumer still fetching with the epoch of the name's
/// previous incarnation is told `FENCED_LEADER_EPOCH`; it refreshes its metadata and
/// asks OffsetForLeaderEpoch where its old epoch ends, which is where this incarnation
/// begins (see `offsets_for_epochs`). A client that sends no epoch (-1) is not checked:
/// for it, the new incarnation's offsets beginning past the old one's is the guard.
pub fn leader_epoch(id: TopicId) -> i32 {
    i32::try_from(id.0).unwrap_or(i32::MAX)
}

/// The error for a request that names `asked` as the leader epoch (-1: none) of a
/// partition of incarnation `id`, if they differ.
fn epoch_mismatch(asked: i32, id: TopicId) -> Option<i16> {
    let epoch = leader_epoch(id);
    match asked {
        a if a < 0 || a == epoch => None,
        a if a < epoch => Some(E::FencedLeaderEpoch.code()),
        _ => Some(E::UnknownLeaderEpoch.code()),
    }
}

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn ready(response: Response) -> Pending {
    Box::pin(async move { Some(response) })
}

/// Handles one decoded request of version `v`.
pub fn handle(ctx: &Context, v: i16, request: Request) -> Pending {
    match request {
        Request::ApiVersions(_) => ready(Response::ApiVersions(api_versions(0))),
        Request::Metadata(r) => metadata(ctx, v, r),
        Request::Produce(r) => produce(ctx, r),
        Request::Fetch(r) => fetch(ctx, r),
        Request::ListOffsets(r) => list_offsets(ctx, v, r),
        Request::CreateTopics(r) => create_topics(ctx, r),
        Request::DeleteTopics(r) => delete_topics(ctx, r),
        Request::OffsetForLeaderEpoch(r) => offsets_for_epochs(ctx, r),
    }
}

fn metadata(ctx: &Context, v: i16, r: MetadataRequest) -> Pending {
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
                return Some(Response::Metadata(response.with_topics(failed)));
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
        Some(Response::Metadata(response.with_topics(topics)))
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

/// One partition of a produce: refused at once, or submitted to the core.
enum Appending {
    Refused(i16, String),
    Submitted(Answer),
}

fn produce(ctx: &Context, r: ProduceRequest) -> Pending {
    let acks = r.acks;
    let valid_acks = matches!(acks, -1..=1);
    let mut topics = Vec::new();
    for topic in r.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partition_data {
            let appending = if !valid_acks {
                Appending::Refused(E::InvalidRequiredAcks.code(), format!("acks={acks}: use 0, 1 or -1 (all)"))
            } else {
                append(ctx, &name, p.index, p.records.as_deref())
            };
            partitions.push((p.index, appending));
        }
        topics.push((topic.name, partitions));
    }
    Box::pin(async move {
        let mut responses = Vec::new();
        for (name, partitions) in topics {
            let mut answers = Vec::new();
            for (index, appending) in partitions {
                let response = PartitionProduceResponse::default()
                    .with_index(index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1);
                let response = match appending {
                    Appending::Refused(error, message) => {
                        response.with_error_code(error).with_error_message(Some(text(message)))
                    }
                    Appending::Submitted(answer) => match answer.get().await {
                        // The log start offset stays -1 (unknown): the core's reply does not
                        // carry it, and no client acts on it.
                        Ok(Reply::Produced { positions, .. }) => {
                            response.with_base_offset(positions.first().map_or(-1, |p| p.offset as i64))
                        }
                        Ok(other) => response
                            .with_error_code(E::UnknownServerError.code())
                            .with_error_message(Some(text(format!("unexpected reply {other:?}")))),
                        Err(e) => response.with_error_code(code(&e)).with_error_message(Some(text(e.to_string()))),
                    },
                };
                answers.push(response);
            }
            responses.push(TopicProduceResponse::default().with_name(name).with_partition_responses(answers));
        }
        // acks=0: the client waits for nothing; the records were submitted all the same.
        (acks != 0).then(|| Response::Produce(ProduceResponse::default().with_responses(responses)))
    })
}

/// Checks one partition's records and submits them.
fn append(ctx: &Context, topic: &str, index: i32, records: Option<&[u8]>) -> Appending {
    let Ok(partition) = u32::try_from(index) else {
        return Appending::Refused(E::UnknownTopicOrPartition.code(), format!("partition {index}"));
    };
    let stored = match batches::split(records.unwrap_or_default()) {
        Ok(stored) => stored,
        Err(e) => {
            let error = match e {
                batches::BatchError::Corrupt(_) => E::CorruptMessage,
                batches::BatchError::Compressed(_) => E::UnsupportedCompressionType,
                batches::BatchError::Refused(_) => E::InvalidRecord,
            };
            return Appending::Refused(error.code(), e.to_string());
        }
    };
    let limits = &ctx.limits;
    if let Some(big) = stored.iter().find(|s| s.len() > limits.max_record_bytes) {
        let message = format!(
            "a record takes {} bytes as stored, over the limit of {} bytes",
            big.len(),
            limits.max_record_bytes
        );
        return Appending::Refused(E::MessageTooLarge.code(), message);
    }
    if stored.len() > limits.max_batch_records {
        let message = format!(
            "{} records in one partition of one request, over the limit of {}",
            stored.len(),
            limits.max_batch_records
        );
        return Appending::Refused(E::RecordListTooLarge.code(), message);
    }
    let records = stored.into_iter().map(|value| ProduceRecord { key: None, value }).collect();
    Appending::Submitted(ctx.core.submit(Command::Produce {
        topic: topic.to_string(),
        partition: Some(partition),
        records,
    }))
}

/// One partition of a fetch.
#[derive(Clone, Debug)]
struct Wanted {
    topic: TopicName,
    partition: i32,
    /// The leader epoch the client believes in (-1: none given).
    leader_epoch: i32,
    offset: i64,
    max_bytes: i64,
}

/// The most bytes a fetch response carries, whatever the request asks (Kafka's broker
/// setting `fetch.max.bytes`, 55 MiB there): a consumer that asks for more gets less, as
/// Kafka allows, and comes back for the rest. The first record served may pass it, so
/// that a consumer always makes progress.
pub const FETCH_RESPONSE_MAX: i64 = 32 << 20;

/// The bytes a fetch's response may hold, which the listener reserves before the
/// request runs: the request's own bound, at most [`FETCH_RESPONSE_MAX`], plus one
/// record whatever its size (`max_record`) and the response's framing.
pub fn fetch_reservation(r: &FetchRequest, max_record: usize) -> usize {
    let asked = i64::from(r.max_bytes.max(0)).min(FETCH_RESPONSE_MAX) as usize;
    let partitions: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
    asked + max_record + batches::BATCH_HEADER + 64 * (partitions + r.topics.len()) + 1024
}

/// The partitions of a fetch, each once: Kafka keys them by topic and partition, so one
/// listed twice is read once, with its last entry's position, in its first entry's place.
fn wanted_partitions(r: &FetchRequest) -> Vec<Wanted> {
    let mut wanted: Vec<Wanted> = Vec::new();
    for topic in &r.topics {
        for p in &topic.partitions {
            let w = Wanted {
                topic: topic.topic.clone(),
                partition: p.partition,
                leader_epoch: p.current_leader_epoch,
                offset: p.fetch_offset,
                max_bytes: i64::from(p.partition_max_bytes.max(0)),
            };
            match wanted.iter_mut().find(|o| o.topic == w.topic && o.partition == w.partition) {
                Some(earlier) => *earlier = w,
                None => wanted.push(w),
            }
        }
    }
    wanted
}

fn fetch(ctx: &Context, r: FetchRequest) -> Pending {
    let wanted = wanted_partitions(&r);
    let core = ctx.core.clone();
    let max_records = ctx.limits.max_fetch_records;
    // The topics' high watermarks as this request is read, in the connection's order.
    let first = describe_topics(&core, &wanted);
    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT);
    let min_bytes = i64::from(r.min_bytes.max(0));
    let max_bytes = i64::from(r.max_bytes.max(0)).min(FETCH_RESPONSE_MAX);
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + wait;
        let mut described = first;
        loop {
            let (response, bytes, failed) = read_partitions(&core, &wanted, described, max_bytes, max_records).await;
            let now = tokio::time::Instant::now();
            // min_bytes 0 asks for no wait at all; an error is news worth answering at once.
            if bytes >= min_bytes || failed || now >= deadline {
                return Some(Response::Fetch(response));
            }
            tokio::time::sleep(FETCH_POLL.min(deadline - now)).await;
            described = describe_topics(&core, &wanted);
        }
    })
}

/// A DescribeTopic for each topic of `wanted`, in the order they first appear.
fn describe_topics(core: &Core, wanted: &[Wanted]) -> Vec<(TopicName, Answer)> {
    let mut out: Vec<(TopicName, Answer)> = Vec::new();
    for w in wanted {
        if !out.iter().any(|(t, _)| *t == w.topic) {
            out.push((w.topic.clone(), core.submit(Command::DescribeTopic { name: w.topic.0.to_string() })));
        }
    }
    out
}

/// Reads the partitions one after another, each within what is left of `max_bytes` (the
/// first record served whatever its size), so that a response never holds more than
/// its bound and a record; a partition with nothing new past its position is not read.
/// Returns the response, the bytes it serves, and whether any partition failed.
async fn read_partitions(
    core: &Core,
    wanted: &[Wanted],
    described: Vec<(TopicName, Answer)>,
    max_bytes: i64,
    max_records: u32,
) -> (FetchResponse, i64, bool) {
    let mut topics_seen = Vec::new();
    for (name, answer) in described {
        topics_seen.push((name, answer.get().await));
    }
    let mut total: i64 = 0;
    let mut failed = false;
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for w in wanted {
        let data = PartitionData::default().with_partition_index(w.partition).with_aborted_transactions(None);
        let described = topics_seen.iter().find(|(t, _)| *t == w.topic).map(|(_, d)| d);
        let log_start = match described {
            Some(Ok(Reply::Described(t))) => t.log_start as i64,
            _ => -1,
        };
        let read = match described {
            Some(Ok(Reply::Described(t))) => {
                read_partition(core, w, t, max_bytes - total, total == 0, max_records).await
            }
            Some(Err(e)) => Err(code(e)),
            Some(Ok(_)) | None => Err(E::UnknownServerError.code()),
        };
        let data = match read {
            Ok((records, hw)) => {
                total += records.len() as i64;
                data.with_high_watermark(hw)
                    .with_last_stable_offset(hw)
                    .with_log_start_offset(log_start)
                    .with_records(Some(Bytes::from(records)))
            }
            Err(error) => {
                failed = true;
                data.with_error_code(error).with_high_watermark(-1).with_records(Some(Bytes::new()))
            }
        };
        match topics.last_mut().filter(|t| t.topic == w.topic) {
            Some(t) => t.partitions.push(data),
            None => {
                topics.push(FetchableTopicResponse::default().with_topic(w.topic.clone()).with_partitions(vec![data]))
            }
        }
    }
    (FetchResponse::default().with_responses(topics), total, failed)
}

/// One partition's records as served (within `left` bytes and its own bound, or one
/// record whatever its size if `first`) and its high watermark; or its error code.
async fn read_partition(
    core: &Core,
    w: &Wanted,
    t: &TopicDescription,
    left: i64,
    first: bool,
    max_records: u32,
) -> Result<(Vec<u8>, i64), i16> {
    let partition = u32::try_from(w.partition).map_err(|_| E::UnknownTopicOrPartition.code())?;
    let hw = *t.high_watermarks.get(partition as usize).ok_or(E::UnknownTopicOrPartition.code())?;
    if let Some(error) = epoch_mismatch(w.leader_epoch, t.id) {
        // An older epoch is a position in an incarnation deleted since: it means
        // nothing in this one, so the consumer applies its offset reset policy.
        return Err(if error == E::FencedLeaderEpoch.code() { E::OffsetOutOfRange.code() } else { error });
    }
    let offset = u64::try_from(w.offset).map_err(|_| E::OffsetOutOfRange.code())?;
    // Before the first offset: a position of a deleted incarnation of the name (its
    // offsets all lie below this one's), which the consumer resets from.
    if offset > hw || offset < t.log_start {
        return Err(E::OffsetOutOfRange.code());
    }
    let limit = w.max_bytes.min(left).max(0);
    if offset == hw || (limit == 0 && !first) {
        return Ok((Vec::new(), hw as i64));
    }
    let max_records = (limit / MIN_SERVED_RECORD + 1).clamp(1, i64::from(max_records)) as u32;
    let command =
        Command::Fetch { topic: w.topic.0.to_string(), partition, offset, max_records, max_bytes: Some(limit as u64) };
    match core.submit(command).get().await {
        // Re-created between the look and the read: answered as the next look will see it.
        Ok(Reply::Fetched { topic, high_watermark, .. }) if topic != t.id => Ok((Vec::new(), high_watermark as i64)),
        Ok(Reply::Fetched { records, high_watermark, .. }) => {
            let mut out = Vec::new();
            for r in &records {
                let size = batches::served_len(r.key.as_deref(), &r.value) as i64;
                if out.len() as i64 + size > limit && !(first && out.is_empty()) {
                    break;
                }
                batches::serve(&mut out, r.offset, leader_epoch(t.id), r.key.as_deref(), &r.value);
            }
            Ok((out, high_watermark as i64))
        }
        Ok(_) => Err(E::UnknownServerError.code()),
        Err(e) => Err(code(&e)),
    }
}

/// ListOffsets; the leader epoch goes in the answer from version 4 on (it is not a field
/// of earlier versions, which then could not be encoded).
fn list_offsets(ctx: &Context, v: i16, r: ListOffsetsRequest) -> Pending {
    let topics: Vec<_> = r
        .topics
        .into_iter()
        .map(|t| {
            let answer = ctx.core.submit(Command::DescribeTopic { name: t.name.0.to_string() });
            (t, answer)
        })
        .collect();
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
                    let found = match &described {
                        Ok(Reply::Described(t)) => usize::try_from(p.partition_index)
                            .ok()
                            .and_then(|i| t.high_watermarks.get(i).copied())
                            .ok_or(E::UnknownTopicOrPartition.code())
                            .and_then(|hw| match epoch_mismatch(p.current_leader_epoch, t.id) {
                                Some(error) => Err(error),
                                None => Ok((hw, t.log_start, leader_epoch(t.id))),
                            }),
                        Ok(_) => Err(E::UnknownServerError.code()),
                        Err(e) => Err(code(e)),
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
        Some(Response::ListOffsets(ListOffsetsResponse::default().with_topics(responses)))
    })
}

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

fn create_topics(ctx: &Context, r: CreateTopicsRequest) -> Pending {
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
        Some(Response::CreateTopics(CreateTopicsResponse::default().with_topics(results)))
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

fn delete_topics(ctx: &Context, r: DeleteTopicsRequest) -> Pending {
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
        Some(Response::DeleteTopics(DeleteTopicsResponse::default().with_responses(results)))
    })
}

/// OffsetForLeaderEpoch: where a leader epoch ends. Each incarnation has one epoch (its
/// id): the current one ends at the high watermark; an older one (a deleted incarnation
/// of the name) ends where this incarnation begins, as Kafka answers for an epoch older
/// than its log's first (every position of it lies below, so a consumer that validates
/// its position then meets `OFFSET_OUT_OF_RANGE` and resets); a newer one is unknown.
fn offsets_for_epochs(ctx: &Context, r: OffsetForLeaderEpochRequest) -> Pending {
    use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    let topics: Vec<_> = r
        .topics
        .into_iter()
        .map(|t| {
            let answer = ctx.core.submit(Command::DescribeTopic { name: t.topic.0.to_string() });
            (t, answer)
        })
        .collect();
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
                    let t = match &described {
                        Ok(Reply::Described(t)) => t,
                        Ok(_) => return out.with_error_code(E::UnknownServerError.code()),
                        Err(e) => return out.with_error_code(code(e)),
                    };
                    let hw = usize::try_from(p.partition).ok().and_then(|i| t.high_watermarks.get(i).copied());
                    let Some(hw) = hw else { return out.with_error_code(E::UnknownTopicOrPartition.code()) };
                    if let Some(error) = epoch_mismatch(p.current_leader_epoch, t.id) {
                        return out.with_error_code(error);
                    }
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
        Some(Response::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(results)))
    })
}
