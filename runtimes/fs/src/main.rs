//! `broker-fs`: the broker core on a real data directory, from the command line.
//!
//! Every command that writes first locks and recovers the directory (replaying the
//! journal, resuming pending deletions, removing stray logs), then does its work; the
//! commands that only read open it read-only, under a shared lock, and write nothing. Exit status:
//! 0 on success, 1 when a command fails, 2 on bad usage, 3 when the broker halts or
//! refuses to start (a corrupt journal), 4 when another process holds the directory.

use broker_core::Notice as CoreNotice;
use broker_core::{BrokerError, Command, HaltReason, ProduceRecord, Reply, TopicDescription, TopicId, TopicSettings};
use broker_fs::driver::{Driver, DriverOptions};
use broker_fs::jsonbytes;
use broker_fs::report::{DriverError, Notice};
use broker_fs::serve::{self, DamagedJson, Outcome, PendingJson, TopicJson};
use clap::{CommandFactory, Parser, Subcommand};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The broker core on a real disk.
#[derive(Debug, Parser)]
#[command(name = "broker-fs", version, about)]
struct Cli {
    /// The data directory (created if missing; locked while in use). Required; it may
    /// come before or after the command.
    #[arg(long, value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Print JSON instead of text (one object per line); before or after the command.
    #[arg(long, global = true)]
    json: bool,
    /// Give up when a storage operation the command waits for has kept failing (and
    /// being retried) for this long, counted from its first failure. Decimals allowed.
    #[arg(long, value_name = "SECS", global = true, default_value = "60", value_parser = parse_secs)]
    timeout: Duration,
    /// The command.
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
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
    },
}

/// What to do when a command other than create, `delete --wait` and recover gives up.
const AGAIN: &str = "Fix the cause, then run the command again";

/// How often a wait looks at the retries it should report or give up on.
const TICK: Duration = Duration::from_millis(100);

/// The least time between two progress lines about retries.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A command's waits on the driver, bounded when storage keeps failing: retries are
/// reported on standard error as they happen, and the command gives up once failures
/// have gone on for the timeout (the core itself retries for ever).
struct Patience {
    timeout: Duration,
    data_dir: PathBuf,
    /// When the first failure was seen: the timeout runs from there.
    first_failure: Option<Instant>,
    /// Per failing operation, in the order first seen: failed attempts, last error.
    failures: Vec<(String, u32, String)>,
    /// When progress was last printed, and whether failures came since.
    reported: Option<Instant>,
    unreported: bool,
    /// Whether a wait gave up, leaving its request or work unfinished.
    gave_up: bool,
}

impl Patience {
    fn new(timeout: Duration, data_dir: &Path) -> Patience {
        Patience {
            timeout,
            data_dir: data_dir.to_path_buf(),
            first_failure: None,
            failures: Vec::new(),
            reported: None,
            unreported: false,
            gave_up: false,
        }
    }

    /// Submits `command` and waits for its reply; `hint` says what to do on giving up.
    fn request(&mut self, d: &mut Driver, command: Command, hint: &str) -> Result<Reply, Failure> {
        let request = d.submit(command);
        self.wait(d, hint, |d, until| d.wait_reply(request, Some(until)).transpose())
    }

    /// Calls `step` (one wait on the driver, until the instant it is given; `None` if
    /// not done by then) until it is done, reporting retries meanwhile.
    fn wait<T>(
        &mut self,
        d: &mut Driver,
        hint: &str,
        mut step: impl FnMut(&mut Driver, Instant) -> Result<Option<T>, DriverError>,
    ) -> Result<T, Failure> {
        loop {
            if let Some(done) = step(d, Instant::now() + TICK)? {
                return Ok(done);
            }
            for n in d.take_retrying() {
                if let Notice::Broker(CoreNotice::Retrying { operation, error, .. }) = n {
                    self.failed(operation.to_string(), error.to_string());
                }
            }
            let now = Instant::now();
            if self.first_failure.is_some_and(|t| now.duration_since(t) >= self.timeout) {
                return Err(self.give_up(hint));
            }
            if self.unreported && self.reported.is_none_or(|t| now.duration_since(t) >= PROGRESS_EVERY) {
                self.report(now);
            }
        }
    }

