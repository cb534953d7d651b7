//! The catalog: what every node folds from the shared journal, in seq order, and the
//! validation of a create or delete against it.
//!
//! Folding is deterministic: nodes that folded the same entries hold the same catalog.
//! An entry is validated by its writer against the catalog just before its seq (rule A:
//! a writer appends at `p + 1` only when it has folded exactly `p` entries), so a valid
//! journal never holds an entry its catalog refuses. Should one be there anyway (a
//! store that broke create-if-absent), every node ignores it alike and [`Folded`] says
//! so, which the simulator's checkers watch.

use crate::cluster::entry::{Entry, EntryKind, EntryWriter};
use crate::command::TopicSettings;
use crate::config::Config;
use crate::error::BrokerError;
use crate::ids::TopicId;
use std::collections::{BTreeMap, BTreeSet};

/// An incarnation that is live or being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incarnation {
    /// The name.
    pub name: String,
    /// The partition count.
    pub partitions: u32,
    /// The settings chosen at creation.
    pub settings: TopicSettings,
    /// Who wrote its `Create` entry.
    pub created_by: EntryWriter,
    /// The seq of its tombstone, once deleted.
    pub deleted_at: Option<u64>,
    /// Who wrote its tombstone, once deleted.
    pub deleted_by: Option<EntryWriter>,
}

/// What folding one entry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Folded {
    /// The entry took effect.
    Applied,
    /// The entry contradicts the catalog before it and changed nothing but the position
    /// (a create of a live name, a delete of an incarnation not live, a second
    /// `Removed`), or came after entry `u64::MAX` and changed nothing at all.
    Ignored(String),
}

/// How a delete of a name is to be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteOf {
    /// The live incarnation: append its tombstone.
    Live(TopicId),
    /// No live incarnation, but this one is already being deleted: its tombstone is in
    /// the journal, so the delete is answered at once (as on one node).
    AlreadyDeleted(TopicId),
}

/// The folded state of the shared journal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The seq of the last entry folded (0: none).
    position: u64,
    /// Live names and their incarnation.
    live: BTreeMap<String, TopicId>,
    /// Every incarnation live or being deleted; an id at or below `position` that is
    /// not here was removed (or was never an incarnation's).
    topics: BTreeMap<TopicId, Incarnation>,
}

impl Catalog {
    /// The seq of the last entry folded; the next is `position() + 1`.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Folds `entry` as the next entry, seq `position() + 1` (the caller reads the
    /// journal in order). At position `u64::MAX` no seq is next: the entry is ignored and
    /// the catalog, position included, stays as it was.
    pub fn fold(&mut self, entry: &Entry) -> Folded {
        let Some(seq) = self.position.checked_add(1) else {
            return Folded::Ignored(format!("no entry can follow entry {}", self.position));
        };
        self.position = seq;
        match &entry.kind {
            EntryKind::Create { name, partitions, settings } => {
                if let Some(id) = self.live.get(name) {
                    return Folded::Ignored(format!("create of {name:?}, live as {id}"));
                }
                let incarnation = Incarnation {
                    name: name.clone(),
                    partitions: *partitions,
                    settings: settings.clone(),
                    created_by: entry.writer,
                    deleted_at: None,
                    deleted_by: None,
                };
                self.live.insert(name.clone(), TopicId(seq));
                self.topics.insert(TopicId(seq), incarnation);
            }
            EntryKind::Delete { name, topic } => {
                if self.live.get(name) != Some(topic) {
                    return Folded::Ignored(format!(
                        "delete of {name:?} as {topic}, which is not its live incarnation"
                    ));
                }
                self.live.remove(name);
                if let Some(t) = self.topics.get_mut(topic) {
                    t.deleted_at = Some(seq);
                    t.deleted_by = Some(entry.writer);
                }
            }
            EntryKind::Removed { topic } => {
                if !self.validate_removed(*topic) {
                    return Folded::Ignored(format!("removal of {topic}, which is not being deleted"));
                }
                self.topics.remove(topic);
            }
        }
        Folded::Applied
    }

