//! Swarm testing: each seed draws its own workload mix, topology and fault rates, so a
//! campaign covers many corners instead of one average. Some seeds have no faults.

use crate::rng::SimRng;

/// Weights of each client command in a seed's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandMix {
    /// Create a topic.
    pub create: u32,
    /// Delete a topic.
    pub delete: u32,
    /// Produce a batch.
    pub produce: u32,
    /// Fetch from a partition.
    pub fetch: u32,
    /// List topics.
    pub list: u32,
    /// Describe a topic.
    pub describe: u32,
    /// Commit, read, list or delete consumer groups' offsets (one broker only: a cluster
    /// node keeps none, and its workload draws none).
    pub groups: u32,
    /// Hand out producer ids and send idempotent batches, retried and hostile (one
    /// broker only: a cluster node refuses both commands, and its workload draws none).
    pub producers: u32,
}

impl CommandMix {
    /// The weight of the group-offsets commands, from the seed's own stream for this
    /// (so every other parameter is drawn as before): none in one seed in five, else up
    /// to about a fifth of the commands.
    pub fn draw_groups(seed: u64) -> u32 {
        let mut r = SimRng::fork(seed, "groups");
        if r.chance(0.2) {
            0
        } else {
            r.between(1, 6) as u32
        }
    }

    /// The weight of the idempotent producers' commands, from the seed's own stream for
    /// this (so every other parameter is drawn as before): none in one seed in five,
    /// else up to about a fifth of the commands.
    pub fn draw_producers(seed: u64) -> u32 {
        let mut r = SimRng::fork(seed, "producers");
        if r.chance(0.2) {
            0
        } else {
            r.between(1, 6) as u32
        }
    }
}

/// Everything a seed decides about its run before it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct SwarmParams {
    /// Concurrent clients.
    pub clients: u32,
    /// Requests each client keeps in flight at most.
    pub depth: u32,
    /// Client commands issued in the chaos phase, in total.
    pub commands: u32,
    /// How many distinct topic names the workload uses (names collide across incarnations).
    pub names: u32,
    /// Largest partition count a create asks for.
    pub max_partitions: u32,
    /// Grace delays a create may choose from, in milliseconds.
    pub grace_choices: Vec<u64>,
    /// Relative weights of the commands the workload draws.
    pub mix: CommandMix,
    /// Fraction of produced records that carry a key.
    pub keyed: f64,
    /// Largest batch an ordinary produce sends, in records.
    pub max_batch: u32,
    /// Most padding bytes on an ordinary produce's values: a few bytes, or enough that
    /// batches span several sectors.
    pub value_pad: u64,
    /// Chance that a produce is sized against the batch limit instead: from half of it
    /// to past it, with records from a few bytes to past the record limit.
    pub big_batch: f64,
    /// What values are padded with after their label.
    pub padding: Padding,
    /// The broker's limit on one produce, in bytes as stored (`Config::max_batch_bytes`):
    /// small, so that seeds reach it cheaply, or the default, one whole log frame.
    pub batch_limit: u64,
    /// The broker's limit on one record's key plus value (`Config::max_record_bytes`).
    pub record_limit: usize,
    /// The disk's capacity in bytes (0: unbounded): a small disk fills up and stays
    /// full until deletions free space (or the chaos phase ends, as an operator adds some).
    pub disk_capacity: u64,
    /// Mean think time between a client's commands, in microseconds.
    pub think_us: u64,
    /// Per-operation I/O latency, uniform in `low..=high` microseconds (reads up to 8x).
    pub latency_us: (u64, u64),
    /// Probability that an operation is slow (x100 latency).
    pub slow_op: f64,
    /// Per file-system call probability of an injected I/O error.
    pub io_error: f64,
    /// Per-write (and per-create of a new file) probability of an injected disk-full error.
    pub disk_full: f64,
    /// Per-fsync probability of failure, for a file with unsynced data.
    pub fsync_failure: f64,
    /// Probability that an injected I/O error or failed fsync leaves the file system
    /// read-only (until a crash reboots the machine, or the chaos phase ends).
    pub read_only_after_error: f64,
    /// Per-fsync probability (of an fsync that made data durable) of latent bit rot in
    /// that file, whichever it is (a log, the journal, ...).
    pub bit_rot: f64,
    /// Mean simulated time between random crashes, in microseconds (0: none).
    pub crash_every_us: u64,
    /// Probability of a targeted crash at each deletion step (tombstone durable,
    /// each log removal, journal compaction) and right after an fsync.
    pub targeted_crash: f64,
    /// Probability that a halt restarts the process with the page cache lost too.
    pub halt_loses_cache: f64,
    /// The broker's [`broker_core::Config::compaction_min_records`] (its ratio is set to 2).
    pub compaction_min_records: u64,
    /// The broker's [`broker_core::Config::removal_concurrency`].
    pub removal_concurrency: usize,
    /// A cluster of nodes over a shared store instead of one broker on the disk (drawn
    /// from a stream of its own, so the other parameters are the same either way).
    pub cluster: Option<crate::cluster::ClusterParams>,
}