    fn failed(&mut self, what: String, error: String) {
        self.first_failure.get_or_insert_with(Instant::now);
        self.unreported = true;
        match self.failures.iter_mut().find(|(w, ..)| *w == what) {
            Some((_, attempts, last)) => {
                *attempts += 1;
                *last = error;
            }
            None => self.failures.push((what, 1, error)),
        }
    }

    /// Prints one progress line per failing operation.
    fn report(&mut self, now: Instant) {
        let left = self.first_failure.map_or(self.timeout, |t| self.timeout.saturating_sub(now.duration_since(t)));
        for (what, attempts, last) in &self.failures {
            eprintln!(
                "retrying: {what} has failed {attempts} times (last error: {last}); giving up in {} unless it \
                 succeeds (--timeout)",
                secs(left)
            );
        }
        self.reported = Some(now);
        self.unreported = false;
    }

    fn give_up(&mut self, hint: &str) -> Failure {
        self.gave_up = true;
        let failures: Vec<String> = self
            .failures
            .iter()
            .map(|(what, attempts, last)| format!("{what} failed {attempts} times (last error: {last})"))
            .collect();
        Failure {
            message: format!(
                "gave up after {} of failing storage in {}: {}. {hint}; --timeout SECS waits longer",
                secs(self.timeout),
                self.data_dir.display(),
                failures.join("; ")
            ),
            code: 1,
        }
    }
}

/// A duration as people read it: "60 s", "1.5 s".
fn secs(d: Duration) -> String {
    format!("{} s", (d.as_secs_f64() * 10.0).round() / 10.0)
}

/// Parses `--timeout`: a non-negative number of seconds.
fn parse_secs(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..1e9).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("{s:?} is not a number of seconds (for example 60 or 0.5)")),
    }
}

/// The most records `produce` sends in one request.
const PRODUCE_CHUNK: usize = 1000;

/// Splits `records` into requests of at most [`PRODUCE_CHUNK`] records and at most
/// `max_bytes` as stored, in order. A record too large on its own goes alone, for the
/// broker to refuse with a typed error.
fn produce_chunks(records: Vec<ProduceRecord>, max_bytes: u64) -> Vec<Vec<ProduceRecord>> {
    let mut chunks: Vec<Vec<ProduceRecord>> = Vec::new();
    let mut bytes = 0;
    for record in records {
        let size = broker_core::logcodec::batch_bytes([&record]);
        match chunks.last_mut() {
            // A batch's fixed header counts once: `size` includes it again.
            Some(chunk) if chunk.len() < PRODUCE_CHUNK && bytes + size - 12 <= max_bytes => {
                bytes += size - 12;
                chunk.push(record);
            }
            _ => {
                bytes = size;
                chunks.push(vec![record]);
            }
        }
    }
    chunks
}

/// A failure of the CLI: what to print and the exit status.
struct Failure {
    message: String,
    code: u8,
}

impl From<DriverError> for Failure {
    fn from(e: DriverError) -> Failure {
        let code = match e {
            DriverError::Locked { .. } => 4,
            DriverError::Halted(reason) => return halted(&reason),
            DriverError::CorruptJournal { .. } | DriverError::Broker(BrokerError::Halted(_)) => 3,
            _ => 1,
        };
        Failure { message: e.to_string(), code }
    }
}

