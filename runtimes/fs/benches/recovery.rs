//! Recovery cost on a real data directory: the time from opening it to serving, for
//! 10, 1,000 and 10,000 live topics, for a journal that has seen 1,000,000 create/delete
//! cycles (compaction keeps it close to the live-only case), and with 1,000 pending
//! deletions (serving must not wait for their physical removal).
//!
//! ```sh
//! cargo bench -p broker-fs --bench recovery
//! BROKER_FS_BENCH_CYCLES=100000 BROKER_FS_BENCH_REPS=3 cargo bench -p broker-fs --bench recovery
//! ```
//!
//! The never-compacted directory has `BROKER_FS_BENCH_UNCOMPACTED_CYCLES` cycles (default
//! 20,000): each journal commit takes about 4 KiB, so a million would be gigabytes.
//!
//! Each directory is generated once in memory by the core and its real storage executor
//! (`SyncDriver` over `MemFs`: the same journal and log bytes the real runtime writes),
//! then written to a real directory before every run, synced, and recovered with the
//! real runtime (`Driver::open`, which returns once the broker serves and the directory
//! has been checked for stray logs). The page cache is warm: the files were just written.
//! The runs take turns across the directories, `BROKER_FS_BENCH_REPS` rounds (default 5).
//! Every topic has 1 partition; live topics hold one 100-byte record each, the topics
//! pending deletion 256 KiB each.

mod common;

use broker_core::{Command, Config, MemFs, Phase, ProduceRecord, SyncDriver, TopicSettings, JOURNAL_FILE};
use broker_fs::{Driver, DriverOptions};
use common::{fmt, fmt_bytes, median, setting};
use std::path::Path;
use std::time::{Duration, Instant};

/// One directory to recover.
struct Case {
    label: String,
    fs: MemFs,
    /// Live topics it holds.
    live: usize,
    /// Pending deletions it holds.
    pending: usize,
    /// How long generating it took.
    generated_in: Duration,
}

fn create(d: &mut SyncDriver<MemFs>, name: &str, grace_ms: u64) {
    let settings = TopicSettings { deletion_grace_ms: grace_ms };
    d.request(Command::CreateTopic { name: name.into(), partitions: 1, settings }).expect("create");
}

fn produce(d: &mut SyncDriver<MemFs>, name: &str, bytes: usize) {
    let records = vec![ProduceRecord { key: None, value: vec![0x42; bytes].into() }];
    d.request(Command::Produce { topic: name.into(), partition: None, records }).expect("produce");
}

/// `n` live topics of one partition holding one 100-byte record each.
fn live_topics(d: &mut SyncDriver<MemFs>, n: usize) {
    for i in 0..n {
        let name = format!("live-{i}");
        create(d, &name, 0);
        produce(d, &name, 100);
    }
}

fn live_only(n: usize) -> Case {
    let start = Instant::now();
    let mut d = SyncDriver::start(Config::default(), MemFs::new());
    live_topics(&mut d, n);
    Case { label: format!("{n} live topics"), fs: d.crash(), live: n, pending: 0, generated_in: start.elapsed() }
}

/// 10 live topics, then `cycles` creations and deletions of one more topic.
fn churn(cycles: u64, config: Config, label: &str) -> Case {
    let start = Instant::now();
    let mut d = SyncDriver::start(config, MemFs::new());
    live_topics(&mut d, 10);
    for _ in 0..cycles {
        create(&mut d, "churn", 0);
        d.request(Command::DeleteTopic { name: "churn".into() }).expect("delete");
    }
    assert!(d.broker().pending_deletions().is_empty());
    Case { label: label.into(), fs: d.crash(), live: 10, pending: 0, generated_in: start.elapsed() }
}

