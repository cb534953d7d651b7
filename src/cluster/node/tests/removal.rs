//! Removal and reconciliation: deleted incarnations removed once by every node, orphans found.

use super::*;

/// Every node removes a deleted incarnation's segments once its grace delay ends,
/// and the completion is recorded once, however many nodes removed at once.
#[test]
fn a_deleted_incarnation_is_removed_by_every_node_and_completed_once() {
    let mut net = Net::new(3);
    let grace = TopicSettings { deletion_grace_ms: 100 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 3, settings: grace });
    net.run();
    for p in 0..3 {
        for node in 0..3 {
            net.submit(node, produce("t", Some(p), &["v"]));
            net.run();
        }
    }
    net.submit(0, create("other"));
    net.run();
    net.submit(0, produce("other", Some(0), &["kept"]));
    net.run();
    assert_eq!(net.objects(), 10);
    net.submit(1, delete("t"));
    net.run();
    // Every node folds the tombstone (a fence each).
    for node in 0..3 {
        net.submit(node, Command::ListTopics);
    }
    net.run();
    net.advance(50);
    assert_eq!(net.objects(), 10, "still in its grace delay");
    net.advance(60);
    assert_eq!(net.objects(), 1, "only the other topic's segment is left");
    let removed = net.journal().iter().filter(|k| matches!(k, EntryKind::Removed { .. })).count();
    assert_eq!(removed, 1, "{:?}", net.journal());
    net.advance(1000);
    assert!(net.nodes.iter().all(|n| n.poll_timeout().is_none()), "nothing left to do");
}

/// A node that folded a tombstone and died before removing leaves the work to
/// another; a node starting afresh resumes every pending removal it folds.
#[test]
fn a_removal_left_by_a_dead_node_is_finished_by_another() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    net.submit(0, produce("t", Some(0), &["a"]));
    net.run();
    net.submit(0, delete("t"));
    net.run();
    // Node 0 starts removing, then dies with its delete in flight.
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    net.step_node(0);
    net.pending.retain(|(n, _, _)| *n != 0);
    net.nodes[0] = Node::new(NodeOptions { boot: 999, ..net.nodes[0].options.clone() });
    assert_eq!(net.objects(), 1);
    // The new life of node 0 folds the journal and resumes.
    net.submit(0, Command::ListTopics);
    net.run();
    net.advance(10);
    assert_eq!(net.objects(), 0);
    assert!(net.journal().iter().any(|k| matches!(k, EntryKind::Removed { .. })));
}

/// A segment landing after its incarnation's removal (a node that wrote before it
/// learned of the tombstone) is an orphan: the reconciler deletes it, and nothing
/// else: not a live topic's segments, not an id the node has not folded yet, not a
/// key outside the layout.
#[test]
fn the_reconciler_deletes_orphans_and_nothing_else() {
    let mut net = Net::new(1);
    net.nodes[0] = Node::new(NodeOptions { reconcile_every_ms: 100, ..net.nodes[0].options.clone() });
    net.submit(0, create("gone"));
    net.submit(0, create("live"));
    net.run();
    for _ in 0..4 {
        net.submit(0, produce("live", Some(1), &["v"]));
        net.run();
    }
    net.submit(0, delete("gone"));
    net.run();
    net.advance(10);
    assert!(net.journal().iter().any(|k| matches!(k, EntryKind::Removed { topic: TopicId(1) })));
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let rec = [ProduceRecord { key: None, value: b"late".to_vec().into() }];
    let put = |net: &mut Net, key: String, bytes: Vec<u8>| {
        net.store.apply(&StoreOp::Create { key, bytes: bytes.into() });
    };
    put(&mut net, segment_key(TopicId(1), 0, 0), segment::encode(TopicId(1), 0, 0, writer, &rec));
    put(&mut net, segment_key(TopicId(1), 1, 5), segment::encode(TopicId(1), 1, 5, writer, &rec));
    put(&mut net, segment_key(TopicId(99), 0, 0), segment::encode(TopicId(99), 0, 0, writer, &rec));
    // Topic objects, the layout that holds several partitions' records, alike.
    let object = |topic: TopicId| topic_object::encode(topic, 7, writer, &[0, 0], &[(1, &rec[..])]).expect("encodes");
    put(&mut net, object_key(TopicId(1), 7), object(TopicId(1)));
    put(&mut net, object_key(TopicId(2), 7), object(TopicId(2)));
    put(&mut net, object_key(TopicId(99), 7), object(TopicId(99)));
    put(&mut net, "d/not-ours".into(), b"x".to_vec());
    put(&mut net, "z/other".into(), b"y".to_vec());
    let before: Vec<String> = net.store.keys().map(String::from).collect();
    net.advance(100);
    let after: Vec<String> = net.store.keys().map(String::from).collect();
    let gone: Vec<&String> = before.iter().filter(|k| !after.contains(k)).collect();
    // In key order: a partition's 8 hex digits, then `/`, sort before 20 decimal digits.
    let want = [segment_key(TopicId(1), 0, 0), object_key(TopicId(1), 7), segment_key(TopicId(1), 1, 5)];
    assert_eq!(gone, want.iter().collect::<Vec<_>>());
    assert_eq!(net.nodes[0].orphans_removed(), 3);
    assert_eq!(after.iter().filter(|k| k.starts_with(&topic_prefix(TopicId(2)))).count(), 5, "live objects kept");
}

/// A removal deletes an incarnation's topic objects as it deletes its segments.
#[test]
fn a_removal_deletes_topic_objects_too() {
    let mut net = Net::new(1);
    let grace = TopicSettings { deletion_grace_ms: 100 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 2, settings: grace });
    net.run();
    net.submit(0, produce("t", Some(0), &["v"]));
    net.run();
    net.submit(0, delete("t"));
    net.run();
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let rec = [ProduceRecord { key: None, value: b"w".to_vec().into() }];
    for n in 1..4 {
        let bytes = topic_object::encode(TopicId(1), n, writer, &[n, 0], &[(0, &rec[..])]).expect("encodes");
        net.store.apply(&StoreOp::Create { key: object_key(TopicId(1), n), bytes: bytes.into() });
    }
    assert_eq!(net.store.keys().filter(|k| k.starts_with(&topic_prefix(TopicId(1)))).count(), 4);
    net.advance(110);
    assert_eq!(net.store.keys().filter(|k| k.starts_with(&topic_prefix(TopicId(1)))).count(), 0);
    assert!(net.journal().iter().any(|k| matches!(k, EntryKind::Removed { topic: TopicId(1) })));
}

/// With background tailing, a node folds a tombstone without being asked anything.
#[test]
fn a_tailing_node_learns_of_a_delete_on_its_own() {
    let mut net = Net::new(2);
    net.nodes[1] = Node::new(NodeOptions { tail_every_ms: 50, ..net.nodes[1].options.clone() });
    net.submit(0, create("t"));
    net.run();
    net.submit(1, describe("t"));
    net.run();
    net.submit(0, delete("t"));
    net.run();
    assert!(net.nodes[1].catalog().live("t").is_some(), "not read yet");
    net.advance(60);
    assert!(net.nodes[1].catalog().live("t").is_none(), "folded by its own tail read");
}
