//! **no-premature-removal**, in cluster runs: no segment is deleted before its
//! incarnation's tombstone landed, and no key planted outside the layout is ever
//! deleted; judged as each delete reaches the store.

use crate::cluster::store::Fact;
use crate::violation::{Checker, Flags};

/// The store carried out an operation that did `fact`.
pub fn store_did(flags: &mut Flags, fact: &Fact) {
    match fact {
        Fact::ForeignDeleted { key } => {
            flags.flag(Checker::NoPrematureRemoval, format!("{key}, a key outside the layout, deleted"))
        }
        Fact::SegmentDeleted { key, topic, tombstoned: false } => {
            flags.flag(Checker::NoPrematureRemoval, format!("segment {key} deleted while {topic} is not deleted"))
        }
        _ => {}
    }
}
