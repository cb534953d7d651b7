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
//! - [`messages`]: what the coordinator takes and gives (limits, requests, outcomes,
//!   views of groups), shared by the modules above, which take nothing from this one;
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
pub mod messages;
mod timers;

pub use coordinator::Coordinator;
pub use messages::{
    GroupLimits, GroupView, JoinOutcome, JoinRequest, Joined, Listed, MemberView, State, SyncOutcome, SyncRequest,
    Synced, Wait,
};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::time::Instant;

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
