//! Time to acknowledge deleting a topic, against a naive synchronous delete of the same
//! data (remove every file, sync the directory, then reply), on the same machine in one
//! run, for topics of 1, 16 and 64 partitions holding 1 MiB, 64 MiB and (opt-in) 1 GiB.
//!
//! The acknowledgement is one journal append and one fsync, whatever the topic holds;
//! the naive delete's cost grows with the data it frees. Physical removal still happens,
//! in the background, and its time is shown too.
//!
//! ```sh
//! cargo bench -p broker-fs --bench delete_ack                          # 1 and 64 MiB
//! BROKER_FS_BENCH_1GIB=1 cargo bench -p broker-fs --bench delete_ack   # adds 1 GiB
//! BROKER_FS_BENCH_MIB=0,16 BROKER_FS_BENCH_PARTITIONS=64 cargo bench -p broker-fs --bench delete_ack
//! ```
//!
//! `BROKER_FS_BENCH_DIR` chooses where the data goes (default: the temp directory),
//! `BROKER_FS_BENCH_REPS` how many runs per case (default 5; 3 for 1 GiB). Each run
//! fills a fresh topic, so every measurement starts from the same state; the median and
//! the minimum are shown, because a shared disk is noisy.

use broker_core::{Command, ProduceRecord, Reply, TopicSettings};
use broker_fs::{Driver, DriverOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The largest record: a quarter of the core's default record limit.
const MAX_RECORD: usize = 256 << 10;
/// The most bytes one produce sends to one partition.
const MAX_PARTITION_BATCH: usize = 4 << 20;

fn list(var: &str, default: &[u64]) -> Vec<u64> {
    match std::env::var(var) {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

fn main() {
    let mut sizes = list("BROKER_FS_BENCH_MIB", &[1, 64]);
    if std::env::var_os("BROKER_FS_BENCH_1GIB").is_some() && !sizes.contains(&1024) {
        sizes.push(1024);
    }
    let partition_counts = list("BROKER_FS_BENCH_PARTITIONS", &[1, 16, 64]);
    let reps: Option<usize> = std::env::var("BROKER_FS_BENCH_REPS").ok().and_then(|v| v.parse().ok());
    let base = std::env::var_os("BROKER_FS_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("broker-fs-bench-{}", std::process::id()));

    println!("delete acknowledgement against a naive synchronous delete; data in {}", base.display());
    println!(
        "{:>10}  {:>10}  {:>4}  {:>22}  {:>22}  {:>10}  {:>18}",
        "partitions",
        "topic size",
        "runs",
        "ack: median (min)",
        "naive: median (min)",
        "naive/ack",
        "background removal"
    );
    let mut rows = Vec::new();
    for &partitions in &partition_counts {
        let partitions = partitions.clamp(1, 1024) as u32;
        for &mib in &sizes {
            let reps = reps.unwrap_or(if mib >= 1024 { 3 } else { 5 }).max(1);
            let mut ack = Vec::new();
            let mut naive = Vec::new();
            let mut background = Vec::new();
            for rep in 0..reps {
                let dir = root.join(format!("{partitions}-{mib}-{rep}"));
                let (a, b) = broker_delete(&dir, partitions, mib << 20);
                ack.push(a);
                background.push(b);
                naive.push(naive_delete(&dir.join("naive"), partitions, mib << 20));
                let _ = std::fs::remove_dir_all(&dir);
            }
            let (a, n, b) = (median(&mut ack), median(&mut naive), median(&mut background));
            let (amin, nmin) = (ack[0], naive[0]);
            rows.push((partitions, mib, a, n));
            println!(
                "{:>10}  {:>6} MiB  {:>4}  {:>22}  {:>22}  {:>9.0}x  {:>18}",
                partitions,
                mib,
                reps,
                format!("{} ({})", fmt(a), fmt(amin)),
                format!("{} ({})", fmt(n), fmt(nmin)),
                n.as_secs_f64() / a.as_secs_f64(),
                fmt(b)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
    for &partitions in &partition_counts {
        let of = |p: u64| rows.iter().filter(move |r| u64::from(r.0) == p);
        if let (Some(first), Some(last)) = (of(partitions).next(), of(partitions).next_back()) {
            println!(
                "{partitions} partition(s), {} MiB -> {} MiB: the ack's median went {:.2}x, the naive delete's {:.2}x",
                first.1,
                last.1,
                ratio(last.2, first.2),
                ratio(last.3, first.3)
            );
        }
    }
}

/// Fills a topic through the broker, then times the delete's acknowledgement and the
/// background removal that follows.
fn broker_delete(dir: &Path, partitions: u32, bytes: u64) -> (Duration, Duration) {
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
    fill(&mut d, "victim", partitions, bytes);
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
fn naive_delete(dir: &Path, partitions: u32, bytes: u64) -> Duration {
    let files = {
        let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
        fill(&mut d, "victim", partitions, bytes);
        let Reply::Topics(t) = d.request(Command::ListTopics).expect("list") else { panic!() };
        let id = t[0].id;
        (0..partitions)
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

/// Creates `name` with `partitions` partitions and produces `bytes` of records, spread
/// evenly (keyless records go round-robin), a few MiB per partition per produce.
fn fill(d: &mut Driver, name: &str, partitions: u32, bytes: u64) {
    let settings = TopicSettings::default();
    d.request(Command::CreateTopic { name: name.into(), partitions, settings }).expect("create");
    let record = (bytes as usize / partitions as usize).clamp(1, MAX_RECORD);
    let per_produce = partitions as usize * (MAX_PARTITION_BATCH / record).max(1);
    let value = vec![0xab_u8; record];
    let mut left = (bytes as usize).div_ceil(record);
    while left > 0 {
        let n = left.min(per_produce);
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
