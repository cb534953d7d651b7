//! What a store adapter is: a [`Store`] carries out the node's operations, any number at
//! once, by the store contract (`broker_core::cluster::store`).

use broker_core::cluster::store::{StoreOp, StoreResult};
use std::future::Future;
use std::pin::Pin;

/// A store operation under way.
pub type Pending = Pin<Box<dyn Future<Output = StoreResult> + Send>>;

/// A shared store: carries out the node's operations, any number at once.
pub trait Store: Send + Sync + 'static {
    /// Carries out `op`. A write whose outcome the store cannot vouch for (an error
    /// after the request may have reached it) is `StoreError::Unknown`; any other
    /// error did nothing and is `StoreError::Failed`.
    fn run(&self, op: StoreOp) -> Pending;
}
