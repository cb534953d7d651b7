//! Removals racing requests, and listings as unkind as S3's: pages cut short, keys outside the layout.

use super::*;

/// A produce whose object landed, and was served, before its topic's deletion (with no
/// grace) reached its second fence is answered with an unknown outcome, never "not
/// found" (which says nothing was written).
#[test]
fn a_produce_that_wrote_before_meeting_a_removal_has_an_unknown_outcome() {
    let mut net = Net::new(3);
    let no_grace = TopicSettings { deletion_grace_ms: 0 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 2, settings: no_grace });
    net.run();
    net.submit(1, produce("t", Some(0), &["a"])); // node 1 knows the newest object
    net.run();
    let p = net.submit(1, produce("t", None, &["x", "y"])); // keyless: x to 0, y to 1
    net.step_picked(1, is_list("j/"));
    net.step_picked(1, |op| matches!(op, StoreOp::Create { .. })); // its object lands
    let f = net.submit(2, fetch("t", 0, 1));
    net.run_node(2);
    assert_eq!(values(net.reply(f)), [(1, "x".to_string())], "x is served before any delete");
    let d = net.submit(0, delete("t"));
    net.run_node(0);
    assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    net.run_node(0);
    assert_eq!(net.objects(), 0, "removed");
    net.run();
    assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
}

/// A fetch whose listing runs while a removal deletes the partition's later segments
/// sees an end below offsets acknowledged before it was invoked: that "out of range"
/// is answered only after a second fence, which finds the topic deleted.
#[test]
fn out_of_range_from_a_half_removed_partition_passes_the_second_fence() {
    let mut net = Net::new(3);
    let no_grace = TopicSettings { deletion_grace_ms: 0 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace });
    net.run();
    for v in ["a", "b", "c"] {
        let r = net.submit(1, produce("t", Some(0), &[v]));
        net.run();
        assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })));
    }
    net.submit(2, Command::ListTopics); // node 2 catches up
    net.run();
    let f = net.submit(2, fetch("t", 0, 2));
    net.step_picked(2, is_list("j/")); // fenced: t is live
    assert!(net.pending.iter().any(|(n, _, op)| *n == 2 && is_list("d/")(op)), "the partition's listing is next");
    net.submit(0, delete("t"));
    net.run_node(0);
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    net.step_picked(0, is_list("d/"));
    for last in ["2", "1"] {
        net.step_picked(0, |op| matches!(op, StoreOp::Delete { key } if key.ends_with(last)));
    }
    net.run_node(2); // lists object 0 alone: an end of 1, below the fetch's offset 2
    net.run();
    assert!(matches!(net.reply(f), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(f));
}

/// Keys outside the layout that fill a page under `j/` are walked past: a describe
/// invoked after a delete's acknowledgement does not see the topic.
#[test]
fn foreign_keys_under_the_journal_never_end_a_fence_early() {
    let mut net = Net::new(2); // pages of 3
    net.submit(0, create("t"));
    net.run();
    let seen = net.submit(1, describe("t"));
    net.run();
    assert!(matches!(net.reply(seen), Ok(Reply::Described(_))));
    for k in ["a", "b", "c", "d"] {
        net.plant_foreign(format!("{}.{k}", journal_key(1)));
    }
    let d = net.submit(0, delete("t"));
    net.run();
    assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
    let gone = net.submit(1, describe("t"));
    net.run();
    assert!(matches!(net.reply(gone), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(gone));
    assert_eq!(net.store.keys().filter(|k| k.contains(".")).count(), 4, "foreign keys are left alone");
}

/// A walk of the journal that keys outside the layout lead past the next entry's
/// key, before that entry lands, takes the entries after it for what they are: it
/// reads the missed entry rather than taking the gap for compaction (the node broke
/// down so in the simulator, with pages cut short).
#[test]
fn an_entry_that_lands_behind_the_walk_is_no_gap() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    net.submit(1, Command::ListTopics);
    net.run();
    net.plant_foreign(format!("{}.a", journal_key(2)));
    let seen = net.submit(1, describe("t"));
    // The fence's first page: the foreign key past entry 2's key, more said to follow.
    assert!(is_list("j/")(&net.pending[0].2));
    net.step_with(|store, op| match store.apply(op) {
        StoreOutput::Listed { keys, .. } => Ok(StoreOutput::Listed { keys, more: true }),
        other => Ok(other),
    });
    // Meanwhile entries 2 and 3 land.
    net.submit(0, delete("t"));
    net.run_node(0);
    net.submit(0, create("u"));
    net.run_node(0);
    net.run();
    // Before or after the delete (they are concurrent), but never unavailable.
    let answer = net.reply(seen);
    assert!(matches!(answer, Ok(Reply::Described(_)) | Err(BrokerError::TopicNotFound { .. })), "{answer:?}");
    let later = net.submit(1, describe("u"));
    net.run();
    assert!(matches!(net.reply(later), Ok(Reply::Described(_))), "the node reads on: {:?}", net.reply(later));
}