/// The failure of a command during which the broker halted: the reason, what it means
/// and what to do, with exit status 3.
fn halted(reason: &HaltReason) -> Failure {
    Failure {
        message: format!(
            "the broker halted: {reason}. The outcome of the command in flight is unknown; nothing more was \
             written after the failure. Fix its cause, then run broker-fs again: it recovers from what is durable"
        ),
        code: 3,
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure { message: format!("cannot write output: {e}"), code: 1 }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // clap cannot require a global option, so its absence is checked here, with clap's
    // own usage error (exit status 2).
    let Some(data_dir) = cli.data_dir.clone() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--data-dir DIR is required (before or after the command)",
            )
            .exit()
    };
    match run(cli, data_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli, data_dir: PathBuf) -> Result<(), Failure> {
    let mut options = DriverOptions {
        // A start whose recovery keeps failing reports each retry and gives up after
        // --timeout, like every other wait of the CLI.
        recovery_attempts: None,
        recovery_timeout: Some(cli.timeout),
        on_recovery_retry: Some(|what| eprintln!("retrying: recovery: {what}")),
        ..DriverOptions::default()
    };
    // Commands that only read write nothing either: they work on a read-only data
    // directory and on a full disk (leaving recovery's repairs to the next writer).
    options.config.read_only =
        matches!(cli.command, Cmd::List | Cmd::Describe { .. } | Cmd::Status | Cmd::Fetch { .. });
    let json = cli.json;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Cmd::Serve { kafka, kafka_write_timeout_ms } = &cli.command {
        let write_timeout = Duration::from_millis(*kafka_write_timeout_ms);
        return serve_command(&data_dir, options, kafka.as_deref(), write_timeout, &mut out);
    }
    let mut d = Driver::<()>::open(&data_dir, options)?;
    let mut patience = Patience::new(cli.timeout, &data_dir);
    let result = command(&mut d, &mut patience, cli.command, json, &data_dir, &mut out);
    // A halt ends every command the same way, whatever the command made of it.
    if let Some(reason) = d.halted() {
        return Err(halted(reason));
    }
    result
}

/// `serve`, with the Kafka listener on `kafka` if given.
fn serve_command(
    data_dir: &Path,
    options: DriverOptions,
    kafka: Option<&str>,
    write_timeout: Duration,
    out: &mut impl Write,
) -> Result<(), Failure> {
    // Bound before recovery, so that an address in use is reported at once.
    let listener = match kafka {
        Some(addr) => Some(
            std::net::TcpListener::bind(addr)
                .map_err(|e| Failure { code: 1, message: format!("cannot listen for Kafka clients on {addr}: {e}") })?,
        ),
        None => None,
    };
    let limits = broker_kafka::Limits { write_timeout, ..broker_kafka::Limits::from(&options.config) };
    let mut serve_options = serve::ServeOptions::for_config(&options.config);
    let driver = Driver::<broker_fs::broker_loop::Input>::open(data_dir, options)?;
    let kafka = match listener {
        Some(listener) => {
            let address = listener.local_addr()?;
            let stop = driver.mailbox();
            let kafka = broker_kafka::Kafka::start(listener, driver.mailbox(), limits, move || {
                stop.send(broker_fs::broker_loop::Input::Stop);
            })?;
            serve_options.outlive_input = true;
            serve_options.ready_events.push(json!({ "event": "kafka-listening", "address": address.to_string() }));
            Some(kafka)
        }
        None => None,
    };
    let stdin = std::io::BufReader::new(std::io::stdin());
    let outcome = serve::serve(driver, stdin, out, &mut std::io::stderr(), serve_options);
    if let Some(kafka) = kafka {
        kafka.stop();
    }
    match outcome {
        Outcome::Finished => Ok(()),
        Outcome::Halted(reason) => Err(halted(&reason)),
        Outcome::OutputClosed(e) => Err(e.into()),
    }
}

