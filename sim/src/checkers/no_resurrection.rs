//! **no-resurrection**: an acknowledged deletion is never undone, and no record appears
//! under an incarnation it was not produced to:
//!
//! - no incarnation whose deletion was acknowledged is live in a broker that recovered
//!   (when it reaches serving after a start, and at the end of the run), nor shown by a
//!   list or describe reply;
//! - a record a fetch shows at a position where the model holds none (neither
//!   acknowledged nor served there) is not a value acknowledged at another position
//!   (but for a retried idempotent batch's, which may have gone to two incarnations
//!   of its name, and whose place in one appended-once judges), and was not produced
//!   to another topic name than the incarnation's.
//!
//! The checker reads each part of a reply as the model folds it in ([`Seen`]), and the
//! live incarnations of each broker that reaches serving.

use crate::model::{label, Model, Seen};
use crate::violation::{Checker, Flags};
use broker_core::TopicId;

/// Judges one part of a reply, against the model as folded up to it.
pub(super) fn saw(flags: &mut Flags, model: &Model, seen: &Seen<'_>) {
    match seen {
        Seen::Fetched { at, record, .. } if !model.holds(at) => {
            let (topic, partition, offset) = *at;
            if let Some(home) = model.home_of(&record.value) {
                if home != *at && !model.producers.resent(&record.value) {
                    let detail = format!(
                        "{topic}/p{partition}@{offset} holds {}, acknowledged at {}/p{}@{}",
                        label(&record.value),
                        home.0,
                        home.1,
                        home.2
                    );
                    flags.flag(Checker::NoResurrection, detail);
                }
                return;
            }
            let name = model.topics.get(&topic).map(|t| &t.0);
            match model.produced_to(&record.value) {
                Some(sent_to) if name.is_some_and(|n| n != sent_to) => {
                    let detail = format!("{topic}/p{partition}@{offset} holds a record produced to {sent_to}");
                    flags.flag(Checker::NoResurrection, detail);
                }
                _ => {}
            }
        }
        Seen::Visible { id, name, .. } if model.deleted.contains(id) => {
            let detail = format!("{name} ({id}) is visible after its deletion was acknowledged");
            flags.flag(Checker::NoResurrection, detail);
        }
        _ => {}
    }
}

/// Judges the live incarnations of a broker that reached serving after a start (or is
/// serving at the end of the run).
pub(super) fn recovered(flags: &mut Flags, model: &Model, live: &[TopicId]) {
    for id in live.iter().filter(|id| model.deleted.contains(id)) {
        let detail = format!("{id} is live again after recovery; its deletion was acknowledged");
        flags.flag(Checker::NoResurrection, detail);
    }
}
