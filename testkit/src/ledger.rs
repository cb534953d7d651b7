//! What clients were told about records, by position: the part every reference model of
//! the workspace shares (the simulator's model, the fuzz oracle; the sequential model of
//! broker-core's `tests/model.rs` predicts replies exactly and needs none of it).
//!
//! A position is `(incarnation, partition, offset)`. A record is *acknowledged* there by a
//! produce reply, or *served* there by a fetch before any acknowledgement (a restarted
//! broker serves what it found below the high watermark). Either way, from then on every
//! read of the position must give the same record: the ledger keeps the first one, and
//! the models judge later replies against it.

use broker_core::TopicId;
use std::collections::BTreeMap;

/// A record's position: incarnation, partition, offset.
pub type Position = (TopicId, u32, u64);

/// Records clients were told about, by position.
#[derive(Clone, Debug)]
pub struct Ledger<R> {
    /// Records a produce reply acknowledged.
    pub acked: BTreeMap<Position, R>,
    /// Records a fetch served where nothing was acknowledged (yet).
    pub served: BTreeMap<Position, R>,
}

impl<R> Default for Ledger<R> {
    fn default() -> Ledger<R> {
        Ledger { acked: BTreeMap::new(), served: BTreeMap::new() }
    }
}

impl<R> Ledger<R> {
    /// Notes that a produce reply acknowledged `record` at `at`. Returns the record
    /// acknowledged there before, if any: an offset acknowledged twice, which is a bug.
    pub fn acknowledge(&mut self, at: Position, record: R) -> Option<R> {
        self.acked.insert(at, record)
    }

    /// Notes that a fetch served `record` at `at`; the first record served or
    /// acknowledged at a position is the one every later read must give.
    pub fn serve(&mut self, at: Position, record: R) {
        if !self.acked.contains_key(&at) {
            self.served.entry(at).or_insert(record);
        }
    }

    /// The record clients were told of at `at`: acknowledged, else served.
    pub fn known(&self, at: &Position) -> Option<&R> {
        self.acked.get(at).or_else(|| self.served.get(at))
    }

    /// Whether clients were told of a record at `at`.
    pub fn holds(&self, at: &Position) -> bool {
        self.acked.contains_key(at) || self.served.contains_key(at)
    }

    /// Whether a produce reply acknowledged a record at `at`.
    pub fn is_acked(&self, at: &Position) -> bool {
        self.acked.contains_key(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_record_at_a_position_is_the_one_kept() {
        let at = (TopicId(1), 0, 5);
        let mut l = Ledger::default();
        l.serve(at, "served");
        l.serve(at, "served later");
        assert_eq!(l.known(&at), Some(&"served"));
        assert!(l.holds(&at) && !l.is_acked(&at));
        // An acknowledgement takes precedence over what was served...
        assert_eq!(l.acknowledge(at, "acked"), None);
        assert_eq!(l.known(&at), Some(&"acked"));
        // ...and a second one reports the first.
        assert_eq!(l.acknowledge(at, "again"), Some("acked"));
        // Nothing served after an acknowledgement is kept as served.
        let other = (TopicId(1), 0, 6);
        l.acknowledge(other, "x");
        l.serve(other, "y");
        assert!(!l.served.contains_key(&other));
    }
}
