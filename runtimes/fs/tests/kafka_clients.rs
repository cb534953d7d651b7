//! Real Kafka clients against `broker-fs serve --kafka`: kafka-python, confluent-kafka
//! (librdkafka) and aiokafka run the scenarios of `tests/kafka/scenarios.py`, kafkajs
//! runs `tests/kafka/kafkajs.js`, and kcat is run as its users run it; this side checks
//! what they print and what the data directory holds afterwards (with `broker-fs list`
//! and `fetch`, once the server has stopped on SIGTERM).
//!
//! The Python comes from `BROKER_KAFKA_PYTHON` (else `python3`), kafkajs from
//! `BROKER_KAFKAJS_MODULES` (else `target/kafka-clients-node/node_modules`);
//! `.ci/kafka-clients` installs both and prints the python. kcat is Debian's. Without a
//! client each of its tests prints one `skipped:` line and passes, unless
//! `BROKER_REQUIRE_KAFKA_CLIENTS=1` (as in CI), where it fails.

mod common;

use base64::Engine as _;
use broker_core::partition_for_key;
use common::clients::{installed, python, required, wait_child};
use common::{cli_ok, log_files, KafkaServer, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/scenarios.py");

/// Longest a scenario may run (each wait inside it is bounded at 30 s).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(240);

/// Takes the test lock and checks that the Python clients import; `None`: skip the test.
fn clients() -> Option<MutexGuard<'static, ()>> {
    installed(SCENARIOS)
}

/// Runs `scenarios.py ARGS... --bootstrap ADDR`; it must exit 0. Returns the JSON
/// object on the last line of its standard output.
fn scenario(server: &mut KafkaServer, args: &[&str]) -> Value {
    let mut child = spawn_scenario(server, args);
    let (status, stdout, stderr) = wait_scenario(&mut child, args);
    if !status.success() {
        panic!(
            "scenario {args:?} failed ({status}):\n--- its stderr ---\n{stderr}\n--- its stdout ---\n{stdout}\n\
             --- broker-fs stderr ---\n{}",
            server.stderr()
        );
    }
    server.assert_running();
    let last = stdout.lines().last().unwrap_or_else(|| panic!("scenario {args:?} printed nothing"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("scenario {args:?}: last line {last:?}: {e}"))
}

fn spawn_scenario(server: &KafkaServer, args: &[&str]) -> Child {
    Command::new(python())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(SCENARIOS)
        .args(args)
        .args(["--bootstrap", &server.address])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {} {SCENARIOS}: {e}", python()))
}

/// Waits for a scenario (killing it after SCENARIO_TIMEOUT); its status and output.
fn wait_scenario(child: &mut Child, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    wait_child(child, &format!("scenario {args:?}"), SCENARIO_TIMEOUT)
}

fn lines_json(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
}

/// `broker-fs --json list` (the server must have stopped): name to its JSON line.
fn listed(dir: &Path) -> BTreeMap<String, Value> {
    lines_json(&cli_ok(dir, &["--json", "list"]))
        .into_iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t))
        .collect()
}

/// `broker-fs --json fetch` of one whole partition: (offset, key, value), keys and
/// values as UTF-8 text. The Kafka listener stores each produced batch whole, as the core
/// record at its first offset (no key, the batch as value), and a 6-byte continuation at
/// each further offset; such a batch is unwrapped here into its Kafka records' keys and
/// values, each at its offset.
fn fetched(dir: &Path, topic: &str, partition: u64) -> Vec<(u64, Value, Value)> {
    let p = partition.to_string();
    // From the topic's first offset (past every offset of the topics deleted before it).
    let described: Value = serde_json::from_str(cli_ok(dir, &["--json", "describe", topic]).trim()).unwrap();
    let start = described["log_start"].as_u64().unwrap().to_string();
    let mut out: Vec<(u64, Value, Value)> = Vec::new();
    // The first offset and the end of the last batch read.
    let mut batch: Option<(u64, u64)> = None;
    let core =
        lines_json(&cli_ok(dir, &["--json", "fetch", topic, "--partition", &p, "--offset", &start, "--max", "10000"]));
    for r in core {
        let offset = r["offset"].as_u64().unwrap();
        let Some(b64) = r["value"]["base64"].as_str() else {
            out.push((offset, r["key"].clone(), r["value"].clone()));
            continue;
        };
        assert!(r["key"].is_null(), "{topic}/{p} offset {offset}: a stored batch with a key: {r}");
        let stored = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        if stored.len() == 6 && stored[..2] == [0xff, b'k'] {
            let back = u64::from(u32::from_be_bytes(stored[2..].try_into().unwrap()));
            assert!(
                batch.is_some_and(|(first, end)| offset.checked_sub(back) == Some(first) && offset < end),
                "{topic}/{p} offset {offset}: a continuation {back} back that no batch before it covers"
            );
            continue;
        }
        let records = batch_records(&stored)
            .unwrap_or_else(|e| panic!("{topic}/{p} offset {offset}: stored value is not a batch: {e}"));
        batch = Some((offset, offset + records.len() as u64));
        let text = |b: Vec<u8>| Value::String(String::from_utf8(b).unwrap());
        for (i, (key, value)) in records.into_iter().enumerate() {
            out.push((offset + i as u64, key.map_or(Value::Null, text), text(value)));
        }
    }
    out
}

/// A Kafka record's key (if any) and value.
type KeyValue = (Option<Vec<u8>>, Vec<u8>);

