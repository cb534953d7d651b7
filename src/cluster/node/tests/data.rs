//! Data: produces and fetches across nodes, offsets that run out, appends whose outcome is unknown.

use super::*;

/// A partition whose last segment ends at offset u64::MAX (only a forged store
/// holds one) has run out of offsets: a produce to it is refused, as on one node.
/// Computing the end of the segment it would write once overflowed.
#[test]
fn a_produce_to_a_partition_out_of_offsets_is_refused() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    let last = u64::MAX - 1;
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let records = [ProduceRecord { key: None, value: b"last".to_vec().into() }];
    let bytes = segment::encode(TopicId(1), 0, last, writer, &records);
    net.store.apply(&StoreOp::Create { key: segment_key(TopicId(1), 0, last), bytes: bytes.into() });
    let r = net.submit(0, produce("t", Some(0), &["v"]));
    net.run();
    let refused = matches!(net.reply(r), Err(BrokerError::Storage(w)) if w.contains("run out of offsets"));
    assert!(refused, "{:?}", net.reply(r));
    assert_eq!(net.segments(), 1, "nothing written");
}

#[test]
fn records_produced_on_one_node_are_fetched_from_another() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    let p1 = net.submit(0, produce("t", Some(1), &["a", "b"]));
    net.run();
    let p2 = net.submit(1, produce("t", Some(1), &["c"]));
    net.run();
    assert!(
        matches!(net.reply(p1), Ok(Reply::Produced { positions, .. }) if positions.iter().map(|p| p.offset).collect::<Vec<_>>() == [0, 1])
    );
    assert!(
        matches!(net.reply(p2), Ok(Reply::Produced { positions, .. }) if positions[0].offset == 2),
        "{:?}",
        net.reply(p2)
    );
    for (node, offset) in [(0, 0), (1, 0), (1, 1), (0, 2)] {
        let f = net.submit(node, fetch("t", 1, offset));
        net.run();
        let want: Vec<(u64, String)> = [(0, "a"), (1, "b"), (2, "c")]
            .iter()
            .filter(|(o, _)| *o >= offset)
            .map(|(o, v)| (*o, v.to_string()))
            .collect();
        // A fetch reads one segment: it may stop at a segment's end.
        let got = values(net.reply(f));
        assert!(!got.is_empty() && want.starts_with(&got), "node {node} from {offset}: {got:?}");
    }
    let past = net.submit(1, fetch("t", 1, 4));
    let at_end = net.submit(1, fetch("t", 1, 3));
    let empty = net.submit(1, fetch("t", 0, 0));
    net.run();
    assert_eq!(net.reply(past), &Err(BrokerError::OffsetOutOfRange { offset: 4, high_watermark: 3 }));
    assert_eq!(values(net.reply(at_end)), vec![]);
    assert_eq!(values(net.reply(empty)), vec![]);
}

#[test]
fn two_nodes_appending_to_one_partition_at_once_get_their_own_offsets() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    // Both learn the end first.
    net.submit(0, produce("t", Some(0), &["x"]));
    net.submit(1, produce("t", Some(0), &["y"]));
    net.run();
    let a = net.submit(0, produce("t", Some(0), &["a1", "a2"]));
    let b = net.submit(1, produce("t", Some(0), &["b1"]));
    net.run();
    let offsets = |r: &Result<Reply, BrokerError>| match r {
        Ok(Reply::Produced { positions, .. }) => positions.iter().map(|p| p.offset).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let mut all = [offsets(net.reply(a)), offsets(net.reply(b))].concat();
    all.sort_unstable();
    assert_eq!(all, vec![2, 3, 4], "dense, and none twice");
}

/// The append's create lands but its answer is lost, or does not land: either way
/// the node reads the key back and appends exactly once.
#[test]
fn an_append_with_an_unknown_outcome_is_read_back() {
    for lands in [true, false] {
        let mut net = Net::new(1);
        let r = net.submit(0, create("t"));
        net.step_with(|store, op| Ok(store.apply(op))); // the fence's listing
        assert!(matches!(net.pending.front(), Some((_, _, StoreOp::Create { .. }))));
        net.step_with(|store, op| {
            if lands {
                store.apply(op);
            }
            Err(StoreError::Unknown("timed out".into()))
        });
        net.run();
        assert_eq!(net.reply(r), &Ok(Reply::Created { topic: TopicId(1) }), "lands: {lands}");
        assert_eq!(net.store.keys().count(), 1, "lands: {lands}");
    }
}
