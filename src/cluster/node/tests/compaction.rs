//! Compaction and snapshots: nodes behind a compacted journal, snapshots that are late, corrupt or missing.

use super::*;

/// A node that last read the journal at entry 2 catches up over a journal another
/// node compacted: it meets the gap, loads the snapshot, folds the entries after it,
/// forgets what it knew of an incarnation the snapshot shows removed, and takes on
/// the removal of one the snapshot shows being deleted.
#[test]
fn a_node_far_behind_catches_up_over_a_compacted_journal() {
    let mut net = Net::new(2);
    net.nodes[0] = Node::new(NodeOptions { compact_after_entries: 4, ..net.nodes[0].options.clone() });
    let grace = TopicSettings { deletion_grace_ms: 100 };
    net.submit(0, Command::CreateTopic { name: "doomed".into(), partitions: 1, settings: grace });
    net.submit(0, create("gone"));
    net.run();
    net.submit(1, produce("doomed", Some(0), &["x"]));
    net.submit(1, produce("gone", None, &["y"]));
    net.run();
    assert_eq!(net.nodes[1].catalog().position(), 2);
    assert!(net.nodes[1].data.objects.contains_key(&TopicId(2)) && net.nodes[1].data.cursors.contains_key(&TopicId(2)));
    // Node 0 deletes and removes "gone" (no grace), deletes "doomed", creates more.
    net.submit(0, delete("gone"));
    net.run();
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    net.run();
    net.submit(0, delete("doomed"));
    net.run();
    for i in 0..8 {
        net.submit(0, create(&format!("t{i}")));
        net.run();
    }
    net.submit(0, Command::ListTopics);
    net.run();
    assert_eq!(net.nodes[0].catalog().position(), 13);
    assert_eq!(net.snapshots(), vec![12], "compacted at 4, 8 and 12; each snapshot replaced the one before");
    assert!((1..12).all(|seq| !net.has_entry(seq)) && (12..=13).all(|seq| net.has_entry(seq)));
    let expected = net.nodes[0].catalog().clone();
    // Node 0 dies: only node 1 can finish deleting "doomed".
    net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
    let list = net.submit(1, Command::ListTopics);
    net.run();
    let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
    assert_eq!(topics.len(), 8);
    assert_eq!(net.nodes[1].catalog(), &expected);
    let node = &net.nodes[1];
    assert!(!node.data.objects.contains_key(&TopicId(2)) && !node.data.cursors.contains_key(&TopicId(2)), "removed");
    assert!(node.data.objects.contains_key(&TopicId(1)), "being deleted: still known");
    assert_eq!(net.objects(), 1);
    net.advance(50);
    assert_eq!(net.objects(), 1, "its grace delay runs from when node 1 loaded the snapshot");
    net.advance(60);
    assert_eq!(net.objects(), 0);
    let removed: Vec<EntryKind> = net
        .history
        .iter()
        .map(|(seq, b)| entry::decode(*seq, b).unwrap().kind)
        .filter(|k| matches!(k, EntryKind::Removed { .. }))
        .collect();
    assert_eq!(removed, vec![EntryKind::Removed { topic: TopicId(2) }, EntryKind::Removed { topic: TopicId(1) }]);
    net.submit(0, Command::ListTopics);
    net.run();
    assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
}

/// A node that starts with nothing folded, over a compacted journal, starts from the
/// snapshot, and appends after the journal's end.
#[test]
fn a_new_node_starts_from_a_snapshot() {
    let mut net = Net::compacting(1, 3);
    for i in 0..7 {
        net.submit(0, create(&format!("t{i}")));
        net.run();
    }
    net.submit(0, delete("t0"));
    net.run();
    assert_eq!(net.snapshots(), vec![6]);
    assert!(!net.has_entry(1));
    let options = NodeOptions { node: 2, boot: 102, ..net.nodes[0].options.clone() };
    net.nodes.push(Node::new(options));
    let d = net.submit(1, describe("t6"));
    net.run();
    assert!(matches!(net.reply(d), Ok(Reply::Described(t)) if t.id == TopicId(7)), "{:?}", net.reply(d));
    assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
    let c = net.submit(1, create("new"));
    net.run();
    assert_eq!(net.reply(c), &Ok(Reply::Created { topic: TopicId(9) }));
    net.submit(0, Command::ListTopics);
    net.run();
    assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog());
}

/// A node reading the journal from an old position while another compacts: its
/// reads find entries gone (it loads the snapshot), or succeed before the entries are
/// deleted and the listing of `s/` that follows them finds the snapshot (it loads
/// it rather than fold what it read).
#[test]
fn compaction_while_another_node_reads_from_an_old_position() {
    for reads_done in [false, true] {
        let mut net = Net::new(2);
        for i in 0..6 {
            net.submit(0, create(&format!("t{i}")));
            net.run();
        }
        // Node 0 now compacts: its next fence ends at 6.
        net.nodes[0] = Node::new(NodeOptions { compact_after_entries: 6, ..net.nodes[0].options.clone() });
        let list = net.submit(1, Command::ListTopics);
        net.step_node(1); // the listing: entries 1 to 3
        if reads_done {
            for _ in 0..3 {
                net.step_node(1);
            }
            let next = net.pending.iter().find(|(n, _, _)| *n == 1).map(|(_, _, op)| op.clone());
            assert!(matches!(&next, Some(StoreOp::List { prefix, .. }) if prefix == SNAPSHOT_PREFIX), "{next:?}");
        }
        net.submit(0, Command::ListTopics);
        net.run_node(0);
        assert_eq!(net.snapshots(), vec![6], "reads done: {reads_done}");
        assert!(!net.has_entry(1));
        net.run();
        let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
        assert_eq!(topics.len(), 6, "reads done: {reads_done}");
        assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog(), "reads done: {reads_done}");
    }
}

