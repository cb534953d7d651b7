//! Three `broker-cluster serve` processes over one store (a directory, S3, PostgreSQL,
//! or PostgreSQL for the metadata and S3 for the data),
//! driven by real Kafka clients (kafka-python and confluent-kafka, through
//! `tests/kafka/steps.py`): create on one node, produce through a second, read through
//! the third, delete through one; from the delete's acknowledgement every node's
//! Metadata refuses the topic; the name re-created is empty on every node; a node
//! killed with SIGKILL right after the delete is acknowledged leaves the removal to the
//! others, and no object of the deleted incarnation remains in the store. Over a
//! directory, batches compressed with every codec of kafka-python, confluent-kafka and
//! aiokafka go through a node whole, and offsets by time are Kafka's through another.
//!
//! `BROKER_CLUSTER_CYCLES` sets the number of cycles (default 3; every third kills a
//! node). The Python comes from `BROKER_KAFKA_PYTHON` (else `python3`); without the
//! clients the tests print one `skipped:` line and pass, unless
//! `BROKER_REQUIRE_KAFKA_CLIENTS=1` (as in CI), where they fail. The same over S3, over
//! PostgreSQL, and with the metadata in PostgreSQL and the data in S3, need
//! `BROKER_S3_ENDPOINT` and `BROKER_POSTGRES_URL` (see `tests/store_contract.rs`), as
//! `.ci/run` sets them.

mod common;

use broker_cluster::store::{self, StoreOptions};
use broker_core::cluster::keys::{parse_data_key, DATA_PREFIX};
use broker_core::cluster::store::{StoreOp, StoreOutput};
use common::{keys_under, server, TempDir};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STEPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/steps.py");
/// broker-fs's offsets-by-time script, which runs against any Kafka listener.
const TIMES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fs/tests/kafka/times.py");

