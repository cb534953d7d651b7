//! **heals-in-bound**: a node that can reach the store again (or restarted) has read
//! every journal entry that existed then within a bound: [`HEAL_BOUND_MS`], plus for
//! each page of entries it has to list and read, four one-way trips at the seed's
//! longest latency and one timeout. A check lapses if its node crashes or is cut off
//! again meanwhile; and the run does not settle while a node is behind a check.

use crate::cluster::params::ClusterParams;
use crate::violation::{Checker, Flags};
use broker_core::Time;
use std::collections::BTreeMap;

/// How long after it can reach the store again (or after it restarts) a node must
/// have read every journal entry that existed then: this, plus for each page of entries
/// it has to list and read, four one-way trips at the seed's longest latency and one
/// timeout.
pub const HEAL_BOUND_MS: u64 = 30_000;

/// A node, in this life and not cut since `since`, must have read entry `tail` by the
/// time the check is due.
#[derive(Clone, Copy, Debug)]
pub struct HealCheck {
    /// The node.
    pub node: usize,
    /// Its life when it healed (or started).
    pub life: u32,
    /// When its last cut began then.
    pub since: Time,
    /// The journal's last entry then.
    pub tail: u64,
}

/// Where a node that is up stands now.
#[derive(Clone, Copy, Debug)]
pub struct Standing {
    /// Its life.
    pub life: u32,
    /// When its last cut began.
    pub cut_at: Time,
    /// Whether it is cut off from the store now.
    pub cut_off: bool,
    /// The last journal entry it has read.
    pub position: u64,
}

/// How long, in microseconds, a node at `position` has to read the journal to `tail`.
pub fn bound_us(cp: &ClusterParams, position: u64, tail: u64) -> u64 {
    let pages = tail.saturating_sub(position).div_ceil(u64::from(cp.list_limit.max(1)));
    Time::from_millis(HEAL_BOUND_MS).as_micros() + pages * page_allowance(cp)
}

/// The time one page of journal entries may take to read, in microseconds: a listing
/// and the reads of what it lists, at the seed's longest latency, and one timeout.
fn page_allowance(cp: &ClusterParams) -> u64 {
    4 * cp.latency_us.1 + cp.timeout_us
}

/// Where the node of `check` has read to, if the check still applies (same life, not
/// cut again) and it has not read to the check's tail yet. `standing` is `None` for a
/// node that is down.
fn behind(check: &HealCheck, standing: Option<Standing>) -> Option<u64> {
    let now = standing?;
    if now.life != check.life || now.cut_at > check.since || now.cut_off {
        return None;
    }
    (now.position < check.tail).then_some(now.position)
}

/// The checks not yet due, by id.
#[derive(Debug, Default)]
pub struct HealsInBound {
    checks: BTreeMap<u64, HealCheck>,
}

impl HealsInBound {
    /// Check `id` is due once its bound has passed.
    pub fn expect(&mut self, id: u64, check: HealCheck) {
        self.checks.insert(id, check);
    }

    /// Whether no node is behind a check not yet due; `standing` tells where a node
    /// stands now.
    pub fn all_met(&self, standing: impl Fn(usize) -> Option<Standing>) -> bool {
        self.checks.values().all(|c| behind(c, standing(c.node)).is_none())
    }

    /// The bound of check `id` has passed.
    pub fn due(&mut self, flags: &mut Flags, id: u64, standing: impl Fn(usize) -> Option<Standing>) {
        let Some(check) = self.checks.remove(&id) else { return };
        let HealCheck { node, tail, .. } = check;
        let Some(position) = behind(&check, standing(node)) else { return };
        flags.flag(
            Checker::HealsInBound,
            format!(
                "node {node} has read the journal to entry {position} only, in the bound since it could reach the \
                 store, when the journal held {tail} entries"
            ),
        );
    }
}
