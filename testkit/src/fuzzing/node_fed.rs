//! The second half of target `cluster_objects`: a node that finds a fuzzed object in its
//! store.

use super::objects_input::{Objects, ObjectsInput};
use broker_core::cluster::catalog::Catalog;
use broker_core::cluster::entry::{self, Entry, EntryKind, EntryWriter};
use broker_core::cluster::keys::{journal_key, object_key, snapshot_key};
use broker_core::cluster::memstore::MemStore;
use broker_core::cluster::node::{Node, NodeEffect, NodeOptions};
use broker_core::cluster::snapshot;
use broker_core::cluster::store::StoreOp;
use broker_core::cluster::topic_object;
use broker_core::{BrokerError, Bytes, Command, Config, ProduceRecord, Reply, RequestId, Time, TopicId, TopicSettings};
use std::collections::{BTreeMap, BTreeSet};

/// The seq of the snapshot planted (the journal holds entries after it only).
const SNAPSHOT_SEQ: u64 = 4;

/// One node over a store in memory that never fails; the store's operations are
/// carried out in the order the node asks for them.
struct OneNode {
    store: MemStore,
    node: Node,
    replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    next: u64,
}

impl OneNode {
    fn new(store: MemStore) -> OneNode {
        let node = Node::new(NodeOptions {
            node: 0,
            boot: 1,
            config: Config::default(),
            list_limit: 3,
            tail_every_ms: 0,
            reconcile_every_ms: 0,
            compact_after_entries: 0,
            gather_ms: 0,
            request_timeout_ms: 0,
        });
        OneNode { store, node, replies: BTreeMap::new(), next: 0 }
    }

    /// Runs `command` to its reply.
    fn call(&mut self, command: Command) -> Result<Reply, BrokerError> {
        let request = RequestId(self.next);
        self.next += 1;
        self.node.handle_command(Time::ZERO, request, command);
        while let Some(effect) = self.node.poll_effect() {
            match effect {
                NodeEffect::Store { id, op } => {
                    let output = self.store.apply(&op);
                    self.node.handle_store(Time::ZERO, id, Ok(output));
                }
                NodeEffect::Reply { request, reply } => {
                    assert!(self.replies.insert(request, reply).is_none(), "{request:?} answered twice");
                }
            }
        }
        self.replies.remove(&request).unwrap_or_else(|| panic!("{request:?} never answered, the node idle"))
    }
}

fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

/// The node refuses, for a reason that names the damage.
fn refused_as_corrupt(what: &str, reply: &Result<Reply, BrokerError>) {
    let named = match reply {
        Err(BrokerError::Unavailable(why)) => why.contains("corrupt"),
        Err(BrokerError::CorruptRecord { .. }) => true,
        _ => false,
    };
    assert!(named, "{what}: a node over a damaged object answered {reply:?}");
}

fn live_names(catalog: &Catalog) -> BTreeSet<String> {
    catalog.live_topics().map(|(name, _, _)| name.to_string()).collect()
}

fn listed(reply: &Result<Reply, BrokerError>) -> Option<BTreeSet<String>> {
    match reply {
        Ok(Reply::Topics(topics)) => Some(topics.iter().map(|t| t.name.clone()).collect()),
        _ => None,
    }
}

/// Plants the input's object where a node reaches it first, framed (when the input's
/// bytes are a payload) for that key, and checks the node: an object that does not
/// decode is reported as corrupt, and neither served nor built on (no create is
/// acknowledged after a damaged entry or snapshot, no append after a damaged topic
/// object); one that decodes is served as decoded. (Segments, the layout before topic
/// objects, are no longer read by the node.)
pub(super) fn check_node_fed(input: &ObjectsInput) {
    if input.decodes(Objects::Entry) {
        entry_fed(input);
    }
    if input.objects == Objects::Each {
        object_fed(input);
    }
    if input.decodes(Objects::Snapshot) {
        snapshot_fed(input);
    }
}

/// The object as the journal's first entry.
fn entry_fed(input: &ObjectsInput) {
    let bytes = match input.frame_kind {
        Some(kind) => entry::frame_object(1, kind, &input.bytes),
        None => input.bytes.clone(),
    };
    let decoded = entry::decode(1, &bytes);
    let mut store = MemStore::default();
    store.apply(&StoreOp::Create { key: journal_key(1), bytes: bytes.into() });
    let mut n = OneNode::new(store);
    let list = n.call(Command::ListTopics);
    match decoded {
        Err(_) => {
            refused_as_corrupt("entry 1", &list);
            refused_as_corrupt("a create after entry 1", &n.call(create("t", 1)));
        }
        Ok(e) => {
            let mut catalog = Catalog::default();
            catalog.fold(&e);
            let expected = live_names(&catalog);
            assert_eq!(listed(&list), Some(expected), "entry 1 decodes to {e:?}; the node lists {list:?}");
        }
    }
}