    /// The catalog as of entry `position` whose incarnations live or being deleted are
    /// `topics` (a snapshot's contents, rule C). Removed incarnations need no record:
    /// an id at or below `position` that is not in `topics` is removed. Refused unless
    /// `topics` is what folding could have left: every id within `1..=position`, every
    /// tombstone after its incarnation's create and at most `position`, no seq used
    /// twice, and the incarnations of one name live one after the other: each has its
    /// tombstone before the next is created (a create of a live name is ignored), so
    /// no name is live twice.
    pub fn restore(position: u64, topics: BTreeMap<TopicId, Incarnation>) -> Result<Catalog, String> {
        let mut live = BTreeMap::new();
        let mut seqs = BTreeSet::new();
        // The newest incarnation of each name so far (ids ascend), and its tombstone.
        let mut newest: BTreeMap<&str, (TopicId, Option<u64>)> = BTreeMap::new();
        for (id, t) in &topics {
            if id.0 == 0 || id.0 > position {
                return Err(format!("incarnation {id} is outside 1..={position}"));
            }
            if !seqs.insert(id.0) {
                return Err(format!("seq {} is used twice", id.0));
            }
            if let Some((before, deleted_at)) = newest.insert(&t.name, (*id, t.deleted_at)) {
                if deleted_at.is_none_or(|at| at >= id.0) {
                    return Err(format!("{:?} is live as {before} when {id} is created", t.name));
                }
            }
            match (t.deleted_at, t.deleted_by) {
                (None, None) => {
                    live.insert(t.name.clone(), *id);
                }
                (Some(at), Some(_)) => {
                    if at <= id.0 || at > position {
                        // No `id + 1` here: incarnation u64::MAX has no seq after it.
                        return Err(format!(
                            "incarnation {id} deleted at {at}: a tombstone follows its create, at most at {position}"
                        ));
                    }
                    if !seqs.insert(at) {
                        return Err(format!("seq {at} is used twice"));
                    }
                }
                _ => return Err(format!("incarnation {id} has a tombstone seq or writer, not both")),
            }
        }
        Ok(Catalog { position, live, topics })
    }

    /// Every incarnation live or being deleted, by id: with the position, all a
    /// snapshot holds.
    pub fn incarnations(&self) -> impl Iterator<Item = (TopicId, &Incarnation)> {
        self.topics.iter().map(|(id, t)| (*id, t))
    }

    /// The incarnation `topic`, if live or being deleted.
    pub fn incarnation(&self, topic: TopicId) -> Option<&Incarnation> {
        self.topics.get(&topic)
    }

    /// The live incarnation of `name`.
    pub fn live(&self, name: &str) -> Option<(TopicId, &Incarnation)> {
        let id = *self.live.get(name)?;
        self.topics.get(&id).map(|t| (id, t))
    }

    /// Every live incarnation, ordered by name.
    pub fn live_topics(&self) -> impl Iterator<Item = (&str, TopicId, &Incarnation)> {
        self.live.iter().filter_map(|(name, id)| self.topics.get(id).map(|t| (name.as_str(), *id, t)))
    }

    /// Every incarnation being deleted (tombstoned, not yet removed), by id.
    pub fn deleting(&self) -> impl Iterator<Item = (TopicId, &Incarnation)> {
        self.topics.iter().filter(|(_, t)| t.deleted_at.is_some()).map(|(id, t)| (*id, t))
    }

    /// Whether `topic` is known to be removed: an id this catalog has folded past that
    /// is neither live nor being deleted. An id past the position is never removed: it
    /// may be a create this node has not folded yet (rule O).
    pub fn is_removed(&self, topic: TopicId) -> bool {
        topic.0 <= self.position && !self.topics.contains_key(&topic)
    }

    /// Checks a create against the catalog and `config`'s limits, as one node does.
    pub fn validate_create(
        &self,
        name: &str,
        partitions: u32,
        settings: &TopicSettings,
        config: &Config,
    ) -> Result<(), BrokerError> {
        config.check_new_topic(name, partitions, settings)?;
        if self.live.contains_key(name) {
            return Err(BrokerError::TopicAlreadyExists { name: name.to_string() });
        }
        crate::name::check_collision(name, self.live.keys().map(String::as_str))
    }

    /// Checks a delete of `name`: its live incarnation gets a tombstone; with none, the
    /// newest incarnation of the name still being deleted answers it; with neither,
    /// the name is not found.
    pub fn validate_delete(&self, name: &str) -> Result<DeleteOf, BrokerError> {
        if let Some((id, _)) = self.live(name) {
            return Ok(DeleteOf::Live(id));
        }
        self.deleting()
            .filter(|(_, t)| t.name == name)
            .map(|(id, _)| DeleteOf::AlreadyDeleted(id))
            .last()
            .ok_or_else(|| BrokerError::TopicNotFound { name: name.to_string() })
    }

