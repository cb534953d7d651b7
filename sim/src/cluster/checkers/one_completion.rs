//! **one-completion**: at most one `Removed` journal entry per incarnation, judged as
//! each lands (two nodes that both finished one removal must not both complete it).

use crate::cluster::store::Fact;
use crate::violation::{Checker, Flags};

/// Whether `fact` is the landing of a second (or later) `Removed` of one incarnation.
/// Such an entry is this checker's alone: one-live-incarnation leaves it.
pub fn is_second(fact: &Fact) -> bool {
    matches!(fact, Fact::EntryFolded { completion: Some((_, n)), .. } if *n > 1)
}

/// The store carried out an operation that did `fact`.
pub fn store_did(flags: &mut Flags, fact: &Fact) {
    if let Fact::EntryFolded { seq, completion: Some((topic, n)), .. } = fact {
        if *n > 1 {
            flags.flag(Checker::OneCompletion, format!("journal entry {seq}: a second Removed of {topic}"));
        }
    }
}