/// The keys and values of a Kafka record batch (format v2, uncompressed).
fn batch_records(batch: &[u8]) -> Result<Vec<KeyValue>, String> {
    const HEADER: usize = 61;
    if batch.len() < HEADER || batch[16] != 2 {
        return Err(format!("{} bytes, magic {:?}", batch.len(), batch.get(16)));
    }
    if batch[22] & 0b111 != 0 {
        return Err(format!("compressed (codec {}): this reader reads uncompressed batches", batch[22] & 0b111));
    }
    let count = i32::from_be_bytes(batch[57..61].try_into().unwrap());
    let mut r = Cursor { bytes: batch, at: HEADER };
    let mut out = Vec::new();
    for _ in 0..count {
        let length = r.varint()?;
        let end = r.at + length as usize;
        let _attributes = r.take(1)?;
        let (_timestamp_delta, _offset_delta) = (r.varint()?, r.varint()?);
        let key = match r.varint()? {
            n if n < 0 => None,
            n => Some(r.take(n as usize)?.to_vec()),
        };
        let value_len = r.varint()?;
        let value = r.take(value_len.max(0) as usize)?.to_vec();
        out.push((key, value));
        r.at = end;
    }
    if r.at != batch.len() {
        return Err(format!("{} bytes after {count} records", batch.len() - r.at));
    }
    Ok(out)
}

/// Reads a Kafka v2 record: zigzag varints and byte strings.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let out =
            self.bytes.get(self.at..self.at + n).ok_or_else(|| format!("{n} bytes past the end at {}", self.at))?;
        self.at += n;
        Ok(out)
    }

    fn varint(&mut self) -> Result<i64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok((n >> 1) as i64 ^ -((n & 1) as i64));
            }
        }
        Err("varint too long".into())
    }
}

/// The records a scenario printed for `partition`, as `fetched` gives them.
fn printed(records: &Value, partition: u64) -> Vec<(u64, Value, Value)> {
    let mut out: Vec<_> = records
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["partition"].as_u64() == Some(partition))
        .map(|r| (r["offset"].as_u64().unwrap(), r["key"].clone(), r["value"].clone()))
        .collect();
    out.sort_by_key(|r| r.0);
    out
}

/// (a) Both admin clients create topics; both list them; creating either again fails
/// with TOPIC_ALREADY_EXISTS; an unknown config is refused. On disk: exactly those two
/// topics, with their partition counts and the grace delay `deletion.grace.ms` set.
#[test]
fn admin_creates_lists_and_refuses_duplicates() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-create");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let out = scenario(&mut server, &["create", "--prefix", "orders"]);
    assert_eq!(out["topics"], serde_json::json!({ "orders-kp": 3, "orders-ck": 5 }));
    server.terminate();

    let topics = listed(&data);
    assert_eq!(topics.keys().collect::<Vec<_>>(), ["orders-ck", "orders-kp"], "{topics:?}");
    assert_eq!(topics["orders-kp"]["partitions"], 3);
    assert_eq!(topics["orders-ck"]["partitions"], 5);
    assert_eq!(topics["orders-ck"]["grace_ms"], 100, "deletion.grace.ms=100 was asked for");
    assert_eq!(topics["orders-kp"]["grace_ms"], 0, "no deletion.grace.ms: no grace delay");
    assert_eq!(log_files(&data).len(), 8, "one log per partition of the two topics");
}

/// (b) Keyed and keyless records from both producers, read back by both consumers;
/// the same records, at the same offsets, are on disk.
#[test]
fn records_produced_by_both_clients_read_back_everywhere() {
    let _ = produce_consume(&[]);
}

/// The same under durability log-sync: acknowledged at the log's fsync, and read back
/// by every client and by broker-fs, whose later commands start under the setting the
/// directory keeps.
#[test]
fn records_produced_under_log_sync_read_back_everywhere() {
    if let Some(tmp) = produce_consume(&["--durability", "log-sync"]) {
        let setting = std::fs::read_to_string(tmp.path().join("data").join("DURABILITY")).unwrap();
        assert_eq!(setting, "log-sync 1000\n");
    }
}

/// Runs the scenario on a new directory; returns it (`None` without the clients).
fn produce_consume(serve_args: &[&str]) -> Option<TempDir> {
    let _lock = clients()?;
    let tmp = TempDir::new("kafka-produce");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start_with(&data, &tmp.path().join("stderr"), serve_args);
    let out = scenario(&mut server, &["produce-consume", "--topic", "events"]);
    server.terminate();

    let records = &out["records"];
    assert_eq!(records.as_array().unwrap().len(), 36, "18 records from each client");
    let topics = listed(&data);
    let hw: Vec<u64> =
        topics["events"]["high_watermarks"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(hw.len(), 3);
    for p in 0..3u64 {
        let on_disk = fetched(&data, "events", p);
        assert_eq!(on_disk, printed(records, p), "partition {p}: broker-fs fetch against what the clients read");
        assert_eq!(hw[p as usize], on_disk.len() as u64, "partition {p}: high watermark");
    }
    Some(tmp)
}

/// (c) A consumer of each client polls while the admin client of the same library
/// deletes the topic: nothing is delivered after the acknowledgement; the same name
/// re-created is a new topic, empty from offset 0.
#[test]
fn delete_while_consumers_poll_delivers_nothing_afterwards() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-delete");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let mut outs = Vec::new();
    for (client, topic) in [("confluent", "polled-ck"), ("kafka-python", "polled-kp")] {
        let out = scenario(&mut server, &["delete-while-polling", "--client", client, "--topic", topic]);
        eprintln!("{client}: consumer errors after the delete: {}", out["consumer_errors"]);
        match (out["old_topic_id"].as_str(), out["new_topic_id"].as_str()) {
            (Some(old), Some(new)) => assert_ne!(old, new, "{client}: the re-created {topic} kept its topic id"),
            _ => eprintln!("{client}: Metadata gave no topic ids (version below 10): {out}"),
        }
        outs.push((topic, out));
    }
    server.terminate();

    let topics = listed(&data);
    assert_eq!(topics.len(), 2, "{topics:?}");
    for (topic, out) in &outs {
        for p in 0..3u64 {
            let on_disk = fetched(&data, topic, p);
            assert_eq!(
                on_disk,
                printed(&out["records"], p),
                "{topic} partition {p}: only the new incarnation's record"
            );
            assert_eq!(on_disk.len(), 1);
        }
    }
}