/// A node's create is delayed while another appends at the same seq and compacts past
/// it; then the create lands, on a deleted key, and reports success. A snapshot past
/// the seq judges: the incarnation there is another's, so the node validates again
/// (here: appends at a later seq); or it is removed, and the outcome is unknown.
#[test]
fn an_append_landing_on_a_compacted_seq_is_judged_by_a_snapshot() {
    for removed in [false, true] {
        let mut net = Net::new(2);
        let every = if removed { 3 } else { 2 };
        net.nodes[0] = Node::new(NodeOptions { compact_after_entries: every, ..net.nodes[0].options.clone() });
        let x = net.submit(1, create("x"));
        net.step_node(1); // its fence: nothing in the journal
        let held = net.pending.iter().position(|(n, _, _)| *n == 1).unwrap();
        let held = net.pending.remove(held).unwrap();
        assert!(matches!(&held.2, StoreOp::Create { key, .. } if *key == journal_key(1)));
        net.submit(0, create("y"));
        net.run();
        if removed {
            net.submit(0, delete("y"));
            net.run();
            net.nodes[0].handle_timeout(net.now);
            net.collect();
            net.run();
            assert_eq!(net.nodes[0].catalog().position(), 3, "y removed");
        } else {
            net.submit(0, create("z"));
            net.run();
        }
        net.submit(0, Command::ListTopics);
        net.run();
        assert!(!net.has_entry(1) && net.snapshots() == vec![every], "removed: {removed}");
        // The held create lands on the deleted key.
        net.pending.push_front(held);
        net.run();
        let first = entry::decode(1, &net.history[&1]).unwrap();
        assert!(matches!(first.kind, EntryKind::Create { ref name, .. } if name == "y"));
        let landed = entry::decode(1, net.store.get(&journal_key(1)).unwrap()).unwrap();
        assert!(matches!(landed.kind, EntryKind::Create { ref name, .. } if name == "x"), "created again");
        if removed {
            assert!(matches!(net.reply(x), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(x));
        } else {
            assert_eq!(net.reply(x), &Ok(Reply::Created { topic: TopicId(3) }));
        }
        net.submit(0, Command::ListTopics);
        net.run();
        assert_eq!(net.nodes[1].catalog(), net.nodes[0].catalog(), "removed: {removed}");
        assert_eq!(net.nodes[0].catalog().live("x").is_some(), !removed);
    }
}

/// A snapshot that does not decode, or a gap with no snapshot past it, makes a node
/// refuse to serve, saying why, rather than guess.
#[test]
fn a_corrupt_or_missing_snapshot_makes_the_node_refuse_rather_than_guess() {
    for (damage, why) in [("corrupt", "snapshot 4 is corrupt"), ("missing", "no snapshot past it")] {
        let mut net = Net::compacting(1, 4);
        for i in 0..5 {
            net.submit(0, create(&format!("t{i}")));
            net.run();
        }
        assert_eq!(net.snapshots(), vec![4]);
        net.store.apply(&StoreOp::Delete { key: snapshot_key(4) });
        if damage == "corrupt" {
            let mut bytes = snapshot::encode(net.nodes[0].catalog());
            bytes[20] ^= 1;
            net.store.apply(&StoreOp::Create { key: snapshot_key(4), bytes: bytes.into() });
        }
        net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
        let r = net.submit(0, Command::ListTopics);
        net.run();
        assert!(matches!(net.reply(r), Err(BrokerError::Unavailable(w)) if w.contains(why)), "{:?}", net.reply(r));
    }
}

/// A snapshot as of entry u64::MAX, which only a forged store holds, is loaded: reads
/// are served, and an append, which no entry can follow, makes the node refuse to
/// serve. Computing the next seq after loading it once overflowed.
#[test]
fn a_snapshot_as_of_the_last_seq_is_served_and_nothing_is_appended_after_it() {
    let mut net = Net::new(1);
    let last = Catalog::restore(u64::MAX, BTreeMap::new()).unwrap();
    net.store.apply(&StoreOp::Create { key: snapshot_key(u64::MAX), bytes: snapshot::encode(&last).into() });
    // Entry 2 without entry 1: a gap, so the node looks for a snapshot past it.
    let e =
        Entry { writer: EntryWriter { node: 7, boot: 7, nonce: 7 }, kind: EntryKind::Removed { topic: TopicId(9) } };
    net.store.apply(&StoreOp::Create { key: journal_key(2), bytes: entry::encode(2, &e).into() });
    let r = net.submit(0, Command::ListTopics);
    net.run();
    assert_eq!(net.reply(r), &Ok(Reply::Topics(vec![])));
    assert_eq!(net.nodes[0].catalog().position(), u64::MAX);
    let r = net.submit(0, create("t"));
    net.run();
    let refused = matches!(net.reply(r), Err(BrokerError::Unavailable(w)) if w.contains("no entry can follow"));
    assert!(refused, "{:?}", net.reply(r));
}
