//! Kafka clients on a real disk: produce throughput through confluent-kafka (librdkafka)
//! with acks=all against `broker-fs serve --kafka`, next to the raw `write` +
//! `fdatasync` floor of the same bytes on the same disk, fetch throughput, and the bytes
//! the log holds per record; with each compression codec in turn (none, gzip, snappy,
//! lz4, zstd), each on a topic of its own, in one run.
//!
//! ```sh
//! .ci/kafka-clients                      # once: the clients, in target/kafka-clients-venv
//! cargo bench -p broker-fs --bench kafka
//! BROKER_FS_BENCH_SECS=10 BROKER_FS_BENCH_VALUE=100 cargo bench -p broker-fs --bench kafka
//! BROKER_FS_BENCH_CODECS=none,zstd cargo bench -p broker-fs --bench kafka
//! ```
//!
//! The load (`kafka_load.py`) produces keyless values of `BROKER_FS_BENCH_VALUE` bytes
//! (default 1000) to one partition for `BROKER_FS_BENCH_SECS` seconds (default 6) with
//! librdkafka's default batching (linger.ms=5), then fetches them all back. Both phases
//! report the CPU seconds of the broker and of the client, whose produce loop in Python
//! is the limit at small values on a small machine. librdkafka's
//! statistics count the produce requests the broker got; the floor then appends exactly
//! the bytes the partition's log grew by, in as many writes as there were requests, each
//! followed by `fdatasync`, to a file in the same directory. Each produce request is one
//! core produce and one log fsync, so the floor is what the disk allows for that pattern.
//! MiB/s counts record values on both sides. The fetch is taken twice: by the Python
//! consumer, whose loop over the messages is the limit on a small machine, and by kcat
//! (librdkafka's C consumer, when installed), which leaves the broker as the limit.
//! Without the clients, the bench says so in one line and measures nothing.

mod common;

use common::{bench_root, env_or, setting, settle};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_broker-fs");
/// The codecs measured, each on a topic of its own, unless `BROKER_FS_BENCH_CODECS`
/// names others (comma-separated).
const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kafka-clients-venv/bin/python");
    let python = std::env::var_os("BROKER_KAFKA_PYTHON").map(PathBuf::from).unwrap_or(venv);
    let ok = Command::new(&python).args(["-c", "import confluent_kafka"]).status().is_ok_and(|s| s.success());
    ok.then_some(python)
}

