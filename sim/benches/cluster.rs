//! The cluster in simulated time: how long a delete takes to be acknowledged, how long
//! until every node refuses writes to the deleted incarnation, and what the fence costs,
//! against the same runs with the fence switched off (the planted bug
//! `cluster-skip-fence`, hence the feature).
//!
//! ```sh
//! cargo bench -p broker-sim --features planted-bugs --bench cluster
//! BENCH_CLUSTER_SEEDS=200 cargo bench -p broker-sim --features planted-bugs --bench cluster
//! ```
//!
//! Each row runs seeds `0..BENCH_CLUSTER_SEEDS` (default 100) of one fixed workload:
//! 4 clients with 2 requests in flight each, produce-heavy with creates and deletes of 3
//! names, on 3 nodes over a store 5 to 20 ms away each way, with no faults. Latencies
//! are simulated milliseconds (median and 99th percentile over every seed's samples);
//! throughput is commands answered per simulated second, and events per wall second is
//! the simulator's own speed. The run without the fence is not linearizable (its
//! violations are counted, not failed); the fenced runs must have none.

use broker_core::planted::Bug;
use broker_sim::cluster::ClusterParams;
use broker_sim::runner::{run, RunOptions};
use broker_sim::swarm::{CommandMix, SwarmParams};
use std::time::Instant;

fn env_or<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn params(seed: u64, nodes: u32, tail_every_ms: u64) -> SwarmParams {
    let p = SwarmParams::draw(seed);
    SwarmParams {
        clients: 4,
        depth: 2,
        commands: 600,
        names: 3,
        max_partitions: 2,
        grace_choices: vec![0],
        mix: CommandMix { create: 2, delete: 2, produce: 10, fetch: 4, list: 1, describe: 1, groups: 0, producers: 0 },
        keyed: 0.5,
        max_batch: 4,
        value_pad: 48,
        big_batch: 0.0,
        think_us: 2_000,
        cluster: Some(ClusterParams {
            tail_every_ms,
            compact_after_entries: 200,
            gather_ms: 0,
            request_timeout_ms: 30_000,
            ..ClusterParams::fault_free(nodes, (5_000, 20_000))
        }),
        ..p
    }
}

/// Median and 99th percentile, in milliseconds.
fn quantiles(mut us: Vec<u64>) -> (f64, f64) {
    if us.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    us.sort_unstable();
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    (at(0.5), at(0.99))
}

struct Row {
    delete_ack: Vec<u64>,
    fanout: Vec<u64>,
    produce: Vec<u64>,
    replies: u64,
    busy_us: u64,
    store_ops: u64,
    journal_lists: u64,
    events: u64,
    wall: f64,
    violations: usize,
}

fn measure(seeds: u64, nodes: u32, tail_every_ms: u64, bug: Option<Bug>) -> Row {
    let mut row = Row {
        delete_ack: Vec::new(),
        fanout: Vec::new(),
        produce: Vec::new(),
        replies: 0,
        busy_us: 0,
        store_ops: 0,
        journal_lists: 0,
        events: 0,
        wall: 0.0,
        violations: 0,
    };
    let start = Instant::now();
    for seed in 0..seeds {
        let opts = RunOptions { seed, bug, params: Some(params(seed, nodes, tail_every_ms)), ..RunOptions::default() };
        let r = run(&opts);
        let m = r.cluster.expect("a cluster run");
        row.delete_ack.extend(m.delete_ack_us);
        row.fanout.extend(m.fanout_us);
        row.produce.extend(m.produce_us);
        row.replies += r.stats.replies;
        row.busy_us += m.last_reply.as_micros();
        row.store_ops += r.stats.storage_ops;
        row.journal_lists += m.journal_lists;
        row.events += r.events;
        row.violations += r.violations.len();
    }
    row.wall = start.elapsed().as_secs_f64();
    row
}

fn main() {
    // BROKER_BENCH_SMOKE: tiny sizes, to show that it runs to the end.
    let smoke = std::env::var_os("BROKER_BENCH_SMOKE").is_some();
    let seeds: u64 = env_or("BENCH_CLUSTER_SEEDS", if smoke { 3 } else { 100 });
    println!("cluster: seeds 0..{seeds}, 600 commands each, store 5-20 ms each way, no faults; times in simulated ms");
    println!(
        "{:<28} {:>13} {:>15} {:>13} {:>9} {:>10} {:>10} {:>10} {:>6}",
        "configuration", "delete ack", "all refuse", "produce", "cmds/s", "store/cmd", "lists/cmd", "events/s", "viol."
    );
    let configs: [(&str, u32, u64, Option<Bug>); 5] = [
        ("1 node, fenced", 1, 100, None),
        ("3 nodes, fenced", 3, 100, None),
        ("3 nodes, tail every 1 s", 3, 1_000, None),
        ("5 nodes, fenced", 5, 100, None),
        ("3 nodes, no fence (unsafe)", 3, 100, Some(Bug::ClusterSkipFence)),
    ];
    let mut throughput = Vec::new();
    for (name, nodes, tail, bug) in configs {
        let r = measure(seeds, nodes, tail, bug);
        if bug.is_none() {
            assert_eq!(r.violations, 0, "{name}: a fenced run broke an invariant");
        }
        let (d50, d99) = quantiles(r.delete_ack);
        let (f50, f99) = quantiles(r.fanout);
        let (p50, p99) = quantiles(r.produce);
        let cmds = r.replies as f64 / (r.busy_us as f64 / 1e6);
        throughput.push(cmds);
        println!(
            "{:<28} {:>5.1} / {:>5.1} {:>6.1} / {:>6.1} {:>5.1} / {:>5.1} {:>9.1} {:>10.2} {:>10.2} {:>10.0} {:>6}",
            name,
            d50,
            d99,
            f50,
            f99,
            p50,
            p99,
            cmds,
            r.store_ops as f64 / r.replies as f64,
            r.journal_lists as f64 / r.replies as f64,
            r.events as f64 / r.wall,
            r.violations
        );
    }
    println!(
        "(median / p99) fence cost on 3 nodes: fenced throughput is {:.2} of the unfenced",
        throughput[1] / throughput[4]
    );
}
