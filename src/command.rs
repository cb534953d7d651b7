//! Client commands and the broker's replies.

use crate::ids::TopicId;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Per-topic settings chosen at creation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSettings {
    /// How long after the delete physical removal waits, in milliseconds (never before the
    /// tombstone is durable either); at most [`crate::Config::max_grace_ms`], 0: at once.
    pub deletion_grace_ms: u64,
}

/// One record a client produces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceRecord {
    /// The key; keyed records go to `murmur2(key) % partitions`, keyless ones round-robin
    /// (unless the produce names its partition).
    pub key: Option<Vec<u8>>,
    /// The value. Key plus value may take at most [`crate::Config::max_record_bytes`].
    /// A shared buffer: cloning a record (a command kept for retries, or by a checker)
    /// does not copy its bytes.
    pub value: Bytes,
}

/// One stored record, as fetch returns it and as logs hold it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    /// Its offset in the partition: dense, never reused.
    pub offset: u64,
    /// The key as produced; `None` for a keyless record.
    pub key: Option<Vec<u8>>,
    /// The value, byte for byte as produced. It may share the buffer it was read into
    /// with the other records of that read, and keeps that buffer alive while it is
    /// held: to keep one small value long, copy it (`Bytes::copy_from_slice`).
    pub value: Bytes,
}

/// A consumer group's committed position in one partition of one incarnation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    /// The partition index.
    pub partition: u32,
    /// The next offset the group will read: between the partition's log start and its
    /// high watermark when committed.
    pub offset: u64,
    /// What the client stored with it (Kafka's `committed_metadata`), returned as given:
    /// at most [`crate::Config::max_offset_metadata_bytes`] bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metadata: String,
}

/// A client command. Each is answered by exactly one reply carrying its request id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a topic. Replied once its metadata is durable and its logs exist.
    CreateTopic {
        /// The name: 1..=249 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
        name: String,
        /// How many partitions, `1..=`[`crate::Config::max_partitions`].
        partitions: u32,
        /// Settings such as the deletion grace delay.
        settings: TopicSettings,
    },
    /// Delete a topic. Hidden at once; replied `DeleteAccepted` once the tombstone is
    /// durable and every request already admitted for the topic is answered (no reply
    /// for the topic follows the deletion's); its logs are removed in the background.
    DeleteTopic {
        /// The topic's name: its live incarnation, or the one already being deleted.
        name: String,
    },
    /// Append records. Replied once every record is durable in its partition's log.
    Produce {
        /// The name of the live topic to append to.
        topic: String,
        /// The partition every record goes to, whatever its key (a Kafka client picks
        /// partitions itself); `None`: each record's key decides, as on [`ProduceRecord::key`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<u32>,
        /// The records, at least one.
        records: Vec<ProduceRecord>,
    },
    /// Hand out a producer id for idempotent produces, at epoch 0. Replied once durable:
    /// no id is handed out twice, whatever the crashes.
    InitProducer,
    /// Append records to one partition as one batch of an idempotent producer: a retry
    /// of one of the producer's latest batches there is answered with the positions the
    /// first time gave, not appended again; a batch out of sequence, or from a fenced
    /// epoch, is refused ([`crate::ProducerBatch`] has the rules).
    ProduceIdempotent {
        /// The name of the live topic to append to.
        topic: String,
        /// The partition every record goes to.
        partition: u32,
        /// The producer, its epoch and the first record's sequence number.
        producer: crate::ProducerBatch,
        /// The records, at least one, each taking one sequence number.
        records: Vec<ProduceRecord>,
    },
    /// Read acknowledged records of one partition from an offset.
    Fetch {
        /// The name of the live topic to read.
        topic: String,
        /// The partition index, `0..partitions`.
        partition: u32,
        /// The first offset to return, at most the high watermark (at it, the reply is empty).
        offset: u64,
        /// The most records to return, `1..=`[`crate::Config::max_fetch_records`];
        /// [`crate::Config::max_fetch_bytes`] bounds the reply too.
        max_records: u32,
        /// The most bytes of keys and values to return (at most, and by default,
        /// [`crate::Config::max_fetch_bytes`]). The first record is returned whatever its
        /// size, so that a reader always makes progress.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u64>,
    },
    /// List live topics, ordered by name.
    ListTopics,
    /// Store a consumer group's positions in partitions of a live topic, replacing the
    /// group's earlier ones for those partitions. Replied once durable. Positions are
    /// kept under the topic's incarnation, not its name: they go with it when it is
    /// deleted, and a topic created again under the name starts with none.
    CommitOffsets {
        /// The group: 1..=249 bytes.
        group: String,
        /// The name of the live topic.
        topic: String,
        /// The incarnation the client read from (Kafka's leader epoch of its records);
        /// if it is not the live one, the commit is refused (a position of an older
        /// incarnation never lands on a newer one). `None`: the live one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incarnation: Option<TopicId>,
        /// The positions, at least one, each partition at most once.
        offsets: Vec<CommittedOffset>,
    },
    /// Read a consumer group's committed positions in a live topic's incarnation.
    FetchOffsets {
        /// The group.
        group: String,
        /// The name of the live topic.
        topic: String,
    },
    /// List the groups that hold a committed position, ordered by name.
    ListGroups,
    /// Forget every position a group committed, in every topic.
    DeleteGroup {
        /// The group.
        group: String,
    },
    /// Describe one live topic.
    DescribeTopic {
        /// The name of a live topic.
        name: String,
    },
}

