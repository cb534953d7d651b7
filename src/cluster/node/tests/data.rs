//! Data: produces and fetches across nodes, offsets that run out, appends whose outcome is unknown.

use super::*;

/// A partition whose end is u64::MAX (only a forged store holds an object ending
/// there) has run out of offsets: a produce to it is refused, as on one node.
#[test]
fn a_produce_to_a_partition_out_of_offsets_is_refused() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    let last = u64::MAX - 1;
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let records = [ProduceRecord { key: None, value: b"last".to_vec().into() }];
    let bytes = topic_object::encode(TopicId(1), 0, writer, &[last, 0], &[(0, &records[..])]).unwrap();
    net.store.apply(&StoreOp::Create { key: object_key(TopicId(1), 0), bytes: bytes.into() });
    let r = net.submit(0, produce("t", Some(0), &["v"]));
    net.run();
    let refused = matches!(net.reply(r), Err(BrokerError::Storage(w)) if w.contains("run out of offsets"));
    assert!(refused, "{:?}", net.reply(r));
    assert_eq!(net.objects(), 1, "nothing written");
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

/// Partition 0's first offset in each object of incarnation 1 that holds records of
/// it, in object order.
fn partition_0_bases(net: &Net) -> Vec<u64> {
    let headers = net.store.keys().filter_map(|k| {
        let (topic, n) = parse_object_key(k)?;
        Some(topic_object::decode_header(topic, n, net.store.get(k)?).expect("decodes").0)
    });
    headers.filter_map(|h| h.parts.iter().find(|p| p.partition == 0).map(|p| h.base(p))).collect()
}

/// One node with `config`: produces of `a`, `b c`, `d` and `e` to partition 0 of a new
/// topic, submitted at once and run, each checked acknowledged at its offsets.
fn four_produces_to_one_partition(config: Config) -> Net {
    let mut net = Net::new(1);
    net.nodes[0] = Node::new(NodeOptions { config, ..net.nodes[0].options.clone() });
    net.submit(0, create("t"));
    net.run();
    let batches: [&[&str]; 4] = [&["a"], &["b", "c"], &["d"], &["e"]];
    let rs: Vec<RequestId> = batches.iter().map(|b| net.submit(0, produce("t", Some(0), b))).collect();
    net.run();
    let got: Vec<Vec<u64>> = rs.iter().map(|r| offsets(net.reply(*r))).collect();
    assert_eq!(got, vec![vec![0], vec![1, 2], vec![3], vec![4]]);
    net
}

/// The offsets a produce was acknowledged with.
fn offsets(reply: &Result<Reply, BrokerError>) -> Vec<u64> {
    let Ok(Reply::Produced { positions, .. }) = reply else { panic!("not produced: {reply:?}") };
    positions.iter().map(|p| p.offset).collect()
}

/// Produces to one partition that reach a node while its write there is under way
/// cost one segment between them: the first of them leads the next write, the others
/// ride in its segment, each acknowledged at the offsets where its own records lie.
/// (The first produce's fence round has begun when the others arrive: they wait for
/// the next round, and meet its segment write under way.)
#[test]
fn produces_to_one_partition_in_flight_together_share_one_segment() {
    let mut net = four_produces_to_one_partition(Config::default());
    assert_eq!(partition_0_bases(&net), vec![0, 1], "[a] then [b c d e]");
    assert_eq!(net.nodes[0].rides(), 2);
    // A fetch reads one segment.
    let f = net.submit(0, fetch("t", 0, 1));
    net.run();
    let want: Vec<(u64, String)> = ["b", "c", "d", "e"].iter().zip(1..).map(|(v, i)| (i, v.to_string())).collect();
    assert_eq!(values(net.reply(f)), want);
}