/// (d) Without a chosen partition, librdkafka (`murmur2_random`) and kafka-python's
/// default partitioner put every keyed record where the core's partitioner would.
#[test]
fn clients_partition_keys_as_the_core_does() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-partitioner");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let out = scenario(&mut server, &["partitioner", "--prefix", "keyed"]);
    server.terminate();

    let results = out["results"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    let mut wrong = Vec::new();
    for r in results {
        let (client, key) = (r["client"].as_str().unwrap(), r["key"].as_str().unwrap());
        let (partitions, partition) = (r["partitions"].as_u64().unwrap() as u32, r["partition"].as_u64().unwrap());
        let want = partition_for_key(key.as_bytes(), partitions);
        if u64::from(want) != partition {
            wrong.push(format!(
                "{client}: key {key:?} of {partitions} partitions went to {partition}, core says {want}"
            ));
        }
        seen.insert((client.to_string(), partitions));
    }
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
    let want: BTreeSet<_> =
        ["confluent-kafka", "kafka-python"].iter().flat_map(|c| [(c.to_string(), 5), (c.to_string(), 16)]).collect();
    assert_eq!(seen, want, "both clients, both topics");
    assert_eq!(results.len(), 4 * 51, "51 keys for each client and topic");
    // The keys spread: agreement is not the trivial kind where every key goes to 0.
    let partitions_of_16: BTreeSet<u64> =
        results.iter().filter(|r| r["partitions"] == 16).map(|r| r["partition"].as_u64().unwrap()).collect();
    assert!(partitions_of_16.len() > 8, "keys over 16 partitions used only {partitions_of_16:?}");
}

/// (e) Metadata for a missing name answers with an error for it and creates nothing,
/// though both producers ask with allow_auto_topic_creation.
#[test]
fn metadata_for_a_missing_topic_creates_nothing() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-metadata");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let out = scenario(&mut server, &["metadata-missing", "--topic", "nowhere"]);
    assert_eq!(out["confluent_error"], "UNKNOWN_TOPIC_OR_PART");
    server.terminate();
    assert!(listed(&data).is_empty(), "no topic on disk");
    assert!(log_files(&data).is_empty(), "no log on disk: {:?}", log_files(&data));
}

