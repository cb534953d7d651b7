//! Client commands and the broker's replies.

use crate::ids::TopicId;
use serde::{Deserialize, Serialize};

/// Per-topic settings chosen at creation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSettings {
    /// How long physical removal waits after the tombstone is durable, in milliseconds.
    pub deletion_grace_ms: u64,
}

/// One record a client produces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceRecord {
    /// The key; keyed records go to `murmur2(key) % partitions`, keyless ones round-robin.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
}

/// One stored record, as fetch returns it and as logs hold it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    /// Its offset in the partition: dense, never reused.
    pub offset: u64,
    /// The key.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
}

/// A client command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a topic. Replied once its metadata is durable and its logs exist.
    CreateTopic {
        /// The name: 1..=249 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
        name: String,
        /// How many partitions, 1..=the configured maximum.
        partitions: u32,
        /// Settings such as the deletion grace delay.
        settings: TopicSettings,
    },
    /// Delete a topic. Hidden at once; replied `DeleteAccepted` once the tombstone is
    /// durable and every request already admitted for the topic is answered (no reply
    /// for the topic follows the deletion's); its logs are removed in the background.
    DeleteTopic {
        /// The name.
        name: String,
    },
    /// Append records. Replied once every record is durable in its partition's log.
    Produce {
        /// The topic name.
        topic: String,
        /// The records, at least one.
        records: Vec<ProduceRecord>,
    },
    /// Read acknowledged records of one partition from an offset.
    Fetch {
        /// The topic name.
        topic: String,
        /// The partition.
        partition: u32,
        /// The first offset to return.
        offset: u64,
        /// The most records to return, at least 1.
        max_records: u32,
    },
    /// List live topics, ordered by name.
    ListTopics,
    /// Describe one live topic.
    DescribeTopic {
        /// The name.
        name: String,
    },
}

/// Where one produced record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordPosition {
    /// The partition.
    pub partition: u32,
    /// The offset within it.
    pub offset: u64,
}

/// A live topic as list and describe show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicDescription {
    /// The name.
    pub name: String,
    /// The incarnation.
    pub id: TopicId,
    /// The partition count.
    pub partitions: u32,
    /// The settings.
    pub settings: TopicSettings,
    /// The next offset to be acknowledged, per partition.
    pub high_watermarks: Vec<u64>,
}

/// A successful reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The topic exists: its metadata is durable and its logs are created.
    Created {
        /// The new incarnation's id.
        topic: TopicId,
    },
    /// The tombstone is durable; physical removal continues in the background.
    DeleteAccepted {
        /// The incarnation being deleted.
        topic: TopicId,
    },
    /// Every record is durable; positions are in the order the records were given.
    Produced {
        /// The incarnation the records went to.
        topic: TopicId,
        /// Where each record landed.
        positions: Vec<RecordPosition>,
    },
    /// Records from the requested offset, all below the high watermark.
    Fetched {
        /// The incarnation read from.
        topic: TopicId,
        /// The records, with dense offsets.
        records: Vec<StoredRecord>,
        /// The partition's high watermark when the fetch was admitted.
        high_watermark: u64,
    },
    /// Live topics, ordered by name.
    Topics(Vec<TopicDescription>),
    /// One live topic.
    Described(TopicDescription),
}
