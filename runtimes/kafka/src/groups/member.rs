//! A member of a group: who it is, what it supports, what it was assigned, and the
//! responses it waits for.

use super::messages::{JoinOutcome, SyncOutcome};
use bytes::Bytes;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// What a member takes against the coordinator's byte budget besides its strings and
/// bytes (its bookkeeping, so that members of empty strings are not free).
pub(super) const MEMBER_OVERHEAD: usize = 512;
/// What each protocol a member lists takes besides its name and metadata.
pub(super) const PROTOCOL_OVERHEAD: usize = 64;

pub(super) struct Member {
    pub id: String,
    /// When it joined, for the leader's list and the choice of a new leader (Kafka's
    /// members are ordered so too).
    pub seq: u64,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// The protocols it supports, most preferred first: name and metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation (empty before).
    pub assignment: Bytes,
    /// Its JoinGroup, waiting for the rebalance to complete.
    pub awaiting_join: Option<oneshot::Sender<JoinOutcome>>,
    /// Its SyncGroup, waiting for the leader's assignment.
    pub awaiting_sync: Option<oneshot::Sender<SyncOutcome>>,
    /// When its session ends unless it is heard from; `None` while it awaits a join
    /// (the rebalance's deadline bounds that wait instead, as in Kafka).
    pub session_deadline: Option<Instant>,
}

impl Member {
    /// What the member takes against the byte budget.
    pub fn bytes(&self) -> usize {
        MEMBER_OVERHEAD
            + self.id.len()
            + self.client_id.len()
            + self.client_host.len()
            + protocols_bytes(&self.protocols)
            + self.assignment.len()
    }

    /// Its metadata for `protocol` (empty if it does not list it).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(name, _)| name == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }

    /// Whether it supports `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }
}

/// What a list of protocols takes against the byte budget.
pub(super) fn protocols_bytes(protocols: &[(String, Bytes)]) -> usize {
    protocols.iter().map(|(name, metadata)| PROTOCOL_OVERHEAD + name.len() + metadata.len()).sum()
}