/// The object as a new topic's first object, the topic having as many partitions as
/// the object's header gives ends for (one if it does not decode). A header that does
/// not decode is refused by fetches and produces alike; records that do not decode
/// behind a sound header are refused by the fetch that reads them, while a produce,
/// which needs only the ends, appends past them.
fn object_fed(input: &ObjectsInput) {
    let topic = TopicId(1);
    let bytes = Bytes::from(match input.frame_kind {
        Some(_) => {
            let mut framed = input.clone();
            (framed.seq, framed.base) = (topic.0, 0);
            framed.topic_object_bytes()
        }
        None => input.bytes.clone(),
    });
    let header = topic_object::decode_header(topic, 0, &bytes).map(|(h, _)| h);
    let decoded = topic_object::decode(topic, 0, &bytes);
    let partitions = header.as_ref().map_or(1, |h| h.ends.len() as u32);
    if partitions > Config::default().max_partitions {
        return;
    }
    let mut n = OneNode::new(MemStore::default());
    let Ok(Reply::Created { topic: t }) = n.call(create("t", partitions)) else {
        panic!("a create over an empty store failed")
    };
    assert_eq!(t, topic, "the first entry's incarnation");
    n.store.apply(&StoreOp::Create { key: object_key(topic, 0), bytes });
    // The first part's first record, or offset 0 of partition 0.
    let first = header.as_ref().ok().map(|h| (h.parts[0].partition, h.base(&h.parts[0])));
    let (partition, offset) = first.unwrap_or((0, 0));
    let fetch = Command::Fetch { topic: "t".into(), partition, offset, max_records: 1, max_bytes: None };
    let fetched = n.call(fetch);
    let produce = Command::Produce {
        topic: "t".into(),
        partition: Some(partition),
        records: vec![ProduceRecord { key: None, value: b"after".to_vec().into() }],
    };
    let produced = n.call(produce);
    let Ok(header) = header else {
        refused_as_corrupt("object 0", &fetched);
        return refused_as_corrupt("an append after object 0", &produced);
    };
    match decoded {
        Err(_) => refused_as_corrupt("object 0's records", &fetched),
        Ok(o) => {
            let Ok(Reply::Fetched { records, .. }) = &fetched else {
                panic!("object {header:?} decodes; fetched {fetched:?}")
            };
            let first = &o.records[0][0];
            assert!(
                records.len() == 1 && records[0].offset == offset && records[0].value == first.value,
                "object 0's first record is {first:?} at {offset}; fetched {records:?}"
            );
        }
    }
    let end = header.ends[partition as usize];
    let Ok(Reply::Produced { positions, .. }) = &produced else { panic!("an append after {header:?}: {produced:?}") };
    assert_eq!(positions[0].offset, end, "an append after an object ending partition {partition} at {end}");
}

/// The object as the newest snapshot, with the journal's entries before it compacted
/// away and one entry after it.
fn snapshot_fed(input: &ObjectsInput) {
    let bytes = match input.frame_kind {
        Some(kind) => snapshot::frame_object(SNAPSHOT_SEQ, kind, &input.bytes),
        None => input.bytes.clone(),
    };
    let decoded = snapshot::decode(SNAPSHOT_SEQ, &bytes);
    let mut store = MemStore::default();
    store.apply(&StoreOp::Create { key: snapshot_key(SNAPSHOT_SEQ), bytes: bytes.into() });
    let after = Entry {
        writer: EntryWriter { node: 7, boot: 7, nonce: 7 },
        kind: EntryKind::Removed { topic: TopicId(u64::MAX) },
    };
    store.apply(&StoreOp::Create {
        key: journal_key(SNAPSHOT_SEQ + 1),
        bytes: entry::encode(SNAPSHOT_SEQ + 1, &after).into(),
    });
    let mut n = OneNode::new(store);
    let list = n.call(Command::ListTopics);
    match decoded {
        Err(_) => {
            refused_as_corrupt("the snapshot", &list);
            refused_as_corrupt("a create after the snapshot", &n.call(create("t", 1)));
        }
        Ok(c) => {
            assert_eq!(listed(&list), Some(live_names(&c)), "the snapshot holds {c:?}; the node lists {list:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(objects: Objects, bytes: Vec<u8>) -> ObjectsInput {
        ObjectsInput { objects, frame_kind: None, seq: 1, partition: 0, base: 0, bytes }
    }

    fn writer() -> EntryWriter {
        EntryWriter { node: 3, boot: 3, nonce: 3 }
    }

    fn damaged(mut bytes: Vec<u8>) -> Vec<u8> {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        bytes
    }

    /// Each branch of the check runs on real objects, whole and damaged: a node that
    /// served a damaged object, or served a sound one otherwise than it decodes, fails it.
    #[test]
    fn the_node_serves_sound_objects_as_they_decode_and_refuses_damaged_ones() {
        let e = Entry {
            writer: writer(),
            kind: EntryKind::Create { name: "x".into(), partitions: 2, settings: TopicSettings::default() },
        };
        let records: Vec<ProduceRecord> =
            ["a", "b", "c"].iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect();
        let mut catalog = Catalog::default();
        for i in 0..SNAPSHOT_SEQ {
            catalog.fold(&Entry {
                writer: writer(),
                kind: EntryKind::Create { name: format!("t{i}"), partitions: 1, settings: TopicSettings::default() },
            });
        }
        let objects = [
            (Objects::Entry, entry::encode(1, &e)),
            (Objects::Each, topic_object::encode(TopicId(1), 0, writer(), &[4, 0, 7], &[(2, &records[..])]).unwrap()),
            (Objects::Snapshot, snapshot::encode(&catalog)),
        ];
        for (kind, bytes) in objects {
            check_node_fed(&whole(kind, bytes.clone()));
            check_node_fed(&whole(kind, damaged(bytes)));
        }
    }
}
