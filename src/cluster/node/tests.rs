//! The node's tests, over one harness: nodes sharing a [`MemStore`] (`Net`).

use super::*;
use crate::cluster::memstore::MemStore;
use crate::cluster::snapshot;
use crate::command::TopicSettings;

/// Nodes over one [`MemStore`], store operations carried out in the order issued.
struct Net {
    store: MemStore,
    nodes: Vec<Node>,
    pending: VecDeque<(usize, StoreOpId, StoreOp)>,
    replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    next_request: u64,
    now: Time,
    /// The first bytes ever created under each journal key: the journal as every
    /// node must fold it, although compaction deletes keys (and a late create may
    /// write under a deleted one).
    history: BTreeMap<u64, Vec<u8>>,
    /// Writes whose answer was lost and that land later, in this order.
    late: VecDeque<StoreOp>,
}

impl Net {
    fn new(nodes: u32) -> Net {
        let nodes = (0..nodes)
            .map(|node| {
                Node::new(NodeOptions {
                    node,
                    boot: 100 + u64::from(node),
                    config: Config::default(),
                    list_limit: 3,
                    tail_every_ms: 0,
                    reconcile_every_ms: 0,
                    compact_after_entries: 0,
                    request_timeout_ms: 0,
                })
            })
            .collect();
        Net {
            store: MemStore::default(),
            nodes,
            pending: VecDeque::new(),
            replies: BTreeMap::new(),
            next_request: 0,
            now: Time::ZERO,
            history: BTreeMap::new(),
            late: VecDeque::new(),
        }
    }

    /// `nodes` nodes that compact after `every` entries.
    fn compacting(nodes: u32, every: u64) -> Net {
        let mut net = Net::new(nodes);
        for node in &mut net.nodes {
            *node = Node::new(NodeOptions { compact_after_entries: every, ..node.options.clone() });
        }
        net
    }

    /// Records a journal key's first creation.
    fn record(&mut self, op: &StoreOp) {
        if let StoreOp::Create { key, .. } = op {
            if let (Some(seq), Some(bytes)) = (parse_journal_key(key), self.store.get(key)) {
                self.history.entry(seq).or_insert_with(|| bytes.to_vec());
            }
        }
    }

    /// Lands the oldest late write.
    fn land_late(&mut self) {
        if let Some(op) = self.late.pop_front() {
            self.store.apply(&op);
            self.record(&op);
        }
    }

    fn submit(&mut self, node: usize, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.nodes[node].handle_command(self.now, request, command);
        self.collect();
        request
    }

    fn collect(&mut self) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            while let Some(effect) = node.poll_effect() {
                match effect {
                    NodeEffect::Store { id, op } => self.pending.push_back((i, id, op)),
                    NodeEffect::Reply { request, reply } => {
                        assert!(self.replies.insert(request, reply).is_none(), "{request:?} answered twice");
                    }
                }
            }
        }
    }

    /// Carries out the oldest pending operation; `result` may replace its outcome.
    fn step_with(&mut self, result: impl FnOnce(&mut MemStore, &StoreOp) -> StoreResult) -> bool {
        let Some((node, id, op)) = self.pending.pop_front() else { return false };
        let r = result(&mut self.store, &op);
        self.record(&op);
        self.nodes[node].handle_store(self.now, id, r);
        self.collect();
        true
    }

    fn run(&mut self) {
        while self.step_with(|store, op| Ok(store.apply(op))) {}
    }

    fn reply(&self, request: RequestId) -> &Result<Reply, BrokerError> {
        self.replies.get(&request).unwrap_or_else(|| panic!("{request:?} has no reply"))
    }
}

fn create(name: &str) -> Command {
    Command::CreateTopic { name: name.into(), partitions: 2, settings: TopicSettings::default() }
}

fn describe(name: &str) -> Command {
    Command::DescribeTopic { name: name.into() }
}

fn delete(name: &str) -> Command {
    Command::DeleteTopic { name: name.into() }
}

fn produce(name: &str, partition: Option<u32>, values: &[&str]) -> Command {
    let records = values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec() }).collect();
    Command::Produce { topic: name.into(), partition, records }
}

fn fetch(name: &str, partition: u32, offset: u64) -> Command {
    Command::Fetch { topic: name.into(), partition, offset, max_records: 100, max_bytes: None }
}

fn values(reply: &Result<Reply, BrokerError>) -> Vec<(u64, String)> {
    let Ok(Reply::Fetched { records, .. }) = reply else { panic!("not fetched: {reply:?}") };
    records.iter().map(|r| (r.offset, String::from_utf8(r.value.clone()).unwrap())).collect()
}

