//! What clients sent and were told of consumer groups' committed offsets: every commit
//! and group deletion, in the order the broker applied them, each with its outcome so
//! far. The model records; [`crate::checkers`] judge (group-offsets).
//!
//! One broker takes commands one at a time, as they arrive: a commit, read, list or
//! deletion of group offsets takes effect when it is admitted (its reply waits only for
//! the journal), so request ids, which ascend in issue order, order their effects.

use broker_core::{BrokerError, Command, CommittedOffset, Reply, RequestId, TopicId};
use std::collections::BTreeMap;

/// How a group write turned out, as far as the clients know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet.
    InFlight,
    /// Cut off by a crash or a halt: it may or may not have taken effect.
    Unknown,
    /// Acknowledged: a commit, kept under this incarnation; a group deletion, done.
    Acked(Option<TopicId>),
    /// Refused with an error: it changed nothing.
    Refused,
}

impl Outcome {
    /// Whether it may have taken effect without the clients being told (in flight or
    /// cut off).
    pub fn maybe(self) -> bool {
        matches!(self, Outcome::InFlight | Outcome::Unknown)
    }
}

/// A commit or a group deletion.
#[derive(Clone, Debug)]
pub enum WriteKind {
    /// A commit of positions in a topic, by name.
    Commit {
        /// The topic's name.
        topic: String,
        /// The incarnation the commit named, if it named one.
        incarnation: Option<TopicId>,
        /// The positions sent.
        offsets: Vec<CommittedOffset>,
    },
    /// A deletion of the group.
    Delete,
}

/// One write to a group.
#[derive(Clone, Debug)]
pub struct GroupWrite {
    /// What it asked.
    pub kind: WriteKind,
    /// How it turned out.
    pub outcome: Outcome,
}

impl GroupWrite {
    /// The position this write, a commit to `topic`, sent for `partition` (the first if
    /// it named the partition twice).
    pub fn position(&self, topic: &str, partition: u32) -> Option<&CommittedOffset> {
        match &self.kind {
            WriteKind::Commit { topic: t, offsets, .. } if t == topic => {
                offsets.iter().find(|o| o.partition == partition)
            }
            _ => None,
        }
    }
}

/// The consumer groups' part of the reference model.
#[derive(Debug, Default)]
pub struct Groups {
    /// Every commit and group deletion sent, by group, then request id.
    writes: BTreeMap<String, BTreeMap<RequestId, GroupWrite>>,
    /// The group of each write in flight.
    open: BTreeMap<RequestId, String>,
    /// The id of the last request issued.
    last_issued: u64,
    /// For each incarnation whose deletion was acknowledged, the last request issued
    /// before the acknowledgement: every request issued after it found the incarnation
    /// gone, and its positions with it.
    deleted_after: BTreeMap<TopicId, u64>,
    /// Records sent by every produce so far: every offset the broker handed out is
    /// below it (an incarnation's offsets start past those of the incarnations deleted
    /// before it, which sent records of their own), and so is every high watermark.
    records_sent: u64,
}

impl Groups {
    /// A request is issued.
    pub fn issued(&mut self, request: RequestId, command: &Command) {
        self.last_issued = self.last_issued.max(request.0);
        let (group, kind) = match command {
            Command::Produce { records, .. } | Command::ProduceIdempotent { records, .. } => {
                self.records_sent += records.len() as u64;
                return;
            }
            Command::CommitOffsets { group, topic, incarnation, offsets } => {
                let kind =
                    WriteKind::Commit { topic: topic.clone(), incarnation: *incarnation, offsets: offsets.clone() };
                (group, kind)
            }
            Command::DeleteGroup { group } => (group, WriteKind::Delete),
            _ => return,
        };
        self.writes.entry(group.clone()).or_default().insert(request, GroupWrite { kind, outcome: Outcome::InFlight });
        self.open.insert(request, group.clone());
    }

    /// A reply arrives.
    pub fn replied(&mut self, request: RequestId, reply: &Result<Reply, BrokerError>) {
        let Some(group) = self.open.remove(&request) else { return };
        let outcome = match reply {
            Ok(Reply::OffsetsCommitted { topic }) => Outcome::Acked(Some(*topic)),
            Ok(Reply::GroupDeleted) => Outcome::Acked(None),
            Err(BrokerError::Halted(_)) => Outcome::Unknown,
            Err(_) => Outcome::Refused,
            // A reply of another kind (model-agreement flags it) tells nothing.
            Ok(_) => Outcome::Unknown,
        };
        if let Some(w) = self.writes.get_mut(&group).and_then(|g| g.get_mut(&request)) {
            w.outcome = outcome;
        }
    }

    /// Every write in flight was cut off by a crash.
    pub fn crashed(&mut self) {
        for (request, group) in std::mem::take(&mut self.open) {
            if let Some(w) = self.writes.get_mut(&group).and_then(|g| g.get_mut(&request)) {
                w.outcome = Outcome::Unknown;
            }
        }
    }

    /// The deletion of incarnation `topic` was acknowledged.
    pub fn topic_deleted(&mut self, topic: TopicId) {
        self.deleted_after.entry(topic).or_insert(self.last_issued);
    }

    /// Whether `topic`'s deletion was acknowledged before `request` was issued.
    pub fn deleted_before(&self, topic: TopicId, request: RequestId) -> bool {
        self.deleted_after.get(&topic).is_some_and(|last| *last < request.0)
    }

    /// Records sent by every produce issued so far.
    pub fn records_sent(&self) -> u64 {
        self.records_sent
    }

    /// Every group a commit or deletion was sent for, by name.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.writes.keys().map(String::as_str)
    }

    /// The writes to `group` issued before `request`, latest first.
    pub fn before<'a>(
        &'a self,
        group: &str,
        request: RequestId,
    ) -> impl Iterator<Item = (RequestId, &'a GroupWrite)> + 'a {
        self.writes.get(group).into_iter().flat_map(move |w| w.range(..request).rev().map(|(r, w)| (*r, w)))
    }
}