/// 10 live topics and `n` topics of 256 KiB each whose deletion is acknowledged (the
/// tombstone is durable) but whose logs are not yet removed: they have a grace delay of
/// 1 ms, and the process stops before it runs out.
fn pending(n: usize) -> Case {
    let start = Instant::now();
    let mut d = SyncDriver::start(Config::default(), MemFs::new());
    live_topics(&mut d, 10);
    for i in 0..n {
        let name = format!("doomed-{i}");
        create(&mut d, &name, 1);
        produce(&mut d, &name, 256 << 10);
    }
    for i in 0..n {
        d.request(Command::DeleteTopic { name: format!("doomed-{i}") }).expect("delete");
    }
    assert_eq!(d.broker().pending_deletions().len(), n);
    let label = format!("10 live + {n} pending deletions");
    Case { label, fs: d.crash(), live: 10, pending: n, generated_in: start.elapsed() }
}

/// Recovers `dir`: the time until the broker serves, and until every pending deletion
/// has finished.
fn recover(dir: &Path, case: &Case) -> (Duration, Duration) {
    let start = Instant::now();
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).expect("recover");
    let serving = start.elapsed();
    assert_eq!(d.broker().phase(), Phase::Serving);
    assert_eq!(d.live_topics().len(), case.live, "{}", case.label);
    assert!(d.pending_deletions().len() <= case.pending);
    assert!(d.wait_quiescent(None).expect("removal"));
    (serving, start.elapsed())
}

fn main() {
    let cycles: u64 = setting("BROKER_FS_BENCH_CYCLES", 1_000_000, 2_000);
    // Every journal commit takes about 4 KiB (two copies a block apart), so a journal
    // never compacted grows about 12 KiB per cycle: this row gets fewer cycles.
    let uncompacted_cycles: u64 = setting("BROKER_FS_BENCH_UNCOMPACTED_CYCLES", 20_000, 500);
    let reps: usize = setting("BROKER_FS_BENCH_REPS", 5, 1).max(1);
    let root = common::bench_root("recovery");
    let uncompacted = Config { compaction_min_records: u64::MAX, compaction_min_bytes: u64::MAX, ..Config::default() };
    println!("generating the directories in memory ({cycles} create/delete cycles)...");
    let cases = [
        live_only(10),
        live_only(1_000),
        live_only(10_000),
        churn(cycles, Config::default(), &format!("10 live, {cycles} cycles")),
        churn(uncompacted_cycles, uncompacted, &format!("10 live, {uncompacted_cycles} cycles, never compacted")),
        pending(1_000),
    ];
    println!(
        "recovery to serving, {reps} run(s) per directory, median (min); warm page cache; data in {}",
        root.display()
    );
    println!(
        "{:<42} {:>8} {:>11} {:>22} {:>10} {:>22} {:>11}",
        "directory", "files", "journal", "to serving", "vs 10 live", "all deletions done", "generated in"
    );
    // The runs take turns across directories, so a burst of load elsewhere on the
    // machine lands on every directory alike instead of on one.
    let dir = root.join("data");
    let mut serving: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    let mut done: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for _ in 0..reps {
        for (i, case) in cases.iter().enumerate() {
            common::materialize(&case.fs, &dir);
            let (s, d) = recover(&dir, case);
            serving[i].push(s);
            done[i].push(d);
        }
    }
    let mut base = None;
    for (i, case) in cases.iter().enumerate() {
        let (serving, done) = (&mut serving[i], &mut done[i]);
        let (s, d) = (median(serving), median(done));
        let base = *base.get_or_insert(s);
        let journal = case.fs.file(JOURNAL_FILE).map_or(0, <[u8]>::len) as u64;
        println!(
            "{:<42} {:>8} {:>11} {:>22} {:>9.2}x {:>22} {:>11}",
            case.label,
            case.fs.names().len(),
            fmt_bytes(journal),
            format!("{} ({})", fmt(s), fmt(serving[0])),
            s.as_secs_f64() / base.as_secs_f64(),
            if case.pending > 0 { format!("{} ({})", fmt(d), fmt(done[0])) } else { "-".into() },
            fmt(case.generated_in),
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