impl Command {
    /// Whether this command commits, reads, lists or deletes consumer groups' offsets.
    pub fn is_group_offsets(&self) -> bool {
        matches!(
            self,
            Command::CommitOffsets { .. }
                | Command::FetchOffsets { .. }
                | Command::ListGroups
                | Command::DeleteGroup { .. }
        )
    }

    /// Whether this command hands out a producer id or appends as an idempotent producer.
    pub fn is_idempotent_producing(&self) -> bool {
        matches!(self, Command::InitProducer | Command::ProduceIdempotent { .. })
    }
}

/// Where one produced record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordPosition {
    /// The partition it went to: by key hash, or round-robin if keyless.
    pub partition: u32,
    /// Its offset in that partition, never reused.
    pub offset: u64,
}

/// A live topic as list and describe show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicDescription {
    /// The name, unique among live topics.
    pub name: String,
    /// The incarnation's id; re-creating the name gets a new one.
    pub id: TopicId,
    /// The partition count, fixed at creation.
    pub partitions: u32,
    /// The settings chosen at creation.
    pub settings: TopicSettings,
    /// Indexed by partition: its high watermark, one past its last acknowledged offset.
    pub high_watermarks: Vec<u64>,
    /// The first offset of every partition: past every offset the topics deleted before
    /// this one was created had acknowledged (0 for the topics of a broker that has
    /// deleted none with records).
    pub log_start: u64,
}

/// What a command returns on success; a failure is a [`crate::BrokerError`].
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
        /// The records, dense from the requested offset; empty if it is the high watermark.
        records: Vec<StoredRecord>,
        /// The partition's high watermark when the fetch was admitted.
        high_watermark: u64,
    },
    /// Live topics, ordered by name.
    Topics(Vec<TopicDescription>),
    /// One live topic.
    Described(TopicDescription),
    /// The positions are durable.
    OffsetsCommitted {
        /// The incarnation they were kept under.
        topic: TopicId,
    },
    /// A group's committed positions in one incarnation, by ascending partition; a
    /// partition with none committed is left out.
    Offsets {
        /// The incarnation read.
        topic: TopicId,
        /// The positions.
        offsets: Vec<CommittedOffset>,
    },
    /// The groups holding a committed position, ordered by name.
    Groups(Vec<String>),
    /// The group's positions are forgotten, durably.
    GroupDeleted,
    /// A producer id for idempotent produces, durably handed out.
    ProducerInitialized {
        /// The id.
        producer_id: u64,
        /// Its epoch.
        epoch: u16,
    },
}