    /// Whether a `Removed` entry for `topic` would take effect: it is being deleted and
    /// no `Removed` for it has been folded.
    pub fn validate_removed(&self, topic: TopicId) -> bool {
        self.topics.get(&topic).is_some_and(|t| t.deleted_at.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::entry::EntryWriter;

    fn entry(node: u32, nonce: u64, kind: EntryKind) -> Entry {
        Entry { writer: EntryWriter { node, boot: 1, nonce }, kind }
    }

    fn create(name: &str, partitions: u32) -> EntryKind {
        EntryKind::Create { name: name.into(), partitions, settings: TopicSettings::default() }
    }

    fn delete(name: &str, topic: u64) -> EntryKind {
        EntryKind::Delete { name: name.into(), topic: TopicId(topic) }
    }

    /// Folds `kinds` as entries 1, 2, ... written by node 0.
    fn folded(kinds: Vec<EntryKind>) -> (Catalog, Vec<Folded>) {
        let mut c = Catalog::default();
        let results = kinds.into_iter().enumerate().map(|(i, k)| c.fold(&entry(0, i as u64, k))).collect();
        (c, results)
    }

    #[test]
    fn an_incarnation_is_its_create_seq_and_lives_until_its_tombstone() {
        let (c, results) = folded(vec![create("a", 2), create("b", 1), delete("a", 1), create("a", 3)]);
        assert!(results.iter().all(|r| *r == Folded::Applied), "{results:?}");
        assert_eq!(c.position(), 4);
        assert_eq!(c.live("a").map(|(id, t)| (id, t.partitions)), Some((TopicId(4), 3)));
        assert_eq!(c.live("b").map(|(id, _)| id), Some(TopicId(2)));
        let deleting: Vec<_> = c.deleting().map(|(id, t)| (id, t.name.clone(), t.deleted_at)).collect();
        assert_eq!(deleting, vec![(TopicId(1), "a".to_string(), Some(3))]);
        let names: Vec<_> = c.live_topics().map(|(n, id, _)| (n.to_string(), id)).collect();
        assert_eq!(names, vec![("a".to_string(), TopicId(4)), ("b".to_string(), TopicId(2))]);
    }

    #[test]
    fn removal_forgets_the_incarnation_and_only_folded_ids_count_as_removed() {
        let (mut c, _) = folded(vec![create("a", 1), delete("a", 1)]);
        assert!(c.validate_removed(TopicId(1)));
        assert!(!c.is_removed(TopicId(1)), "being deleted, not removed");
        assert_eq!(c.fold(&entry(1, 0, EntryKind::Removed { topic: TopicId(1) })), Folded::Applied);
        assert!(c.is_removed(TopicId(1)));
        assert!(!c.validate_removed(TopicId(1)), "a second Removed would change nothing");
        assert!(!c.is_removed(TopicId(4)), "an id past the position may be a create not folded yet");
        assert!(matches!(c.fold(&entry(1, 1, EntryKind::Removed { topic: TopicId(1) })), Folded::Ignored(_)));
    }

    /// A catalog rebuilt from its position and incarnations is the folded one, removed
    /// ids included; contents folding could not leave are refused.
    #[test]
    fn a_restored_catalog_is_the_folded_one() {
        let (c, _) = folded(vec![
            create("a", 1),
            delete("a", 1),
            create("a", 2),
            EntryKind::Removed { topic: TopicId(1) },
            create("b", 1),
            delete("b", 5),
        ]);
        let topics: BTreeMap<TopicId, Incarnation> = c.incarnations().map(|(id, t)| (id, t.clone())).collect();
        let restored = Catalog::restore(c.position(), topics.clone()).unwrap();
        assert_eq!(restored, c);
        assert!(restored.is_removed(TopicId(1)) && !restored.is_removed(TopicId(3)));
        assert_eq!(topics[&TopicId(5)].deleted_by, Some(EntryWriter { node: 0, boot: 1, nonce: 5 }));
        assert!(Catalog::restore(5, topics.clone()).is_err(), "a tombstone past the position");
        let mut twice = topics.clone();
        let c6 = Incarnation { name: "c".into(), deleted_at: None, deleted_by: None, ..topics[&TopicId(5)].clone() };
        twice.insert(TopicId(6), c6);
        assert!(Catalog::restore(6, twice).is_err(), "seq 6 as an incarnation and a tombstone");
        let mut half = topics.clone();
        half.get_mut(&TopicId(5)).unwrap().deleted_by = None;
        assert!(Catalog::restore(6, half).is_err(), "a tombstone seq without its writer");
        // `a` created again as 3 while 1 still lived (tombstone 4): folding ignores such
        // a create, so no journal leaves this.
        let a = |deleted_at: Option<u64>| Incarnation {
            deleted_at,
            deleted_by: deleted_at.map(|_| EntryWriter { node: 0, boot: 1, nonce: 9 }),
            ..topics[&TopicId(3)].clone()
        };
        let overlap = BTreeMap::from([(TopicId(1), a(Some(4))), (TopicId(3), a(None))]);
        let e = Catalog::restore(4, overlap).expect_err("two lives of one name overlap");
        assert!(e.contains("live as t1 when t3 is created"), "{e}");
    }

    /// No seq follows u64::MAX: an entry folded there is ignored and changes nothing.
    /// Folding once took seq u64::MAX again, putting a create over incarnation u64::MAX
    /// while its name stayed live (fuzz input `crash-fold-after-the-last-seq`).
    #[test]
    fn nothing_folds_after_the_last_seq() {
        let (c, _) = folded(vec![create("a", 1)]);
        let a = c.incarnation(TopicId(1)).unwrap().clone();
        let mut c = Catalog::restore(u64::MAX, BTreeMap::from([(TopicId(u64::MAX), a)])).unwrap();
        let before = c.clone();
        assert!(matches!(c.fold(&entry(1, 0, create("b", 1))), Folded::Ignored(_)));
        assert_eq!(c, before);
    }

    #[test]
    fn contradicting_entries_are_ignored_alike_everywhere() {
        let kinds =
            vec![create("a", 1), create("a", 2), delete("a", 2), delete("b", 1), delete("a", 1), delete("a", 1)];
        let (c1, r1) = folded(kinds.clone());
        let (c2, r2) = folded(kinds);
        assert_eq!((&c1, &r1), (&c2, &r2), "folding is deterministic");
        let ignored: Vec<usize> =
            r1.iter().enumerate().filter(|(_, r)| matches!(r, Folded::Ignored(_))).map(|(i, _)| i + 1).collect();
        assert_eq!(ignored, vec![2, 3, 4, 6]);
        assert!(c1.live("a").is_none());
    }

    /// Two nodes validate a create of one name at the same position; the store lets one
    /// append it. The other folds the winner and validates again: already exists.
    #[test]
    fn the_loser_of_a_race_validates_again_against_the_winner() {
        let config = Config::default();
        let settings = TopicSettings::default();
        let (mut n1, _) = folded(vec![create("x", 1)]);
        let mut n2 = n1.clone();
        assert_eq!(n1.validate_create("t", 2, &settings, &config), Ok(()));
        assert_eq!(n2.validate_create("t", 3, &settings, &config), Ok(()));
        let winner = entry(1, 0, create("t", 2));
        n1.fold(&winner);
        n2.fold(&winner);
        assert_eq!(
            n2.validate_create("t", 3, &settings, &config),
            Err(BrokerError::TopicAlreadyExists { name: "t".into() })
        );
        assert_eq!(n1, n2);
    }

    #[test]
    fn a_delete_answers_for_a_name_being_deleted_and_not_found_for_an_unknown_one() {
        let (c, _) = folded(vec![create("a", 1), delete("a", 1), create("a", 1), delete("a", 3)]);
        assert_eq!(c.validate_delete("a"), Ok(DeleteOf::AlreadyDeleted(TopicId(3))), "the newest being deleted");
        assert_eq!(c.validate_delete("b"), Err(BrokerError::TopicNotFound { name: "b".into() }));
        let (c, _) = folded(vec![create("a", 1)]);
        assert_eq!(c.validate_delete("a"), Ok(DeleteOf::Live(TopicId(1))));
    }

    #[test]
    fn creates_are_validated_as_on_one_node() {
        let c = Catalog::default();
        let config = Config { max_partitions: 4, max_grace_ms: 10, ..Config::default() };
        let ok = TopicSettings::default();
        assert!(matches!(c.validate_create("a/b", 1, &ok, &config), Err(BrokerError::InvalidTopicName { .. })));
        assert!(matches!(c.validate_create("a", 0, &ok, &config), Err(BrokerError::InvalidPartitionCount { .. })));
        assert!(matches!(c.validate_create("a", 5, &ok, &config), Err(BrokerError::InvalidPartitionCount { .. })));
        let long = TopicSettings { deletion_grace_ms: 11 };
        assert!(matches!(c.validate_create("a", 1, &long, &config), Err(BrokerError::InvalidSettings(_))));
        assert_eq!(c.validate_create("a", 4, &ok, &config), Ok(()));
        let (c, _) = folded(vec![create("a_b", 1)]);
        assert!(matches!(c.validate_create("a.b", 1, &ok, &config), Err(BrokerError::InvalidTopicName { .. })));
        let (c, _) = folded(vec![create("a_b", 1), delete("a_b", 1)]);
        assert_eq!(c.validate_create("a.b", 1, &ok, &config), Ok(()), "a deleted name does not collide");
    }
}
