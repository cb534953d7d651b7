//! Small builders of commands, and unwrappers of the replies tests expect.

use broker_core::{BrokerError, Command, ProduceRecord, Reply, StoredRecord, TopicId, TopicMeta, TopicSettings};

/// `CreateTopic` with default settings.
pub fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

/// `CreateTopic` with a deletion grace delay.
pub fn create_grace(name: &str, partitions: u32, grace_ms: u64) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings { deletion_grace_ms: grace_ms } }
}

/// `DeleteTopic`.
pub fn delete(name: &str) -> Command {
    Command::DeleteTopic { name: name.into() }
}

/// A record with an optional key.
pub fn rec(key: Option<&str>, value: &str) -> ProduceRecord {
    ProduceRecord { key: key.map(|k| k.as_bytes().to_vec()), value: value.as_bytes().to_vec().into() }
}

/// `Produce` of keyless records with these values.
pub fn produce(topic: &str, values: &[&str]) -> Command {
    Command::Produce { topic: topic.into(), partition: None, records: values.iter().map(|v| rec(None, v)).collect() }
}

/// `Produce` of keyed records `(key, value)`.
pub fn produce_keyed(topic: &str, records: &[(&str, &str)]) -> Command {
    Command::Produce {
        topic: topic.into(),
        partition: None,
        records: records.iter().map(|(k, v)| rec(Some(k), v)).collect(),
    }
}

/// `Fetch`.
pub fn fetch(topic: &str, partition: u32, offset: u64, max_records: u32) -> Command {
    Command::Fetch { topic: topic.into(), partition, offset, max_records, max_bytes: None }
}

/// The values of fetched records, as strings.
pub fn values(records: &[StoredRecord]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()).collect()
}

/// Unwraps a `Fetched` reply into its records and high watermark.
#[track_caller]
pub fn fetched(reply: Result<Reply, BrokerError>) -> (Vec<StoredRecord>, u64) {
    match reply {
        Ok(Reply::Fetched { records, high_watermark, .. }) => (records, high_watermark),
        other => panic!("expected Fetched, got {other:?}"),
    }
}

/// Unwraps a `Created` reply into the new topic id.
#[track_caller]
pub fn created(reply: Result<Reply, BrokerError>) -> broker_core::TopicId {
    match reply {
        Ok(Reply::Created { topic }) => topic,
        other => panic!("expected Created, got {other:?}"),
    }
}

/// Unwraps a `Produced` reply into `(partition, offset)` pairs.
#[track_caller]
pub fn produced(reply: Result<Reply, BrokerError>) -> Vec<(u32, u64)> {
    match reply {
        Ok(Reply::Produced { positions, .. }) => positions.iter().map(|p| (p.partition, p.offset)).collect(),
        other => panic!("expected Produced, got {other:?}"),
    }
}

/// A topic's journaled metadata: incarnation `id`, offsets from 0.
pub fn topic_meta(id: u64, name: &str, partitions: u32, grace_ms: u64) -> TopicMeta {
    TopicMeta {
        id: TopicId(id),
        name: name.into(),
        partitions,
        settings: TopicSettings { deletion_grace_ms: grace_ms },
        offset_base: 0,
    }
}
