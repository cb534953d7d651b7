//! The body of the cargo-fuzz target `sim_seed`: the fuzzer chooses the seed and the
//! swarm parameters of a short simulation, and every checker must pass.

use crate::runner::{run, RunOptions};
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
