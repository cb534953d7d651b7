//! Rule O, the reconciler: objects of the data prefix that no incarnation owns are
//! deleted, segments and topic objects alike.

use super::*;

impl Node {
    pub(super) fn list_orphans(&mut self, after: Option<String>) {
        let op = StoreOp::List { prefix: DATA_PREFIX.into(), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::ReconcileList);
    }

    /// Deletes every listed segment whose incarnation this node knows to be removed;
    /// never one of a live or pending incarnation, never one whose id is past the
    /// node's position (a create not folded yet), never a key outside the layout. The
    /// segments of a live incarnation are skipped over in one step.
    pub(super) fn orphans_listed(&mut self, page: Page) {
        if self.reconcile.pass.is_none() {
            return;
        }
        // The next page starts after the last key, or, if that is a segment of an
        // incarnation not removed, after all of that incarnation's keys ('~' sorts after
        // its partitions), so a long live topic is skipped in one step.
        let next = page.next().map(|last| match parse_data_key(&last) {
            Some(topic) if !self.catalog.is_removed(topic) => format!("{}~", topic_prefix(topic)),
            _ => last,
        });
        let then = if page.more { Then::From(next) } else { Then::Done };
        let unknown_ids = planted!(self.options.config, ClusterReconcileUnknownIds);
        let orphan = |t: TopicId| {
            self.catalog.is_removed(t) || (unknown_ids && !self.catalog.live_topics().any(|(_, id, _)| id == t))
        };
        let orphans: Vec<String> = page.keys.into_iter().filter(|k| parse_data_key(k).is_some_and(orphan)).collect();
        self.reconcile.pass = Some((then.clone(), orphans.len()));
        for key in orphans {
            self.issue(StoreOp::Delete { key }, Purpose::ReconcileDelete);
        }
        if self.reconcile.pass.as_ref().is_some_and(|(_, left)| *left == 0) {
            self.reconcile_on(then);
        }
    }

    pub(super) fn orphan_deleted(&mut self) {
        self.reconcile.orphans_removed += 1;
        let Some((then, left)) = self.reconcile.pass.as_mut() else { return };
        *left = left.saturating_sub(1);
        if *left == 0 {
            let then = then.clone();
            self.reconcile_on(then);
        }
    }

    /// Lists the next page, or ends the pass after the last.
    pub(super) fn reconcile_on(&mut self, then: Then) {
        match then {
            Then::From(after) => {
                self.reconcile.pass = Some((Then::From(after.clone()), 0));
                self.list_orphans(after);
            }
            Then::Done => self.reconcile.pass = None,
        }
    }
}
