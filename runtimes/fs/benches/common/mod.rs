//! Helpers shared by the broker-fs benchmarks.
#![allow(dead_code)]

use broker_core::MemFs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An environment variable parsed as `T`, or `default`.
pub fn env_or<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Whether `BROKER_BENCH_SMOKE` is set: tiny sizes and one run, to show that the
/// benchmark runs to the end and prints its table (`.ci/bench-smoke`), never how fast.
pub fn smoke() -> bool {
    std::env::var_os("BROKER_BENCH_SMOKE").is_some()
}

/// An environment variable parsed as `T`, or `full` (`small` in a [`smoke`] run).
pub fn setting<T: std::str::FromStr>(var: &str, full: T, small: T) -> T {
    env_or(var, if smoke() { small } else { full })
}

/// A fresh directory for this benchmark under `BROKER_FS_BENCH_DIR` (default: the temp
/// directory), named after the benchmark and the process.
pub fn bench_root(name: &str) -> PathBuf {
    let base = std::env::var_os("BROKER_FS_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("broker-fs-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("create the bench directory");
    root
}

/// Writes every file of an in-memory disk into `dir` (created empty), as the same
/// executor would have left them on a real disk, then makes it all durable.
pub fn materialize(fs: &MemFs, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create the data directory");
    for name in fs.names() {
        std::fs::write(dir.join(&name), fs.file(&name).unwrap_or_default()).expect("write a file");
    }
    settle();
}

/// A measurement starts from a quiet disk: everything written so far is on disk
/// (`sync(1)` where there is one), and the disk has gone idle: no write has completed on
/// any block device for 500 ms (from `/proc/diskstats`; at most 15 s, and a plain
/// 300 ms pause where there is no such file). After a big fill the virtual disk keeps
/// writing for a few seconds after `sync` returns, and an fsync issued meanwhile waits.
pub fn settle() {
    if smoke() {
        return;
    }
    let _ = std::process::Command::new("sync").status();
    let Some(mut last) = writes_completed() else {
        return std::thread::sleep(Duration::from_millis(300));
    };
    let start = std::time::Instant::now();
    let mut quiet_since = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
        let now = writes_completed().unwrap_or(last);
        if now != last {
            last = now;
            quiet_since = std::time::Instant::now();
        } else if quiet_since.elapsed() >= Duration::from_millis(500) {
            return;
        }
    }
}

/// Writes completed on every block device, summed (`/proc/diskstats`, field 8).
fn writes_completed() -> Option<u64> {
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    Some(stats.lines().filter_map(|l| l.split_whitespace().nth(7)?.parse::<u64>().ok()).sum())
}

/// The median (sorts `v`).
pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median of rates (sorts `v`).
pub fn median_f64(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A duration with a unit that suits it.
pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A byte count with a unit that suits it.
pub fn fmt_bytes(n: u64) -> String {
    if n < 1 << 10 {
        format!("{n} B")
    } else if n < 1 << 20 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    }
}