fn main() {
    let Some(python) = python() else {
        println!("kafka: skipped: confluent-kafka is not installed (run .ci/kafka-clients)");
        return;
    };
    let secs: f64 = setting("BROKER_FS_BENCH_SECS", 6.0, 1.0);
    let value: usize = env_or("BROKER_FS_BENCH_VALUE", 1000);
    let root = bench_root("kafka");
    let data = root.join("data");

    let mut server = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--kafka", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start broker-fs serve");
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let address = loop {
        let event = next();
        if event["event"] == "kafka-listening" {
            break event["address"].as_str().unwrap().to_string();
        }
    };
    let codecs = std::env::var("BROKER_FS_BENCH_CODECS").unwrap_or_else(|_| CODECS.join(","));
    let load = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/kafka_load.py");
    let run = |args: &[String]| -> Value {
        let out = Command::new(&python).arg(&load).args(args).output().expect("run kafka_load.py");
        assert!(out.status.success(), "kafka_load.py failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("the load's JSON line")
    };
    for (i, codec) in codecs.split(',').enumerate() {
        let topic = format!("bench-{codec}");
        let create = format!(
            r#"{{"id": {}, "command": {{"CreateTopic": {{"name": "{topic}", "partitions": 1, "settings": {{"deletion_grace_ms": 0}}}}}}}}"#,
            i + 1
        );
        writeln!(stdin, "{create}").unwrap();
        let id = next()["ok"]["Created"]["topic"].as_u64().expect("the topic is created");
        let log = data.join(broker_core::LogId { topic: broker_core::TopicId(id), partition: 0 }.file_name());
        let before = std::fs::metadata(&log).unwrap().len();
        settle();

        let cpu_before = cpu_seconds(server.id());
        let produced = run(&[
            "produce".into(),
            address.clone(),
            topic.clone(),
            secs.to_string(),
            value.to_string(),
            codec.to_string(),
        ]);
        let cpu_produce = cpu_seconds(server.id()) - cpu_before;
        let grown = std::fs::metadata(&log).unwrap().len() - before;
        let records = produced["records"].as_u64().unwrap();
        settle();
        let cpu_before = cpu_seconds(server.id());
        let fetched = run(&["fetch".into(), address.clone(), topic.clone(), records.to_string()]);
        let cpu_fetch = cpu_seconds(server.id()) - cpu_before;
        settle();
        let kcat_secs = kcat_fetch(&address, &topic, records);

        let requests = produced["requests"].as_u64().unwrap().max(1);
        let produce_secs = produced["seconds"].as_f64().unwrap();
        let fetch_secs = fetched["seconds"].as_f64().unwrap();
        settle();
        let floor_secs = floor(&root.join(format!("floor-{codec}")), grown, requests);

        let mib = (records * value as u64) as f64 / (1024.0 * 1024.0);
        let (kafka_rate, floor_rate) = (mib / produce_secs, mib / floor_secs);
        println!(
            "kafka produce (acks=all, {value}-byte values, {codec}): {records} records in {requests} requests, \
             {:.0} records/s, {kafka_rate:.1} MiB/s; {:.1} bytes on disk per record ({:.2}x the values)",
            records as f64 / produce_secs,
            grown as f64 / records as f64,
            grown as f64 / (records * value as u64) as f64,
        );
        println!(
            "floor (write + fdatasync of the same {:.1} MiB of log in {requests} writes): {floor_rate:.1} MiB/s",
            grown as f64 / (1024.0 * 1024.0)
        );
        println!("kafka produce / floor: {:.2} ({codec})", kafka_rate / floor_rate);
        println!("kafka fetch: {:.0} records/s, {:.1} MiB/s ({codec})", records as f64 / fetch_secs, mib / fetch_secs);
        match kcat_secs {
            Some(secs) => println!(
                "kafka fetch through kcat: {:.0} records/s, {:.1} MiB/s, {:.2}x produce ({codec})",
                records as f64 / secs,
                mib / secs,
                produce_secs / secs
            ),
            None => println!("kafka fetch through kcat: skipped: kcat is not installed (Debian: apt install kcat)"),
        }
        println!(
            "CPU seconds, broker / client: produce {cpu_produce:.1} / {:.1} over {produce_secs:.1} s; \
             fetch {cpu_fetch:.1} / {:.1} over {fetch_secs:.1} s ({codec})",
            produced["client_cpu_seconds"].as_f64().unwrap(),
            fetched["client_cpu_seconds"].as_f64().unwrap(),
        );
    }
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&root);
}

/// The seconds kcat (librdkafka's C consumer, with no Python loop between the messages
/// and the count) takes to consume the partition's `records` from the start, with the
/// fetch sizes of the Python consumer; `None` without kcat.
fn kcat_fetch(address: &str, topic: &str, records: u64) -> Option<f64> {
    Command::new("kcat").arg("-V").output().ok().filter(|o| o.status.success())?;
    let start = Instant::now();
    let out = Command::new("kcat")
        .args(["-b", address, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-q", "-f", ""])
        .args(["-c", &records.to_string()])
        .args(["-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"])
        .output()
        .expect("run kcat");
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "kcat failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(secs)
}

/// The CPU seconds (user and system) process `pid` has used, from `/proc`; 0 where
/// there is no `/proc`.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|t| t.parse::<f64>().ok()).sum());
    // USER_HZ: 100 ticks a second on every mainstream Linux.
    ticks / 100.0
}

/// Appends `bytes` to a new file in `requests` equal writes, each followed by
/// `fdatasync`; returns the seconds it took.
fn floor(path: &Path, bytes: u64, requests: u64) -> f64 {
    let chunk = vec![0x61u8; (bytes / requests).max(1) as usize];
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("create the floor file");
    let start = Instant::now();
    for _ in 0..requests {
        f.write_all(&chunk).expect("write");
        f.sync_data().expect("fdatasync");
    }
    start.elapsed().as_secs_f64()
}