impl Net {
    /// Carries out the oldest pending operation of `node`.
    fn step_node(&mut self, node: usize) -> bool {
        let Some(i) = self.pending.iter().position(|(n, _, _)| *n == node) else { return false };
        let op = self.pending.remove(i).unwrap();
        self.pending.push_front(op);
        self.step_with(|store, op| Ok(store.apply(op)))
    }
}

impl Net {
    /// Lets `ms` pass on every node, then runs what that started.
    fn advance(&mut self, ms: u64) {
        self.now = self.now.plus_millis(ms);
        for node in &mut self.nodes {
            node.handle_timeout(self.now);
        }
        self.collect();
        self.run();
    }

    fn journal(&self) -> Vec<EntryKind> {
        self.store
            .keys()
            .filter_map(|k| parse_journal_key(k).map(|seq| (seq, k)))
            .map(|(seq, k)| entry::decode(seq, self.store.get(k).unwrap()).unwrap().kind)
            .collect()
    }

    fn segments(&self) -> usize {
        self.store.keys().filter(|k| parse_segment_key(k).is_some()).count()
    }
}

impl Net {
    /// Carries out `node`'s operations until it has none left.
    fn run_node(&mut self, node: usize) {
        while self.step_node(node) {}
    }

    fn snapshots(&self) -> Vec<u64> {
        self.store.keys().filter_map(parse_snapshot_key).collect()
    }

    fn has_entry(&self, seq: u64) -> bool {
        self.store.get(&journal_key(seq)).is_some()
    }
}

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
    assert!(net.nodes[1].ends.contains_key(&(TopicId(2), 0)) && net.nodes[1].cursors.contains_key(&TopicId(2)));
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
    assert!(!node.ends.contains_key(&(TopicId(2), 0)) && !node.cursors.contains_key(&TopicId(2)), "removed");
    assert!(node.ends.contains_key(&(TopicId(1), 0)), "being deleted: still known");
    assert_eq!(net.segments(), 1);
    net.advance(50);
    assert_eq!(net.segments(), 1, "its grace delay runs from when node 1 loaded the snapshot");
    net.advance(60);
    assert_eq!(net.segments(), 0);
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
            net.store.apply(&StoreOp::Create { key: snapshot_key(4), bytes });
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
    net.store.apply(&StoreOp::Create { key: snapshot_key(u64::MAX), bytes: snapshot::encode(&last) });
    // Entry 2 without entry 1: a gap, so the node looks for a snapshot past it.
    let e =
        Entry { writer: EntryWriter { node: 7, boot: 7, nonce: 7 }, kind: EntryKind::Removed { topic: TopicId(9) } };
    net.store.apply(&StoreOp::Create { key: journal_key(2), bytes: entry::encode(2, &e) });
    let r = net.submit(0, Command::ListTopics);
    net.run();
    assert_eq!(net.reply(r), &Ok(Reply::Topics(vec![])));
    assert_eq!(net.nodes[0].catalog().position(), u64::MAX);
    let r = net.submit(0, create("t"));
    net.run();
    let refused = matches!(net.reply(r), Err(BrokerError::Unavailable(w)) if w.contains("no entry can follow"));
    assert!(refused, "{:?}", net.reply(r));
}

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
    let records = [ProduceRecord { key: None, value: b"last".to_vec() }];
    let bytes = segment::encode(TopicId(1), 0, last, writer, &records);
    net.store.apply(&StoreOp::Create { key: segment_key(TopicId(1), 0, last), bytes });
    let r = net.submit(0, produce("t", Some(0), &["v"]));
    net.run();
    let refused = matches!(net.reply(r), Err(BrokerError::Storage(w)) if w.contains("run out of offsets"));
    assert!(refused, "{:?}", net.reply(r));
    assert_eq!(net.segments(), 1, "nothing written");
}

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
    assert_eq!(net.segments(), 10);
    net.submit(1, delete("t"));
    net.run();
    // Every node folds the tombstone (a fence each).
    for node in 0..3 {
        net.submit(node, Command::ListTopics);
    }
    net.run();
    net.advance(50);
    assert_eq!(net.segments(), 10, "still in its grace delay");
    net.advance(60);
    assert_eq!(net.segments(), 1, "only the other topic's segment is left");
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
    assert_eq!(net.segments(), 1);
    // The new life of node 0 folds the journal and resumes.
    net.submit(0, Command::ListTopics);
    net.run();
    net.advance(10);
    assert_eq!(net.segments(), 0);
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
    let rec = [ProduceRecord { key: None, value: b"late".to_vec() }];
    let put = |net: &mut Net, key: String, bytes: Vec<u8>| {
        net.store.apply(&StoreOp::Create { key, bytes });
    };
    put(&mut net, segment_key(TopicId(1), 0, 0), segment::encode(TopicId(1), 0, 0, writer, &rec));
    put(&mut net, segment_key(TopicId(1), 1, 5), segment::encode(TopicId(1), 1, 5, writer, &rec));
    put(&mut net, segment_key(TopicId(99), 0, 0), segment::encode(TopicId(99), 0, 0, writer, &rec));
    put(&mut net, "d/not-ours".into(), b"x".to_vec());
    put(&mut net, "z/other".into(), b"y".to_vec());
    let before: Vec<String> = net.store.keys().map(String::from).collect();
    net.advance(100);
    let after: Vec<String> = net.store.keys().map(String::from).collect();
    let gone: Vec<&String> = before.iter().filter(|k| !after.contains(k)).collect();
    assert_eq!(gone, vec![&segment_key(TopicId(1), 0, 0), &segment_key(TopicId(1), 1, 5)]);
    assert_eq!(net.nodes[0].orphans_removed(), 2);
    assert_eq!(after.iter().filter(|k| k.starts_with(&topic_prefix(TopicId(2)))).count(), 4, "live segments kept");
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
    assert_eq!(net.segments(), 1);
    // A request the store answers in time is answered as usual.
    let f = net.submit(0, fetch("a", 0, 0));
    net.run();
    assert_eq!(values(net.reply(f)), vec![(0, "x".to_string())]);
}

