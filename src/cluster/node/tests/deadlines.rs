//! Healing and deadlines: retries after a backoff, requests answered at their deadline.

use super::*;

#[test]
fn a_failed_operation_is_retried_after_its_backoff() {
    let mut net = Net::new(1);
    let r = net.submit(0, Command::ListTopics);
    net.step_with(|_, _| Err(StoreError::Failed("503".into())));
    assert!(net.pending.is_empty() && !net.replies.contains_key(&r));
    let at = net.nodes[0].poll_timeout().expect("a retry is due");
    assert!(at > Time::ZERO);
    net.now = at;
    net.nodes[0].handle_timeout(at);
    net.collect();
    net.run();
    assert_eq!(net.reply(r), &Ok(Reply::Topics(vec![])));
}

#[test]
fn a_request_the_store_does_not_answer_in_time_is_answered_at_its_deadline() {
    let mut net = Net::new(1);
    net.nodes[0] = Node::new(NodeOptions { request_timeout_ms: 1_000, ..net.nodes[0].options.clone() });
    let c = net.submit(0, create("a"));
    net.run();
    assert!(matches!(net.reply(c), Ok(Reply::Created { .. })));
    // A produce passes its fence; its segment's create is held.
    let p = net.submit(0, produce("a", Some(0), &["x"]));
    let writing = |net: &Net| {
        net.pending.iter().any(|(_, _, op)| matches!(op, StoreOp::Create { key, .. } if key.starts_with("d/")))
    };
    while !writing(&net) {
        assert!(net.step_with(|store, op| Ok(store.apply(op))), "the produce never wrote");
    }
    // A describe waits for a fence the store does not answer either.
    let d = net.submit(0, describe("a"));
    net.now = net.now.plus_millis(999);
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    assert!(!net.replies.contains_key(&d) && !net.replies.contains_key(&p), "answered before the deadline");
    net.now = net.now.plus_millis(1);
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    assert!(
        matches!(net.reply(d), Err(BrokerError::Unavailable(why)) if why.contains("nothing was written")),
        "{:?}",
        net.reply(d)
    );
    assert!(matches!(net.reply(p), Err(BrokerError::OutcomeUnknown(_))), "{:?}", net.reply(p));
    // While the write goes on, its id stays taken.
    net.nodes[0].handle_command(net.now, p, describe("a"));
    let again = net.nodes[0].poll_effect();
    assert!(
        matches!(again, Some(NodeEffect::Reply { reply: Err(BrokerError::DuplicateRequestId(_)), .. })),
        "{again:?}"
    );
    // The write lands; its late answer is dropped (`collect` fails on a second reply).
    net.run();
    assert_eq!(net.objects(), 1);
    // A request the store answers in time is answered as usual.
    let f = net.submit(0, fetch("a", 0, 0));
    net.run();
    assert_eq!(values(net.reply(f)), vec![(0, "x".to_string())]);
}
