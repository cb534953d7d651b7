//! **no-orphans**, in cluster runs: once the run has settled and one reconciliation by
//! a fresh node has run, the store holds segments of live incarnations only, and no key
//! outside the layout but those planted before the run (the journal and the snapshots
//! are the layout's).

use crate::cluster::store::SimStore;
use crate::violation::{Checker, Flags};
use broker_core::cluster::keys::{parse_data_key, parse_journal_key};
use broker_core::TopicId;
use std::collections::BTreeSet;

/// A reconciliation has run on the settled store.
pub fn after_reconciliation(flags: &mut Flags, store: &SimStore) {
    let live: BTreeSet<TopicId> = store.truth.live_topics().map(|(_, id, _)| id).collect();
    for key in store.objects.keys() {
        if let Some(topic) = parse_data_key(key) {
            if !live.contains(&topic) {
                flags.flag(Checker::NoOrphans, format!("data {key} of {topic} left after a reconciliation"));
            }
        } else if parse_journal_key(key).is_none() && !key.starts_with("s/") && !store.foreign.contains(key) {
            flags.flag(Checker::NoOrphans, format!("{key} is no key of the layout"));
        }
    }
}
