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

/// An operation as an error names it (without its bytes): what an adapter's error, and
/// the node loop's when the store does not answer in time, say was under way.
pub fn shown(op: &StoreOp) -> String {
    match op {
        StoreOp::Create { key, bytes } => format!("creating {key:?} ({} bytes)", bytes.len()),
        StoreOp::Get { key } => format!("reading {key:?}"),
        StoreOp::List { prefix, .. } => format!("listing {prefix:?}"),
        StoreOp::Delete { key } => format!("deleting {key:?}"),
    }
}