fn python() -> String {
    std::env::var("BROKER_KAFKA_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Whether the clients import; prints the one `skipped:` line when they do not.
fn clients() -> bool {
    imports("kafka, confluent_kafka")
}

/// Whether `modules` import in the clients' Python; prints the one `skipped:` line when
/// they do not, or fails if the clients are required.
fn imports(modules: &str) -> bool {
    let out = Command::new(python()).args(["-c", &format!("import {modules}")]).output();
    let why = match &out {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => e.to_string(),
    };
    if std::env::var("BROKER_REQUIRE_KAFKA_CLIENTS").as_deref() == Ok("1") {
        panic!("BROKER_REQUIRE_KAFKA_CLIENTS=1 but the Kafka clients do not import with {} ({why})", python());
    }
    println!("skipped: kafka clients not installed (run .ci/kafka-clients, see README)");
    false
}

/// One node process; killed when dropped. Nodes of even id hold each partition's first
/// segment write 3 ms for more produces to ride in it (`--gather-ms`), the others not,
/// so that every scenario runs through both.
struct NodeProcess {
    child: Child,
    address: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl NodeProcess {
    fn start(store: &Store, id: u32) -> NodeProcess {
        NodeProcess::start_with(store, id, &[])
    }

    /// [`NodeProcess::start`], with `extra` arguments to `serve`.
    fn start_with(store: &Store, id: u32, extra: &[&str]) -> NodeProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_broker-cluster"))
            .args(["serve", "--node-id", &id.to_string(), "--kafka", "127.0.0.1:0"])
            .args(&store.args)
            .args(extra)
            .args(["--tail-every-ms", "200", "--reconcile-every-ms", "2000"])
            .args(["--gather-ms", if id.is_multiple_of(2) { "3" } else { "0" }])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn broker-cluster");
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("its first line");
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("node {id} said {line:?}: {e}"));
        assert_eq!(ready["event"], "listening", "{ready}");
        let address = ready["kafka"].as_str().unwrap().to_string();
        NodeProcess { child, address, stderr: Some(stderr) }
    }

    fn kill9(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.stderr.take().unwrap().join().unwrap()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `steps.py STEP --bootstrap NODE --topic TOPIC ARGS...`; it must exit 0.
fn step(node: &NodeProcess, name: &str, topic: &str, args: &[&str]) -> Value {
    try_step(node, name, topic, args).unwrap_or_else(|why| panic!("{why}"))
}

/// [`step`], its failure returned.
fn try_step(node: &NodeProcess, name: &str, topic: &str, args: &[&str]) -> Result<Value, String> {
    let mut all = vec![STEPS, name, "--bootstrap", &node.address, "--topic", topic];
    all.extend_from_slice(args);
    run_script(&all).map_err(|why| format!("step {name} {topic} {args:?} on {}: {why}", node.address))
}

/// Runs a Python script of the clients (`args`, the script first); it must exit 0 and
/// print a JSON line last, which is returned.
fn run_script(args: &[&str]) -> Result<Value, String> {
    let out = Command::new(python()).env("PYTHONDONTWRITEBYTECODE", "1").args(args).output().expect("run python");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("failed:\n{stderr}\n{stdout}"));
    }
    let last = stdout.lines().last().ok_or("printed nothing")?;
    serde_json::from_str(last).map_err(|e| format!("{last:?}: {e}"))
}

/// The store the nodes share: the arguments that name it to `serve`, and the same
/// store opened here.
struct Store {
    args: Vec<String>,
    store: Arc<dyn store::Store>,
}

impl Store {
    /// `serve --store URL [--s3-endpoint E]`.
    fn one(url: String, endpoint: Option<String>) -> Store {
        let options = StoreOptions { s3_endpoint: endpoint.clone() };
        let store = store::open(&url, &options).expect("the store opens");
        let mut args = vec!["--store".to_string(), url];
        args.extend(endpoint.into_iter().flat_map(|e| ["--s3-endpoint".to_string(), e]));
        Store { args, store }
    }

    /// `serve --meta-store META --data-store DATA [--s3-endpoint E]`.
    fn split(meta: String, data: String, endpoint: Option<String>) -> Store {
        let options = StoreOptions { s3_endpoint: endpoint.clone() };
        let store = store::open_split(&meta, &data, &options).expect("the stores open");
        let mut args = vec!["--meta-store".to_string(), meta, "--data-store".to_string(), data];
        args.extend(endpoint.into_iter().flat_map(|e| ["--s3-endpoint".to_string(), e]));
        Store { args, store }
    }

    /// The incarnations that have objects in the store, listed as a node lists them.
    fn incarnations_with_objects(&self) -> BTreeSet<u64> {
        let store = &self.store;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut found = BTreeSet::new();
        let mut after = None;
        loop {
            let op = StoreOp::List { prefix: DATA_PREFIX.into(), after: after.clone(), limit: 1000 };
            match runtime.block_on(store.run(op)) {
                Ok(StoreOutput::Listed { keys, more }) => {
                    found.extend(keys.iter().filter_map(|k| parse_data_key(k)).map(|t| t.0));
                    after = keys.last().cloned().or(after);
                    if !more {
                        return found;
                    }
                }
                other => panic!("listing the store's objects: {other:?}"),
            }
        }
    }
}

#[test]
fn three_nodes_over_one_directory_serve_the_lifecycle_to_kafka_clients() {
    if !clients() {
        return;
    }
    let dir = TempDir::named("broker-cluster-kafka");
    std::fs::create_dir_all(&dir.0).unwrap();
    lifecycle(&Store::one(format!("file://{}", dir.0.display()), None));
}

/// Each node names itself in Metadata by its own id, as the only broker and the
/// controller, at the address the client reached.
#[test]
fn each_node_names_itself_by_its_id() {
    if !clients() {
        return;
    }
    let dir = TempDir::named("broker-cluster-ids");
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = Store::one(format!("file://{}", dir.0.display()), None);
    for id in [1, 5] {
        let node = NodeProcess::start(&store, id);
        let port: u64 = node.address.rsplit(':').next().unwrap().parse().unwrap();
        let seen = step(&node, "brokers", "-", &[]);
        assert_eq!(seen["brokers"], serde_json::json!([[id, port]]), "{seen}");
        assert_eq!(seen["controller"], id, "{seen}");
    }
}

/// Batches compressed with every codec of kafka-python, confluent-kafka and aiokafka,
/// produced through a node, are read back by all three from the first offset and from
/// inside a batch (broker-fs's compression scenario, through `steps.py`); offsets by
/// time asked of another node answer Kafka's rule (the first record whose timestamp is
/// at least the time asked) in confluent-kafka and aiokafka, whose producers are not
/// idempotent by default (broker-fs's `times.py`).
#[test]
fn nodes_serve_compressed_batches_and_offsets_by_time() {
    if !imports("kafka, confluent_kafka, aiokafka, cramjam, lz4.frame, snappy, zstandard") {
        return;
    }
    let dir = TempDir::named("broker-cluster-codecs");
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = Store::one(format!("file://{}", dir.0.display()), None);
    let (one, two) = (NodeProcess::start(&store, 1), NodeProcess::start(&store, 2));
    let zipped = step(&one, "compression", "zipped", &[]);
    let runs = zipped["runs"].as_array().unwrap_or_else(|| panic!("{zipped}"));
    assert_eq!(runs.len(), 12, "three clients, four codecs: {zipped}");
    for client in ["confluent-kafka", "aiokafka"] {
        let topic = format!("times-{client}");
        let got = run_script(&[TIMES, client, "--bootstrap", &two.address, "--topic", &topic])
            .unwrap_or_else(|why| panic!("times.py {client} on {}: {why}", two.address));
        let timestamps: Vec<i64> = serde_json::from_value(got["timestamps"].clone()).expect("timestamps");
        assert_eq!(got["produced"], serde_json::json!((0..timestamps.len()).collect::<Vec<_>>()), "{got}");
        let answers = got["answers"].as_array().unwrap_or_else(|| panic!("{got}"));
        assert!(answers.len() > 5, "{got}");
        for a in answers {
            let t = a[0].as_i64().unwrap();
            let want = match timestamps.iter().position(|&ts| ts >= t) {
                Some(i) => serde_json::json!([i, timestamps[i]]),
                None => Value::Null,
            };
            assert_eq!(a[1], want, "{client} offsets_for_times({t}) through a node");
        }
    }
}

/// A node keeps no consumer groups' offsets and no producer ids: ApiVersions lists none
/// of the group APIs nor InitProducerId, and a FindCoordinator (a client about to join
/// a group) closes its connection, with the reason in the log, as any API not served
/// does. Raw frames: no client needed.
#[test]
fn a_node_serves_no_consumer_group_api() {
    use std::io::Write;
    let dir = TempDir::named("broker-cluster-groups");
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = Store::one(format!("file://{}", dir.0.display()), None);
    let node = NodeProcess::start(&store, 1);
    let connect = || {
        let s = std::net::TcpStream::connect(&node.address).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    // A request frame of version 0: size, API key, version, correlation id, no client
    // id, then `body`.
    let frame = |key: i16, body: &[u8]| {
        let mut f = ((10 + body.len()) as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&key.to_be_bytes());
        f.extend_from_slice(&0i16.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&(-1i16).to_be_bytes());
        f.extend_from_slice(body);
        f
    };
    let mut s = connect();
    s.write_all(&frame(18, &[])).unwrap();
    let mut size = [0; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    // ApiVersions v0: correlation id, error code, then (key, min, max) of each API.
    let count = i32::from_be_bytes(body[6..10].try_into().unwrap()) as usize;
    let keys: BTreeSet<i16> = (0..count).map(|i| i16::from_be_bytes([body[10 + 6 * i], body[11 + 6 * i]])).collect();
    assert!(keys.contains(&0) && keys.contains(&1), "Produce and Fetch are served: {keys:?}");
    // OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
    // SyncGroup, DescribeGroups, ListGroups, DeleteGroups.
    let groups = [8, 9, 10, 11, 12, 13, 14, 15, 16, 42];
    assert!(groups.iter().all(|k| !keys.contains(k)), "a group API is advertised: {keys:?}");
    // InitProducerId: a node hands out no producer ids either.
    assert!(!keys.contains(&22), "InitProducerId is advertised: {keys:?}");

    let mut s = connect();
    s.write_all(&frame(10, &[0, 1, b'g'])).unwrap();
    let mut byte = [0; 1];
    assert!(matches!(s.read(&mut byte), Ok(0) | Err(_)), "FindCoordinator got an answer");
    let log = node.kill9();
    assert!(log.contains("FindCoordinator (API key 10) is not served here"), "{log}");
}

/// Polls step `leaders` of `topic` on `node` until `want` holds of what it printed (a
/// step that fails, its client sent to a node just killed, is polled again).
fn leaders_until(node: &NodeProcess, topic: &str, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = try_step(node, "leaders", topic, &[]);
        match &seen {
            Ok(seen) if want(seen) => return seen.clone(),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{what}: Metadata still says {seen:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// With `--spread-leadership`, Metadata on any node names every live node and spreads
/// the partitions' leadership over them; kafka-python, bootstrapped at one node, produces
/// to each partition's leader and reads everything back through another. A node killed
/// with kill -9 drops out of Metadata within seconds, and the clients carry on with the
/// other two.
#[test]
fn nodes_spread_leadership_over_the_live_nodes() {
    if !clients() {
        return;
    }
    let dir = TempDir::named("broker-cluster-spread");
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = Store::one(format!("file://{}", dir.0.display()), None);
    let mut nodes: Vec<NodeProcess> =
        (1..=3).map(|id| NodeProcess::start_with(&store, id, &["--spread-leadership"])).collect();
    step(&nodes[0], "create-topic", "spread", &["--partitions", "6"]);
    let all = |ids: &[u64]| {
        let ids: Vec<u64> = ids.to_vec();
        move |seen: &Value| {
            let brokers: Vec<u64> = seen["brokers"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
            let leaders: Vec<u64> = seen["leaders"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
            brokers == ids && ids.iter().all(|id| leaders.contains(id)) && leaders.iter().all(|l| ids.contains(l))
        }
    };
    for node in &nodes {
        leaders_until(node, "spread", "three live nodes", all(&[1, 2, 3]));
    }
    let produced = step(&nodes[0], "produce", "spread", &["--partitions", "6", "--count", "5"]);
    assert_eq!(produced["records"], 30, "{produced}");
    let read = step(&nodes[2], "consume", "spread", &["--partitions", "6"]);
    assert_eq!(read["records"], 30, "{read}");
    let said = nodes.pop().unwrap().kill9();
    assert!(!said.contains("panicked"), "node 3 before its kill:\n{said}");
    leaders_until(&nodes[0], "spread", "node 3 killed", all(&[1, 2]));
    let produced = step(&nodes[0], "produce", "spread", &["--partitions", "6", "--count", "5"]);
    assert_eq!(produced["records"], 30, "{produced}");
    let read = step(&nodes[1], "consume", "spread", &["--partitions", "6"]);
    assert_eq!(read["records"], 60, "{read}");
    // A node stopped cleanly deletes its beats (the killed one's stay, for the others
    // to delete after a minute).
    let mut stopped = nodes.pop().unwrap();
    let term = Command::new("kill").args(["-TERM", &stopped.child.id().to_string()]).status().unwrap();
    assert!(term.success());
    assert!(stopped.child.wait().unwrap().success(), "node 2 after SIGTERM");
    let beats = |node: &str| keys_under(&dir.0).iter().filter(|k| k.starts_with(&format!("n/{node}/"))).count();
    assert_eq!(beats("0000000002"), 0, "node 2's beats after a clean stop");
    assert!(beats("0000000003") > 0, "the killed node's beats are still there");
}

#[test]
fn three_nodes_over_s3_serve_the_lifecycle_to_kafka_clients() {
    let Some(s3) = server("BROKER_S3_ENDPOINT", "S3 server") else { return };
    if !clients() {
        return;
    }
    lifecycle(&Store::one(s3_url("kafka"), Some(s3)));
}

#[test]
fn three_nodes_over_postgres_serve_the_lifecycle_to_kafka_clients() {
    let Some(pg) = server("BROKER_POSTGRES_URL", "PostgreSQL") else { return };
    if !clients() {
        return;
    }
    lifecycle(&Store::one(pg_url(&pg, "kafka"), None));
}

#[test]
fn three_nodes_over_postgres_and_s3_serve_the_lifecycle_to_kafka_clients() {
    let Some(pg) = server("BROKER_POSTGRES_URL", "PostgreSQL") else { return };
    let Some(s3) = server("BROKER_S3_ENDPOINT", "S3 server") else { return };
    if !clients() {
        return;
    }
    lifecycle(&Store::split(pg_url(&pg, "kafka_meta"), s3_url("kafka-data"), Some(s3)));
}

/// A prefix of the test bucket of this run's own.
fn s3_url(name: &str) -> String {
    let bucket = std::env::var("BROKER_S3_BUCKET").unwrap_or_else(|_| "broker-test".into());
    format!("s3://{bucket}/{name}-{}", std::process::id())
}

/// A table of this run's own in the test database.
fn pg_url(base: &str, name: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}table={name}_{}", std::process::id())
}

/// The cycles of the module's doc over `store`.
fn lifecycle(store: &Store) {
    let cycles: u32 = std::env::var("BROKER_CLUSTER_CYCLES").ok().and_then(|c| c.parse().ok()).unwrap_or(3);
    let mut nodes: Vec<NodeProcess> = (1..=3).map(|id| NodeProcess::start(store, id)).collect();
    let topic = "orders";
    step(&nodes[0], "create-topic", topic, &["--partitions", "2"]);
    for cycle in 0..cycles {
        let (a, b, c) = ((cycle % 3) as usize, ((cycle + 1) % 3) as usize, ((cycle + 2) % 3) as usize);
        let produced = step(&nodes[b], "produce", topic, &["--partitions", "2", "--count", "5"]);
        assert_eq!(produced["records"], 10, "{produced}");
        let read = step(&nodes[c], "consume", topic, &["--partitions", "2"]);
        assert_eq!(read["records"], 10, "cycle {cycle}: {read}");
        let holding = store.incarnations_with_objects();
        assert_eq!(holding.len(), 1, "cycle {cycle}: incarnations with objects before the delete: {holding:?}");
        step(&nodes[c], "delete", topic, &[]);
        if cycle % 3 == 2 {
            // The deleting node dies at once; the others finish the removal.
            let said = std::mem::replace(&mut nodes[c], NodeProcess::start(store, c as u32 + 1)).kill9();
            assert!(!said.contains("panicked"), "node {} before its kill:\n{said}", c + 1);
        }
        for node in &nodes {
            step(node, "absent", topic, &[]);
        }
        step(&nodes[a], "create-topic", topic, &["--partitions", "2"]);
        for node in &nodes {
            let read = step(node, "consume", topic, &["--partitions", "2"]);
            assert_eq!(read["records"], 0, "cycle {cycle}: the re-created topic on {}: {read}", node.address);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = store.incarnations_with_objects();
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "cycle {cycle}: {left:?} still in the store after 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for node in nodes {
        let said = node.kill9();
        assert!(!said.contains("panicked"), "{said}");
    }
}

/// A node killed with SIGKILL while a client produces through it, one record at a
/// time: every record it acknowledged reads back through another node, at its offset.
#[test]
fn a_node_killed_mid_produce_loses_nothing_it_acknowledged() {
    if !clients() {
        return;
    }
    let dir = TempDir::named("broker-cluster-kill");
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = Store::one(format!("file://{}", dir.0.display()), None);
    let (producer_node, reader) = (NodeProcess::start(&store, 1), NodeProcess::start(&store, 2));
    step(&reader, "create-topic", "kills", &["--partitions", "1"]);
    let mut child = Command::new(python())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args([STEPS, "produce-until-gone", "--bootstrap", &producer_node.address, "--topic", "kills"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run steps.py");
    let mut acked: Vec<(u64, String)> = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut killed = None;
    for line in lines.by_ref() {
        let r: Value = serde_json::from_str(&line.unwrap()).unwrap();
        acked.push((r["offset"].as_u64().unwrap(), r["value"].as_str().unwrap().to_string()));
        if acked.len() == 50 {
            // Its next produce is under way, or about to be.
            killed = Some(producer_node.kill9());
            break;
        }
    }
    // What it acknowledged before the kill took, still in the pipe.
    for line in lines {
        let r: Value = serde_json::from_str(&line.unwrap()).unwrap();
        acked.push((r["offset"].as_u64().unwrap(), r["value"].as_str().unwrap().to_string()));
    }
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the producer failed ({status}):\n{stderr}");
    let said = killed.expect("the producer reached 50 acknowledgements");
    assert!(!said.contains("panicked"), "{said}");
    let read = step(&reader, "consume", "kills", &["--partitions", "1"]);
    let values: BTreeSet<&str> = read["values"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for (offset, value) in &acked {
        assert!(values.contains(value.as_str()), "acknowledged {value} at {offset} is gone; read {read}");
    }
    let offsets: Vec<u64> = acked.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, (0..acked.len() as u64).collect::<Vec<_>>(), "acknowledged offsets are dense from 0");
}
