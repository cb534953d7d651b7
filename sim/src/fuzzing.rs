//! The bodies of the cargo-fuzz targets `sim_seed` and `cluster_seed`: the fuzzer
//! chooses the seed and the parameters of a short simulation (one broker on the
//! simulated disk, or a cluster over the simulated store), and every checker must pass.

use crate::cluster::ClusterParams;
use crate::run::RunOptions;
use crate::runner::run;
use crate::swarm::SwarmParams;

/// Reads little-endian fields from the fuzzer's bytes, with zeros past the end.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, i| acc | (u64::from(self.u8()) << (8 * i)))
    }

    /// One of `choices`, by the next byte.
    fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[usize::from(self.u8()) % choices.len()]
    }

    /// A probability in `0..=max`, in 1/255 steps.
    fn rate(&mut self, max: f64) -> f64 {
        max * f64::from(self.u8()) / 255.0
    }
}

/// The parameters the fuzzer's bytes choose: a seed, then the swarm drawn from it with
/// each field optionally overridden within its normal range. Short runs: the fuzzer
/// wants many of them.
pub fn params_from_bytes(data: &[u8]) -> (u64, SwarmParams) {
    let mut b = Bytes(data);
    let seed = b.u64();
    let mut p = SwarmParams::draw(seed);
    let flags = b.u8();
    p.clients = 1 + u32::from(b.u8() % 6);
    p.depth = 1 + u32::from(b.u8() % 3);
    p.commands = 20 + u32::from(b.u8() % 100);
    p.names = 1 + u32::from(b.u8() % 4);
    p.max_partitions = 1 + u32::from(b.u8() % 4);
    p.removal_concurrency = 1 + usize::from(b.u8() % 4);
    p.compaction_min_records = [4, 16, 64, 1_000][usize::from(b.u8() % 4)];
    if flags & 1 != 0 {
        p.io_error = b.rate(0.05);
        p.disk_full = b.rate(0.02);
        p.fsync_failure = b.rate(0.02);
        p.bit_rot = b.rate(0.05);
        p.slow_op = b.rate(0.1);
        p.targeted_crash = b.rate(0.5);
        p.halt_loses_cache = b.rate(1.0);
        p.crash_every_us = u64::from(b.u8()) * 1_000;
        p.read_only_after_error = b.rate(0.2);
    }
    if flags & 2 != 0 {
        p.grace_choices = vec![0, u64::from(b.u8()), u64::from(b.u8()) * 4];
    }
    (seed, p)
}

/// Runs the simulation the bytes choose; panics (a fuzzer finding) on any violation.
pub fn fuzz_sim_seed(data: &[u8]) {
    let (seed, params) = params_from_bytes(data);
    let report = run(&RunOptions { seed, params: Some(params), ..RunOptions::default() });
    assert!(report.violations.is_empty(), "seed {seed}: {:#?}", report.violations);
}

/// The parameters of a cluster run the fuzzer's bytes choose: a seed, the node count,
/// a short workload, then (by a flag byte) the store's faults, the nodes' crashes, cuts
/// and clocks, and the protocol's timers and limits, each within the range the swarm
/// draws from (`ClusterParams::draw`). Without the flags, the run is fault free.
pub fn cluster_params_from_bytes(data: &[u8]) -> (u64, SwarmParams, ClusterParams) {
    let mut b = Bytes(data);
    let seed = b.u64();
    let nodes = 1 + u32::from(b.u8() % 5);
    let mut p = SwarmParams::draw(seed);
    p.clients = 1 + u32::from(b.u8() % 4);
    p.depth = 1 + u32::from(b.u8() % 3);
    p.commands = 10 + u32::from(b.u8() % 50);
    p.names = 1 + u32::from(b.u8() % 3);
    p.max_partitions = 1 + u32::from(b.u8() % 3);
    let flags = b.u8();
    let mut c = ClusterParams::fault_free(nodes, (20 + u64::from(b.u8()) * 10, 500 + u64::from(b.u8()) * 80));
    if flags & 1 != 0 {
        c.slow = b.rate(0.05);
        c.error = b.rate(0.05);
        c.timeout = b.rate(0.05);
        c.timeout_us = 50_000 + u64::from(b.u8()) * 7_800;
        c.error_after_write = b.rate(0.05);
        c.short_pages = b.rate(0.5);
        c.foreign_keys = b.u8() % 2 == 1;
    }
    if flags & 2 != 0 {
        c.crash_every_us = 100_000 + u64::from(b.u8()) * 19_000;
        c.targeted_crash = b.rate(0.2);
        c.down_for_us = (1_000 + u64::from(b.u8()) * 200, 50_000 + u64::from(b.u8()) * 11_000);
        c.cut_every_us = 100_000 + u64::from(b.u8()) * 11_000;
        c.cut_for_us = (1_000 + u64::from(b.u8()) * 400, 100_000 + u64::from(b.u8()) * 39_000);
    }
    if flags & 4 != 0 {
        c.clock_offset_us = u64::from(b.u8()) * 39_000;
        c.clock_drift_ppm = u64::from(b.u8()) * 78;
    }
    if flags & 8 != 0 {
        c.tail_every_ms = b.pick(&[10, 100, 1_000]);
        c.reconcile_every_ms = b.pick(&[200, 2_000, 20_000]);
        c.list_limit = b.pick(&[1, 2, 10, 1_000]);
        c.compact_after_entries = b.pick(&[0, 1, 3, 20, 200]);
        c.request_timeout_ms = b.pick(&[0, 10, 10_000, 30_000]);
    }
    p.cluster = Some(c.clone());
    (seed, p, c)
}

/// Runs the cluster simulation the bytes choose; panics (a fuzzer finding) on any
/// violation of any cluster checker.
pub fn fuzz_cluster_seed(data: &[u8]) {
    let (seed, params, cluster) = cluster_params_from_bytes(data);
    let report = crate::cluster::runner::run(&RunOptions { seed, ..RunOptions::default() }, params, cluster);
    assert!(report.violations.is_empty(), "seed {seed}: {:#?}", report.violations);
}
