//! `broker-sim`: run simulation campaigns, replay a seed, explore crash states
//! exhaustively, and list planted bugs.
//!
//! The wall clock is read here only, to report how long a campaign took; it never
//! reaches a simulated run.

use broker_sim::campaign::{run_campaign, CampaignOptions, Summary};
use broker_sim::runner::{run, RunOptions};
use broker_sim::Bug;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e` of mimalloc.h (v3),
/// which the `libmimalloc-sys` crate does not name. A test below holds it to the option's
/// default of 1000 ms.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps the memory freed by one run mapped for the next, rather than handing it back
/// to the kernel a second later to be faulted in and zeroed again. Memory stays bounded
/// by the most a thread's runs have held at once.
fn keep_freed_memory() {
    // SAFETY: called first thing in `main`, before any thread is started, as
    // `mi_option_set` requires (it is not thread safe).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// Prints a line to stdout, ignoring a closed pipe (`broker-sim run | head`).
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

#[derive(Parser)]
#[command(name = "broker-sim", about = "Deterministic simulation of broker-core: crashes, faults and checkers")]
#[cfg_attr(
    not(feature = "planted-bugs"),
    command(after_help = "This build has no planted bugs: `--plant` and `bugs` need `--features planted-bugs`.")
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a campaign of seeds and print a summary; exits non-zero on any violation.
    Run {
        /// How many seeds.
        #[arg(long, default_value_t = 1000)]
        seeds: u64,
        /// The first seed: the campaign runs seeds `from..from + seeds`.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Threads (each seed stays single-threaded and deterministic).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        #[command(flatten)]
        plant: Plant,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Run every seed as a cluster of this many nodes over a shared store (1 to 5),
        /// or with 0 as one broker on the simulated disk; without it, half of the seeds
        /// run a cluster of 1 to 5 nodes.
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=5))]
        nodes: Option<u32>,
        /// Run the broker with durability log-sync (a produce acknowledged at its log's
        /// fsync; the journal learns each end within 1 to 200 simulated ms, by seed).
        #[arg(long)]
        log_sync: bool,
    },
    /// Replay one seed, print its trace hash and violations; optionally write its trace.
    Replay {
        /// The seed.
        #[arg(long)]
        seed: u64,
        #[command(flatten)]
        plant: Plant,
        /// Write the event trace here, as JSON lines.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Replay with this many nodes (as `run --nodes` ran it).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=5))]
        nodes: Option<u32>,
        /// Run the broker with durability log-sync (a produce acknowledged at its log's
        /// fsync; the journal learns each end within 1 to 200 simulated ms, by seed).
        #[arg(long)]
        log_sync: bool,
    },
    /// Crash after every storage operation of a few fixed workloads, under every crash
    /// mode; then strike every store operation of fixed cluster workloads with every fault.
    Exhaust {
        #[command(flatten)]
        plant: Plant,
    },
    /// List the planted bugs (needs the `planted-bugs` feature).
    Bugs,
}

/// The planted bug a command switches on: `--plant` exists only in a build with the
/// `planted-bugs` feature.
#[derive(clap::Args, Clone, Copy, Debug)]
struct Plant {
    /// Switch on a planted bug in the core (see `broker-sim bugs`).
    #[cfg(feature = "planted-bugs")]
    #[arg(long = "plant", value_name = "BUG", value_parser = parse_bug)]
    bug: Option<Bug>,
    /// No planted bug in this build.
    #[cfg(not(feature = "planted-bugs"))]
    #[arg(skip)]
    bug: Option<Bug>,
}

#[cfg(feature = "planted-bugs")]
fn parse_bug(name: &str) -> Result<Bug, String> {
    Bug::from_name(name).ok_or_else(|| format!("unknown bug {name:?}; `broker-sim bugs` lists them"))
}

/// The command that replays `seed`.
fn replay_command(seed: u64, plant: Option<Bug>, nodes: Option<u32>, log_sync: bool) -> String {
    let mut nodes = nodes.map(|n| format!(" --nodes {n}")).unwrap_or_default();
    if log_sync {
        nodes.push_str(" --log-sync");
    }
    match plant {
        Some(bug) => format!(
            "cargo run --release -p broker-sim --features planted-bugs -- replay --seed {seed}{nodes} --plant {bug}"
        ),
        None => format!("cargo run --release -p broker-sim -- replay --seed {seed}{nodes}"),
    }
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Run { seeds, from, jobs, plant, quiet, nodes, log_sync } => {
            cmd_run(seeds, from, jobs, plant, quiet, nodes, log_sync)
        }
        Cmd::Replay { seed, plant, trace, nodes, log_sync } => cmd_replay(seed, plant, trace, nodes, log_sync),
        Cmd::Exhaust { plant } => cmd_exhaust(plant),
        Cmd::Bugs => cmd_bugs(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "planted-bugs")]
fn cmd_bugs() -> Result<ExitCode, String> {
    for bug in Bug::ALL {
        say!("{bug}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "planted-bugs"))]
fn cmd_bugs() -> Result<ExitCode, String> {
    Err("this build has no planted bugs (nor `--plant`): build with `--features planted-bugs`".into())
}

fn cmd_run(
    seeds: u64,
    from: u64,
    jobs: usize,
    plant: Plant,
    quiet: bool,
    nodes: Option<u32>,
    log_sync: bool,
) -> Result<ExitCode, String> {
    let opts = CampaignOptions { from, seeds, jobs, bug: plant.bug, nodes, log_sync };
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(seeds) };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} seeds ({per_sec}, eta {eta})")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let summary = run_campaign(&opts, &|done| bar.set_position(done));
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    print_summary(&summary, wall, jobs);
    if let Some((seed, v)) = summary.failures.first() {
        say!();
        say!("FAILED: {} of {} seeds broke an invariant.", summary.failures.len(), summary.seeds);
        say!("first failing seed {seed}: {v}");
        let seeds: Vec<String> = summary.failures.iter().take(20).map(|(s, _)| s.to_string()).collect();
        say!("failing seeds: {}{}", seeds.join(", "), if summary.failures.len() > 20 { ", ..." } else { "" });
        say!("replay it with:\n  {}", replay_command(*seed, plant.bug, nodes, log_sync));
        return Ok(ExitCode::from(1));
    }
    say!();
    say!("OK: {} seeds, no violations.", summary.seeds);
    Ok(ExitCode::SUCCESS)
}

fn print_summary(s: &Summary, wall: f64, jobs: usize) {
    let sim = s.sim_time.as_micros() as f64 / 1e6;
    let row = |k: &str, v: String| say!("  {k:<28} {v}");
    say!("broker-sim campaign summary");
    row("seeds", format!("{} ({} fault-free)", s.seeds, s.fault_free_seeds));
    let topology: Vec<String> = s
        .seeds_by_nodes
        .iter()
        .map(|(n, k)| if *n == 0 { format!("{k} one broker on a disk") } else { format!("{k} with {n} nodes") })
        .collect();
    row("seeds by topology", topology.join(", "));
    row("jobs", jobs.to_string());
    row("campaign trace hash", format!("{:016x}", s.campaign_hash()));
    row("events", s.events.to_string());
    row("events per second", format!("{:.0}", s.events as f64 / wall.max(1e-9)));
    row("seeds per second", format!("{:.1}", s.seeds as f64 / wall.max(1e-9)));
    row("wall time", format!("{wall:.2} s"));
    row("simulated time", format!("{sim:.2} s ({:.1}x wall)", sim / wall.max(1e-9)));
    row("client commands", s.commands.to_string());
    row("storage operations", s.storage_ops.to_string());
    row("crashes", s.crashes.to_string());
    row("halts", s.halts.to_string());
    row("restarts", s.restarts.to_string());
    // A deletion's acknowledgement may be cut off by a crash while the deletion still
    // happens, so more deletions can complete than were acknowledged.
    row("deletions started (acked)", s.deletions_started.to_string());
    row("deletions completed", s.deletions_completed.to_string());
    row("producer ids handed out", s.producer_ids.to_string());
    row("idempotent batches acked", s.idempotent_batches.to_string());
    let across = format!("{} ({} across a crash)", s.duplicate_answers, s.duplicates_across_crash);
    row("retries answered as dups", across);
    row("acked after a cut-off send", s.acked_after_cut_off.to_string());
    say!("  faults injected:");
    for (kind, n) in &s.faults {
        row(&format!("  {kind}"), n.to_string());
    }
    say!("  violations by checker:");
    for c in broker_sim::Checker::ALL {
        row(&format!("  {c}"), s.violations.get(&c).copied().unwrap_or(0).to_string());
    }
    if !s.journal_lost_seeds.is_empty() {
        let seeds: Vec<String> = s.journal_lost_seeds.iter().take(10).map(u64::to_string).collect();
        say!(
            "  rot struck both copies of a journal commit in {} seeds ({}{}): beyond what two copies cover; \
             {} violations after it reported apart",
            s.journal_lost_seeds.len(),
            seeds.join(", "),
            if s.journal_lost_seeds.len() > 10 { ", ..." } else { "" },
            s.excused
        );
    }
}

fn cmd_replay(
    seed: u64,
    plant: Plant,
    trace: Option<std::path::PathBuf>,
    nodes: Option<u32>,
    log_sync: bool,
) -> Result<ExitCode, String> {
    let opts =
        RunOptions { seed, bug: plant.bug, keep_trace: trace.is_some(), nodes, log_sync, ..RunOptions::default() };
    let report = run(&opts);
    say!("seed {seed}: {} events, simulated {}", report.events, report.sim_time);
    say!("params: {:?}", report.params);
    say!("stats: {:?}", report.stats);
    say!("faults: {:?}", broker_sim::campaign::fault_kinds(&report));
    if let Some(path) = trace {
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?);
        for line in &report.trace {
            writeln!(f, "{}", line.to_json()).map_err(|e| e.to_string())?;
        }
        f.flush().map_err(|e| e.to_string())?;
        say!("trace: {} lines written to {}", report.trace.len(), path.display());
    }
    say!("trace hash: {:016x}", report.trace_hash);
    if let Some(at) = report.journal_lost_to_rot {
        say!("at {at} rot had struck both copies of a journal commit: beyond what two copies cover");
        for v in &report.excused {
            say!("after it (reported apart): {v}");
        }
    }
    if report.violations.is_empty() {
        say!("no violations");
        return Ok(ExitCode::SUCCESS);
    }
    for v in &report.violations {
        say!("VIOLATION {v}");
    }
    Ok(ExitCode::from(1))
}

fn cmd_exhaust(plant: Plant) -> Result<ExitCode, String> {
    let report = broker_sim::exhaust::explore(plant.bug, &mut |line| say!("{line}"));
    say!("explored {} crash states across {} workloads", report.states, report.workloads);
    say!("explored {} store-fault states across {} cluster workloads", report.cluster_states, report.cluster_workloads);
    if report.violations.is_empty() {
        say!("no violations");
        return Ok(ExitCode::SUCCESS);
    }
    for (state, v) in report.violations.iter().take(20) {
        say!("VIOLATION in {state}: {v}");
    }
    say!("{} violations in total", report.violations.len());
    Ok(ExitCode::from(1))
}

#[cfg(test)]
mod tests {
    use super::MI_OPTION_PURGE_DELAY;

    #[test]
    fn the_purge_delay_option_is_the_one_with_its_default_of_1000_ms() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            eprintln!("skipped: MIMALLOC_PURGE_DELAY is set in the environment");
            return;
        }
        // SAFETY: reads one option; nothing in this test binary sets any.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 1000, "option {MI_OPTION_PURGE_DELAY} is not mimalloc's purge delay");
    }
}
