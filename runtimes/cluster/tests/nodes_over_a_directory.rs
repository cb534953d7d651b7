//! Three nodes of this runtime (each its own loop and its own handle on the store, as
//! three processes have) over one directory: the lifecycle of DESIGN.md section 10
//! through different nodes, and the store left clean after a removal.

mod common;

use broker_cluster::node_loop::{self, Health, LoopOptions, NodeHandle};
use broker_cluster::store::{self, Store};
use broker_core::cluster::node::NodeOptions;
use broker_core::{BrokerError, Command, Config, ProduceRecord, Reply, TopicSettings};
use common::{keys_under, TempDir};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn node(id: u32, store: Arc<dyn Store>) -> NodeHandle {
    let loop_options = LoopOptions { op_timeout: Duration::from_secs(5) };
    node_loop::start(options(id), store, loop_options, Arc::new(Mutex::new(Health::default()))).0
}

fn options(id: u32) -> NodeOptions {
    NodeOptions {
        node: id,
        boot: u64::from(id) + 1,
        config: Config::default(),
        list_limit: 1_000,
        tail_every_ms: 100,
        reconcile_every_ms: 0,
        compact_after_entries: 20,
        gather_ms: 0,
        request_timeout_ms: 10_000,
    }
}

fn produce(topic: &str, partition: u32, value: &str) -> Command {
    let record = ProduceRecord { key: None, value: value.as_bytes().to_vec().into() };
    Command::Produce { topic: topic.into(), partition: Some(partition), records: vec![record] }
}

fn fetch(topic: &str, partition: u32) -> Command {
    fetch_from(topic, partition, 0)
}

fn fetch_from(topic: &str, partition: u32, offset: u64) -> Command {
    Command::Fetch { topic: topic.into(), partition, offset, max_records: 100, max_bytes: None }
}

/// Every value of the partition, fetched as a consumer does: from the next offset until
/// the high watermark (a node answers a fetch from one segment).
async fn values(node: &NodeHandle, topic: &str, partition: u32) -> Vec<String> {
    let mut values = Vec::new();
    loop {
        match node.call(fetch_from(topic, partition, values.len() as u64)).await {
            Ok(Reply::Fetched { records, high_watermark, .. }) => {
                values.extend(records.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()));
                if values.len() as u64 >= high_watermark {
                    return values;
                }
                assert!(!records.is_empty(), "an empty fetch below the high watermark {high_watermark}");
            }
            other => panic!("a fetch gave {other:?}"),
        }
    }
}

#[test]
fn create_produce_delete_and_recreate_through_three_nodes() {
    let dir = TempDir::named("broker-cluster-nodes");
    let url = format!("file://{}", dir.0.display());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let nodes: Vec<NodeHandle> =
            (1..=3).map(|id| node(id, store::open(&url, &store::StoreOptions::default()).unwrap())).collect();
        let create = || Command::CreateTopic {
            name: "orders".into(),
            partitions: 2,
            settings: TopicSettings { deletion_grace_ms: 0 },
        };
        let first = match nodes[0].call(create()).await {
            Ok(Reply::Created { topic }) => topic,
            other => panic!("create gave {other:?}"),
        };
        for (i, value) in ["a", "b", "c"].iter().enumerate() {
            let reply = nodes[1].call(produce("orders", 1, value)).await;
            assert!(
                matches!(&reply, Ok(Reply::Produced { positions, .. }) if positions[0].offset == i as u64),
                "{reply:?}"
            );
        }
        for n in &nodes {
            assert_eq!(values(n, "orders", 1).await, ["a", "b", "c"]);
        }
        let prefix = broker_core::cluster::keys::topic_prefix(first);
        let before = keys_under(&dir.0);
        assert_eq!(before.iter().filter(|k| k.starts_with(&prefix)).count(), 3, "segments: {before:?}");
        let deleted = nodes[2].call(Command::DeleteTopic { name: "orders".into() }).await;
        assert_eq!(deleted, Ok(Reply::DeleteAccepted { topic: first }));
        // From the acknowledgement on, every node refuses the topic.
        for n in &nodes {
            let p = n.call(produce("orders", 0, "late")).await;
            assert!(matches!(p, Err(BrokerError::TopicNotFound { .. })), "{p:?}");
            let f = n.call(fetch("orders", 1)).await;
            assert!(matches!(f, Err(BrokerError::TopicNotFound { .. })), "{f:?}");
        }
        let second = match nodes[1].call(create()).await {
            Ok(Reply::Created { topic }) => topic,
            other => panic!("create again gave {other:?}"),
        };
        assert_ne!(second, first);
        for n in &nodes {
            assert_eq!(values(n, "orders", 1).await, Vec::<String>::new());
        }
        // The removal of the first incarnation's segments finishes: none is left.
        let mut left = Vec::new();
        for _ in 0..200 {
            left = keys_under(&dir.0);
            left.retain(|k| k.starts_with(&prefix));
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(left.is_empty(), "segments of the deleted incarnation left: {left:?}");
        // status reads what the nodes did: the new incarnation live, nothing being
        // removed once the removal is recorded.
        let store = store::open(&url, &store::StoreOptions::default()).unwrap();
        let mut seen = None;
        for _ in 0..200 {
            let status = broker_cluster::status::read(store.clone(), Duration::from_secs(5)).await.unwrap();
            let done = status.deleting.is_empty();
            seen = Some(status);
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status = seen.unwrap();
        assert_eq!(status.live, [("orders".to_string(), second.0, 2)]);
        assert!(status.deleting.is_empty(), "{status:?}");
        // Create, delete, create, and the removal's record.
        assert_eq!(status.position, 4, "{status:?}");
    });
}