#[test]
fn a_corrupt_entry_makes_the_node_refuse_rather_than_guess() {
    let mut net = Net::new(1);
    net.store.apply(&StoreOp::Create { key: journal_key(1), bytes: b"not an entry".to_vec() });
    let r = net.submit(0, Command::ListTopics);
    net.run();
    assert!(matches!(net.reply(r), Err(BrokerError::Unavailable(why)) if why.contains("corrupt")));
    let later = net.submit(0, create("t"));
    assert!(matches!(net.reply(later), Err(BrokerError::Unavailable(_))));
}

/// Seeded runs: several nodes, commands on random nodes, store operations completed
/// in random order, some failing and some with unknown outcomes (landed or not).
/// Two seeds in three compact (after 2 or 5 entries), and some of their writes with
/// unknown outcomes land later, after other operations. Every request is answered;
/// the journal never holds an entry its catalog ignores; every Created and
/// DeleteAccepted names a journal entry that says so; every node ends with the same
/// catalog, which the store's newest snapshot and the entries after it fold to; and
/// no describe invoked after a delete's acknowledgement shows the deleted
/// incarnation.
#[test]
fn random_interleavings_and_faults_keep_the_journal_and_the_lifecycle_straight() {
    let seeds: u64 = std::env::var("BROKER_CLUSTER_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let mut compacted = 0;
    for seed in 1..=seeds {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        // Drawn from the seed, not the stream, so seeds without compaction run as
        // they did before compaction was built.
        let compact = [0, 2, 5][(seed % 3) as usize];
        let mut net = Net::compacting(1 + rand(4) as u32, compact);
        let names = ["a", "b"];
        let mut issued: BTreeMap<RequestId, (Command, u64)> = BTreeMap::new();
        let mut answered_at: BTreeMap<RequestId, u64> = BTreeMap::new();
        let mut step = 0u64;
        for _ in 0..60 {
            step += 1;
            if rand(3) == 0 {
                let name = names[rand(2) as usize];
                let command = match rand(7) {
                    0 => create(name),
                    1 => delete(name),
                    2 => describe(name),
                    3 => Command::ListTopics,
                    4 | 5 => {
                        let value = format!("v{step}");
                        produce(name, (rand(3) > 0).then(|| rand(2) as u32), &[value.as_str(), "w"])
                    }
                    _ => fetch(name, rand(2) as u32, rand(3)),
                };
                let node = rand(net.nodes.len() as u64) as usize;
                let r = net.submit(node, command.clone());
                issued.insert(r, (command, step));
            } else if !net.pending.is_empty() {
                let i = rand(net.pending.len() as u64) as usize;
                let op = net.pending.remove(i).unwrap();
                net.pending.push_front(op);
                let fault = rand(20);
                let mut late = std::mem::take(&mut net.late);
                let mut land = false;
                net.step_with(|store, op| match fault {
                    0 => Err(StoreError::Failed("503".into())),
                    1 => {
                        store.apply(op);
                        Err(StoreError::Unknown("timed out after landing".into()))
                    }
                    2 => Err(StoreError::Unknown("timed out before landing".into())),
                    3 if compact > 0 => {
                        if matches!(op, StoreOp::Create { .. } | StoreOp::Delete { .. }) {
                            late.push_back(op.clone());
                        }
                        Err(StoreError::Unknown("timed out, to land later".into()))
                    }
                    4 if compact > 0 => {
                        land = true;
                        Ok(store.apply(op))
                    }
                    _ => Ok(store.apply(op)),
                });
                net.late = late;
                if land {
                    net.land_late();
                }
            } else {
                net.now = net.now.plus_millis(10);
                for node in &mut net.nodes {
                    node.handle_timeout(net.now);
                }
                net.collect();
            }
            for r in net.replies.keys() {
                answered_at.entry(*r).or_insert(step);
            }
        }
        // Faults stop: late writes land, everything drains.
        while !net.late.is_empty() {
            net.land_late();
        }
        for _ in 0..1000 {
            net.run();
            net.now = net.now.plus_millis(10_000);
            for node in &mut net.nodes {
                node.handle_timeout(net.now);
            }
            net.collect();
            if net.pending.is_empty() && net.nodes.iter().all(|n| n.poll_timeout().is_none()) {
                break;
            }
        }
        step += 1;
        for r in net.replies.keys() {
            answered_at.entry(*r).or_insert(step);
        }
        for r in issued.keys() {
            assert!(net.replies.contains_key(r), "seed {seed}: {r:?} ({:?}) never answered", issued[r].0);
        }
        // The journal, folded afresh from every entry ever appended (compaction
        // deleted some), ignores nothing.
        let mut journal = Catalog::default();
        let mut entries = BTreeMap::new();
        let mut folded_at = BTreeMap::new();
        for (seq, bytes) in &net.history {
            assert_eq!(*seq, journal.position() + 1, "seed {seed}: the journal skips a seq");
            let e = entry::decode(*seq, bytes).expect("a valid entry");
            assert_eq!(journal.fold(&e), Folded::Applied, "seed {seed}: entry {seq}");
            entries.insert(*seq, e.kind);
            folded_at.insert(*seq, journal.clone());
        }
        // The store holds the same: every snapshot is that catalog at its seq, and
        // the newest one with the entries after it folds to the whole journal.
        let mut from_store = Catalog::default();
        for key in net.store.keys() {
            let Some(seq) = parse_snapshot_key(key) else { continue };
            let c = snapshot::decode(seq, net.store.get(key).unwrap()).expect("a valid snapshot");
            assert_eq!(Some(&c), folded_at.get(&seq), "seed {seed}: snapshot {seq}");
            from_store = c;
        }
        if from_store.position() > 0 {
            compacted += 1;
        }
        for key in net.store.keys() {
            let Some(seq) = parse_journal_key(key) else { continue };
            if seq > from_store.position() {
                assert_eq!(seq, from_store.position() + 1, "seed {seed}: entry {seq} after a gap");
                assert_eq!(Some(net.store.get(key).unwrap()), net.history.get(&seq).map(Vec::as_slice));
                let e = entry::decode(seq, net.store.get(key).unwrap()).expect("a valid entry");
                from_store.fold(&e);
            }
        }
        assert_eq!(from_store, journal, "seed {seed}: the store's journal");
        for (r, reply) in &net.replies {
            match reply {
                Ok(Reply::Created { topic }) => {
                    assert!(matches!(entries.get(&topic.0), Some(EntryKind::Create { .. })), "seed {seed}: {r:?}");
                }
                Ok(Reply::DeleteAccepted { topic }) => {
                    let tombstone =
                        entries.values().any(|k| matches!(k, EntryKind::Delete { topic: t, .. } if t == topic));
                    assert!(tombstone, "seed {seed}: {r:?} acknowledged a delete of {topic} with no tombstone");
                }
                _ => {}
            }
        }
        // No position is acknowledged twice, and a fetch shows at each position the
        // record acknowledged there (or one produced there whose answer was lost).
        let mut at: BTreeMap<(TopicId, u32, u64), Vec<u8>> = BTreeMap::new();
        for (r, reply) in &net.replies {
            if let (Ok(Reply::Produced { topic, positions }), Command::Produce { records, .. }) = (reply, &issued[r].0)
            {
                for (p, rec) in positions.iter().zip(records) {
                    let old = at.insert((*topic, p.partition, p.offset), rec.value.clone());
                    assert!(old.is_none(), "seed {seed}: {topic}/{}@{} acknowledged twice", p.partition, p.offset);
                }
            }
        }
        for (r, reply) in &net.replies {
            if let (Ok(Reply::Fetched { topic, records, high_watermark }), Command::Fetch { partition, .. }) =
                (reply, &issued[r].0)
            {
                for rec in records {
                    assert!(rec.offset < *high_watermark, "seed {seed}: {r:?}");
                    if let Some(v) = at.get(&(*topic, *partition, rec.offset)) {
                        assert_eq!(v, &rec.value, "seed {seed}: {r:?} at {}", rec.offset);
                    }
                }
            }
        }
        // No describe or fetch invoked after a delete's acknowledgement shows the
        // incarnation, and no produce invoked after it is acknowledged to it.
        for (d, reply) in &net.replies {
            let Ok(Reply::DeleteAccepted { topic }) = reply else { continue };
            for (r, (command, invoked)) in &issued {
                if *invoked > answered_at[d] {
                    let shown = match &net.replies[r] {
                        Ok(Reply::Described(t)) => Some(t.id),
                        Ok(Reply::Fetched { topic, .. } | Reply::Produced { topic, .. }) => Some(*topic),
                        _ => None,
                    };
                    assert_ne!(
                        shown,
                        Some(*topic),
                        "seed {seed}: {r:?} ({command:?}) invoked after {d:?} was acknowledged"
                    );
                }
            }
        }
        // At most one completion per incarnation, and every deletion completed.
        let removed: Vec<TopicId> = entries
            .values()
            .filter_map(|k| match k {
                EntryKind::Removed { topic } => Some(*topic),
                _ => None,
            })
            .collect();
        let distinct: BTreeSet<TopicId> = removed.iter().copied().collect();
        assert_eq!(removed.len(), distinct.len(), "seed {seed}: a second Removed: {removed:?}");
        assert_eq!(journal.deleting().count(), 0, "seed {seed}: deletions left unfinished");
        // Once quiet, one reconciliation leaves segments of live incarnations only.
        net.nodes[0] = Node::new(NodeOptions { reconcile_every_ms: 1, boot: 1000, ..net.nodes[0].options.clone() });
        net.submit(0, Command::ListTopics);
        net.run();
        net.advance(10);
        for key in net.store.keys() {
            if let Some((topic, _, _)) = parse_segment_key(key) {
                assert!(journal.live_topics().any(|(_, id, _)| id == topic), "seed {seed}: orphan {key} left");
            }
        }
        // Every node, fenced once more, holds the journal's catalog.
        for node in 0..net.nodes.len() {
            net.submit(node, Command::ListTopics);
        }
        net.run();
        for node in &net.nodes {
            assert_eq!(node.catalog(), &journal, "seed {seed}: broken {:?}", node.broken);
        }
    }
    if seeds >= 30 {
        assert!(compacted > seeds / 10, "only {compacted} of {seeds} runs compacted");
    }
}

// ---- removals racing requests, and listings as unkind as S3's ----

impl Net {
    /// Carries out the oldest pending operation of `node` that `which` picks.
    fn step_picked(&mut self, node: usize, which: impl Fn(&StoreOp) -> bool) {
        let i = self.pending.iter().position(|(n, _, op)| *n == node && which(op));
        let i = i.unwrap_or_else(|| panic!("node {node} has no such operation pending: {:?}", self.pending));
        let op = self.pending.remove(i).unwrap();
        self.pending.push_front(op);
        self.step_with(|store, op| Ok(store.apply(op)));
    }

    /// Creates a key outside the layout, as an operator or another program might.
    fn plant_foreign(&mut self, key: String) {
        self.store.apply(&StoreOp::Create { key, bytes: b"not ours".to_vec() });
    }

    /// Runs every operation with each page of a listing cut to at most `keep(n)`
    /// keys of the `n` the store would give (none, sometimes), `more` set wherever
    /// keys were cut: what S3 may do.
    fn run_cut(&mut self, keep: &impl Fn(usize) -> usize) {
        while self.step_with(|store, op| match store.apply(op) {
            StoreOutput::Listed { mut keys, more } => {
                let n = keys.len();
                keys.truncate(keep(n));
                Ok(StoreOutput::Listed { more: more || keys.len() < n, keys })
            }
            other => Ok(other),
        }) {}
    }
}

fn is_list(prefix: &'static str) -> impl Fn(&StoreOp) -> bool {
    move |op| matches!(op, StoreOp::List { prefix: p, .. } if p.starts_with(prefix))
}

/// A produce over two partitions creates its segment in one, then finds the other's
/// last segment removed while reading it (the topic was deleted with no grace): its
/// first record may have landed before the tombstone, and was indeed served, so it
/// is answered with an unknown outcome, never "not found" (which says nothing was
/// written).
#[test]
fn a_produce_that_wrote_before_meeting_a_removal_has_an_unknown_outcome() {
    let mut net = Net::new(3);
    let no_grace = TopicSettings { deletion_grace_ms: 0 };
    net.submit(0, Command::CreateTopic { name: "t".into(), partitions: 2, settings: no_grace });
    net.run();
    net.submit(1, produce("t", Some(0), &["a"])); // node 1 knows partition 0's end
    net.submit(2, produce("t", Some(1), &["b"]));
    net.run();
    let p = net.submit(1, produce("t", None, &["x", "y"])); // keyless: x to 0, y to 1
    net.step_picked(1, is_list("j/"));
    net.step_picked(1, |op| matches!(op, StoreOp::Create { .. })); // x's segment
    net.step_picked(1, is_list("d/")); // partition 1 listed; its read is pending
    let f = net.submit(2, fetch("t", 0, 1));
    net.run_node(2);
    assert_eq!(values(net.reply(f)), [(1, "x".to_string())], "x is served before any delete");
    let d = net.submit(0, delete("t"));
    net.run_node(0);
    assert!(matches!(net.reply(d), Ok(Reply::DeleteAccepted { .. })));
    net.nodes[0].handle_timeout(net.now);
    net.collect();
    net.run_node(0);
    assert_eq!(net.segments(), 0, "removed");
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
    net.run_node(2); // lists segment 0 alone: an end of 1, below the fetch's offset 2
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

/// Segments that land behind a fetch's walk of the partition (a key outside the
/// layout led it past their keys) are found again: the fetch never answers with an
/// end past its offset and nothing at it (seen in the simulator, 1 seed in 20,000).
#[test]
fn segments_that_land_behind_a_fetchs_walk_are_found() {
    let mut net = Net::new(2);
    net.submit(0, create("t"));
    net.run();
    net.submit(1, Command::ListTopics);
    net.run();
    net.plant_foreign(format!("{}.part", segment_key(TopicId(1), 0, 3)));
    let f = net.submit(1, fetch("t", 0, 4));
    net.step_picked(1, is_list("j/"));
    // The partition's first page: only the foreign key, more said to follow.
    assert!(net.pending.iter().any(|(n, _, op)| *n == 1 && is_list("d/")(op)));
    let i = net.pending.iter().position(|(n, _, op)| *n == 1 && is_list("d/")(op)).unwrap();
    let op = net.pending.remove(i).unwrap();
    net.pending.push_front(op);
    net.step_with(|store, op| match store.apply(op) {
        StoreOutput::Listed { keys, .. } => Ok(StoreOutput::Listed { keys, more: true }),
        other => Ok(other),
    });
    // Segments 0 and 3 land behind the walk, 5 ahead of it.
    for values in [&["a", "b", "c"][..], &["d", "e"], &["f", "g"]] {
        let r = net.submit(0, produce("t", Some(0), values));
        net.run_node(0);
        assert!(matches!(net.reply(r), Ok(Reply::Produced { .. })), "{:?}", net.reply(r));
    }
    net.run();
    assert_eq!(values(net.reply(f)), [(4, "e".to_string())]);
}

/// Keys outside the layout that fill a page of a partition's listing are walked
/// past: each fetch is answered (from one segment, as always), with the partition's
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
/// complete early: `Removed` is journaled only once no segment is left.
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
    assert_eq!(net.segments(), 0, "Removed journaled with segments left");
}

/// Every listing follows a page's `more`, never its length: with each page cut to one
/// key, or to none every other time, a fence still reads the whole journal, a fetch
/// sees every acknowledged record, a removal leaves no segment, compaction deletes
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
        assert_eq!(net.segments(), 0, "the removal walked every page");
        assert!(net.journal().contains(&EntryKind::Removed { topic: TopicId(1) }));
        assert!(!net.snapshots().is_empty(), "compaction ran");
        assert!(!net.has_entry(1), "compaction walked the journal's pages");
    }
}
