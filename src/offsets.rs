//! Consumer groups' committed offsets, keyed by group and topic incarnation: the state
//! the journal's commits, group deletions and snapshots describe, and the broker serves.
//!
//! Keyed by incarnation ([`TopicId`]), never by name: a deleted topic's positions go
//! with its tombstone ([`CommittedOffsets::drop_topic`]), so a topic created again under
//! the name starts every group afresh, by the group's reset policy.

use crate::command::CommittedOffset;
use crate::ids::TopicId;
use std::collections::BTreeMap;

/// The longest group id, in bytes (Kafka sets none; this one bounds what a journal
/// record and a snapshot hold per group).
pub const MAX_GROUP_BYTES: usize = 249;

/// One group's positions in one incarnation, as a snapshot records them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupOffsets {
    /// The group.
    pub group: String,
    /// The incarnation.
    pub topic: TopicId,
    /// The positions, by ascending partition.
    pub offsets: Vec<CommittedOffset>,
}

/// One group's positions in one incarnation, by partition: offset and metadata.
type Positions = BTreeMap<u32, (u64, String)>;

/// Every group's committed positions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommittedOffsets {
    /// By group, then incarnation, then partition: offset and metadata.
    groups: BTreeMap<String, BTreeMap<TopicId, Positions>>,
    /// What they take, as [`committed_bytes`] counts.
    bytes: u64,
}

/// What one committed position of `group` takes against
/// [`crate::Config::max_committed_offsets_bytes`]: its group, incarnation, partition,
/// offset and metadata, as a snapshot stores them.
pub fn committed_bytes(group: &str, metadata: &str) -> u64 {
    (4 + group.len() + 8 + 4 + 8 + 4 + metadata.len()) as u64
}

impl CommittedOffsets {
    /// Stores `offsets` for `group` in `topic`, replacing earlier ones of those partitions.
    pub fn commit(&mut self, group: &str, topic: TopicId, offsets: &[CommittedOffset]) {
        let parts = self.groups.entry(group.to_string()).or_default().entry(topic).or_default();
        for o in offsets {
            let added = committed_bytes(group, &o.metadata);
            if let Some((_, old)) = parts.insert(o.partition, (o.offset, o.metadata.clone())) {
                self.bytes -= committed_bytes(group, &old);
            }
            self.bytes += added;
        }
    }

    /// The bytes all positions would take after committing `offsets` for `group` in
    /// `topic` (what [`CommittedOffsets::commit`] would leave), without committing.
    pub fn bytes_after(&self, group: &str, topic: TopicId, offsets: &[CommittedOffset]) -> u64 {
        let parts = self.groups.get(group).and_then(|g| g.get(&topic));
        let mut replaced = BTreeMap::new();
        for o in offsets {
            if let Some((_, old)) = parts.and_then(|p| p.get(&o.partition)) {
                replaced.insert(o.partition, committed_bytes(group, old));
            }
        }
        let added: u64 = offsets.iter().map(|o| committed_bytes(group, &o.metadata)).sum();
        self.bytes + added - replaced.values().sum::<u64>()
    }

    /// The bytes all positions take.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// `group`'s positions in `topic`, by ascending partition.
    pub fn get(&self, group: &str, topic: TopicId) -> Vec<CommittedOffset> {
        let parts = self.groups.get(group).and_then(|g| g.get(&topic));
        parts
            .into_iter()
            .flatten()
            .map(|(&partition, (offset, metadata))| CommittedOffset {
                partition,
                offset: *offset,
                metadata: metadata.clone(),
            })
            .collect()
    }

    /// Forgets every position in `topic` (its tombstone is written).
    pub fn drop_topic(&mut self, topic: TopicId) {
        let mut freed = 0;
        self.groups.retain(|group, topics| {
            if let Some(parts) = topics.remove(&topic) {
                freed += parts.values().map(|(_, m)| committed_bytes(group, m)).sum::<u64>();
            }
            !topics.is_empty()
        });
        self.bytes -= freed;
    }

    /// Forgets every position of `group`; false if it had none.
    pub fn delete_group(&mut self, group: &str) -> bool {
        let Some(topics) = self.groups.remove(group) else { return false };
        self.bytes -= topics.values().flat_map(|p| p.values()).map(|(_, m)| committed_bytes(group, m)).sum::<u64>();
        true
    }

