//! Rule R, removal: the segments of an incarnation whose grace delay ended are deleted,
//! by every node that folded its tombstone, and the removal is completed once.

use super::*;

impl Node {
    /// Starts removing the incarnation whose grace delay ended first, if none is being
    /// removed. Every node does this for every tombstone it folds: deletes are
    /// idempotent, so removals running at once on several nodes do no harm, and a node
    /// that dies mid-removal leaves the rest to the others.
    pub(super) fn start_removal(&mut self) {
        if self.removal.in_flight.is_some() || self.healing.broken.is_some() {
            return;
        }
        let Some((&topic, _)) = self.removal.due.iter().filter(|(_, at)| **at <= self.now).min_by_key(|(_, at)| **at)
        else {
            return;
        };
        self.removal.in_flight = Some((topic, 0));
        self.list_removal(topic, None);
    }

    pub(super) fn list_removal(&mut self, topic: TopicId, after: Option<String>) {
        let op = StoreOp::List { prefix: topic_prefix(topic), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::RemoveList(topic));
    }

    /// Deletes the segments a page lists, then lists again from the start; a page with
    /// none goes on to the next, and only a walk to the last page that finds none
    /// records the removal.
    pub(super) fn removal_listed(&mut self, topic: TopicId, page: Page) {
        if self.removal.in_flight.map(|(t, _)| t) != Some(topic) {
            return;
        }
        let next = page.next();
        let segments: Vec<String> = page.keys.into_iter().filter(|k| parse_data_key(k) == Some(topic)).collect();
        if segments.is_empty() && page.more {
            return self.list_removal(topic, next);
        }
        if segments.is_empty() {
            // Nothing of it is left: record that once (an append validates again, so a
            // completion another node appended first is not repeated).
            self.removal.due.remove(&topic);
            self.removal.in_flight = None;
            self.append.queue.push_back(Appendable::Removed(topic));
            self.pump_appends();
            return self.start_removal();
        }
        self.removal.in_flight = Some((topic, segments.len()));
        for key in segments {
            self.issue(StoreOp::Delete { key }, Purpose::RemoveSegment(topic));
        }
    }

    pub(super) fn segment_removed(&mut self, topic: TopicId) {
        let Some((t, left)) = self.removal.in_flight.as_mut().filter(|(t, _)| *t == topic) else { return };
        *left -= 1;
        if *left == 0 {
            let t = *t;
            // List again: more than one listing's worth, or a late write.
            self.list_removal(t, None);
        }
    }
}