/// Objects that land while a fetch walks the incarnation's keys (a key outside the
/// layout, which sorts before them, on a page of its own) are found: the fetch never
/// answers with an end past its offset and nothing at it (seen in the simulator with
/// segments, 1 seed in 20,000).
#[test]
fn objects_that_land_during_a_fetchs_walk_are_found() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    net.submit(1, Command::ListTopics);
    net.run();
    net.plant_foreign(format!("{}.part", segment_key(TopicId(1), 0, 3)));
    let f = net.submit(1, fetch("t", 0, 4));
    net.step_picked(1, is_list("j/"));
    // The incarnation's first page: only the foreign key, more said to follow.
    assert!(net.pending.iter().any(|(n, _, op)| *n == 1 && is_list("d/")(op)));
    let i = net.pending.iter().position(|(n, _, op)| *n == 1 && is_list("d/")(op)).unwrap();
    let op = net.pending.remove(i).unwrap();
    net.pending.push_front(op);
    net.step_with(|store, op| match store.apply(op) {
        StoreOutput::Listed { keys, .. } => Ok(StoreOutput::Listed { keys, more: true }),
        other => Ok(other),
    });
    // Three objects land: offsets 0..3, 3..5 and 5..7.
    for values in [&["a", "b", "c"][..], &["d", "e"], &["f", "g"]] {
        let r = net.submit(0, produce("t", Some(0), values));
        net.run_node(0);
        assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
    }
    net.run();
    assert_eq!(values(net.reply(f)), [(4, "e".to_string())]);
}

/// Keys outside the layout that fill a page of an incarnation's listing are walked
/// past: each fetch is answered (from one object, as always), with the partition's
/// whole end.
#[test]
fn foreign_keys_under_a_partition_never_stall_a_fetch() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    for v in ["a", "b"] {
        let r = net.submit(0, produce("t", Some(0), &[v]));
        net.run();
        assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })));
    }
    for k in ["!a", "!b", "!c", "!d"] {
        net.plant_foreign(format!("{}{k}", partition_prefix(TopicId(1), 0)));
    }
    for (offset, value) in [(0, "a"), (1, "b")] {
        let f = net.submit(0, fetch("t", 0, offset));
        for _ in 0..1_000 {
            if !net.step_with(|store, op| Ok(store.apply(op))) {
                break;
            }
        }
        assert_eq!(values(net.reply(f)), [(offset, value.to_string())]);
        assert!(matches!(net.reply(f), Ok(Reply::Fetched { high_watermark: 2, .. })));
    }
}

/// Keys outside the layout under an incarnation's prefix never make its removal
/// complete early: `Removed` is journaled only once no object is left.
#[test]
fn foreign_keys_under_a_topic_never_complete_its_removal_early() {
    let mut net = Net::new(1);
    let no_grace = TopicSettings { deletion_grace_ms: 0 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace });
    net.run();
    net.submit(0, produce("t", Some(0), &["a"]));
    net.run();
    for k in ["!a", "!b", "!c"] {
        net.plant_foreign(format!("{}{k}", topic_prefix(TopicId(1))));
    }
    net.submit(0, delete("t"));
    net.run();
    net.advance(1);
    assert!(net.journal().contains(&EntryKind::Removed { topic: TopicId(1) }), "{:?}", net.journal());
    assert_eq!(net.objects(), 0, "Removed journaled with objects left");
}

/// Every listing follows a page's `more`, never its length: with each page cut to one
/// key, or to none every other time, a fence still reads the whole journal, a fetch
/// sees every acknowledged record, a removal leaves no object, compaction deletes
/// what it should, and the reconciler walks the whole data prefix.
#[test]
fn short_and_empty_pages_that_are_not_the_last_are_followed() {
    for empty_every in [0, 2] {
        let mut net = Net::compacting(2, 4);
        let turn = std::cell::Cell::new(0usize);
        let keep = |n: usize| {
            turn.set(turn.get() + 1);
            if empty_every > 0 && turn.get().is_multiple_of(empty_every) {
                0
            } else {
                n.min(1)
            }
        };
        let no_grace = TopicSettings { deletion_grace_ms: 0 };
        net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 1, settings: no_grace.clone() });
        net.run_cut(&keep);
        for v in ["a", "b", "c", "d"] {
            let r = net.submit(0, produce("t", Some(0), &[v]));
            net.run_cut(&keep);
            assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
        }
        let f = net.submit(1, fetch("t", 0, 0));
        net.run_cut(&keep);
        let Ok(Reply::Fetched { high_watermark, .. }) = net.reply(f) else { panic!("{:?}", net.reply(f)) };
        assert_eq!(*high_watermark, 4, "every acknowledged offset is seen");
        for name in ["u", "v", "w"] {
            net.submit(0, Command::CreateTopic { name: name.into(), partitions: 1, settings: no_grace.clone() });
            net.run_cut(&keep);
        }
        let d = net.submit(0, delete("t"));
        net.run_cut(&keep);
        assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
        let gone = net.submit(1, describe("t"));
        net.run_cut(&keep);
        assert!(matches!(net.reply(gone), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(gone));
        for _ in 0..5 {
            net.now = net.now.plus_millis(1);
            for node in &mut net.nodes {
                node.handle_timeout(net.now);
            }
            net.collect();
            net.run_cut(&keep);
        }
        assert_eq!(net.objects(), 0, "the removal walked every page");
        assert!(net.journal().contains(&EntryKind::Removed { topic: TopicId(1) }));
        assert!(!net.snapshots().is_empty(), "compaction ran");
        assert!(!net.has_entry(1), "compaction walked the journal's pages");
    }
}