impl SwarmParams {
    /// Draws a seed's parameters.
    pub fn draw(seed: u64) -> SwarmParams {
        let mut r = SimRng::fork(seed, "swarm");
        let faults = !r.chance(0.2);
        let rate = |r: &mut SimRng, max: f64| {
            if faults && r.chance(0.7) {
                max * (r.below(1000) as f64 / 1000.0)
            } else {
                0.0
            }
        };
        let w = |r: &mut SimRng, hi: u64| r.between(0, hi) as u32;
        let mut mix = CommandMix {
            create: 1 + w(&mut r, 6),
            delete: 1 + w(&mut r, 5),
            produce: w(&mut r, 12),
            fetch: w(&mut r, 8),
            list: w(&mut r, 2),
            describe: w(&mut r, 2),
            groups: CommandMix::draw_groups(seed),
            producers: CommandMix::draw_producers(seed),
        };
        if mix.produce + mix.fetch == 0 {
            mix.produce = 4;
        }
        let grace_choices = if r.chance(0.5) { vec![0] } else { vec![0, r.between(1, 20), r.between(20, 200)] };
        SwarmParams {
            clients: r.between(1, 6) as u32,
            depth: r.between(1, 3) as u32,
            commands: r.between(100, 800) as u32,
            names: r.between(1, 4) as u32,
            max_partitions: r.between(1, 4) as u32,
            grace_choices,
            mix,
            keyed: r.below(101) as f64 / 100.0,
            max_batch: r.between(1, 6) as u32,
            think_us: r.between(50, 3_000),
            latency_us: (r.between(5, 50), r.between(50, 2_000)),
            slow_op: rate(&mut r, 0.05),
            io_error: rate(&mut r, 0.02),
            disk_full: rate(&mut r, 0.01),
            fsync_failure: rate(&mut r, 0.01),
            bit_rot: rate(&mut r, 0.02),
            crash_every_us: if faults && r.chance(0.8) { r.between(2_000, 200_000) } else { 0 },
            targeted_crash: if faults { rate(&mut r, 0.3) } else { 0.0 },
            halt_loses_cache: r.below(101) as f64 / 100.0,
            compaction_min_records: *r.pick(&[4, 16, 64, 1_000]).unwrap_or(&16),
            removal_concurrency: r.between(1, 4) as usize,
            value_pad: *r.pick(&[48, 48, 2_000]).unwrap_or(&48),
            big_batch: *r.pick(&[0.0, 0.0, 0.02, 0.1]).unwrap_or(&0.0),
            padding: Padding::draw(seed),
            batch_limit: *r.pick(&[4 << 10, 64 << 10, broker_core::MAX_LOG_FRAME as u64]).unwrap_or(&0),
            record_limit: *r.pick(&[1 << 10, 1 << 20]).unwrap_or(&(1 << 20)),
            disk_capacity: if faults && r.chance(0.3) { r.between(24 << 10, 256 << 10) } else { 0 },
            read_only_after_error: rate(&mut r, 0.2),
            cluster: crate::cluster::ClusterParams::draw(seed, None),
        }
    }

    /// Whether this seed injects any fault or crash at all.
    pub fn has_faults(&self) -> bool {
        if let Some(cluster) = &self.cluster {
            return cluster.has_faults();
        }
        self.io_error + self.disk_full + self.fsync_failure + self.bit_rot + self.slow_op + self.targeted_crash > 0.0
            || self.crash_every_us > 0
    }
}

/// What a seed's values are padded with after their unique label. Values are the
/// client's bytes: a client may send bytes that look like the log's own frames, which a
/// search for the next valid frame past damage must get through at the cost of the
/// bytes, not of the lengths they announce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `.` repeated.
    Dots,
    /// Batch frame headers repeated, each announcing 64 KiB: every 21 bytes, a candidate
    /// that passes every test of a frame short of its checksum.
    FrameHeaders,
}

impl Padding {
    /// One seed in four pads with frame headers, drawn from the seed's own stream for
    /// this, so that every other parameter is drawn as before.
    pub fn draw(seed: u64) -> Padding {
        if SimRng::fork(seed, "padding").chance(0.25) {
            Padding::FrameHeaders
        } else {
            Padding::Dots
        }
    }

    /// Appends `len` bytes of this padding to `value`.
    pub fn fill(self, value: &mut Vec<u8>, len: usize) {
        match self {
            Padding::Dots => value.resize(value.len() + len, b'.'),
            Padding::FrameHeaders => {
                let end = value.len() + len;
                while value.len() < end {
                    value.extend_from_slice(&FRAME_HEADERS[..FRAME_HEADERS.len().min(end - value.len())]);
                }
            }
        }
    }
}

/// A log's batch frame header (length, kind 2, a checksum that does not match) and a
/// batch header (first offset 0, one record): 21 bytes.
const FRAME_HEADER: [u8; 21] = [0, 0, 1, 0, 2, 0xa5, 0xa5, 0xa5, 0xa5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];

/// [`FRAME_HEADER`] repeated, to pad from with whole copies.
const FRAME_HEADERS: [u8; 21 * 195] = {
    let mut out = [0u8; 21 * 195];
    let mut i = 0;
    while i < out.len() {
        out[i] = FRAME_HEADER[i % 21];
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Padding is exactly as long as asked, frame headers back to back from its start,
    /// and both kinds are drawn.
    #[test]
    fn padding_fills_to_the_length_asked() {
        for len in [0, 1, 20, 21, 22, FRAME_HEADERS.len() + 5, 10_000] {
            let mut value = b"v1-".to_vec();
            Padding::FrameHeaders.fill(&mut value, len);
            assert_eq!(value.len(), 3 + len);
            assert!(value[3..].iter().enumerate().all(|(i, b)| *b == FRAME_HEADER[i % 21]), "{len}");
            let mut dots = b"v1-".to_vec();
            Padding::Dots.fill(&mut dots, len);
            assert_eq!(dots.len(), 3 + len);
            assert!(dots[3..].iter().all(|b| *b == b'.'));
        }
        let headers = (0..400).filter(|s| Padding::draw(*s) == Padding::FrameHeaders).count();
        assert!((50..150).contains(&headers), "{headers} of 400 seeds pad with frame headers");
    }
}
