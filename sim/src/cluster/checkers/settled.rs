//! The cluster once its run has settled, as the checkers that read it back ask it:
//! the runner lends itself through [`Settled`], so the checkers drive nodes without
//! knowing the runner, and their violations land in order with those the store's
//! operations meanwhile raise.

use crate::cluster::store::SimStore;
use crate::violation::Flags;
use broker_core::cluster::catalog::Catalog;
use broker_core::{BrokerError, Command, Reply};

/// A settled cluster: its nodes, its store's record, and where violations go.
pub trait Settled {
    /// How many nodes it has.
    fn nodes(&self) -> usize;
    /// Runs `command` on node `node` to its reply, the store answering at once and
    /// without faults; `None` if the node is down.
    fn ask(&mut self, node: usize, command: Command) -> Option<Result<Reply, BrokerError>>;
    /// The catalog node `node` holds, if it is up.
    fn catalog(&self, node: usize) -> Option<&Catalog>;
    /// What the store ever held.
    fn store(&self) -> &SimStore;
    /// The most records a fetch asks for.
    fn max_fetch_records(&self) -> u32;
    /// Where violations go now.
    fn flags(&mut self) -> Flags<'_>;
}
