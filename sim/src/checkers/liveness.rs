//! **liveness**: once faults stop, the broker serves again and completes every pending
//! deletion within the bound ([`crate::run::LIVENESS_BOUND_MS`] of simulated time).

use crate::run::LIVENESS_BOUND_MS;
use broker_core::{DeletionStatus, Phase};

/// What breaks the invariant at the end of the run; `None` for the phase means the
/// process is down.
pub fn at_end(phase: Option<Phase>, pending: &[DeletionStatus]) -> Vec<String> {
    match phase {
        None => vec!["the broker is down when the run ends".into()],
        Some(phase) if phase != Phase::Serving => {
            vec![format!("the broker is {phase:?}, not serving, {LIVENESS_BOUND_MS} ms after faults stopped")]
        }
        Some(_) if !pending.is_empty() => vec![format!(
            "{} deletions still pending {LIVENESS_BOUND_MS} ms after faults stopped: {pending:?}",
            pending.len()
        )],
        Some(_) => Vec::new(),
    }
}
