//! The cluster on real stores: what one acknowledged produce costs (latency, store
//! operations) against the store's own floor, one object created, measured in the same
//! run; the store operations of one produce to 1, 10 and 100 partitions; produce
//! throughput with 16 requests in flight, to one partition and to 16; and
//! the delete's acknowledgement against the topic's size, with the time until the other
//! nodes refuse the topic. The baseline of the directory's produce: the same produce,
//! one at a time, on `broker-fs` (one broker, durability journaled) over the same disk.
//!
//! Three nodes of the runtime (`node_loop`) in this process over one store, each with
//! its own handle on it, as three processes have:
//!
//! - `file://` on a temporary directory (`BROKER_CLUSTER_BENCH_DIR` to choose its disk);
//! - S3, when `BROKER_S3_ENDPOINT` names a server (with `BROKER_S3_BUCKET` and the
//!   `AWS_*` credentials, as `.ci/run` sets them);
//! - PostgreSQL, when `BROKER_POSTGRES_URL` names a database.
//!
//! ```sh
//! cargo bench -p broker-cluster --bench stores
//! BROKER_CLUSTER_BENCH_N=2000 cargo bench -p broker-cluster --bench stores
//! ```
//!
//! `BROKER_CLUSTER_BENCH_N` produces per phase (default 300; smoke mode 20).

use broker_cluster::node_loop::{self, Health, LoopOptions, NodeHandle, DEFAULT_GATHER_MS};
use broker_cluster::store::{self, Pending, Store, StoreOptions};
use broker_core::cluster::node::NodeOptions;
use broker_core::cluster::store::StoreOp;
use broker_core::{Command, Config, ProduceRecord, Reply, TopicSettings};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Counts the operations a store carries out, by kind: create, get, list, delete.
struct Counting {
    inner: Arc<dyn Store>,
    ops: Arc<[AtomicU64; 4]>,
}

impl Store for Counting {
    fn run(&self, op: StoreOp) -> Pending {
        let kind = match op {
            StoreOp::Create { .. } => 0,
            StoreOp::Get { .. } => 1,
            StoreOp::List { .. } => 2,
            StoreOp::Delete { .. } => 3,
        };
        self.ops[kind].fetch_add(1, Ordering::Relaxed);
        self.inner.run(op)
    }
}

fn counts(ops: &[AtomicU64; 4]) -> [u64; 4] {
    [0, 1, 2, 3].map(|i| ops[i].load(Ordering::Relaxed))
}

fn node(id: u32, store: Arc<dyn Store>) -> NodeHandle {
    node_with(id, store, Config::default())
}

fn node_with(id: u32, store: Arc<dyn Store>, config: Config) -> NodeHandle {
    let options = NodeOptions {
        node: id,
        boot: u64::from(id),
        config,
        list_limit: 1_000,
        tail_every_ms: 1_000,
        reconcile_every_ms: 0,
        compact_after_entries: 1_000,
        request_timeout_ms: 30_000,
        gather_ms: gather_ms(),
    };
    let loop_options = LoopOptions { op_timeout: Duration::from_secs(10) };
    node_loop::start(options, store, loop_options, Arc::new(Mutex::new(Health::default()))).0
}

