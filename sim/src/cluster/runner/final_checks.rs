//! The end of a cluster run: the checks over the whole run, then, once it has settled,
//! the read-back of every node and one reconciliation by a fresh node. The checks are
//! [`crate::cluster::checkers`]; here the runner drives the nodes for them, each
//! command run to its reply with the store answering at once and without faults.

use super::{apply, Sim};
use crate::cluster::checkers::{self, no_orphans, settled::Settled};
use crate::cluster::store::SimStore;
use crate::violation::{Flags, Violation};
use broker_core::cluster::catalog::Catalog;
use broker_core::cluster::node::{Node, NodeEffect};
use broker_core::{BrokerError, Command, Reply, RequestId, Time};

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
                    let output = apply(store, violations, now, &op);
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
        checkers::run_over(&mut self.violations, self.now, &self.history, &self.store);
        if !self.quiescent() {
            checkers::liveness::never_quiesced(&mut Flags::new(self.now, &mut self.violations));
            return;
        }
        checkers::after_settling(self);
        self.reconcile_once();
    }

    /// One reconciliation by a fresh node, then the store must hold segments of live
    /// incarnations only, and nothing the layout does not know.
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
        no_orphans::after_reconciliation(&mut Flags::new(self.now, &mut self.violations), &self.store);
    }
}

/// The settled cluster, as the checkers that read it back ask it.
impl Settled for Sim {
    fn nodes(&self) -> usize {
        self.slots.len()
    }

    fn ask(&mut self, node: usize, command: Command) -> Option<Result<Reply, BrokerError>> {
        self.sync(node, command)
    }

    fn catalog(&self, node: usize) -> Option<&Catalog> {
        self.slots[node].node.as_ref().map(Node::catalog)
    }

    fn store(&self) -> &SimStore {
        &self.store
    }

    fn max_fetch_records(&self) -> u32 {
        self.config.max_fetch_records
    }

    fn flags(&mut self) -> Flags<'_> {
        Flags::new(self.now, &mut self.violations)
    }
}
