//! Identifiers that cross the boundary between the core and its runtime.

use serde::{Deserialize, Serialize};

/// A topic incarnation. Unique for the life of a data directory: re-creating a
/// name gets a new id, and storage is keyed by id, never by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicId(pub u64);

/// One partition log of one topic incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LogId {
    /// The incarnation that owns the log.
    pub topic: TopicId,
    /// The partition index, `0..partitions`.
    pub partition: u32,
}

impl LogId {
    /// The file name that byte-oriented runtimes store this log under.
    ///
    /// Derived from the id only, so no topic name ever becomes a path component.
    pub fn file_name(&self) -> String {
        format!("{:016x}-{:08x}.log", self.topic.0, self.partition)
    }

    /// Parses a name made by [`LogId::file_name`]; anything else is `None`.
    pub fn parse_file_name(name: &str) -> Option<LogId> {
        let stem = name.strip_suffix(".log")?;
        let (topic, partition) = stem.split_once('-')?;
        if topic.len() != 16 || partition.len() != 8 {
            return None;
        }
        if !topic.bytes().chain(partition.bytes()).all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
            return None;
        }
        let topic = u64::from_str_radix(topic, 16).ok()?;
        let partition = u32::from_str_radix(partition, 16).ok()?;
        Some(LogId { topic: TopicId(topic), partition })
    }
}

impl std::fmt::Display for TopicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "t{}", self.0)
    }
}

impl std::fmt::Display for LogId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/p{}", self.topic, self.partition)
    }
}

/// A client request, chosen by the runtime; its reply carries the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// A storage operation issued by the core; its completion must echo this id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpId(pub u64);
