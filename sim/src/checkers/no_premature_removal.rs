//! **no-premature-removal**: no log of a live topic is removed (a topic being created
//! counts as live), and no in-flight read fails because its log was removed under it.

use broker_core::{OpResult, StorageError, StorageOp, TopicId};

/// A removal about to be carried out while `live` are the broker's live topics.
pub fn removal(op: &StorageOp, live: &[TopicId]) -> Option<String> {
    match op {
        StorageOp::RemoveLog { log } if live.contains(&log.topic) => {
            Some(format!("log {log} of live topic {} removed", log.topic))
        }
        _ => None,
    }
}

/// An operation carried out, with its result.
pub fn result(op: &StorageOp, result: &OpResult) -> Option<String> {
    match (op, result) {
        (StorageOp::Read { log, offset, .. }, Err(StorageError::NotFound(_))) => {
            Some(format!("read of {log} from {offset} failed: its log was removed while the read was in flight"))
        }
        _ => None,
    }
}
