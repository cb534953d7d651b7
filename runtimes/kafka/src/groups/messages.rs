//! What the coordinator takes and gives: its limits, the requests of a join and a sync,
//! their outcomes, and the views of groups that DescribeGroups and ListGroups show,
//! shared by the coordinator, one group's state machine and its members.

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use std::time::Duration;
use tokio::sync::oneshot;

/// A group's state, as Kafka names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No member (members told `MEMBER_ID_REQUIRED` may be pending).
    Empty,
    /// A rebalance began: members rejoin until all have, or its timeout passes.
    PreparingRebalance,
    /// The rebalance's members are known: the leader's SyncGroup is awaited.
    CompletingRebalance,
    /// Every member has (or may fetch) its assignment.
    Stable,
}

impl State {
    /// Kafka's name of the state (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

/// The bounds on what the coordinator holds, and the timeouts it accepts.
#[derive(Clone, Debug)]
pub struct GroupLimits {
    /// Groups in memory at once (with a member, or one told `MEMBER_ID_REQUIRED`); a
    /// JoinGroup that would make one more is answered `COORDINATOR_NOT_AVAILABLE`.
    pub max_groups: usize,
    /// Members of one group, counting those told `MEMBER_ID_REQUIRED` (Kafka's
    /// `group.max.size`, whose default of 2^31 bounds nothing): past it a new member
    /// is answered `GROUP_MAX_SIZE_REACHED`.
    pub max_members: usize,
    /// One member's protocol type, names and metadata, and its assignment, each at most
    /// this many bytes: past it `UNKNOWN_SERVER_ERROR`, Kafka's answer when a group's
    /// record is over its log's message size (1 MiB by default, as here).
    pub max_member_bytes: usize,
    /// Everything all groups hold, counted as member.rs and group.rs count it: past
    /// it, what would add to it is answered `COORDINATOR_NOT_AVAILABLE` (retriable).
    pub max_bytes: usize,
    /// The session timeouts a JoinGroup may ask for; others get
    /// `INVALID_SESSION_TIMEOUT` (Kafka's `group.min.session.timeout.ms` and
    /// `group.max.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// See `min_session_timeout`.
    pub max_session_timeout: Duration,
    /// A longer rebalance timeout is taken as this one: a JoinGroup waits at most this
    /// long for the other members.
    pub max_rebalance_timeout: Duration,
}

impl Default for GroupLimits {
    fn default() -> GroupLimits {
        GroupLimits {
            max_groups: 10_000,
            max_members: 1_000,
            max_member_bytes: 1 << 20,
            max_bytes: 64 << 20,
            min_session_timeout: Duration::from_millis(1_000),
            max_session_timeout: Duration::from_secs(30 * 60),
            max_rebalance_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// A JoinGroup, as the coordinator takes it.
#[derive(Clone, Debug, Default)]
pub struct JoinRequest {
    /// The group.
    pub group: String,
    /// The member's id; empty for a new member.
    pub member_id: String,
    /// Static membership's id, which is refused (`UNSUPPORTED_VERSION`).
    pub group_instance_id: Option<String>,
    /// The request header's client id.
    pub client_id: String,
    /// Where the client connects from, as DescribeGroups shows it.
    pub client_host: String,
    /// The session timeout asked for.
    pub session_timeout_ms: i32,
    /// The rebalance timeout asked for; negative (version 0): the session timeout.
    pub rebalance_timeout_ms: i32,
    /// The protocol type ("consumer" for consumers).
    pub protocol_type: String,
    /// The protocols the member supports, preferred first: name and metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Version 4 on: a new member is given its id with `MEMBER_ID_REQUIRED` and must
    /// join again with it.
    pub require_known_member_id: bool,
}

/// A SyncGroup, as the coordinator takes it.
#[derive(Clone, Debug, Default)]
pub struct SyncRequest {
    /// The group.
    pub group: String,
    /// The member.
    pub member_id: String,
    /// Static membership's id, which is refused.
    pub group_instance_id: Option<String>,
    /// The generation the member joined.
    pub generation: i32,
    /// Version 5 on: what the member takes the group's protocol type to be.
    pub protocol_type: Option<String>,
    /// Version 5 on: what the member takes the group's protocol to be.
    pub protocol_name: Option<String>,
    /// The leader's assignments, by member id (others send none).
    pub assignments: Vec<(String, Bytes)>,
}

/// A member's place in a new generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// The generation.
    pub generation: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The protocol chosen.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's own id.
    pub member_id: String,
    /// For the leader, every member's id and metadata (for the protocol chosen), in
    /// the order they joined; empty for the others.
    pub members: Vec<(String, Bytes)>,
}

/// The answer to a JoinGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    /// In the new generation.
    Joined(Joined),
    /// Refused with `error`; `member_id` is echoed (for `MEMBER_ID_REQUIRED`, the id to
    /// join with).
    Failed {
        /// The error.
        error: E,
        /// The member id to answer with.
        member_id: String,
    },
}

impl JoinOutcome {
    /// A refusal.
    pub fn failed(error: E, member_id: String) -> JoinOutcome {
        JoinOutcome::Failed { error, member_id }
    }
}

/// A member's assignment, as SyncGroup answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synced {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The group's protocol.
    pub protocol_name: Option<String>,
    /// The assignment.
    pub assignment: Bytes,
}

/// The answer to a SyncGroup.
pub type SyncOutcome = Result<Synced, E>;

/// An answer now, or one to wait for.
#[derive(Debug)]
pub enum Wait<T> {
    /// Answered at once.
    Now(T),
    /// Answered when the group moves on (the sender is never dropped unanswered).
    Later(oneshot::Receiver<T>),
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct GroupView {
    /// Its state.
    pub state: State,
    /// Its protocol type ("" with no member).
    pub protocol_type: String,
    /// Its protocol, once stable ("" before).
    pub protocol: String,
    /// Its generation.
    pub generation: i32,
    /// The leader's member id.
    pub leader: String,
    /// Its members, in the order they joined.
    pub members: Vec<MemberView>,
}

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct MemberView {
    /// Its id.
    pub member_id: String,
    /// The client id it joined with.
    pub client_id: String,
    /// Where it connects from.
    pub client_host: String,
    /// Its metadata for the group's protocol, once stable.
    pub metadata: Bytes,
    /// Its assignment, once stable.
    pub assignment: Bytes,
}

/// A group as ListGroups shows it.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Its id.
    pub group: String,
    /// Its state.
    pub state: State,
    /// Its protocol type.
    pub protocol_type: String,
}
