//! Consumer groups' membership, Kafka's classic group protocol, held in the listener's
//! memory: who is in each group, its generation, the leader's assignments, and the
//! deadlines (sessions, rebalances) that move groups on. Committed offsets are the
//! core's (`Command::CommitOffsets`); this is everything else a group is.
//!
//! - [`coordinator`]: the state of every group and the requests against it, pure (the
//!   time is passed in);
//! - [`group`]: one group's state machine (`Empty`, `PreparingRebalance`,
//!   `CompletingRebalance`, `Stable`);
//! - `member`: a member; `timers`: the deadlines, in one ordered index;
//! - [`Groups`]: the coordinator behind a lock, shared by every connection, with the
//!   task that carries out its deadlines.
//!
//! Nothing here waits on a client: an answer that must wait (a JoinGroup until the
//! rebalance completes, a follower's SyncGroup until the leader's assignment) is a
//! oneshot channel its connection's response future awaits, so a client that never
//! reads holds up only its own connection. Memory is bounded by [`GroupLimits`].
//! Membership does not survive a restart (members rejoin, as after a coordinator moves
//! in Kafka); committed offsets do.

pub mod coordinator;
pub mod group;
mod member;
mod timers;

pub use coordinator::Coordinator;
pub use group::State;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

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

/// The coordinator, shared by every connection of a listener: each request takes the
/// lock briefly (nothing is awaited under it), and a task started with the first
/// request carries out the deadlines.
#[derive(Clone)]
pub struct Groups {
    inner: Arc<Inner>,
}

struct Inner {
    coordinator: Mutex<Coordinator>,
    /// Woken after every request, so that the deadline task sees a new soonest deadline.
    changed: Notify,
    ticking: AtomicBool,
}

impl Groups {
    /// A coordinator with no groups; its member ids carry `nonce` (pick one that
    /// differs from run to run, so that ids given out before a restart are not given
    /// out again).
    pub fn new(limits: GroupLimits, nonce: u64) -> Groups {
        Groups {
            inner: Arc::new(Inner {
                coordinator: Mutex::new(Coordinator::new(limits, nonce)),
                changed: Notify::new(),
                ticking: AtomicBool::new(false),
            }),
        }
    }

    /// Runs `f` on the coordinator at the current time (tokio's clock, which the
    /// fuzz target pauses), starting the deadline task if it is not running yet; must
    /// be called inside the listener's runtime.
    pub fn with<R>(&self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        if !self.inner.ticking.swap(true, Ordering::AcqRel) {
            tokio::spawn(deadlines(self.inner.clone()));
        }
        let out = {
            let mut c = self.inner.coordinator.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut c, Instant::now())
        };
        self.inner.changed.notify_one();
        out
    }
}

/// Carries out the coordinator's deadlines as they fall due, for as long as the
/// runtime runs.
async fn deadlines(inner: Arc<Inner>) {
    loop {
        let next = inner.coordinator.lock().unwrap_or_else(|e| e.into_inner()).next_deadline();
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = inner.changed.notified() => {}
                }
            }
            None => inner.changed.notified().await,
        }
        inner.coordinator.lock().unwrap_or_else(|e| e.into_inner()).tick(Instant::now());
    }
}

#[cfg(test)]
mod tests;
