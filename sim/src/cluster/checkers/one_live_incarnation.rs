//! **one-live-incarnation**: every journal entry decodes, lands right after the one
//! before and folds (never a second live incarnation of a name), judged as each lands;
//! every incarnation a reply shows, and every acknowledged create, is the journal's;
//! and every node, fenced once the run has settled, holds the journal's catalog.

use super::judged::Judged;
use super::one_completion;
use super::settled::Settled;
use crate::cluster::store::{Fact, Life};
use crate::violation::{Checker, Flags};
use broker_core::TopicId;

/// The store carried out an operation that did `fact`.
pub fn store_did(flags: &mut Flags, fact: &Fact) {
    match fact {
        Fact::EntryUndecodable { seq, error } => {
            flags.flag(Checker::OneLiveIncarnation, format!("journal entry {seq} written undecodable: {error}"))
        }
        Fact::EntryAfterGap { seq, position } => {
            flags.flag(Checker::OneLiveIncarnation, format!("journal entry {seq} landed after entry {position}"))
        }
        Fact::EntryFolded { seq, ignored: Some(why), .. } if !one_completion::is_second(fact) => {
            flags.flag(Checker::OneLiveIncarnation, format!("journal entry {seq} contradicts the journal: {why}"))
        }
        _ => {}
    }
}

/// A reply shows `topic` as an incarnation of `name`: returns its life if the journal
/// has it so.
pub fn shown<'a>(j: &mut Judged<'a>, topic: TopicId, name: &str) -> Option<&'a Life> {
    let life = j.life(topic, name);
    if life.is_none() {
        j.flag(Checker::OneLiveIncarnation, format!("shows {topic} as {name:?}, which the journal does not"));
    }
    life
}

/// A create of `name` was acknowledged as `topic`: returns its life if the journal's
/// entry of that seq is a create of the name.
pub fn created<'a>(j: &mut Judged<'a>, topic: TopicId, name: &str) -> Option<&'a Life> {
    let life = j.life(topic, name);
    if life.is_none() {
        j.flag(
            Checker::OneLiveIncarnation,
            format!("acknowledged as {topic}, but journal entry {} is not a create of {name:?}", topic.0),
        );
    }
    life
}

/// Node `node` of the settled cluster has been fenced: returns whether it holds the
/// journal's catalog (if not, its partitions are not read back).
pub fn catalog_at_end(cluster: &mut impl Settled, node: usize) -> bool {
    let same = cluster.catalog(node).is_some_and(|c| c == &cluster.store().truth);
    if !same {
        cluster
            .flags()
            .flag(Checker::OneLiveIncarnation, format!("node {node}, fenced at the end, holds another catalog"));
    }
    same
}
