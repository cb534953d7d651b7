//! The coordinator's deadlines, in one ordered index: each member's session, each
//! member told `MEMBER_ID_REQUIRED` and not yet joined, each group's rebalance. Every
//! deadline is also held where it belongs (a member, a group), and changed only through
//! [`Timers::reset`], so that the index never holds a stale entry: what it yields is due.

use std::collections::BTreeSet;
use tokio::time::Instant;

/// What a deadline ends.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// The rebalance of `group` completes with the members that rejoined.
    Rebalance { group: String },
    /// `member` of `group` sent no heartbeat for its session timeout: it is removed.
    Session { group: String, member: String },
    /// `member`, told `MEMBER_ID_REQUIRED`, did not join with its id in time: forgotten.
    Pending { group: String, member: String },
}

/// Every deadline, soonest first.
#[derive(Debug, Default)]
pub(super) struct Timers(BTreeSet<(Instant, Timer)>);

impl Timers {
    /// Moves the deadline held in `slot` (for `timer`) to `at`, or clears it (`None`).
    pub fn reset(&mut self, slot: &mut Option<Instant>, at: Option<Instant>, timer: Timer) {
        if let Some(old) = slot.take() {
            self.0.remove(&(old, timer.clone()));
        }
        if let Some(at) = at {
            self.0.insert((at, timer));
            *slot = Some(at);
        }
    }

    /// The soonest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.0.first().map(|(at, _)| *at)
    }

    /// Takes the soonest deadline if it is due at `now`; its holder's slot must then be
    /// cleared (`reset` to `None` finds nothing to remove).
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        match self.0.first() {
            Some((at, _)) if *at <= now => self.0.pop_first().map(|(_, t)| t),
            _ => None,
        }
    }

    /// How many deadlines are set.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}
