//! Append and fence: creates, deletes and produces that race on the journal, and one fence round serving many.

use super::*;

/// The second fence of a produce finds its topic deleted: the segment may have been
/// read before the deletion, so the answer is an unknown outcome, not "not found".
#[test]
fn a_produce_overtaken_by_a_delete_has_an_unknown_outcome() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    let p = net.submit(0, produce("t", Some(0), &["v"]));
    // Node 0: its first fence (one empty listing), the listing of the partition, the
    // segment's creation.
    for _ in 0..3 {
        assert!(net.step_node(0));
    }
    assert!(net.store.keys().any(|k| k.starts_with("d/")), "the segment exists");
    let d = net.submit(1, delete("t"));
    while net.step_node(1) {}
    assert_eq!(net.reply(d), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
    net.run();
    assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
    let after = net.submit(0, produce("t", Some(0), &["w"]));
    net.run();
    assert_eq!(net.reply(after), &Err(BrokerError::TopicNotFound { name: "t".into() }));
}

#[test]
fn a_create_on_one_node_is_seen_by_another() {
    let mut net = Net::new(2);
    let r = net.submit(0, create("t"));
    net.run();
    assert_eq!(net.reply(r), &Ok(Reply::Created { topic: TopicId(1) }));
    let d = net.submit(1, describe("t"));
    assert!(!net.nodes[1].only_polling(), "a command waits for its fence");
    net.run();
    assert!(matches!(net.reply(d), Ok(Reply::Described(t)) if t.id == TopicId(1) && t.partitions == 2));
    assert_eq!(net.nodes[0].catalog(), net.nodes[1].catalog());
}

#[test]
fn two_nodes_creating_one_name_at_once_exactly_one_succeeds() {
    let mut net = Net::new(2);
    let a = net.submit(0, create("t"));
    let b = net.submit(1, create("t"));
    net.run();
    let mut replies = vec![net.reply(a).clone(), net.reply(b).clone()];
    replies.sort_by_key(|r| r.is_err());
    assert_eq!(
        replies,
        vec![Ok(Reply::Created { topic: TopicId(1) }), Err(BrokerError::TopicAlreadyExists { name: "t".into() })]
    );
    assert_eq!(net.store.keys().collect::<Vec<_>>(), vec![journal_key(1)], "one entry");
    assert_eq!(net.nodes[0].catalog(), net.nodes[1].catalog());
}

#[test]
fn a_delete_acknowledged_on_one_node_hides_the_topic_on_every_other() {
    let mut net = Net::new(3);
    net.submit(0, create("t"));
    net.run();
    let seen = net.submit(2, describe("t"));
    net.run();
    assert!(net.reply(seen).is_ok());
    let d = net.submit(1, delete("t"));
    net.run();
    assert_eq!(net.reply(d), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
    // Invoked after the acknowledgement: node 2's fence folds the tombstone first.
    let after = net.submit(2, describe("t"));
    let list = net.submit(2, Command::ListTopics);
    net.run();
    assert_eq!(net.reply(after), &Err(BrokerError::TopicNotFound { name: "t".into() }));
    assert_eq!(net.reply(list), &Ok(Reply::Topics(vec![])));
    // Deleting it again answers for the incarnation being deleted; creating the name
    // again makes a new incarnation at once.
    let again = net.submit(0, delete("t"));
    net.run();
    let recreate = net.submit(2, create("t"));
    net.run();
    assert_eq!(net.reply(again), &Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
    assert_eq!(net.reply(recreate), &Ok(Reply::Created { topic: TopicId(3) }));
}

#[test]
fn one_fence_round_serves_every_command_that_arrived_before_it() {
    let mut net = Net::new(1);
    let requests: Vec<_> = (0..10).map(|_| net.submit(0, Command::ListTopics)).collect();
    let lists = net.pending.iter().filter(|(_, _, op)| matches!(op, StoreOp::List { .. })).count();
    assert_eq!(lists, 1, "one listing for ten commands");
    net.run();
    assert!(requests.iter().all(|r| net.reply(*r) == &Ok(Reply::Topics(vec![]))));
}

/// A journal longer than one listing is read in several, in order.
#[test]
fn a_node_far_behind_catches_up_listing_after_listing() {
    let mut net = Net::new(2);
    for i in 0..8 {
        net.submit(0, create(&format!("t{i}")));
        net.run();
    }
    let list = net.submit(1, Command::ListTopics);
    net.run();
    let Ok(Reply::Topics(topics)) = net.reply(list) else { panic!("{:?}", net.reply(list)) };
    assert_eq!(topics.len(), 8);
    assert_eq!(net.nodes[1].catalog().position(), 8);
}

#[test]
fn a_corrupt_entry_makes_the_node_refuse_rather_than_guess() {
    let mut net = Net::new(1);
    net.store.apply(&StoreOp::Create { key: journal_key(1), bytes: b"not an entry".to_vec().into() });
    let r = net.submit(0, Command::ListTopics);
    net.run();
    assert!(matches!(net.reply(r), Err(BrokerError::Unavailable(why)) if why.contains("corrupt")));
    let later = net.submit(0, create("t"));
    assert!(matches!(net.reply(later), Err(BrokerError::Unavailable(_))));
}

/// A node told to stop its background work finishes the tail read under way, then polls
/// the store no more on its own; commands still fence, so it still learns the journal.
#[test]
fn a_node_whose_background_stopped_polls_no_more_and_still_fences() {
    let mut net = Net::new(2);
    net.nodes[1] = Node::new(NodeOptions { tail_every_ms: 50, reconcile_every_ms: 80, ..net.nodes[1].options.clone() });
    net.submit(1, create("t"));
    net.run();
    // Its timers are armed; at 60 ms a tail read goes out.
    assert!(net.nodes[1].poll_timeout().is_some());
    net.now = net.now.plus_millis(60);
    net.nodes[1].handle_timeout(net.now);
    net.collect();
    assert!(net.pending.iter().any(|(n, _, op)| *n == 1 && is_list("j/")(op)), "a tail read under way");
    assert!(net.nodes[1].only_polling() && !net.nodes[1].idle(), "busy with its polling only");
    net.nodes[1].stop_background();
    net.run();
    assert!(net.nodes[1].idle(), "the read under way finished");
    assert_eq!(net.nodes[1].poll_timeout(), None, "nothing left on a timer");
    net.advance(10_000);
    assert!(net.pending.is_empty(), "no tail read or reconciler pass in ten seconds");
    // Another node deletes the topic; a command on the stopped node fences and sees it.
    net.submit(0, delete("t"));
    net.run();
    assert!(net.nodes[1].catalog().live("t").is_some(), "not read on its own");
    let d = net.submit(1, describe("t"));
    net.run();
    assert!(matches!(net.reply(d), Err(BrokerError::TopicNotFound { .. })), "{:?}", net.reply(d));
    assert!(net.nodes[1].catalog().live("t").is_none());
}
