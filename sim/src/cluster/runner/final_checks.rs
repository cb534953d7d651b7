//! The final checks of a cluster run, once it has settled: every node's catalog against
//! the journal, every partition read back from every node, and one reconciliation by a
//! fresh node that must leave no orphan.

use super::Sim;
use crate::cluster::lifecycle;
use crate::cluster::store::SimStore;
use crate::run::LIVENESS_BOUND_MS;
use crate::violation::{Checker, Violation};
use broker_core::cluster::keys::{parse_journal_key, parse_segment_key};
use broker_core::cluster::node::{Node, NodeEffect};
use broker_core::{BrokerError, Command, Reply, RequestId, Time, TopicId};
use std::collections::BTreeSet;

impl Sim {
    /// Runs one command on node `n` to its reply, with the store answering at once and
    /// without faults (for the final checks).
    fn sync(&mut self, n: usize, command: Command) -> Option<Result<Reply, BrokerError>> {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        let now = self.now;
        let node = self.slots[n].node.as_mut()?;
        node.handle_command(now, request, command);
        Self::settle_node(node, now, &mut self.store, &mut self.violations, Some(request))
    }

    fn settle_node(
        node: &mut Node,
        now: Time,
        store: &mut SimStore,
        violations: &mut Vec<Violation>,
        request: Option<RequestId>,
    ) -> Option<Result<Reply, BrokerError>> {
        let mut answer = None;
        let mut now = now;
        for _ in 0..1_000_000 {
            match node.poll_effect() {
                Some(NodeEffect::Store { id, op }) => {
                    let output = store.apply(now, &op, violations);
                    node.handle_store(now, id, Ok(output));
                }
                Some(NodeEffect::Reply { request: r, reply }) if Some(r) == request => answer = Some(reply),
                Some(NodeEffect::Reply { .. }) => {}
                // An operation that failed before the run settled waits for its backoff.
                None => match node.poll_timeout() {
                    Some(at) if answer.is_none() && request.is_some() => {
                        now = now.max(at);
                        node.handle_timeout(now);
                    }
                    _ => break,
                },
            }
        }
        answer
    }

    pub(super) fn final_checks(&mut self) {
        for (id, t) in self.store.truth.deleting().map(|(id, t)| (id, t.name.clone())).collect::<Vec<_>>() {
            self.flag(
                Checker::Liveness,
                format!("the deletion of {t:?} ({id}) never completed, {LIVENESS_BOUND_MS} ms after faults stopped"),
            );
        }
        let unanswered: Vec<(RequestId, usize)> = self
            .history
            .calls
            .iter()
            .filter(|(_, c)| c.answer.is_none() && !c.cut_off)
            .map(|(r, c)| (*r, c.node))
            .collect();
        for (r, n) in unanswered {
            self.flag(Checker::EveryRequestAnswered, format!("req{} to node {n} was never answered", r.0));
        }
        for (at, checker, detail) in lifecycle::judge(&self.history, &self.store) {
            self.violations.push(Violation { checker, at, detail });
        }
        if !self.quiescent() {
            if self.script.is_some() {
                let detail = "the scripted run never quiesced: the final read-back and reconciliation could not run";
                self.flag(Checker::Liveness, detail.into());
            }
            return;
        }
        self.read_back();
        self.reconcile_once();
    }

    /// Every node, fenced, holds the journal's catalog and serves every record ever
    /// written to a live topic, at its offset.
    fn read_back(&mut self) {
        let live: Vec<(String, TopicId, u32)> =
            self.store.truth.live_topics().map(|(n, id, t)| (n.to_string(), id, t.partitions)).collect();
        for n in 0..self.slots.len() {
            self.sync(n, Command::ListTopics);
            let same = self.slots[n].node.as_ref().is_some_and(|node| node.catalog() == &self.store.truth);
            if !same {
                self.flag(Checker::OneLiveIncarnation, format!("node {n}, fenced at the end, holds another catalog"));
                continue;
            }
            for (name, topic, partitions) in &live {
                for p in 0..*partitions {
                    let end = self.store.end(*topic, p);
                    let mut offset = 0;
                    while offset < end {
                        let max_records = self.config.max_fetch_records;
                        let fetch =
                            Command::Fetch { topic: name.clone(), partition: p, offset, max_records, max_bytes: None };
                        let got = self.sync(n, fetch);
                        let Some(Ok(Reply::Fetched { topic: t, records, high_watermark })) = got else {
                            self.flag(
                                Checker::AckedReadableEverywhere,
                                format!("node {n}: fetch of {name:?}/{p}@{offset} answered {got:?}"),
                            );
                            break;
                        };
                        let wrong =
                            records.iter().find(|r| self.store.value_at(*topic, p, r.offset) != Some(&r.value[..]));
                        if t != *topic || high_watermark != end || records.is_empty() || wrong.is_some() {
                            let first = records.first().map(|r| r.offset);
                            self.flag(
                                Checker::AckedReadableEverywhere,
                                format!(
                                    "node {n}: {name:?}/{p}@{offset} ({topic}, written to {end}) served {t} with {} \
                                     records from {first:?}, high watermark {high_watermark}{}",
                                    records.len(),
                                    if wrong.is_some() { ", one of them never written there" } else { "" }
                                ),
                            );
                            break;
                        }
                        offset += records.len() as u64;
                    }
                }
            }
        }
    }

    /// One reconciliation by a fresh node leaves segments of live incarnations only,
    /// and the journal holds nothing it cannot read.
    fn reconcile_once(&mut self) {
        let mut options = self.options(self.slots.len());
        options.reconcile_every_ms = 1;
        options.tail_every_ms = 0;
        let mut auditor = Node::new(options);
        let request = RequestId(self.next_request);
        self.next_request += 1;
        auditor.handle_command(self.now, request, Command::ListTopics);
        Self::settle_node(&mut auditor, self.now, &mut self.store, &mut self.violations, Some(request));
        auditor.handle_timeout(self.now.plus_millis(2));
        Self::settle_node(&mut auditor, self.now, &mut self.store, &mut self.violations, None);
        self.stats.orphans_removed = auditor.orphans_removed();
        let live: BTreeSet<TopicId> = self.store.truth.live_topics().map(|(_, id, _)| id).collect();
        let keys: Vec<String> = self.store.objects.keys().map(str::to_string).collect();
        for key in keys {
            if let Some((topic, _, _)) = parse_segment_key(&key) {
                if !live.contains(&topic) {
                    self.flag(Checker::NoOrphans, format!("segment {key} of {topic} left after a reconciliation"));
                }
            } else if parse_journal_key(&key).is_none() && !key.starts_with("s/") && !self.store.foreign.contains(&key)
            {
                // Keys outside the layout are only those planted before the run.
                self.flag(Checker::NoOrphans, format!("{key} is no key of the layout"));
            }
        }
    }
}
