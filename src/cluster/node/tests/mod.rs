//! The node's tests, over one harness: nodes sharing a [`MemStore`] (`Net`), and one
//! file of tests per rule of the node.

use super::*;
use crate::cluster::keys::{object_key, partition_prefix, segment_key};
use crate::cluster::memstore::MemStore;
use crate::cluster::{segment, snapshot, topic_object};
use crate::command::TopicSettings;

mod compaction;
mod data;
mod deadlines;
mod fence;
mod listings;
mod random;
mod removal;

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
                    gather_ms: 0,
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

    /// Carries out the oldest pending operation of `node`.
    fn step_node(&mut self, node: usize) -> bool {
        let Some(i) = self.pending.iter().position(|(n, _, _)| *n == node) else { return false };
        let op = self.pending.remove(i).unwrap();
        self.pending.push_front(op);
        self.step_with(|store, op| Ok(store.apply(op)))
    }

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

    /// How many objects of the data prefix the store holds (either layout).
    fn objects(&self) -> usize {
        self.store.keys().filter(|k| parse_data_key(k).is_some()).count()
    }

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
        self.store.apply(&StoreOp::Create { key, bytes: b"not ours".to_vec().into() });
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
    let records = values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect();
    Command::Produce { topic: name.into(), partition, records }
}

fn fetch(name: &str, partition: u32, offset: u64) -> Command {
    Command::Fetch { topic: name.into(), partition, offset, max_records: 100, max_bytes: None }
}

fn values(reply: &Result<Reply, BrokerError>) -> Vec<(u64, String)> {
    let Ok(Reply::Fetched { records, .. }) = reply else { panic!("not fetched: {reply:?}") };
    records.iter().map(|r| (r.offset, String::from_utf8(r.value.to_vec()).unwrap())).collect()
}

fn is_list(prefix: &'static str) -> impl Fn(&StoreOp) -> bool {
    move |op| matches!(op, StoreOp::List { prefix: p, .. } if p.starts_with(prefix))
}
