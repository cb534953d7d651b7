//! What a cluster seed decides before it starts: how many nodes, and how the shared
//! store and the nodes misbehave.

use crate::rng::SimRng;

/// A cluster run's topology and fault rates.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterParams {
    /// Nodes sharing the store (1 to 5).
    pub nodes: u32,
    /// One-way latency between a node and the store, uniform in `low..=high`
    /// microseconds.
    pub latency_us: (u64, u64),
    /// Probability that an operation is slow (x20 latency each way).
    pub slow: f64,
    /// Probability that the store fails an operation: nothing happens.
    pub error: f64,
    /// Probability that an operation times out: the node hears nothing for
    /// `timeout_us`, then an unknown outcome; a write may land at once, later (even
    /// long after the timeout) or never.
    pub timeout: f64,
    /// Probability that a write lands and is answered with an error of unknown outcome
    /// at once (S3's 5xx after the write).
    pub error_after_write: f64,
    /// Probability that a listing's page is cut short, to any number of its keys (none
    /// included), though more follow: S3 may return fewer keys than asked.
    pub short_pages: f64,
    /// Keys outside the layout are planted under every prefix before the run: the
    /// protocol must walk past them, never delete them, and give no answer by them.
    pub foreign_keys: bool,
    /// The most a node's clock is set off the simulation's, in microseconds, either way.
    pub clock_offset_us: u64,
    /// The most a node's clock runs fast or slow, in parts per million.
    pub clock_drift_ppm: u64,
    /// How long a node waits for an answer before it calls the outcome unknown.
    pub timeout_us: u64,
    /// Mean time between cuts of one node from the store, in microseconds (0: none).
    pub cut_every_us: u64,
    /// How long a cut lasts, uniform in `low..=high` microseconds.
    pub cut_for_us: (u64, u64),
    /// Mean time between crashes of some node, in microseconds (0: none).
    pub crash_every_us: u64,
    /// Probability of crashing a node right after it acknowledges a delete (between
    /// the logical and the physical step) or issues the delete of a segment it removes.
    pub targeted_crash: f64,
    /// How long a crashed node stays down, uniform in `low..=high` microseconds.
    pub down_for_us: (u64, u64),
    /// How often an idle node reads the journal's tail, in milliseconds.
    pub tail_every_ms: u64,
    /// How often a node runs the reconciler, in milliseconds.
    pub reconcile_every_ms: u64,
    /// The most keys one listing asks for.
    pub list_limit: u32,
    /// How many entries a node folds past the newest snapshot before it compacts the
    /// journal (0: never).
    pub compact_after_entries: u64,
    /// How long a node lets a request wait for the store before it answers anyway, in
    /// milliseconds (0: as long as it takes).
    pub request_timeout_ms: u64,
    /// How long a node holds a partition's next segment write for more produces to ride
    /// in it, in milliseconds (0: not at all).
    pub gather_ms: u64,
}

impl ClusterParams {
    /// Whether the seed runs a cluster, and if so its parameters. `nodes` fixes the
    /// count (`broker-sim run --nodes N`); without it, half of the seeds run a cluster
    /// of 1 to 5 nodes and the rest one broker on the simulated disk.
    pub fn draw(seed: u64, nodes: Option<u32>) -> Option<ClusterParams> {
        let mut r = SimRng::fork(seed, "cluster");
        let drawn = if r.chance(0.5) { Some(r.between(1, 5) as u32) } else { None };
        let nodes = nodes.or(drawn)?;
        let faults = !r.chance(0.15);
        let rate = |r: &mut SimRng, max: f64| {
            if faults && r.chance(0.7) {
                max * (r.below(1000) as f64 / 1000.0)
            } else {
                0.0
            }
        };
        Some(ClusterParams {
            nodes: nodes.max(1),
            latency_us: (r.between(20, 500), r.between(500, 20_000)),
            slow: rate(&mut r, 0.05),
            error: rate(&mut r, 0.05),
            timeout: rate(&mut r, 0.05),
            timeout_us: r.between(50_000, 2_000_000),
            cut_every_us: if faults && r.chance(0.6) { r.between(100_000, 3_000_000) } else { 0 },
            cut_for_us: (r.between(1_000, 100_000), r.between(100_000, 10_000_000)),
            crash_every_us: if faults && r.chance(0.6) { r.between(100_000, 5_000_000) } else { 0 },
            targeted_crash: rate(&mut r, 0.2),
            down_for_us: (r.between(1_000, 50_000), r.between(50_000, 3_000_000)),
            tail_every_ms: *r.pick(&[10, 100, 1_000]).unwrap_or(&100),
            reconcile_every_ms: *r.pick(&[200, 2_000, 20_000]).unwrap_or(&2_000),
            list_limit: *r.pick(&[2, 10, 1_000]).unwrap_or(&1_000),
            compact_after_entries: *r.pick(&[0, 3, 20, 200]).unwrap_or(&0),
            request_timeout_ms: *r.pick(&[0, 10_000, 30_000]).unwrap_or(&0),
            error_after_write: rate(&mut r, 0.05),
            short_pages: rate(&mut r, 0.5),
            foreign_keys: faults && r.chance(0.5),
            clock_offset_us: if faults && r.chance(0.5) { r.between(1, 10_000_000) } else { 0 },
            clock_drift_ppm: if faults && r.chance(0.5) { r.between(1, 20_000) } else { 0 },
            // Drawn apart, so that the draws above stay as they were.
            gather_ms: *SimRng::fork(seed, "gather").pick(&[0, 0, 1, 5]).unwrap_or(&0),
        })
    }

    /// `nodes` over a store `latency_us` away each way that never fails, with no cuts
    /// and no crashes; the timers and limits are the caller's to set.
    pub fn fault_free(nodes: u32, latency_us: (u64, u64)) -> ClusterParams {
        ClusterParams {
            nodes,
            latency_us,
            slow: 0.0,
            error: 0.0,
            timeout: 0.0,
            timeout_us: 2_000_000,
            cut_every_us: 0,
            cut_for_us: (0, 0),
            crash_every_us: 0,
            targeted_crash: 0.0,
            down_for_us: (0, 0),
            tail_every_ms: 100,
            reconcile_every_ms: 2_000,
            list_limit: 1_000,
            compact_after_entries: 0,
            request_timeout_ms: 0,
            error_after_write: 0.0,
            short_pages: 0.0,
            foreign_keys: false,
            clock_offset_us: 0,
            clock_drift_ppm: 0,
            gather_ms: 0,
        }
    }

    /// Whether the store or the nodes misbehave at all.
    pub fn has_faults(&self) -> bool {
        self.slow + self.error + self.timeout + self.targeted_crash + self.error_after_write + self.short_pages > 0.0
            || self.cut_every_us > 0
            || self.crash_every_us > 0
            || self.foreign_keys
            || self.clock_offset_us + self.clock_drift_ppm > 0
    }
}