/// A segment holds at most one batch: the first produce queued that would take it past
/// the batch's limits waits for the next write, and those behind it keep their order.
#[test]
fn riders_past_a_batchs_limit_wait_for_the_next_segment() {
    let net = four_produces_to_one_partition(Config { max_batch_records: 3, ..Config::default() });
    assert_eq!(partition_0_bases(&net), vec![0, 1, 4], "[a], then [b c d] (3 records), then [e]");
}

/// The leader's create times out, whether it landed or not: it is read back and, if
/// missing, issued again with the same bytes. A produce that arrived after the first
/// create went out is not added to it (it could be acknowledged by a segment that does
/// not hold it): it writes the next segment.
#[test]
fn a_create_of_unknown_outcome_is_issued_again_without_new_riders() {
    for lands in [true, false] {
        let mut net = Net::new(1);
        net.submit(0, create("t"));
        net.run();
        let first = net.submit(0, produce("t", Some(0), &["a"]));
        let rider = net.submit(0, produce("t", Some(0), &["b"]));
        while !matches!(net.pending.front(), Some((_, _, StoreOp::Create { .. }))) {
            assert!(net.step_with(|store, op| Ok(store.apply(op))), "no segment create");
        }
        let late = net.submit(0, produce("t", Some(0), &["c"]));
        net.step_with(|store, op| {
            if lands {
                store.apply(op);
            }
            Err(StoreError::Unknown("timed out".into()))
        });
        net.run();
        let got: Vec<Vec<u64>> = [first, rider, late].iter().map(|r| offsets(net.reply(*r))).collect();
        assert_eq!(got, vec![vec![0], vec![1], vec![2]], "lands: {lands}");
        assert_eq!(net.objects(), 2, "lands: {lands}");
        let f = net.submit(0, fetch("t", 0, 2));
        net.run();
        assert_eq!(values(net.reply(f)), vec![(2, "c".to_string())], "lands: {lands}");
    }
}

/// A leader whose create meets a corrupt object under its key ends with an error,
/// and so do its riders (their records went with its create).
#[test]
fn riders_end_as_their_leader_does() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    let p1 = net.submit(0, produce("t", Some(0), &["a"]));
    net.run();
    assert_eq!(offsets(net.reply(p1)), vec![0]);
    // Another node's object 1 lands while this node knows object 0 as the newest, then
    // its header rots.
    let writer = EntryWriter { node: 9, boot: 9, nonce: 9 };
    let records = [ProduceRecord { key: None, value: b"x".to_vec().into() }];
    let mut bytes = topic_object::encode(TopicId(1), 1, writer, &[1, 0], &[(0, &records[..])]).unwrap();
    bytes[20] ^= 0xff;
    net.store.apply(&StoreOp::Create { key: object_key(TopicId(1), 1), bytes: bytes.into() });
    // `b` writes at the end it knows; `c` and `d` arrive while it does.
    let b = net.submit(0, produce("t", Some(0), &["b"]));
    while !matches!(net.pending.front(), Some((_, _, StoreOp::Create { .. }))) {
        assert!(net.step_with(|store, op| Ok(store.apply(op))), "no segment create");
    }
    // A list begins a fence round: `c` and `d` both wait for the next one.
    net.submit(0, Command::ListTopics);
    let cd: Vec<RequestId> = ["c", "d"].iter().map(|v| net.submit(0, produce("t", Some(0), &[v]))).collect();
    net.run();
    for r in [b].into_iter().chain(cd) {
        assert!(matches!(net.reply(r), Err(BrokerError::CorruptRecord { .. })), "{:?}", net.reply(r));
    }
    assert_eq!(net.nodes[0].rides(), 1, "d rode with c");
    assert_eq!(net.objects(), 2, "nothing written past the corrupt segment");
}

