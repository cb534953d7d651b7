//! The command line as clap parses it: the global options and one variant per command.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// The broker core on a real disk.
#[derive(Debug, Parser)]
#[command(name = "broker-fs", version, about)]
pub struct Cli {
    /// The data directory (created if missing; locked while in use). Required; it may
    /// come before or after the command.
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Print JSON instead of text (one object per line); before or after the command.
    #[arg(long, global = true)]
    pub json: bool,
    /// Give up when a storage operation the command waits for has kept failing (and
    /// being retried) for this long, counted from its first failure. Decimals allowed.
    #[arg(long, value_name = "SECS", global = true, default_value = "60", value_parser = parse_secs)]
    pub timeout: Duration,
    /// The command.
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Create a topic.
    Create {
        /// The topic name: 1..=249 characters of [A-Za-z0-9._-].
        name: String,
        /// How many partitions.
        #[arg(long)]
        partitions: u32,
        /// How long physical removal waits after a delete is acknowledged.
        #[arg(long, default_value_t = 0, value_name = "MS")]
        grace_ms: u64,
    },
    /// Delete a topic: returns once the tombstone is durable; the logs stay on disk
    /// until `recover` (or `serve`, or `--wait`) removes them.
    Delete {
        /// The topic name.
        name: String,
        /// Wait until every log of the topic is physically removed.
        #[arg(long)]
        wait: bool,
    },
    /// Produce records (the values given, or one per line of standard input).
    Produce {
        /// The topic name.
        name: String,
        /// The key of every record (keyless records go round-robin).
        #[arg(long)]
        key: Option<String>,
        /// The values; read from standard input, one per line, if none is given.
        values: Vec<String>,
    },
    /// Fetch acknowledged records of one partition.
    Fetch {
        /// The topic name.
        name: String,
        /// The partition.
        #[arg(long)]
        partition: u32,
        /// The first offset.
        #[arg(long)]
        offset: u64,
        /// The most records to return.
        #[arg(long, default_value_t = 100)]
        max: u32,
    },
    /// List live topics.
    List,
    /// Describe a live topic.
    Describe {
        /// The topic name.
        name: String,
    },
    /// Show pending deletions with their progress, and what recovery found.
    Status,
    /// Recover the directory, wait until every pending deletion has finished, report.
    Recover,
    /// Serve JSON-lines commands from standard input until its end; with --kafka, also
    /// serve Kafka clients, until SIGINT or SIGTERM.
    Serve {
        /// Listen for Kafka clients on this address (for example 127.0.0.1:9092; port 0
        /// picks a free port, which the `kafka-listening` event names).
        #[arg(long, value_name = "ADDR")]
        kafka: Option<String>,
        /// Cut off a Kafka client that reads none of a response for this long, in
        /// milliseconds (what it held is freed for the other clients).
        #[arg(long, value_name = "MS", default_value_t = broker_kafka::WRITE_TIMEOUT_MS, requires = "kafka")]
        kafka_write_timeout_ms: u64,
        /// When a produce is acknowledged, kept by the directory for every later
        /// command: `journaled` (the default: the log's fsync, then the journal's) or
        /// `log-sync[:MS]` (the log's fsync alone, about twice the rate with one request
        /// in flight; ends journaled within MS, 1000 by default, and rot in records past
        /// the journal's end is cut at the next start, reported). Without it, as the
        /// directory was last served. DESIGN.md section 5 weighs the two.
        #[arg(long, value_name = "MODE", value_parser = broker_fs::durability_file::parse_durability)]
        durability: Option<broker_core::Durability>,
    },
}

impl Cmd {
    /// Whether the command only reads: it opens the directory read-only and writes
    /// nothing, so it works on a read-only directory and on a full disk (leaving
    /// recovery's repairs to the next writer).
    pub fn only_reads(&self) -> bool {
        matches!(self, Cmd::List | Cmd::Describe { .. } | Cmd::Status | Cmd::Fetch { .. })
    }
}

/// Parses `--timeout`: a non-negative number of seconds.
fn parse_secs(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..1e9).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("{s:?} is not a number of seconds (for example 60 or 0.5)")),
    }
}