/// A store that refuses everything, as one whose credentials are wrong does.
struct Refusing;

impl Store for Refusing {
    fn run(&self, _op: broker_core::cluster::store::StoreOp) -> store::Pending {
        Box::pin(async { Err(broker_core::cluster::store::StoreError::Failed("403 Forbidden".into())) })
    }
}

#[test]
fn status_of_a_store_that_refuses_names_its_answer() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let status = runtime.block_on(broker_cluster::status::read(Arc::new(Refusing), Duration::from_millis(200)));
    let e = status.unwrap_err();
    assert!(e.contains("within") && e.contains("403 Forbidden"), "{e}");
    let json = broker_cluster::status::to_json("s3://b", &Err(e));
    assert_eq!(json["reachable"], false);
}

/// 64 produces to one partition sent at once through one node: each gets its own
/// offset, every value reads back at the offset its produce was given, and they take
/// fewer segments than produces (they ride in each other's: group commit); the node's
/// health counts the riders.
#[test]
fn produces_in_flight_to_one_partition_share_segments() {
    let dir = TempDir::named("broker-cluster-lanes");
    let url = format!("file://{}", dir.0.display());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let options = NodeOptions { gather_ms: 0, ..options(1) };
        let health = Arc::new(Mutex::new(Health::default()));
        let store = store::open(&url, &store::StoreOptions::default()).unwrap();
        let loop_options = LoopOptions { op_timeout: Duration::from_secs(5) };
        let n = node_loop::start(options, store, loop_options, health.clone()).0;
        let create = Command::CreateTopic { name: "t".into(), partitions: 1, settings: TopicSettings::default() };
        assert!(matches!(n.call(create).await, Ok(Reply::Created { .. })));
        let calls: Vec<_> = (0..64)
            .map(|i| {
                let n = n.clone();
                tokio::spawn(async move { n.call(produce("t", 0, &format!("v{i}"))).await })
            })
            .collect();
        let mut at = Vec::new();
        for (i, call) in calls.into_iter().enumerate() {
            match call.await.unwrap() {
                Ok(Reply::Produced { positions, .. }) => at.push((positions[0].offset, format!("v{i}"))),
                other => panic!("produce {i} gave {other:?}"),
            }
        }
        at.sort();
        let offsets: Vec<u64> = at.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, (0..64).collect::<Vec<u64>>(), "each its own offset");
        let want: Vec<String> = at.into_iter().map(|(_, v)| v).collect();
        assert_eq!(values(&n, "t", 0).await, want, "each value at its produce's offset");
        let keys = keys_under(&dir.0);
        let segments = keys.iter().filter(|k| k.starts_with("d/")).count();
        assert!(segments < 64, "{segments} segments for 64 produces in flight at once");
        // The health is counted at most every quarter second, as the loop goes on (its
        // tailing wakes it every 100 ms).
        let riders = 64 - segments as u64;
        let mut rides = 0;
        for _ in 0..50 {
            rides = health.lock().unwrap().rides;
            if rides == riders {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(rides, riders, "every produce not leading a segment rode in one");
    });
}