/// With a gathering window, a partition's first create waits it out once the node knows
/// where the segment goes: produces that arrive meanwhile ride in it.
#[test]
fn a_gathering_window_holds_the_first_create_for_riders() {
    let mut net = Net::new(1);
    net.nodes[0] = Node::new(NodeOptions { gather_ms: 5, ..net.nodes[0].options.clone() });
    net.submit(0, create("t"));
    net.run();
    let a = net.submit(0, produce("t", Some(0), &["a"]));
    net.run();
    assert!(!net.replies.contains_key(&a), "held for the window");
    assert_eq!(net.objects(), 0);
    assert_eq!(net.nodes[0].poll_timeout(), Some(Time::ZERO.plus_millis(5)));
    let bc: Vec<RequestId> = ["b", "c"].iter().map(|v| net.submit(0, produce("t", Some(0), &[v]))).collect();
    net.run();
    net.advance(5);
    let got: Vec<Vec<u64>> = [a].iter().chain(&bc).map(|r| offsets(net.reply(*r))).collect();
    assert_eq!(got, vec![vec![0], vec![1], vec![2]]);
    assert_eq!(partition_0_bases(&net), vec![0], "one segment: [a b c]");
    assert_eq!(net.nodes[0].rides(), 2);
}

/// A produce whose create went out carrying a rider's records, lost the race for its
/// object number (the object there is another node's), and then met its topic's
/// removal while it looked for the newest object, has written nothing, and neither has
/// its rider: both are answered "not found". Had the create's outcome been unknown
/// instead, reading the object back would have said whose it is first.
#[test]
fn a_produce_that_lost_its_race_has_written_nothing_at_a_removal() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    for p in 0..2 {
        let r = net.submit(0, produce("t", Some(p), &["x"]));
        net.run();
        assert_eq!(offsets(net.reply(r)), vec![0]);
    }
    // Another node wrote objects 2 and 3.
    let other = EntryWriter { node: 9, boot: 9, nonce: 9 };
    for n in [2, 3] {
        let theirs = [ProduceRecord { key: None, value: b"y".to_vec().into() }];
        let bytes = topic_object::encode(TopicId(1), n, other, &[1, n - 1], &[(1, &theirs[..])]).unwrap();
        net.store.apply(&StoreOp::Create { key: object_key(TopicId(1), n), bytes: bytes.into() });
    }
    let key_for = |p: u32| (0u8..).map(|k| vec![k]).find(|k| crate::partition_for_key(k, 2) == p).unwrap();
    let record = |p: u32| ProduceRecord { key: Some(key_for(p)), value: format!("to {p}").into_bytes().into() };
    let both = Command::Produce { topic: "t".into(), partition: None, records: vec![record(0), record(1)] };
    // A list begins a fence round: the two produces wait for the next one together.
    net.submit(0, Command::ListTopics);
    let leader = net.submit(0, both);
    let rider = net.submit(0, produce("t", Some(0), &["rides"]));
    // The create of object 2 meets the other's; the node reads it, lists past it, and
    // reads the newest, 3: by then the topic's removal has taken it.
    let mut created = None;
    while !net.replies.contains_key(&leader) {
        net.step_with(|store, op| match op {
            StoreOp::Get { key } if *key == object_key(TopicId(1), 3) => Ok(StoreOutput::Missing),
            StoreOp::Create { key, bytes } if *key == object_key(TopicId(1), 2) => {
                created = Some(bytes.clone());
                Ok(store.apply(op))
            }
            _ => Ok(store.apply(op)),
        });
    }
    let object = topic_object::decode(TopicId(1), 2, &created.expect("object 2's create went out")).unwrap();
    let carried: Vec<&[u8]> = object.records[0].iter().map(|r| &r.value[..]).collect();
    assert_eq!(carried, vec![&b"to 0"[..], b"rides"], "the rider is in the leader's create");
    for r in [leader, rider] {
        assert!(matches!(net.reply(r), Err(BrokerError::TopicNotFound { .. })), "{r:?}: {:?}", net.reply(r));
    }
    let object_2 = net.store.get(&object_key(TopicId(1), 2)).unwrap();
    let header = topic_object::decode_header(TopicId(1), 2, object_2).unwrap().0;
    assert_eq!(header.writer, other, "object 2 is the other node's");
}