/// The nodes' gathering window: `BROKER_CLUSTER_BENCH_GATHER_MS`, else `serve`'s default.
fn gather_ms() -> u64 {
    std::env::var("BROKER_CLUSTER_BENCH_GATHER_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_GATHER_MS)
}

fn produce(topic: &str, value: &[u8]) -> Command {
    let record = ProduceRecord { key: None, value: value.to_vec().into() };
    Command::Produce { topic: topic.into(), partition: Some(0), records: vec![record] }
}

fn create(name: &str) -> Command {
    Command::CreateTopic { name: name.into(), partitions: 1, settings: TopicSettings { deletion_grace_ms: 0 } }
}

async fn ok(node: &NodeHandle, command: Command) -> Reply {
    let shown = format!("{command:?}").chars().take(80).collect::<String>();
    node.call(command).await.unwrap_or_else(|e| panic!("{shown}: {e}"))
}

/// One store's figures.
struct Row {
    store: String,
    floor_ms: f64,
    produce_ms: f64,
    ops: [f64; 4],
    /// Produces per second, 16 in flight to one partition, and store operations per
    /// produce (create, get, list, delete).
    one: (f64, [f64; 4]),
    /// The same, each to a partition of its own.
    spread: (f64, [f64; 4]),
    /// Store operations (create, get, list, delete) of one produce of a record to each
    /// of 1, 10 and 100 partitions.
    fan_out: Vec<(u32, [u64; 4])>,
    /// The same produce as `produce_ms`, one at a time, without its fences.
    unfenced_ms: Option<f64>,
}

async fn measure(name: &str, url: &str, endpoint: Option<String>, n: usize) -> (Row, Vec<(usize, f64, f64)>) {
    let options = StoreOptions { s3_endpoint: endpoint };
    let ops = Arc::new([0, 0, 0, 0].map(AtomicU64::new));
    let open = || -> Arc<dyn Store> {
        Arc::new(Counting { inner: store::open(url, &options).expect("the store opens"), ops: ops.clone() })
    };
    let nodes: Vec<NodeHandle> = (1..=3).map(|id| node(id, open())).collect();
    let value = vec![0x5a_u8; 1000];
    // The floor: one object of the same size created, n times, in turn.
    let raw = open();
    let started = Instant::now();
    for i in 0..n {
        let op = StoreOp::Create { key: format!("bench/{i:08}"), bytes: value.clone().into() };
        raw.run(op).await.expect("a create on the store");
    }
    let floor_ms = started.elapsed().as_secs_f64() * 1e3 / n as f64;
    ok(&nodes[0], create("bench")).await;
    ok(&nodes[1], produce("bench", &value)).await;
    // One produce at a time through one node: latency and store operations.
    let before = counts(&ops);
    let started = Instant::now();
    for _ in 0..n {
        ok(&nodes[1], produce("bench", &value)).await;
    }
    let produce_ms = started.elapsed().as_secs_f64() * 1e3 / n as f64;
    let after = counts(&ops);
    let per = [0, 1, 2, 3].map(|i| (after[i] - before[i]) as f64 / n as f64);
    let unfenced_ms = unfenced_produce_ms(open(), &value, n).await;
    // 16 in flight, spread over the three nodes: to one partition (every produce
    // races the others for the partition's next offset), then each to its own.
    let one = in_flight(&nodes, &ops, "bench", |_| 0, &value, n).await;
    let wide =
        Command::CreateTopic { name: "wide".into(), partitions: 16, settings: TopicSettings { deletion_grace_ms: 0 } };
    ok(&nodes[0], wide).await;
    let spread = in_flight(&nodes, &ops, "wide", |w| w as u32, &value, n).await;
    // Store operations of one produce that writes to each of P partitions.
    let mut fan_out = Vec::new();
    for partitions in [1_u32, 10, 100] {
        let topic = format!("fan-{partitions}");
        let settings = TopicSettings { deletion_grace_ms: 0 };
        ok(&nodes[0], Command::CreateTopic { name: topic.clone(), partitions, settings }).await;
        let records: Vec<ProduceRecord> =
            (0..partitions).map(|_| ProduceRecord { key: None, value: value.clone().into() }).collect();
        let command = || Command::Produce { topic: topic.clone(), partition: None, records: records.clone() };
        // The first produce learns each partition's end; the second is measured.
        ok(&nodes[1], command()).await;
        let before = counts(&ops);
        ok(&nodes[1], command()).await;
        let after = counts(&ops);
        fan_out.push((partitions, [0, 1, 2, 3].map(|i| after[i] - before[i])));
    }
    // Deletes of topics of 1, n/10 and n segments: the acknowledgement, and how long
    // each other node then takes to refuse a produce.
    let mut deletes = Vec::new();
    for (i, segments) in [1, (n / 10).max(2), n].into_iter().enumerate() {
        let topic = format!("del-{i}");
        ok(&nodes[0], create(&topic)).await;
        for _ in 0..segments {
            ok(&nodes[1], produce(&topic, &value)).await;
        }
        let started = Instant::now();
        ok(&nodes[2], Command::DeleteTopic { name: topic.clone() }).await;
        let ack_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut refused_ms: f64 = 0.0;
        for node in &nodes[..2] {
            let asked = Instant::now();
            let answer = node.call(produce(&topic, &value)).await;
            assert!(answer.is_err(), "a produce to {topic} after its delete: {answer:?}");
            refused_ms = refused_ms.max(asked.elapsed().as_secs_f64() * 1e3);
        }
        deletes.push((segments, ack_ms, refused_ms));
    }
    (Row { store: name.to_string(), floor_ms, produce_ms, ops: per, one, spread, fan_out, unfenced_ms }, deletes)
}

/// Milliseconds per produce to topic `bench`, one at a time, through a fourth node
/// that skips every fence after its first (broker-core's planted bug
/// `cluster-skip-fence`: unsafe, here only to measure what the fences cost).
#[cfg(feature = "planted-bugs")]
async fn unfenced_produce_ms(store: Arc<dyn Store>, value: &[u8], n: usize) -> Option<f64> {
    use broker_core::planted::{Bug, PlantedBugs};
    let config = Config { bugs: PlantedBugs::only(Bug::ClusterSkipFence), ..Config::default() };
    let unfenced = node_with(4, store, config);
    // Its first command fences (it has folded nothing); the rest do not.
    ok(&unfenced, produce("bench", value)).await;
    let started = Instant::now();
    for _ in 0..n {
        ok(&unfenced, produce("bench", value)).await;
    }
    Some(started.elapsed().as_secs_f64() * 1e3 / n as f64)
}

#[cfg(not(feature = "planted-bugs"))]
async fn unfenced_produce_ms(_: Arc<dyn Store>, _: &[u8], _: usize) -> Option<f64> {
    None
}

/// Produces per second with 16 producers, each sending one produce at a time through
/// node `w % 3` to partition `partition(w)`, `n / 16 + 1` each; and the store
/// operations per produce, as `ops` counts them.
async fn in_flight(
    nodes: &[NodeHandle],
    ops: &[AtomicU64; 4],
    topic: &str,
    partition: fn(usize) -> u32,
    value: &[u8],
    n: usize,
) -> (f64, [f64; 4]) {
    let before = counts(ops);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (node, topic) = (nodes[w % 3].clone(), topic.to_string());
        let record = ProduceRecord { key: None, value: value.to_vec().into() };
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / 16 + 1 {
                let command = Command::Produce {
                    topic: topic.clone(),
                    partition: Some(partition(w)),
                    records: vec![record.clone()],
                };
                ok(&node, command).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("a producer");
    }
    let produces = (16 * (n / 16 + 1)) as f64;
    let rate = produces / started.elapsed().as_secs_f64();
    let after = counts(ops);
    (rate, [0, 1, 2, 3].map(|i| (after[i] - before[i]) as f64 / produces))
}

fn main() {
    let smoke = std::env::var_os("BROKER_BENCH_SMOKE").is_some();
    let n: usize = std::env::var("BROKER_CLUSTER_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke {
        20
    } else {
        300
    });
    let base = std::env::var_os("BROKER_CLUSTER_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = base.join(format!("broker-cluster-bench-{}", std::process::id()));
    let run = std::process::id();
    let mut stores = vec![("directory".to_string(), format!("file://{}", dir.display()), None)];
    match std::env::var("BROKER_S3_ENDPOINT") {
        Ok(endpoint) => {
            let bucket = std::env::var("BROKER_S3_BUCKET").unwrap_or_else(|_| "broker-test".into());
            stores.push(("s3".into(), format!("s3://{bucket}/bench-{run}"), Some(endpoint)));
        }
        Err(_) => println!("skipped: S3 (set BROKER_S3_ENDPOINT, as .ci/run does)"),
    }
    match std::env::var("BROKER_POSTGRES_URL") {
        Ok(url) => {
            let sep = if url.contains('?') { '&' } else { '?' };
            stores.push(("postgres".into(), format!("{url}{sep}table=bench_{run}"), None));
        }
        Err(_) => println!("skipped: PostgreSQL (set BROKER_POSTGRES_URL, as .ci/run does)"),
    }
    let fs_ms = broker_fs_produce_ms(&base.join(format!("broker-fs-bench-{run}")), n);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("cluster on real stores: 3 nodes in one process, {n} produces of one 1000-byte record per phase");
    println!(
        "{:<10} {:>10} {:>12} {:>8} {:>24} {:>16} {:>18}",
        "store", "floor ms", "produce ms", "ratio", "ops/produce c/g/l/d", "16 to 1 part./s", "16 to 16 parts./s"
    );
    let (mut all_deletes, mut fan_outs, mut in_flights) = (Vec::new(), Vec::new(), Vec::new());
    let mut unfenced = Vec::new();
    let mut directory_ms = None;
    for (name, url, endpoint) in stores {
        let (row, deletes) = runtime.block_on(measure(&name, &url, endpoint, n));
        let [c, g, l, d] = row.ops;
        println!(
            "{:<10} {:>10.2} {:>12.2} {:>7.2}x {:>24} {:>16.0} {:>18.0}",
            row.store,
            row.floor_ms,
            row.produce_ms,
            row.produce_ms / row.floor_ms,
            format!("{c:.2}/{g:.2}/{l:.2}/{d:.2}"),
            row.one.0,
            row.spread.0
        );
        if name == "directory" {
            directory_ms = Some(row.produce_ms);
        }
        if let Some(ms) = row.unfenced_ms {
            unfenced.push((name.clone(), row.produce_ms, ms));
        }
        in_flights.push((name.clone(), row.one, row.spread));
        fan_outs.push((name.clone(), row.fan_out));
        all_deletes.push((name, deletes));
    }
    if let Some(cluster) = directory_ms {
        println!(
            "broker-fs  {fs_ms:>10.2} ms per produce (one broker, journaled); the directory cluster's: {:.2}x",
            cluster / fs_ms
        );
    }
    if unfenced.is_empty() {
        println!("without the fences: not measured (build with --features planted-bugs)");
    }
    for (name, fenced, ms) in unfenced {
        println!("{name:<10} {ms:>10.2} ms per produce without its fences; with them: {:.2}x", fenced / ms);
    }
    println!("{:<10} {:>16} {:>12} {:>28}", "store", "16 in flight to", "produces/s", "ops per produce c/g/l/d");
    for (name, one, spread) in in_flights {
        for (to, (rate, [c, g, l, d])) in [("1 partition", one), ("16 partitions", spread)] {
            println!("{name:<10} {to:>16} {rate:>12.0} {:>28}", format!("{c:.2}/{g:.2}/{l:.2}/{d:.2}"));
        }
    }
    println!("{:<10} {:>10} {:>28}", "store", "partitions", "ops of one produce c/g/l/d");
    for (name, rows) in fan_outs {
        for (partitions, [c, g, l, d]) in rows {
            println!("{name:<10} {partitions:>10} {:>28}", format!("{c}/{g}/{l}/{d}"));
        }
    }
    println!("{:<10} {:>10} {:>14} {:>28}", "store", "segments", "delete ack ms", "others refuse within ms");
    for (name, deletes) in all_deletes {
        for (segments, ack_ms, refused_ms) in deletes {
            println!("{name:<10} {segments:>10} {ack_ms:>14.2} {refused_ms:>28.2}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Milliseconds per produce of one 1000-byte record, one at a time, on broker-fs over
/// a fresh directory `dir` (removed after).
fn broker_fs_produce_ms(dir: &std::path::Path, n: usize) -> f64 {
    let mut d: broker_fs::Driver = broker_fs::Driver::open(dir, broker_fs::DriverOptions::default()).expect("open");
    d.request(create("bench")).expect("create");
    let value = vec![0x5a_u8; 1000];
    d.request(produce("bench", &value)).expect("produce");
    let started = Instant::now();
    for _ in 0..n {
        d.request(produce("bench", &value)).expect("produce");
    }
    let ms = started.elapsed().as_secs_f64() * 1e3 / n as f64;
    drop(d);
    let _ = std::fs::remove_dir_all(dir);
    ms
}