/// kill -9 right after a delete's acknowledgement, inside its grace delay: the logs
/// are still there; after a restart the topic is gone for the clients and its logs
/// leave the directory.
#[test]
fn kill9_after_delete_ack_then_restart_finishes_the_deletion() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-kill9");
    let data = tmp.path().join("data");
    let log = tmp.path().join("stderr");
    let mut server = KafkaServer::start(&data, &log);
    scenario(
        &mut server,
        &["create-topic", "--topic", "doomed", "--partitions", "3", "--config", "deletion.grace.ms=2000"],
    );
    scenario(&mut server, &["produce", "--topic", "doomed", "--partitions", "3", "--count", "20"]);
    let logs = log_files(&data);
    assert_eq!(logs.len(), 3, "three partition logs: {logs:?}");
    assert!(logs.iter().all(|l| l.0 == logs[0].0), "one topic: {logs:?}");

    // The delete prints its acknowledgement and flushes; the kill follows at once,
    // without waiting for the script to shut its client down.
    let args = ["delete", "--topic", "doomed"];
    let mut child = spawn_scenario(&server, &args);
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
    if first.trim().is_empty() {
        let (status, _, stderr) = wait_scenario(&mut child, &args);
        panic!("delete: no acknowledgement ({status}):\n{stderr}\n--- broker-fs stderr ---\n{}", server.stderr());
    }
    server.kill9();
    let at_kill = log_files(&data);
    let _ = wait_scenario(&mut child, &args);
    let ack: Value = serde_json::from_str(first.trim()).unwrap();
    assert_eq!(ack["deleted"], "doomed");
    assert_eq!(at_kill, logs, "the grace delay (2 s) keeps every log past the acknowledgement");

    let mut server = KafkaServer::start(&data, &log);
    scenario(&mut server, &["absent", "--topic", "doomed"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<_> = log_files(&data).into_iter().filter(|l| logs.contains(l)).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "30 s after the restart these logs are still on disk: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    scenario(&mut server, &["absent", "--topic", "doomed"]);
    server.terminate();
    assert!(listed(&data).is_empty(), "no topic after the restart");
    let status: Value = serde_json::from_str(cli_ok(&data, &["--json", "status"]).trim()).unwrap();
    assert_eq!(status["pending"], serde_json::json!([]), "no pending deletion left: {status}");
}

/// (g) A consumer paused at a position of a topic that is deleted and created again,
/// with 30 records produced to the new topic before it resumes, is never served the
/// new topic from the middle: with `auto.offset.reset=earliest` it reads all 30, with
/// its default (latest) none. Before offsets began past the deleted topic's, aiokafka
/// (which sends no leader epoch) read new-10 to new-29 here.
#[test]
fn a_consumer_is_never_served_a_recreated_topic_from_the_middle() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-recreate");
    let mut server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    for client in ["confluent", "kafka-python", "aiokafka"] {
        for reset in ["earliest", "default"] {
            let topic = format!("recreated-{client}-{reset}");
            let out = scenario(&mut server, &["recreate", "--client", client, "--reset", reset, "--topic", &topic]);
            let read = out["read"].as_array().unwrap().len();
            assert_eq!(read, if reset == "earliest" { 30 } else { 0 }, "{client} {reset}: {out}");
            let offsets: Vec<u64> = out["offsets"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
            let position = out["position_before"].as_u64().unwrap();
            assert!(offsets.iter().all(|o| *o > position), "{client} {reset}: offsets {offsets:?} not past {position}");
        }
    }
    server.terminate();
}

/// A client program that is not Python, or `None` (with the test's one `skipped:` line)
/// where it is missing, unless `BROKER_REQUIRE_KAFKA_CLIENTS=1`.
fn tool(program: &str, probe: &[&str], env: &[(&str, String)]) -> Option<()> {
    let out = Command::new(program).args(probe).envs(env.iter().map(|(k, v)| (k, v))).output();
    let why = match &out {
        Ok(o) if o.status.success() => return Some(()),
        Ok(o) => format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => e.to_string(),
    };
    if required() {
        panic!("BROKER_REQUIRE_KAFKA_CLIENTS=1 but {program} {probe:?} fails ({why}); run .ci/kafka-clients (and apt-get install kcat)");
    }
    println!("skipped: {program} is not installed (.ci/kafka-clients; kcat from Debian)");
    None
}

/// Where `.ci/kafka-clients` installs kafkajs.
fn kafkajs_modules() -> String {
    std::env::var("BROKER_KAFKAJS_MODULES")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/kafka-clients-node/node_modules").into())
}

/// kafkajs, in its default configuration, as an admin and a producer (its consumer is
/// run by `kafkajs_consumes_through_groups`): create, produce, fetchTopicOffsets (ListOffsets, which
/// closed the connection at the versions kafkajs uses before 7be7f5a), delete, create
/// again: the new topic begins past the deleted one, and its first record lands there.
#[test]
fn kafkajs_creates_produces_lists_offsets_and_recreates() {
    let Some(_lock) = clients() else { return };
    let env = [("NODE_PATH", kafkajs_modules())];
    if tool("node", &["-e", "require('kafkajs')"], &env).is_none() {
        return;
    }
    let tmp = TempDir::new("kafka-kafkajs");
    let server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/kafkajs.js");
    for topic in ["js-a", "js-b"] {
        let out = Command::new("node").arg(script).args([&server.address, topic]).envs(env.clone()).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kafkajs {topic}: {stderr}\n{stdout}\n{}", server.stderr());
        let got: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(got["fresh"]["low"], got["new_base"], "{got}");
    }
    server.terminate();
}

/// Runs `kcat -b ADDRESS -t TOPIC ARGS...` with `input` on its standard input; it must
/// exit 0 (else the broker's log, `log`, is shown). Its standard output.
fn run_kcat(address: &str, topic: &str, log: &Path, args: &[&str], input: Option<String>) -> String {
    let mut child = Command::new("kcat")
        .args(["-b", address, "-t", topic])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        std::io::Write::write_all(&mut stdin, input.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "kcat {args:?}: {stderr}\n{}", std::fs::read_to_string(log).unwrap());
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// kcat (Debian's, librdkafka 2.0.2) as a user drives it: list, produce, consume to
/// the end, across a delete and a re-creation of the topic. A consumer left running when
/// the topic is deleted stops with librdkafka's "no longer available" error (as against
/// Kafka); kcat started on the new topic reads it from its first offset, past the deleted
/// topic's, and `-o -5` reads the last five (ListOffsets latest).
#[test]
fn kcat_lists_produces_and_consumes_across_a_recreate() {
    let Some(_lock) = clients() else { return };
    if tool("kcat", &["-V"], &[]).is_none() {
        return;
    }
    let tmp = TempDir::new("kafka-kcat");
    let mut server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    let topic = "kc";
    let (address, log) = (server.address.clone(), server.log.clone());
    let kcat = |args: &[&str], input: Option<String>| run_kcat(&address, topic, &log, args, input);
    let produce = |prefix: &str, n: usize| {
        kcat(&["-P", "-p", "0"], Some((0..n).map(|i| format!("{prefix}-{i}\n")).collect()));
    };
    let consume = |from: &str| -> Vec<(u64, String)> {
        kcat(&["-C", "-p", "0", "-o", from, "-e", "-f", "%o %s\\n"], None)
            .lines()
            .map(|l| {
                let (o, v) = l.split_once(' ').unwrap_or_else(|| panic!("kcat line {l:?}"));
                (o.parse().unwrap(), v.to_string())
            })
            .collect()
    };
    let expect = |prefix: &str, offsets: std::ops::Range<u64>, first: u64| -> Vec<(u64, String)> {
        offsets.map(|o| (o, format!("{prefix}-{}", o - first))).collect()
    };

    scenario(&mut server, &["create-topic", "--topic", topic]);
    let listed = kcat(&["-L"], None);
    assert!(listed.contains(&format!("topic \"{topic}\" with 1 partitions")), "kcat -L: {listed}");
    produce("old", 15);
    assert_eq!(consume("beginning"), expect("old", 0..15, 0));

    let mut running = Command::new("kcat")
        .args(["-C", "-b", &server.address, "-t", topic, "-p", "0", "-o", "end"])
        .args(["-X", "topic.metadata.refresh.interval.ms=200"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    scenario(&mut server, &["delete", "--topic", topic]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = running.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "a kcat consumer of a deleted topic still runs after 30 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    running.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!status.success() && stderr.contains("no longer available"), "{status}: {stderr}");

    scenario(&mut server, &["create-topic", "--topic", topic]);
    produce("new", 30);
    assert_eq!(consume("beginning"), expect("new", 15..45, 15), "the new topic begins past the deleted one");
    assert_eq!(consume("-5"), expect("new", 40..45, 15));
    server.terminate();
}

/// The Python clients that consume through groups (`scenarios.py`'s names).
const GROUP_CLIENTS: [&str; 3] = ["kafka-python", "confluent", "aiokafka"];

/// The values of `records` (as the scenarios print them), sorted.
fn record_values(records: &Value) -> Vec<String> {
    let mut out: Vec<String> =
        records.as_array().unwrap().iter().map(|r| r["value"].as_str().unwrap().to_string()).collect();
    out.sort();
    out
}

/// A consumer of each Python client subscribes with a group, reads, commits and stops;
/// a second consumer of the group, in the client's default configuration (offset reset
/// latest), reads exactly the records produced after: from the committed offsets. On
/// disk, the two read every record of the topic, each once.
#[test]
fn group_consumers_resume_from_their_committed_offsets() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-group-resume");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let mut outs = Vec::new();
    for client in GROUP_CLIENTS {
        let topic = format!("resume-{client}");
        let out = scenario(&mut server, &["group-resume", "--client", client, "--topic", &topic]);
        outs.push((topic, out));
    }
    server.terminate();
    for (topic, out) in outs {
        let (first, second) = (record_values(&out["first"]), record_values(&out["second"]));
        assert_eq!(first, (0..2).flat_map(|p| (0..5).map(move |i| format!("first-p{p}-{i}"))).collect::<Vec<_>>());
        assert_eq!(second, (0..2).flat_map(|p| (0..5).map(move |i| format!("second-p{p}-{i}"))).collect::<Vec<_>>());
        let mut on_disk: Vec<String> =
            (0..2).flat_map(|p| fetched(&data, &topic, p)).map(|(_, _, v)| v.as_str().unwrap().to_string()).collect();
        on_disk.sort();
        let mut read = [first, second].concat();
        read.sort();
        assert_eq!(read, on_disk, "{topic}: the two consumers read everything on disk, once");
        assert_eq!(out["committed"], serde_json::json!({"0": 5, "1": 5}), "{topic}: {out}");
    }
}

/// Two members of one group (each Python client) split four partitions and each reads
/// its own; when one leaves, the other takes all four and reads on, nothing twice.
#[test]
fn group_members_split_partitions_and_rebalance_when_one_leaves() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-group-split");
    let mut server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    for client in GROUP_CLIENTS {
        let topic = format!("split-{client}");
        let out = scenario(&mut server, &["group-split", "--client", client, "--topic", &topic]);
        let halves: Vec<BTreeSet<u64>> = out["split"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_array().unwrap().iter().map(|p| p.as_u64().unwrap()).collect())
            .collect();
        assert!(halves.iter().all(|h| !h.is_empty()), "{client}: {out}");
        assert_eq!(halves[0].union(&halves[1]).count(), 4, "{client}: the halves cover the partitions: {out}");
        assert!(halves[0].is_disjoint(&halves[1]), "{client}: {out}");
        assert_eq!((out["first"].as_u64(), out["second"].as_u64()), (Some(12), Some(12)), "{client}: {out}");
    }
    server.terminate();
}

/// A topic deleted and created again while a group consumes it (each Python client):
/// the running member reads the new topic from its first record; a group whose offset
/// was committed at the end of the old topic (where the new one begins) has no offset
/// in the new one, so a member in the default configuration (offset reset latest) reads
/// none of the 30 records there before it joined, and with `earliest` all of them:
/// never from the old offset, never skipping.
#[test]
fn a_group_resumes_a_recreated_topic_from_its_reset_point() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-group-recreate");
    let mut server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    for client in GROUP_CLIENTS {
        for reset in ["default", "earliest"] {
            let topic = format!("gr-{client}-{reset}");
            let out =
                scenario(&mut server, &["group-recreate", "--client", client, "--reset", reset, "--topic", &topic]);
            let read: Vec<&str> = out["read"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let more: Vec<String> = (0..5).map(|i| format!("more-p0-{i}")).collect();
            let want: Vec<String> = match reset {
                "earliest" => (0..30).map(|i| format!("new-{i}")).chain(more).collect(),
                _ => more,
            };
            assert_eq!(read, want, "{client} {reset}: {out}");
        }
    }
    server.terminate();
}

/// kafkajs's consumer, which always reads through a group, in its default
/// configuration: resume from the committed offsets, two members splitting partitions
/// and rebalancing when one leaves, a topic created again (no committed offset is
/// carried over; a member from the latest offset reads only what came after it),
/// batches its producer compressed with gzip, and offsets looked up by timestamp (its
/// admin's `fetchTopicOffsetsByTimestamp`).
#[test]
fn kafkajs_consumes_through_groups() {
    let Some(_lock) = clients() else { return };
    let env = [("NODE_PATH", kafkajs_modules())];
    if tool("node", &["-e", "require('kafkajs')"], &env).is_none() {
        return;
    }
    let tmp = TempDir::new("kafka-kafkajs-groups");
    let server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/kafkajs.js");
    for scenario in ["group-resume", "group-split", "group-recreate", "gzip", "times"] {
        let topic = format!("js-{scenario}");
        let out = Command::new("node")
            .arg(script)
            .args([&server.address, &topic, scenario])
            .envs(env.clone())
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kafkajs {scenario}: {stderr}\n{stdout}\n{}", server.stderr());
        let got: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        match scenario {
            "group-resume" => {
                assert_eq!((got["first"].as_u64(), got["second"].as_u64()), (Some(10), Some(10)), "{got}")
            }
            "group-split" => assert_eq!((got["first"].as_u64(), got["second"].as_u64()), (Some(12), Some(12)), "{got}"),
            "gzip" => assert_eq!(got["read"].as_u64(), Some(120), "{got}"),
            // Timestamps 1, 2, 3, 2.5, 4 and 5 million at offsets 0 to 5: the earliest
            // offset whose timestamp reaches each time; past the last, kafkajs gives the
            // high watermark, 6, where the broker answered -1.
            "times" => assert_eq!(
                got["answers"],
                serde_json::json!([
                    [0, 0],
                    [1000000, 0],
                    [1500000, 1],
                    [2200000, 2],
                    [3000001, 4],
                    [5000000, 5],
                    [5000001, 6]
                ]),
                "{got}"
            ),
            _ => assert_eq!(got["read"], serde_json::json!((0..5).map(|i| format!("more-p0-{i}")).collect::<Vec<_>>())),
        }
    }
    server.terminate();
    // Each gzip send is one batch of 20 records, stored compressed as it came.
    for p in 0..2 {
        let stored = stored_batches(&tmp.path().join("data"), "js-gzip", p);
        assert_eq!(stored.iter().map(|(_, n, codec)| (*n, *codec)).collect::<Vec<_>>(), vec![(20, 1); 3], "{p}");
    }
}

/// kcat's balanced consumer (`-G`), as its users run it: it reads, commits as it exits
/// and the next run resumes there; two of them split the partitions and one takes
/// everything when the other stops (SIGTERM); and after a delete and re-create, a group
/// committed at the old topic's end (where the new one begins) reads nothing of the new
/// topic with `auto.offset.reset=latest` (from the old offset it would read it all), and
/// all of it with `earliest`.
#[test]
fn kcat_balanced_consumers_commit_split_and_survive_a_recreate() {
    let Some(_lock) = clients() else { return };
    if tool("kcat", &["-V"], &[]).is_none() {
        return;
    }
    let tmp = TempDir::new("kafka-kcat-groups");
    let mut server = KafkaServer::start(&tmp.path().join("data"), &tmp.path().join("stderr"));
    let (address, log) = (server.address.clone(), server.log.clone());
    let produce = |topic: &str, partition: u32, values: &[String]| {
        let mut child = Command::new("kcat")
            .args(["-b", &address, "-t", topic, "-P", "-p", &partition.to_string()])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input: String = values.iter().map(|v| format!("{v}\n")).collect();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "kcat -P {topic}");
    };
    let values = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    // A balanced consumer that exits at the end of its partitions: the values it read.
    // Its reset policy is librdkafka's `auto.offset.reset`, not kcat's `-o`, which
    // kcat applies at every assignment, over the committed offsets.
    let consume = |group: &str, topic: &str, reset: Option<&str>| -> Vec<String> {
        let reset = reset.map(|r| format!("auto.offset.reset={r}"));
        let mut args = vec!["-b", &address, "-G", group, "-e", "-u", "-f", "%s\\n"];
        if let Some(r) = &reset {
            args.extend(["-X", r]);
        }
        args.push(topic);
        let out = Command::new("kcat").args(&args).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "kcat {args:?}: {stderr}\n{}", std::fs::read_to_string(&log).unwrap());
        let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        got.sort();
        got
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // Resume: the second run reads only what came after the first.
    scenario(&mut server, &["create-topic", "--topic", "kc-resume", "--partitions", "2"]);
    produce("kc-resume", 0, &values("a0", 3));
    produce("kc-resume", 1, &values("a1", 3));
    assert_eq!(consume("kcg", "kc-resume", Some("earliest")), sorted([values("a0", 3), values("a1", 3)].concat()));
    produce("kc-resume", 0, &values("b0", 2));
    produce("kc-resume", 1, &values("b1", 2));
    assert_eq!(consume("kcg", "kc-resume", None), sorted([values("b0", 2), values("b1", 2)].concat()));

    // Split: two members, then one.
    scenario(&mut server, &["create-topic", "--topic", "kc-split", "--partitions", "4"]);
    let member = || {
        let mut child = Command::new("kcat")
            .args(["-b", &address, "-G", "kcs", "-X", "auto.offset.reset=earliest", "-u", "-f", "%p %s\\n", "kc-split"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |r: Box<dyn Read + Send>| {
            let got = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
            let sink = got.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(r).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
            got
        };
        let out = lines(Box::new(child.stdout.take().unwrap()));
        let err = lines(Box::new(child.stderr.take().unwrap()));
        (child, out, err)
    };
    // The partitions kcat said it was assigned last ("assigned: kc-split [0], ...").
    let assigned = |err: &Mutex<Vec<String>>| -> BTreeSet<u32> {
        let lines = err.lock().unwrap();
        let Some(last) = lines.iter().rev().find(|l| l.contains("rebalanced")) else { return BTreeSet::new() };
        if !last.contains("assigned:") {
            return BTreeSet::new();
        }
        last.split('[').skip(1).filter_map(|s| s.split(']').next()?.parse().ok()).collect()
    };
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "kcat: {what} not within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let (mut a, a_out, a_err) = member();
    wait("the first member holds every partition", &|| assigned(&a_err).len() == 4);
    let (mut b, b_out, b_err) = member();
    wait("two members split the partitions", &|| {
        let (sa, sb) = (assigned(&a_err), assigned(&b_err));
        !sa.is_empty() && !sb.is_empty() && sa.is_disjoint(&sb) && sa.len() + sb.len() == 4
    });
    let (half_a, half_b) = (assigned(&a_err), assigned(&b_err));
    for p in 0..4 {
        produce("kc-split", p, &values(&format!("first-p{p}"), 3));
    }
    wait("the members read the first records", &|| a_out.lock().unwrap().len() + b_out.lock().unwrap().len() >= 12);
    std::thread::sleep(Duration::from_secs(2));
    let parts = |lines: &[String]| -> BTreeSet<u32> {
        lines.iter().map(|l| l.split(' ').next().unwrap().parse().unwrap()).collect()
    };
    assert!(parts(&a_out.lock().unwrap()).is_subset(&half_a), "member a read outside {half_a:?}");
    assert!(parts(&b_out.lock().unwrap()).is_subset(&half_b), "member b read outside {half_b:?}");
    assert_eq!(a_out.lock().unwrap().len() + b_out.lock().unwrap().len(), 12, "each record once");
    let before = a_out.lock().unwrap().len();
    // SIGTERM: kcat closes its consumer, committing and leaving the group.
    Command::new("kill").args(["-TERM", &b.id().to_string()]).status().unwrap();
    let _ = b.wait();
    wait("the remaining member takes every partition", &|| assigned(&a_err).len() == 4);
    for p in 0..4 {
        produce("kc-split", p, &values(&format!("second-p{p}"), 3));
    }
    wait("the remaining member reads the second records", &|| a_out.lock().unwrap().len() >= before + 12);
    std::thread::sleep(Duration::from_secs(2));
    let after: Vec<String> =
        a_out.lock().unwrap()[before..].iter().map(|l| l.split_once(' ').unwrap().1.to_string()).collect();
    let _ = a.kill();
    let _ = a.wait();
    assert_eq!(
        sorted(after),
        sorted((0..4).flat_map(|p| values(&format!("second-p{p}"), 3)).collect()),
        "nothing twice, nothing lost"
    );

    // Re-create: both groups committed at the old topic's end.
    scenario(&mut server, &["create-topic", "--topic", "kc-re"]);
    produce("kc-re", 0, &values("old", 15));
    assert_eq!(consume("kc-end", "kc-re", Some("earliest")).len(), 15);
    assert_eq!(consume("kc-beginning", "kc-re", Some("earliest")).len(), 15);
    scenario(&mut server, &["delete", "--topic", "kc-re"]);
    scenario(&mut server, &["create-topic", "--topic", "kc-re"]);
    produce("kc-re", 0, &values("new", 30));
    assert_eq!(consume("kc-end", "kc-re", Some("latest")), Vec::<String>::new(), "the old offset is not carried over");
    assert_eq!(consume("kc-beginning", "kc-re", Some("earliest")), sorted(values("new", 30)), "from the first record");
    server.terminate();
}

/// Idempotent producers deliver each record once, and a transactional producer fails
/// at once, with every client: kafka-python in its default configuration (idempotence
/// on), confluent-kafka and aiokafka with idempotence turned on, read back by
/// kafka-python and on disk; kafkajs with `idempotent: true`, read back by its group
/// consumer; kcat with `-X enable.idempotence=true`, read back by kcat. A
/// transactional id makes each fail within seconds (messages on standard error).
#[test]
fn idempotent_producers_deliver_once_and_transactional_ones_fail_fast() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-idempotent");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let out = scenario(&mut server, &["idempotent", "--topic", "idem"]);
    assert_eq!(out["read"], serde_json::json!({"kafka-python": 24, "confluent": 24, "aiokafka": 24}), "{out}");
    let out = scenario(&mut server, &["transactional", "--topic", "idem-txn"]);
    eprintln!("transactional producers: {out}");
    let messages = &out["messages"];
    for client in ["kafka-python", "confluent", "aiokafka"] {
        let m = messages[client].as_str().unwrap_or_default();
        assert!(
            m.contains("TransactionalIdAuthorizationFailed") || m.contains("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
            "{client}: {m}"
        );
    }
    assert!(messages["confluent"].as_str().unwrap().contains("does not support transactions"), "{out}");

    let env = [("NODE_PATH", kafkajs_modules())];
    if tool("node", &["-e", "require('kafkajs')"], &env).is_some() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/kafkajs.js");
        for (scenario, topic) in [("idempotent", "js-idem"), ("transactional", "js-txn")] {
            let out =
                Command::new("node").arg(script).args([&server.address, topic, scenario]).envs(env.clone()).output();
            let out = out.unwrap();
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "kafkajs {scenario}: {stderr}\n{stdout}\n{}", server.stderr());
            let got: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
            eprintln!("kafkajs {scenario}: {got}");
            match scenario {
                "idempotent" => assert_eq!(got["read"], 24, "{got}"),
                _ => assert!(got["ms"].as_u64().unwrap() < 30_000 && got["error"].is_string(), "{got}"),
            }
        }
    }

    if tool("kcat", &["-V"], &[]).is_some() {
        scenario(&mut server, &["create-topic", "--topic", "kc-idem"]);
        let produce = |extra: &str, input: &str| {
            let mut child = Command::new("kcat")
                .args(["-b", &server.address, "-t", "kc-idem", "-P", "-p", "0", "-X", extra])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        };
        let out = produce("enable.idempotence=true", "a\nb\nc\n");
        assert!(out.status.success(), "kcat -P idempotent: {}", String::from_utf8_lossy(&out.stderr));
        let started = Instant::now();
        let out = produce("transactional.id=kc-txn", "never\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("kcat transactional: {stderr}");
        assert!(!out.status.success() && stderr.contains("does not support transactions"), "kcat: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let read = Command::new("kcat")
            .args(["-b", &server.address, "-t", "kc-idem", "-C", "-e", "-o", "beginning", "-f", "%o %s\\n"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&read.stdout),
            "0 a\n1 b\n2 c\n",
            "each record once, nothing of the transaction"
        );
    }
    server.terminate();

    for client in ["kafka-python", "confluent", "aiokafka"] {
        let topic = format!("idem-{client}");
        for p in 0..2 {
            let values: Vec<String> =
                fetched(&data, &topic, p).into_iter().map(|(_, _, v)| v.as_str().unwrap().to_string()).collect();
            let want: Vec<String> =
                (0..3).flat_map(|r| (0..4).map(move |i| format!("{client}-r{r}-p{p}-{i}"))).collect();
            assert_eq!(values, want, "{topic} partition {p} on disk: each record once, in order");
        }
    }
}

/// The Kafka batches stored in one partition, as `broker-fs --json fetch` reads them:
/// (first offset, record count, compression codec bits) of each, checking on the way
/// that every other offset is a continuation of the batch before it.
fn stored_batches(dir: &Path, topic: &str, partition: u64) -> Vec<(u64, u32, u8)> {
    let p = partition.to_string();
    let described: Value = serde_json::from_str(cli_ok(dir, &["--json", "describe", topic]).trim()).unwrap();
    let start = described["log_start"].as_u64().unwrap().to_string();
    let core =
        lines_json(&cli_ok(dir, &["--json", "fetch", topic, "--partition", &p, "--offset", &start, "--max", "10000"]));
    let mut out: Vec<(u64, u32, u8)> = Vec::new();
    for r in core {
        let offset = r["offset"].as_u64().unwrap();
        let stored = base64::engine::general_purpose::STANDARD.decode(r["value"]["base64"].as_str().unwrap()).unwrap();
        if stored.len() == 6 && stored[..2] == [0xff, b'k'] {
            let back = u64::from(u32::from_be_bytes(stored[2..].try_into().unwrap()));
            let (first, count, _) = *out.last().unwrap_or_else(|| panic!("offset {offset}: a continuation first"));
            assert!(offset - back == first && back < u64::from(count), "offset {offset}: continuation {back} back");
            continue;
        }
        assert!(stored.len() > 61 && stored[16] == 2, "offset {offset}: not a v2 batch");
        let count = u32::from_be_bytes(stored[57..61].try_into().unwrap());
        out.push((offset, count, stored[22] & 0b111));
    }
    out
}

/// Every codec of kafka-python, confluent-kafka and aiokafka: produced in batches of
/// many records, read back in order by all three from the first offset and from the
/// middle of a batch; on disk each batch is kept whole and compressed, as it came.
#[test]
fn compressed_batches_from_every_client_are_kept_whole_and_read_back() {
    let Some(_lock) = clients() else { return };
    let tmp = TempDir::new("kafka-compression");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let out = scenario(&mut server, &["compression", "--topic", "zipped"]);
    server.terminate();
    let batches = stored_batches(&data, "zipped", 0);
    let codec_bits =
        |name: &str| ["none", "gzip", "snappy", "lz4", "zstd"].iter().position(|c| *c == name).unwrap() as u8;
    let runs = out["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12, "three clients, four codecs");
    let mut offsets = 0;
    for run in runs {
        let (first, count) = (run["first"].as_u64().unwrap(), run["count"].as_u64().unwrap());
        let codec = codec_bits(run["codec"].as_str().unwrap());
        let mine: Vec<_> = batches.iter().filter(|(o, _, _)| (first..first + count).contains(o)).collect();
        assert!(!mine.is_empty(), "{run}: no batch stored");
        assert!(mine.iter().all(|(_, _, c)| *c == codec), "{run}: stored {mine:?}, want codec {codec}");
        assert!(mine.iter().any(|(_, n, _)| *n > 1), "{run}: every batch held one record: {mine:?}");
        let held: u64 = mine.iter().map(|(_, n, _)| u64::from(*n)).sum();
        assert_eq!(held, count, "{run}: the batches hold every record once");
        offsets += count;
    }
    assert_eq!(listed(&data)["zipped"]["high_watermarks"][0].as_u64(), Some(offsets));
    println!("{} records in {} batches", offsets, batches.len());
}

/// kcat produces with each codec librdkafka has, and reads everything back from the
/// first offset and from inside a batch.
#[test]
fn kcat_produces_every_codec_and_reads_back_from_inside_a_batch() {
    let Some(_lock) = clients() else { return };
    if tool("kcat", &["-V"], &[]).is_none() {
        return;
    }
    let tmp = TempDir::new("kafka-kcat-codecs");
    let data = tmp.path().join("data");
    let mut server = KafkaServer::start(&data, &tmp.path().join("stderr"));
    let (address, log) = (server.address.clone(), server.log.clone());
    let kcat = |args: &[&str], input: Option<String>| run_kcat(&address, "kz", &log, args, input);
    scenario(&mut server, &["create-topic", "--topic", "kz"]);
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let mut want = Vec::new();
    for codec in codecs {
        let lines: Vec<String> = (0..100).map(|i| format!("{codec}-{i:03}-{}", "x".repeat(50))).collect();
        kcat(
            &["-P", "-p", "0", "-z", codec, "-X", "linger.ms=50"],
            Some(lines.iter().map(|l| format!("{l}\n")).collect()),
        );
        want.extend(lines);
    }
    let consume = |from: u64| -> Vec<(u64, String)> {
        kcat(&["-C", "-p", "0", "-o", &from.to_string(), "-e", "-f", "%o %s\\n"], None)
            .lines()
            .map(|l| {
                let (o, v) = l.split_once(' ').unwrap_or_else(|| panic!("kcat line {l:?}"));
                (o.parse().unwrap(), v.to_string())
            })
            .collect()
    };
    for from in [0, 150] {
        let expect: Vec<(u64, String)> =
            want.iter().enumerate().skip(from as usize).map(|(o, v)| (o as u64, v.clone())).collect();
        assert_eq!(consume(from), expect, "kcat -C -o {from}");
    }
    server.terminate();
    // librdkafka 2.0.2 (Debian's) compresses with gzip, snappy or lz4 only where Produce
    // v0 is served, which Kafka 4.0 and this broker no longer do: it sends those batches
    // uncompressed (and says so only in its debug log). zstd it checks against Produce
    // v7. The 2.16 of confluent-kafka compresses with all four (the Python test); 2.12 is
    // where the check changed, by librdkafka's own account.
    let version = String::from_utf8(Command::new("kcat").arg("-V").output().unwrap().stdout).unwrap();
    let librdkafka: Vec<u32> = version
        .split("librdkafka ")
        .nth(1)
        .and_then(|v| v.split_whitespace().next())
        .map(|v| v.split('.').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| panic!("no librdkafka version in kcat -V: {version}"));
    let old_librdkafka = librdkafka < vec![2, 12];
    let batches = stored_batches(&data, "kz", 0);
    for (i, codec) in (1u8..=4).enumerate() {
        let run = i as u64 * 100..(i as u64 + 1) * 100;
        let mine: Vec<_> = batches.iter().filter(|(o, _, _)| run.contains(o)).collect();
        let sent = if old_librdkafka && codec != 4 { 0 } else { codec };
        assert!(
            mine.iter().all(|(_, _, c)| *c == sent) && mine.iter().any(|(_, n, _)| *n > 1),
            "{}: {mine:?}, want codec {sent} (librdkafka {librdkafka:?})",
            codecs[i]
        );
    }
}