/// An object whose header gives the ends of another number of partitions than its
/// topic has is corrupt: fetches and produces are refused naming it, never served
/// from it or written past it.
#[test]
fn an_object_for_another_partition_count_is_refused_as_corrupt() {
    let mut net = Net::new(1);
    net.submit(0, create("t")); // two partitions
    net.run();
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let records = [ProduceRecord { key: None, value: b"v".to_vec().into() }];
    let bytes = topic_object::encode(TopicId(1), 0, writer, &[0, 0, 0], &[(0, &records[..])]).unwrap();
    net.store.apply(&StoreOp::Create { key: object_key(TopicId(1), 0), bytes: bytes.into() });
    let f = net.submit(0, fetch("t", 0, 0));
    let p = net.submit(0, produce("t", Some(0), &["w"]));
    net.run();
    for r in [f, p] {
        let refused =
            matches!(net.reply(r), Err(BrokerError::CorruptRecord { detail, .. }) if detail.contains("3 partitions"));
        assert!(refused, "{:?}", net.reply(r));
    }
    assert_eq!(net.objects(), 1, "nothing written past it");
}

/// A topic whose records are segments of the layout before topic objects is refused,
/// naming the layout and what to do, never served as if it were empty; a removal
/// deletes the segments as it deletes objects.
#[test]
fn records_in_the_segment_layout_are_refused_by_name_and_removed_with_their_topic() {
    let mut net = Net::new(1);
    net.submit(0, create("t"));
    net.run();
    let writer = EntryWriter { node: 7, boot: 7, nonce: 7 };
    let records = [ProduceRecord { key: None, value: b"old".to_vec().into() }];
    let bytes = segment::encode(TopicId(1), 0, 0, writer, &records);
    net.store.apply(&StoreOp::Create { key: segment_key(TopicId(1), 0, 0), bytes: bytes.into() });
    let f = net.submit(0, fetch("t", 0, 0));
    let p = net.submit(0, produce("t", Some(0), &["new"]));
    let d = net.submit(0, describe("t"));
    net.run();
    for r in [f, p, d] {
        let named =
            matches!(net.reply(r), Err(BrokerError::Storage(w)) if w.contains("segment layout of an earlier version"));
        assert!(named, "{:?}", net.reply(r));
    }
    net.submit(0, delete("t"));
    net.run();
    net.advance(10);
    assert_eq!(net.objects(), 0, "the removal deleted the segment");
}

/// A fetch's search reads the headers of the objects it passes through; damage in the
/// records of one of them fails only the fetches of offsets that object holds.
#[test]
fn damaged_records_fail_only_the_fetches_that_read_them() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    for v in ["a", "b", "c"] {
        let r = net.submit(0, produce("t", Some(0), &[v]));
        net.run();
        assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
    }
    let key = object_key(TopicId(1), 1);
    let mut bytes = net.store.get(&key).unwrap().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff; // in the records frame: the header still reads
    net.store.apply(&StoreOp::Delete { key: key.clone() });
    net.store.apply(&StoreOp::Create { key, bytes: bytes.into() });
    // Node 1 has read no header yet: from offset 2 it reads object 2 alone, then from
    // offset 0 it searches through object 1's header to object 0.
    let (c, a, b) = (net.submit(1, fetch("t", 0, 2)), net.submit(1, fetch("t", 0, 0)), net.submit(1, fetch("t", 0, 1)));
    net.run();
    assert_eq!(values(net.reply(c)), [(2, "c".to_string())]);
    assert_eq!(values(net.reply(a)), [(0, "a".to_string())]);
    assert!(matches!(net.reply(b), Err(BrokerError::CorruptRecord { .. })), "{:?}", net.reply(b));
}