    /// Whether `group` holds any position.
    pub fn has_group(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// The groups holding a position, by name.
    pub fn groups(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// How many (group, incarnation) entries there are: what a snapshot lists.
    pub fn entries(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    /// Every entry, by group then incarnation, as a snapshot lists them.
    pub fn to_snapshot(&self) -> Vec<GroupOffsets> {
        let mut out = Vec::with_capacity(self.entries());
        for (group, topics) in &self.groups {
            for &topic in topics.keys() {
                out.push(GroupOffsets { group: group.clone(), topic, offsets: self.get(group, topic) });
            }
        }
        out
    }

    /// The state a snapshot's entries describe.
    pub fn from_snapshot(entries: &[GroupOffsets]) -> CommittedOffsets {
        let mut out = CommittedOffsets::default();
        for e in entries {
            out.commit(&e.group, e.topic, &e.offsets);
        }
        out
    }
}

/// Why `group` cannot name a group, if it cannot: it is empty or longer than
/// [`MAX_GROUP_BYTES`].
pub fn check_group(group: &str) -> Result<(), crate::BrokerError> {
    let reason = if group.is_empty() {
        "is empty".to_string()
    } else if group.len() > MAX_GROUP_BYTES {
        format!("is {} bytes long, over the limit of {MAX_GROUP_BYTES}", group.len())
    } else {
        return Ok(());
    };
    Err(crate::BrokerError::InvalidGroup { group: group.chars().take(64).collect(), reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: u32, offset: u64, metadata: &str) -> CommittedOffset {
        CommittedOffset { partition, offset, metadata: metadata.into() }
    }

    #[test]
    fn commits_replace_per_partition_and_bytes_follow() {
        let mut c = CommittedOffsets::default();
        let first = [at(0, 5, "ab"), at(1, 7, "")];
        assert_eq!(c.bytes_after("g", TopicId(1), &first), committed_bytes("g", "ab") + committed_bytes("g", ""));
        c.commit("g", TopicId(1), &first);
        let second = [at(0, 9, "abcd")];
        let expect = c.bytes_after("g", TopicId(1), &second);
        c.commit("g", TopicId(1), &second);
        assert_eq!(c.bytes(), expect);
        assert_eq!(c.bytes(), committed_bytes("g", "abcd") + committed_bytes("g", ""));
        assert_eq!(c.get("g", TopicId(1)), vec![at(0, 9, "abcd"), at(1, 7, "")]);
        assert_eq!(c.get("g", TopicId(2)), vec![]);
        assert_eq!(c.get("h", TopicId(1)), vec![]);
    }

    #[test]
    fn a_dropped_incarnation_leaves_no_position_and_no_bytes() {
        let mut c = CommittedOffsets::default();
        c.commit("g", TopicId(1), &[at(0, 5, "x")]);
        c.commit("g", TopicId(2), &[at(0, 6, "")]);
        c.commit("h", TopicId(1), &[at(3, 1, "")]);
        c.drop_topic(TopicId(1));
        assert_eq!(c.get("g", TopicId(1)), vec![]);
        assert_eq!(c.groups(), vec!["g".to_string()], "h held positions in the dropped incarnation only");
        assert_eq!(c.bytes(), committed_bytes("g", ""));
        assert!(c.delete_group("g"));
        assert!(!c.delete_group("g"));
        assert_eq!((c.bytes(), c.entries()), (0, 0));
    }

    #[test]
    fn a_snapshot_recreates_the_state() {
        let mut c = CommittedOffsets::default();
        c.commit("b", TopicId(4), &[at(2, 5, "m"), at(0, 1, "")]);
        c.commit("a", TopicId(9), &[at(0, 3, "")]);
        let snap = c.to_snapshot();
        assert_eq!(snap.iter().map(|e| e.group.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(CommittedOffsets::from_snapshot(&snap), c);
    }

    #[test]
    fn group_ids_are_bounded() {
        assert!(check_group("").is_err());
        assert!(check_group(&"g".repeat(MAX_GROUP_BYTES)).is_ok());
        assert!(check_group(&"g".repeat(MAX_GROUP_BYTES + 1)).is_err());
    }
}
