//! A campaign: many seeds, on one or more threads (each seed single-threaded and
//! deterministic), folded into one summary.

use crate::run::{RunOptions, RunReport};
use crate::runner::run;
use crate::violation::{Checker, Violation};
use broker_core::Time;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a campaign runs.
#[derive(Clone, Debug, Default)]
pub struct CampaignOptions {
    /// The first seed: the campaign runs seeds `from..from + seeds`.
    pub from: u64,
    /// How many seeds.
    pub seeds: u64,
    /// Threads (0 counts as 1); the summary is the same whatever the count.
    pub jobs: usize,
    /// A planted bug (see [`RunOptions::bug`]).
    pub bug: Option<crate::Bug>,
    /// Run every seed as a cluster of this many nodes (see [`RunOptions::nodes`]).
    pub nodes: Option<u32>,
    /// Run the broker with durability log-sync (see [`RunOptions::log_sync`]).
    pub log_sync: bool,
}

/// The totals of a campaign over all its seeds; lists are sorted by seed.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Seeds that injected no fault or crash.
    pub fault_free_seeds: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time, summed over seeds.
    pub sim_time: Time,
    /// Storage operations executed.
    pub storage_ops: u64,
    /// Client commands.
    pub commands: u64,
    /// Crashes.
    pub crashes: u64,
    /// Halts.
    pub halts: u64,
    /// Restarts.
    pub restarts: u64,
    /// Deletions acknowledged.
    pub deletions_started: u64,
    /// Deletions completed.
    pub deletions_completed: u64,
    /// Producer ids handed out.
    pub producer_ids: u64,
    /// Idempotent batches acknowledged.
    pub idempotent_batches: u64,
    /// Retries answered with their batch's first positions.
    pub duplicate_answers: u64,
    /// Of those, by a later life of the broker.
    pub duplicates_across_crash: u64,
    /// Batches acknowledged after an earlier send was cut off by a crash.
    pub acked_after_cut_off: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Violations, by checker.
    pub violations: BTreeMap<Checker, u64>,
    /// Seeds in which rot struck both copies of a journal commit (beyond what the
    /// journal's redundancy covers), and the violations after it, reported apart.
    pub journal_lost_seeds: Vec<u64>,
    /// Violations excused in those seeds.
    pub excused: u64,
    /// The failing seeds, ascending, with their first violation.
    pub failures: Vec<(u64, Violation)>,
    /// Each seed's trace hash, ascending by seed.
    pub trace_hashes: Vec<(u64, u64)>,
    /// Seeds by node count (0: one broker on the simulated disk).
    pub seeds_by_nodes: BTreeMap<u32, u64>,
}

impl Summary {
    fn add(&mut self, r: &RunReport) {
        self.seeds += 1;
        self.fault_free_seeds += u64::from(!r.params.has_faults());
        self.events += r.events;
        self.sim_time = Time(self.sim_time.0 + r.sim_time.0);
        self.storage_ops += r.stats.storage_ops;
        self.commands += r.stats.commands;
        self.crashes += r.stats.crashes;
        self.halts += r.stats.halts;
        self.restarts += r.stats.restarts;
        self.deletions_started += r.stats.deletions_started;
        self.deletions_completed += r.stats.deletions_completed;
        self.producer_ids += r.stats.producer_ids;
        self.idempotent_batches += r.stats.idempotent_batches;
        self.duplicate_answers += r.stats.duplicate_answers;
        self.duplicates_across_crash += r.stats.duplicates_across_crash;
        self.acked_after_cut_off += r.stats.acked_after_cut_off;
        for (kind, n) in fault_kinds(r) {
            *self.faults.entry(kind).or_default() += n;
        }
        for v in &r.violations {
            *self.violations.entry(v.checker).or_default() += 1;
        }
        if r.journal_lost_to_rot.is_some() {
            self.journal_lost_seeds.push(r.seed);
            self.excused += r.excused.len() as u64;
        }
        if let Some(v) = r.violations.first() {
            self.failures.push((r.seed, v.clone()));
        }
        self.trace_hashes.push((r.seed, r.trace_hash));
        *self.seeds_by_nodes.entry(r.stats.nodes).or_default() += 1;
    }

    /// One hash of every seed's trace hash, in seed order: two runs of the same
    /// campaign print the same value, whatever the thread count.
    pub fn campaign_hash(&self) -> u64 {
        self.trace_hashes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, (seed, hash)| {
            let mut h = h;
            for b in seed.to_le_bytes().iter().chain(hash.to_le_bytes().iter()) {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
            h
        })
    }

    /// Total violations.
    pub fn violation_count(&self) -> u64 {
        self.violations.values().sum()
    }
}

/// Every fault a run injected, by kind: the disk's and the scheduler's.
pub fn fault_kinds(r: &RunReport) -> Vec<(&'static str, u64)> {
    let f = &r.faults;
    vec![
        ("I/O errors", f.io_errors),
        ("partial writes", f.partial_writes),
        ("disk full", f.disk_full),
        ("disk at capacity", f.out_of_space),
        ("writes cut short by a full disk", f.short_writes),
        ("file system turned read-only", f.read_only_turns),
        ("calls refused read-only", f.read_only_refusals),
        ("rot in a last sector", f.rot_last_sectors),
        ("rot in the journal", f.rot_journal_sectors),
        ("produces over a sector", r.stats.large_batches),
        ("produces over the limit", r.stats.batches_over_limit),
        ("failed fsyncs", f.fsync_failures),
        ("bit-rot sectors", f.bit_rot_sectors),
        ("torn writes", f.torn_writes),
        ("broken renames", f.broken_renames),
        ("ops lost in crashes", f.ops_dropped_by_crash),
        ("slow operations", r.stats.slow_ops),
        ("reordered completions", r.stats.reordered_completions),
        ("store errors", r.stats.store_errors),
        ("store unknown outcomes", r.stats.unknown_outcomes),
        ("store late landings", r.stats.late_landings),
        ("store errors after the write landed", r.stats.errors_after_landing),
        ("listing pages cut short though more followed", r.stats.short_pages),
        ("keys outside the layout planted", r.stats.foreign_keys),
        ("nodes with a skewed clock", r.stats.skewed_clocks),
        ("nodes cut off from the store", r.stats.cuts),
        ("node crashes", r.stats.node_crashes),
        ("lost races (create found the key)", r.stats.lost_races),
        ("orphans reconciled at the end", r.stats.orphans_removed),
        ("produces carried in another's object", r.stats.rides),
        ("journal keys landing after compaction", r.stats.stale_landings),
        ("replies unavailable or of unknown outcome", r.stats.uncertain_replies),
    ]
}

/// Runs a campaign; `progress` is called after each seed with the seeds done so far.
pub fn run_campaign(opts: &CampaignOptions, progress: &(dyn Fn(u64) + Sync)) -> Summary {
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let summary = Mutex::new(Summary::default());
    let jobs = opts.jobs.max(1);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= opts.seeds {
                    break;
                }
                let run_opts = RunOptions {
                    seed: opts.from + i,
                    bug: opts.bug,
                    nodes: opts.nodes,
                    log_sync: opts.log_sync,
                    ..RunOptions::default()
                };
                let report = run(&run_opts);
                if let Ok(mut sum) = summary.lock() {
                    sum.add(&report);
                }
                progress(done.fetch_add(1, Ordering::Relaxed) + 1);
            });
        }
    });
    let mut summary = summary.into_inner().unwrap_or_default();
    summary.failures.sort_by_key(|(seed, _)| *seed);
    summary.journal_lost_seeds.sort_unstable();
    summary.trace_hashes.sort_unstable();
    summary
}
