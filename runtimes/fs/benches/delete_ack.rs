//! Time to acknowledge deleting a topic, against a naive synchronous delete of the same
//! data (remove every file, sync the directory, then reply), on the same machine in one
//! run, for topics of 1, 16 and 64 partitions holding 1 MiB, 64 MiB and (opt-in) 1 GiB.
//!
//! The acknowledgement is one journal append and one fsync, whatever the topic holds;
//! the naive delete's cost grows with the data it frees. Physical removal still happens,
//! in the background, and its time is shown too. With the default grace delay of 0 it
//! starts the moment the tombstone is durable, and its unlinks compete for the CPU with
//! the thread that hands out the acknowledgement; the second broker column deletes a
//! topic with a grace delay of 10 s, so the acknowledgement is the logical step alone.
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
//! the minimum are shown, because a shared disk is noisy. Before each timed delete,
//! `sync(1)` runs and the bench waits until the disk has gone idle, for both sides alike.

mod common;

use broker_core::{batch_bytes, Command, ProduceRecord, Reply, TopicSettings};
use broker_fs::{Driver, DriverOptions};
use common::{fmt, median, settle};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The largest record: a quarter of the core's default record limit.
const MAX_RECORD: usize = 256 << 10;
/// The grace delay of the second broker-side measurement: physical removal does not
/// start at the acknowledgement, so the acknowledgement is the logical step alone.
const GRACE_MS: u64 = 10_000;
fn list(var: &str, full: &[u64], small: &[u64]) -> Vec<u64> {
    match std::env::var(var) {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) if common::smoke() => small.to_vec(),
        Err(_) => full.to_vec(),
    }
}

fn main() {
    // The smoke run's 32 MiB over 16 partitions takes two produces at the batch limit.
    let mut sizes = list("BROKER_FS_BENCH_MIB", &[1, 64], &[1, 32]);
    if std::env::var_os("BROKER_FS_BENCH_1GIB").is_some() && !sizes.contains(&1024) {
        sizes.push(1024);
    }
    let partition_counts = list("BROKER_FS_BENCH_PARTITIONS", &[1, 16, 64], &[1, 16]);
    let reps: Option<usize> = std::env::var("BROKER_FS_BENCH_REPS").ok().and_then(|v| v.parse().ok());
    let reps = reps.or(common::smoke().then_some(1));
    let base = std::env::var_os("BROKER_FS_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("broker-fs-bench-{}", std::process::id()));

    println!("delete acknowledgement against a naive synchronous delete; data in {}", base.display());
    println!(
        "{:>10}  {:>10}  {:>4}  {:>20}  {:>20}  {:>20}  {:>9}  {:>11}  {:>10}",
        "partitions",
        "topic size",
        "runs",
        "ack: median (min)",
        "ack, grace 10 s",
        "naive: median (min)",
        "naive/ack",
        "naive/grace",
        "background"
    );
    let mut rows = Vec::new();
    for &partitions in &partition_counts {
        let partitions = partitions.clamp(1, 1024) as u32;
        for &mib in &sizes {
            let reps = reps.unwrap_or(if mib >= 1024 { 3 } else { 5 }).max(1);
            let (mut ack, mut graced, mut naive, mut background) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for rep in 0..reps {
                let dir = root.join(format!("{partitions}-{mib}-{rep}"));
                let (a, b) = broker_delete(&dir, partitions, mib << 20, 0);
                ack.push(a);
                background.push(b.unwrap_or_default());
                graced.push(broker_delete(&dir.join("graced"), partitions, mib << 20, GRACE_MS).0);
                naive.push(naive_delete(&dir.join("naive"), partitions, mib << 20));
                let _ = std::fs::remove_dir_all(&dir);
            }
            let (a, g, n, b) = (median(&mut ack), median(&mut graced), median(&mut naive), median(&mut background));
            let (amin, gmin, nmin) = (ack[0], graced[0], naive[0]);
            rows.push((partitions, mib, a, n, g));
            println!(
                "{:>10}  {:>6} MiB  {:>4}  {:>20}  {:>20}  {:>20}  {:>8.0}x  {:>10.0}x  {:>10}",
                partitions,
                mib,
                reps,
                format!("{} ({})", fmt(a), fmt(amin)),
                format!("{} ({})", fmt(g), fmt(gmin)),
                format!("{} ({})", fmt(n), fmt(nmin)),
                n.as_secs_f64() / a.as_secs_f64(),
                n.as_secs_f64() / g.as_secs_f64(),
                fmt(b)
            );
        }
    }
    let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
    for &partitions in &partition_counts {
        let of = |p: u64| rows.iter().filter(move |r| u64::from(r.0) == p);
        if let (Some(first), Some(last)) = (of(partitions).next(), of(partitions).next_back()) {
            println!(
                "{partitions} partition(s), {} MiB -> {} MiB: the ack's median went {:.2}x ({:.2}x with a grace \
                 delay), the naive delete's {:.2}x",
                first.1,
                last.1,
                ratio(last.2, first.2),
                ratio(last.4, first.4),
                ratio(last.3, first.3)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Fills a topic (with a deletion grace delay of `grace_ms`) through the broker, then
/// times the delete's acknowledgement and, without a grace delay, the background
/// removal that follows.
fn broker_delete(dir: &Path, partitions: u32, bytes: u64, grace_ms: u64) -> (Duration, Option<Duration>) {
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
    fill(&mut d, "victim", partitions, bytes, grace_ms);
    settle();
    let start = Instant::now();
    let reply = d.request(Command::DeleteTopic { name: "victim".into() }).expect("delete");
    let ack = start.elapsed();
    let Reply::DeleteAccepted { topic } = reply else { panic!("{reply:?}") };
    if grace_ms > 0 {
        // The removal would start after the grace delay; the directory goes instead.
        return (ack, None);
    }
    d.wait_deletion(topic, None).expect("removal");
    (ack, Some(start.elapsed()))
}

/// Fills a topic the same way, closes the broker, then deletes naively: remove every
/// file, make the removals durable, then reply.
fn naive_delete(dir: &Path, partitions: u32, bytes: u64) -> Duration {
    let files = {
        let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("open");
        fill(&mut d, "victim", partitions, bytes, 0);
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
/// evenly (keyless records go round-robin), as many records per produce as the broker
/// takes in one (its batch limit in bytes as stored, and in records), as `produce` does.
fn fill(d: &mut Driver, name: &str, partitions: u32, bytes: u64, grace_ms: u64) {
    let settings = TopicSettings { deletion_grace_ms: grace_ms };
    d.request(Command::CreateTopic { name: name.into(), partitions, settings }).expect("create");
    let record = (bytes as usize / partitions as usize).clamp(1, MAX_RECORD);
    let value = vec![0xab_u8; record];
    let one = ProduceRecord { key: None, value: value.clone().into() };
    let (header, config) = (batch_bytes([]), d.broker().config());
    let fit = (config.batch_bytes_limit() - header) / (batch_bytes([&one]) - header);
    let per_produce = usize::try_from(fit).unwrap_or(usize::MAX).min(config.max_batch_records).max(1);
    let mut left = (bytes as usize).div_ceil(record);
    while left > 0 {
        let n = left.min(per_produce);
        let batch = (0..n).map(|_| ProduceRecord { key: None, value: value.clone().into() }).collect();
        d.request(Command::Produce { topic: name.into(), partition: None, records: batch }).expect("produce");
        left -= n;
    }
}