/// Runs one command other than `serve` on an open directory, writing to `out`.
fn command(
    d: &mut Driver,
    patience: &mut Patience,
    command: Cmd,
    json: bool,
    data_dir: &Path,
    out: &mut impl Write,
) -> Result<(), Failure> {
    match command {
        Cmd::Create { name, partitions, grace_ms } => {
            let settings = TopicSettings { deletion_grace_ms: grace_ms };
            let hint = format!(
                "The creation of topic {name:?} is journaled: fix the cause (a file or directory in the way of \
                 the log, a full disk, permissions) and the next start of broker-fs creates its missing logs \
                 (`broker-fs list` then shows the topic)"
            );
            let reply =
                patience.request(d, Command::CreateTopic { name: name.clone(), partitions, settings }, &hint)?;
            let Reply::Created { topic } = reply else { return Err(unexpected(&reply)) };
            if json {
                emit(out, &json!({ "name": name, "id": topic.0, "partitions": partitions, "grace_ms": grace_ms }))?;
            } else {
                writeln!(out, "created topic {name:?} (id {topic}, {partitions} partitions)")?;
            }
        }
        Cmd::Delete { name, wait } => {
            let reply = patience.request(d, Command::DeleteTopic { name: name.clone() }, AGAIN)?;
            let Reply::DeleteAccepted { topic } = reply else { return Err(unexpected(&reply)) };
            let partitions = d.pending_deletions().iter().find(|p| p.topic == topic).map(|p| p.partitions);
            let logs = partitions.map_or("its logs".to_string(), |n| format!("its {n} logs"));
            if wait {
                if !json {
                    eprintln!("deleted topic {name:?} (id {topic}); waiting for {logs} to be removed...");
                }
                let hint = "The deletion is acknowledged (its tombstone is durable): fix the cause, then \
                            `broker-fs recover` removes the remaining logs";
                patience.wait(d, hint, |d, until| Ok(d.wait_deletion(topic, Some(until))?.then_some(())))?;
            }
            if json {
                let state = if wait { "removed" } else { "pending" };
                emit(out, &json!({ "name": name, "id": topic.0, "deleted": true, "physical": state }))?;
            } else if wait {
                writeln!(out, "deleted topic {name:?} (id {topic}): the tombstone is durable and {logs} are removed")?;
            } else {
                // This process exits now: the removal does not go on without it.
                writeln!(
                    out,
                    "deleted topic {name:?} (id {topic}): the tombstone is durable; {logs} are still on disk. \
                     `broker-fs recover` removes them (so does a running `serve`); any other command that writes \
                     (create, produce, delete) resumes the removal for as long as it runs"
                )?;
            }
        }
        Cmd::Produce { name, key, values } => {
            let values = if values.is_empty() { read_stdin_lines()? } else { values };
            if values.is_empty() {
                return Err(Failure { message: "nothing to produce: give values or lines on stdin".into(), code: 1 });
            }
            let key = key.map(String::into_bytes);
            let total = values.len();
            let mut positions = Vec::new();
            // The records go in requests within the broker's limits; a failed request ends
            // the produce: (its first record, counted from 1, its length, the failure).
            let mut failed = None;
            let records = values.into_iter().map(|v| ProduceRecord { key: key.clone(), value: v.into_bytes() });
            for records in produce_chunks(records.collect(), d.broker().config().batch_bytes_limit()) {
                let len = records.len();
                match patience.request(d, Command::Produce { topic: name.clone(), partition: None, records }, AGAIN) {
                    Ok(Reply::Produced { positions: p, .. }) => positions.extend(p),
                    Ok(reply) => failed = Some((positions.len() + 1, len, unexpected(&reply))),
                    Err(e) => failed = Some((positions.len() + 1, len, e)),
                }
                if failed.is_some() {
                    break;
                }
            }
            // What was acknowledged is printed whether or not a later request failed.
            if !json && failed.is_some() {
                writeln!(out, "produced {} of {total} records to {name:?}", positions.len())?;
            } else if !json {
                writeln!(out, "produced {} records to {name:?}", positions.len())?;
            }
            for p in &positions {
                if json {
                    emit(out, &json!({ "partition": p.partition, "offset": p.offset }))?;
                } else {
                    writeln!(out, "  partition {} offset {}", p.partition, p.offset)?;
                }
            }
            if let Some((first, len, failure)) = failed {
                out.flush()?;
                let last = first + len - 1;
                let fate = if d.halted().is_some() || patience.gave_up {
                    "their outcome is unknown"
                } else {
                    "none of them was written (the error counts records from the first of them)"
                };
                let unsent = if last < total {
                    format!("; records {} to {total} were not sent", last + 1)
                } else {
                    String::new()
                };
                eprintln!(
                    "note: produced {} of {total} records (positions above); records {first} to {last} failed as one \
                     request and {fate}{unsent}",
                    positions.len()
                );
                return Err(failure);
            }
        }
        Cmd::Fetch { name, partition, offset, max } => {
            let reply = patience.request(
                d,
                Command::Fetch { topic: name.clone(), partition, offset, max_records: max, max_bytes: None },
                AGAIN,
            )?;
            let Reply::Fetched { records, high_watermark, .. } = reply else { return Err(unexpected(&reply)) };
            if !json && records.is_empty() {
                writeln!(out, "no records at offset {offset} (the high watermark is {high_watermark})")?;
            }
            for r in records {
                if json {
                    let key = r.key.as_deref().map_or(Value::Null, jsonbytes::to_json);
                    let value = jsonbytes::to_json(&r.value);
                    emit(out, &json!({ "partition": partition, "offset": r.offset, "key": key, "value": value }))?;
                } else {
                    let key = r.key.as_deref().map_or("-".to_string(), bytes_text);
                    writeln!(out, "offset {}  key {}  value {}", r.offset, key, bytes_text(&r.value))?;
                }
            }
        }
        Cmd::List => {
            let reply = patience.request(d, Command::ListTopics, AGAIN)?;
            let Reply::Topics(topics) = reply else { return Err(unexpected(&reply)) };
            if json {
                for t in &topics {
                    emit(out, &serde_json::to_value(TopicJson::from(t)).unwrap_or_default())?;
                }
            } else if topics.is_empty() {
                writeln!(out, "no topics")?;
            } else {
                writeln!(out, "{:<24} {:>6} {:>10} {:>8}", "NAME", "ID", "PARTITIONS", "RECORDS")?;
                for t in &topics {
                    let records: u64 = t.high_watermarks.iter().map(|hw| hw - t.log_start).sum();
                    writeln!(out, "{:<24} {:>6} {:>10} {:>8}", t.name, t.id.to_string(), t.partitions, records)?;
                }
            }
        }
        Cmd::Describe { name } => {
            let reply = patience.request(d, Command::DescribeTopic { name }, AGAIN)?;
            let Reply::Described(t) = reply else { return Err(unexpected(&reply)) };
            if json {
                emit(out, &serde_json::to_value(TopicJson::from(&t)).unwrap_or_default())?;
            } else {
                describe_text(out, &t)?;
            }
        }
        Cmd::Status => {
            let pending: Vec<PendingJson> =
                d.pending_deletions().iter().map(|p| PendingJson::new(p, d.clock())).collect();
            let topics: Vec<TopicJson> = d.live_topics().iter().map(TopicJson::from).collect();
            let damaged: Vec<DamagedJson> = d.broker().damaged_records().iter().map(DamagedJson::from).collect();
            let notices = d.take_notices();
            // Status holds the lock shared, so no writer holds it now; what LOCK says is
            // for the operator who wonders whether a leftover pid is stale.
            let pid = broker_fs::datadir::lock_file_pid(data_dir);
            let pid_running = pid.and_then(broker_fs::datadir::pid_running);
            if json {
                let notices: Vec<String> = notices.iter().map(ToString::to_string).collect();
                let lock = json!({ "pid": pid, "pid_running": pid_running });
                emit(
                    out,
                    &json!({ "topics": topics, "pending": pending, "damaged": damaged, "lock": lock, "notices": notices }),
                )?;
            } else {
                writeln!(out, "topics: {} live", topics.len())?;
                for r in &damaged {
                    writeln!(
                        out,
                        "damaged: {:?} (id {}) partition {} offsets {}..{} cannot be read back: {}",
                        r.name,
                        TopicId(r.id),
                        r.partition,
                        r.from,
                        r.to,
                        r.detail
                    )?;
                }
                pending_text(out, &pending, "removal runs while a broker-fs command that writes (recover, serve, create, produce, delete) has the directory open")?;
                for n in &notices {
                    writeln!(out, "{n}")?;
                }
                let named = match (pid, pid_running) {
                    (None, _) => String::new(),
                    (Some(pid), Some(false)) => {
                        format!("; LOCK names pid {pid}, the last writer, not running (nothing to do)")
                    }
                    (Some(pid), Some(true)) => format!("; LOCK names pid {pid}, running, not writing"),
                    (Some(pid), None) => format!("; LOCK names pid {pid}"),
                };
                writeln!(out, "lock: free{named}")?;
            }
            return Ok(());
        }
        Cmd::Recover => {
            let resumed: Vec<PendingJson> =
                d.pending_deletions().iter().map(|p| PendingJson::new(p, d.clock())).collect();
            if !resumed.is_empty() && !json {
                eprintln!("waiting for {} pending deletion(s) to finish...", resumed.len());
            }
            let hint = "Fix the cause, then run `broker-fs recover` again";
            patience.wait(d, hint, |d, until| Ok(d.wait_quiescent(Some(until))?.then_some(())))?;
            // The finished deletions are listed on their own below.
            let mut notices = d.take_notices();
            notices.retain(|n| !matches!(n, Notice::Broker(CoreNotice::DeletionFinished { .. })));
            let topics: Vec<TopicJson> = d.live_topics().iter().map(TopicJson::from).collect();
            let strays: Vec<String> = notices
                .iter()
                .filter_map(|n| match n {
                    Notice::Broker(CoreNotice::StrayLogRemoved { log }) => Some(log.file_name()),
                    _ => None,
                })
                .collect();
            let unknown: Vec<String> = notices
                .iter()
                .filter_map(|n| match n {
                    Notice::UnknownEntry { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect();
            let epoch = d.broker().journal_epoch();
            if json {
                let notices: Vec<String> = notices.iter().map(ToString::to_string).collect();
                emit(
                    out,
                    &json!({
                        "data_dir": data_dir.display().to_string(),
                        "journal_epoch": epoch,
                        "topics": topics,
                        "finished_deletions": resumed,
                        "stray_logs_removed": strays,
                        "unknown_entries": unknown,
                        "pending": [],
                        "notices": notices,
                    }),
                )?;
            } else {
                writeln!(out, "recovered {} (journal epoch {epoch})", data_dir.display())?;
                writeln!(out, "topics: {} live", topics.len())?;
                for r in &resumed {
                    writeln!(
                        out,
                        "finished the deletion of {:?} (id t{}): {} of {} logs were removed before, all are now",
                        r.name, r.id, r.removed, r.partitions
                    )?;
                }
                if strays.is_empty() {
                    writeln!(out, "stray logs removed: none")?;
                }
                for n in &notices {
                    writeln!(out, "{n}")?;
                }
                writeln!(out, "pending deletions: none")?;
            }
            return Ok(());
        }
        Cmd::Serve { .. } => unreachable!("handled above"),
    }
    for n in d.take_notices() {
        eprintln!("{}: {n}", if n.is_warning() { "warning" } else { "note" });
    }
    Ok(())
}

fn unexpected(reply: &Reply) -> Failure {
    Failure { message: format!("unexpected reply from the broker: {reply:?}"), code: 1 }
}

fn emit(out: &mut impl Write, v: &Value) -> Result<(), Failure> {
    writeln!(out, "{v}")?;
    Ok(())
}

fn read_stdin_lines() -> Result<Vec<String>, Failure> {
    let mut values = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Failure { message: format!("cannot read standard input: {e}"), code: 1 })?;
        values.push(line);
    }
    Ok(values)
}

/// Bytes as text: as they are if printable UTF-8, escaped otherwise.
fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(char::is_control) && !s.is_empty() => s.to_string(),
        _ => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

fn describe_text(out: &mut impl Write, t: &TopicDescription) -> std::io::Result<()> {
    writeln!(out, "topic {:?}", t.name)?;
    writeln!(out, "  id          {}", t.id)?;
    writeln!(out, "  partitions  {}", t.partitions)?;
    writeln!(out, "  grace       {} ms", t.settings.deletion_grace_ms)?;
    if t.log_start > 0 {
        // Past every offset of the topics deleted before this one was created.
        writeln!(out, "  offsets     from {}", t.log_start)?;
    }
    for (p, hw) in t.high_watermarks.iter().enumerate() {
        writeln!(out, "  partition {p}: {} records", hw - t.log_start)?;
    }
    Ok(())
}

fn pending_text(out: &mut impl Write, pending: &[PendingJson], tail: &str) -> std::io::Result<()> {
    if pending.is_empty() {
        return writeln!(out, "pending deletions: none");
    }
    writeln!(out, "pending deletions: {}", pending.len())?;
    for p in pending {
        let durable = if p.tombstone_durable { "" } else { " (tombstone not yet durable)" };
        let stage = if p.grace_left_ms > 0 {
            format!("waits in its grace delay, {:.1} s left", p.grace_left_ms as f64 / 1000.0)
        } else {
            format!("its grace delay is over: {tail}")
        };
        writeln!(
            out,
            "  {:?} (id {}): {} of {} logs removed{durable}; {stage}",
            p.name,
            TopicId(p.id),
            p.removed,
            p.partitions
        )?;
    }
    Ok(())
}
