//! Simulator throughput: simulated events per second, seeds per second and the
//! time-compression ratio (simulated time over wall time) of the default swarm, on one
//! thread and on two, in one run. The same figures `broker-sim run` prints.
//!
//! ```sh
//! cargo bench -p broker-sim --bench campaign
//! BENCH_SIM_SEEDS=5000 BENCH_REPS=1 cargo bench -p broker-sim --bench campaign
//! ```
//!
//! Each configuration runs the seeds `0..BENCH_SIM_SEEDS` (default 1,000), the same
//! campaign as `cargo run --release -p broker-sim -- run --seeds 1000 --jobs N`,
//! `BENCH_REPS` times (default 3), alternating; the run with the median wall time is
//! shown. A campaign with any violation fails the benchmark.

use broker_sim::campaign::{run_campaign, CampaignOptions, Summary};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU time of this process so far (user + system, every thread), from `/proc/self/stat`
/// in clock ticks of 10 ms (Linux's `USER_HZ`); `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3 of the man page, utime 14, stime 15.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// One campaign: its summary, wall time and CPU time.
struct Run {
    summary: Summary,
    wall: Duration,
    cpu: Option<Duration>,
}

fn campaign(seeds: u64, jobs: usize) -> Run {
    let opts = CampaignOptions { from: 0, seeds, jobs, ..CampaignOptions::default() };
    let cpu = cpu_time();
    let start = Instant::now();
    let summary = run_campaign(&opts, &|_| {});
    let wall = start.elapsed();
    let cpu = cpu.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
    assert_eq!(summary.violation_count(), 0, "violations: {:?}", summary.failures.first());
    Run { summary, wall, cpu }
}

fn main() {
    // BROKER_BENCH_SMOKE: tiny sizes and one run, to show that it runs to the end.
    let smoke = std::env::var_os("BROKER_BENCH_SMOKE").is_some();
    let seeds: u64 = env_or("BENCH_SIM_SEEDS", if smoke { 20 } else { 1_000 });
    let reps: usize = env_or("BENCH_REPS", if smoke { 1 } else { 3 }).max(1);
    let jobs = [1usize, 2];
    let mut runs: Vec<Vec<Run>> = jobs.iter().map(|_| Vec::new()).collect();
    for _ in 0..reps {
        for (i, &j) in jobs.iter().enumerate() {
            runs[i].push(campaign(seeds, j));
        }
    }
    println!("simulator: default swarm, seeds 0..{seeds}, {reps} run(s) per row, median wall time");
    println!(
        "{:>4}  {:>9}  {:>7}  {:>8}  {:>10}  {:>9}  {:>8}  {:>8}  {:>13}  {:>12}",
        "jobs", "events", "wall", "cpu", "events/s", "seeds/s", "sim/wall", "cpu use", "events/cpu-s", "seeds/cpu-h"
    );
    let mut rates = Vec::new();
    for (i, &j) in jobs.iter().enumerate() {
        runs[i].sort_by_key(|r| r.wall);
        let r = &runs[i][runs[i].len() / 2];
        let (s, wall) = (&r.summary, r.wall.as_secs_f64());
        let cpu = r.cpu.map_or(f64::NAN, |c| c.as_secs_f64());
        let sim = s.sim_time.as_micros() as f64 / 1e6;
        let events = s.events as f64 / wall;
        rates.push(s.seeds as f64 / wall);
        println!(
            "{:>4}  {:>9}  {:>6.2}s  {:>7.2}s  {:>10.0}  {:>9.1}  {:>7.0}x  {:>7.2}x  {:>13.0}  {:>12.0}",
            j,
            s.events,
            wall,
            cpu,
            events,
            s.seeds as f64 / wall,
            sim / wall,
            cpu / wall,
            s.events as f64 / cpu,
            s.seeds as f64 / cpu * 3600.0
        );
    }
    println!(
        "speed-up of 2 jobs over 1: {:.2}x (cpu use: cores busy on average; below 2 when other work shares the machine)",
        rates[1] / rates[0]
    );
}
