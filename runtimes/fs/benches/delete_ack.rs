//! Time to acknowledge deleting a topic of 64 partitions, against a naive synchronous
//! delete of the same data (remove every file, sync the directory, then reply), on the
//! same machine in one run, for growing topic sizes.
//!
//! The acknowledgement is one journal append and one fsync, whatever the topic holds;
//! the naive delete's cost grows with the data it frees. Physical removal still happens,
//! in the background, and its time is shown too.
//!
//! ```sh
//! cargo bench -p broker-fs --bench delete_ack                    # empty, 8 and 64 MiB
//! BROKER_FS_BENCH_1GIB=1 cargo bench -p broker-fs --bench delete_ack   # adds 1 GiB
//! BROKER_FS_BENCH_MIB=16,256 cargo bench -p broker-fs --bench delete_ack
//! ```
//!
//! `BROKER_FS_BENCH_DIR` chooses where the data goes (default: the temp directory),
//! `BROKER_FS_BENCH_REPS` how many runs per size (default 5). Each run fills a fresh
//! topic, so every measurement starts from the same state; the median and the minimum
//! are shown, because a shared disk is noisy.

use broker_core::{Command, ProduceRecord, Reply, TopicSettings};
use broker_fs::{Driver, DriverOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 64;
/// Record size: a quarter of the core's default record limit.
const RECORD: usize = 256 << 10;

fn main() {
    let mut sizes: Vec<u64> = match std::env::var("BROKER_FS_BENCH_MIB") {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![0, 8, 64],
    };
    if std::env::var_os("BROKER_FS_BENCH_1GIB").is_some() && !sizes.contains(&1024) {
        sizes.push(1024);
    }
    let reps: usize = std::env::var("BROKER_FS_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let base = std::env::var_os("BROKER_FS_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("broker-fs-bench-{}", std::process::id()));

    println!("delete of a topic with {PARTITIONS} partitions, {reps} run(s) per size; data in {}", base.display());
    println!(
        "{:>10}  {:>22}  {:>22}  {:>10}  {:>18}",
        "topic size", "ack: median (min)", "naive: median (min)", "naive/ack", "background removal"
    );
    let mut rows = Vec::new();
    for &mib in &sizes {
        let mut ack = Vec::new();
        let mut naive = Vec::new();
        let mut background = Vec::new();
        for rep in 0..reps {
            let dir = root.join(format!("{mib}-{rep}"));
            let (a, b) = broker_delete(&dir, mib << 20);
            ack.push(a);
            background.push(b);
            naive.push(naive_delete(&dir.join("naive"), mib << 20));
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (a, n, b) = (median(&mut ack), median(&mut naive), median(&mut background));
        let (amin, nmin) = (ack[0], naive[0]);
        rows.push((mib, a, n));
        println!(
            "{:>6} MiB  {:>22}  {:>22}  {:>9.0}x  {:>18}",
            mib,
            format!("{} ({})", fmt(a), fmt(amin)),
            format!("{} ({})", fmt(n), fmt(nmin)),
            n.as_secs_f64() / a.as_secs_f64(),
            fmt(b)
        );
    }
    let _ = std::fs::remove_dir_all(&root);
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
        println!(
            "from {} MiB to {} MiB: the ack's median went {:.2}x, the naive delete's {:.2}x",
            first.0,
            last.0,
            ratio(last.1, first.1),
            ratio(last.2, first.2)
        );
    }
}

/// Fills a topic through the broker, then times the delete's acknowledgement and the
/// background removal that follows.
fn broker_delete(dir: &Path, bytes: u64) -> (Duration, Duration) {
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
    fill(&mut d, "victim", bytes);
    settle();
    let start = Instant::now();
    let reply = d.request(Command::DeleteTopic { name: "victim".into() }).expect("delete");
    let ack = start.elapsed();
    let Reply::DeleteAccepted { topic } = reply else { panic!("{reply:?}") };
    d.wait_deletion(topic).expect("removal");
    (ack, start.elapsed())
}

/// Fills a topic the same way, closes the broker, then deletes naively: remove every
/// file, make the removals durable, then reply.
fn naive_delete(dir: &Path, bytes: u64) -> Duration {
    let files = {
        let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
        fill(&mut d, "victim", bytes);
        let Reply::Topics(t) = d.request(Command::ListTopics).expect("list") else { panic!() };
        let id = t[0].id;
        (0..PARTITIONS)
            .map(|p| dir.join(broker_core::LogId { topic: id, partition: p }.file_name()))
            .collect::<Vec<_>>()
    };
    settle();
    let start = Instant::now();
    for f in &files {
        std::fs::remove_file(f).expect("remove");
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).expect("sync dir");
    start.elapsed()
}

/// Creates `name` with 64 partitions and produces `bytes` of records, spread evenly.
fn fill(d: &mut Driver, name: &str, bytes: u64) {
    let settings = TopicSettings::default();
    d.request(Command::CreateTopic { name: name.into(), partitions: PARTITIONS, settings }).expect("create");
    let records = (bytes as usize).div_ceil(RECORD);
    let value = vec![0xab_u8; RECORD];
    // 64 records per produce: one per partition (keyless records go round-robin).
    let mut left = records;
    while left > 0 {
        let n = left.min(PARTITIONS as usize);
        let batch = (0..n).map(|_| ProduceRecord { key: None, value: value.clone() }).collect();
        d.request(Command::Produce { topic: name.into(), records: batch }).expect("produce");
        left -= n;
    }
}

/// Both measurements start from a quiet disk: everything the fill wrote is on disk
/// (`sync(1)` where there is one), and the disk has had a moment to go idle.
fn settle() {
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(Duration::from_millis(300));
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}
