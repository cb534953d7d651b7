//! `broker-cluster`: one node of a cluster over a shared store, serving Kafka clients.
//!
//! `serve --store URL --node-id N --kafka ADDR` runs until SIGINT or SIGTERM; it writes
//! one JSON line to standard output once it listens (`{"event": "listening", ...}`, with
//! the address, useful with port 0), and what goes wrong with the store to standard
//! error. Exit status: 0 after a stop signal, 1 when it cannot start, 2 on bad usage.
//!
//! `status --store URL [--json]` says what the store holds, as a node reads it, and
//! writes nothing. Exit status: 0, 1 when the store cannot be read, 2 on bad usage.

use broker_cluster::node_loop::{self, Health, LoopOptions, DEFAULT_GATHER_MS};
use broker_cluster::{peers, status, store};
use broker_core::cluster::node::NodeOptions;
use broker_core::Config;
use clap::{Args, Parser, Subcommand};
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Parser)]
#[command(name = "broker-cluster", version, about = "One node of a broker-core cluster over a shared store")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// Which store: one for everything, or metadata in one and data in another.
#[derive(Args)]
struct StoreArgs {
    /// The shared store: file:///path (a directory the nodes of one machine share),
    /// s3://bucket[/prefix] (credentials and region from AWS_* variables),
    /// postgres://user@host:port/db[?table=name], or memory:// (for tests: nothing is
    /// shared or kept).
    #[arg(long, required_unless_present_all = ["meta_store", "data_store"], conflicts_with_all = ["meta_store", "data_store"])]
    store: Option<String>,
    /// The store of the metadata (the journal and snapshots), with --data-store
    /// instead of --store: as postgres://..., with the data objects in s3://...
    #[arg(long, requires = "data_store")]
    meta_store: Option<String>,
    /// The store of the data (the topic objects), with --meta-store.
    #[arg(long, requires = "meta_store")]
    data_store: Option<String>,
    /// The endpoint of an s3:// store that is not AWS's own (http:// allowed), as
    /// http://127.0.0.1:9000.
    #[arg(long)]
    s3_endpoint: Option<String>,
}

impl StoreArgs {
    /// The store, and how to name it to the user; an error and the exit status.
    fn open(self) -> Result<(Arc<dyn store::Store>, String), ExitCode> {
        let options = store::StoreOptions { s3_endpoint: self.s3_endpoint };
        let (opened, shown) = match (self.store, self.meta_store, self.data_store) {
            (Some(url), _, _) => (store::open(&url, &options), url),
            (None, Some(meta), Some(data)) => {
                let shown = format!("metadata {meta}, data {data}");
                (store::open_split(&meta, &data, &options), shown)
            }
            _ => unreachable!("clap requires --store, or --meta-store with --data-store"),
        };
        match opened {
            Ok(s) => Ok((s, shown)),
            Err(e) => {
                eprintln!("error: {e}");
                let usage = matches!(e, store::UrlError::Unsupported { .. });
                Err(ExitCode::from(if usage { 2 } else { 1 }))
            }
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one node: serve Kafka clients over the shared store until SIGINT or SIGTERM.
    Serve {
        #[command(flatten)]
        store: StoreArgs,
        /// This node's id in the cluster: each node its own.
        #[arg(long)]
        node_id: u32,
        /// Where to listen for Kafka clients (host:port; port 0 picks one).
        #[arg(long)]
        kafka: String,
        /// How often an idle node reads the journal's tail, in milliseconds.
        #[arg(long, default_value_t = 1_000)]
        tail_every_ms: u64,
        /// How often the node looks for objects no topic owns, in milliseconds (0: never).
        #[arg(long, default_value_t = 60_000)]
        reconcile_every_ms: u64,
        /// The longest a request waits for the store before it is answered anyway, in
        /// milliseconds.
        #[arg(long, default_value_t = 15_000)]
        request_timeout_ms: u64,
        /// A store operation with no answer after this many milliseconds is abandoned
        /// (a write's outcome is then unknown, and checked by reading it back).
        #[arg(long, default_value_t = 10_000)]
        store_timeout_ms: u64,
        /// How long a topic's next object write waits for more produces to ride in
        /// it, in milliseconds (0: it starts at once; produces that arrive while a write
        /// to their topic is under way ride in the next one either way).
        #[arg(long, default_value_t = DEFAULT_GATHER_MS)]
        gather_ms: u64,
        /// Name every live node in Metadata and spread the partitions' leadership over
        /// them (the nodes learn of each other through the store), so that each
        /// partition's produces go to one node; without it each node names only itself.
        /// Needs --kafka to name an address clients can reach (not 0.0.0.0).
        #[arg(long)]
        spread_leadership: bool,
        /// Write the node's own state here as JSON every second (replaced whole): its
        /// journal position, live topics, pending removals and the store's last read
        /// and write errors; `node-status PATH` shows it.
        #[arg(long)]
        status_file: Option<std::path::PathBuf>,
    },
    /// Say what the store holds: whether it answers, the journal's position, the live
    /// topics and the deletions whose objects are being removed. Writes nothing.
    Status {
        #[command(flatten)]
        store: StoreArgs,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// How long to wait for the store, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Say what a running node last wrote of itself (serve --status-file PATH): its
    /// journal position, live topics, pending removals, the store's last errors, and how
    /// long ago it wrote them.
    NodeStatus {
        /// The node's status file.
        path: std::path::PathBuf,
        /// The file's JSON object, with its age in milliseconds, instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Serve {
            store,
            node_id,
            kafka,
            tail_every_ms,
            reconcile_every_ms,
            request_timeout_ms,
            store_timeout_ms,
            gather_ms,
            spread_leadership,
            status_file,
        } => {
            let (shared, store) = match store.open() {
                Ok(s) => s,
                Err(code) => return code,
            };
            let timing = Timing { tail_every_ms, reconcile_every_ms, request_timeout_ms, store_timeout_ms, gather_ms };
            serve(shared, &store, node_id, &kafka, timing, spread_leadership, status_file)
        }
        Cmd::NodeStatus { path, json } => node_status(&path, json),
        Cmd::Status { store, json, timeout_ms } => {
            let (shared, shown) = match store.open() {
                Ok(s) => s,
                Err(code) => return code,
            };
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: cannot start a runtime: {e}");
                    return ExitCode::from(1);
                }
            };
            let status = runtime.block_on(status::read(shared, Duration::from_millis(timeout_ms)));
            if json {
                println!("{}", status::to_json(&shown, &status));
            } else {
                print!("{}", status::to_text(&shown, &status));
            }
            if status.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// A node's timers, from the command line.
struct Timing {
    tail_every_ms: u64,
    reconcile_every_ms: u64,
    request_timeout_ms: u64,
    store_timeout_ms: u64,
    gather_ms: u64,
}

/// `serve`: runs one node until a stop signal.
fn serve(
    shared: Arc<dyn store::Store>,
    store: &str,
    node_id: u32,
    kafka: &str,
    timing: Timing,
    spread_leadership: bool,
    status_file: Option<std::path::PathBuf>,
) -> ExitCode {
    let Timing { tail_every_ms, reconcile_every_ms, request_timeout_ms, store_timeout_ms, gather_ms } = timing;
    let Ok(kafka_id) = i32::try_from(node_id) else {
        eprintln!("error: --node-id {node_id} is past Kafka's broker ids (at most {})", i32::MAX);
        return ExitCode::from(2);
    };
    let listener = match TcpListener::bind(kafka) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen for Kafka clients on {kafka}: {e}");
            return ExitCode::from(1);
        }
    };
    // A boot is new at every start: the time in nanoseconds, which no earlier start of
    // this node id on this machine can have had.
    let boot = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let config = Config::default();
    let options = NodeOptions {
        node: node_id,
        boot,
        config: config.clone(),
        list_limit: 1_000,
        tail_every_ms,
        reconcile_every_ms,
        compact_after_entries: 1_000,
        request_timeout_ms,
        gather_ms,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the node's runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let health = Arc::new(Mutex::new(Health::default()));
    let loop_options = LoopOptions { op_timeout: Duration::from_millis(store_timeout_ms) };
    if let Some(path) = status_file {
        let (health, id) = (health.clone(), serde_json::json!({"node": node_id, "boot": boot}));
        runtime.spawn(write_status(path, id, health));
    }
    let address = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if spread_leadership && address.ip().is_unspecified() {
        eprintln!(
            "error: --spread-leadership names this node to clients by the address it listens on, and {address} is \
             none they can reach: give --kafka a specific address (HOST:PORT)"
        );
        return ExitCode::from(2);
    }
    let registry_store = shared.clone();
    let (handle, task) = runtime.block_on(async { node_loop::start(options, shared, loop_options, health) });
    let registry = spread_leadership.then(|| {
        let _inside = runtime.enter();
        peers::Registry::start(registry_store, node_id, boot, address.to_string())
    });
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    // Metadata names the node by its own id, so that a client told of several nodes
    // tells them apart (checked below i32::MAX, Kafka's broker ids, at the start).
    let peers = registry.clone().map(|r| r as Arc<dyn broker_kafka::Peers>);
    // A node keeps no consumer groups' offsets and no producer ids (the core refuses
    // their commands here): the group APIs and InitProducerId are neither advertised nor
    // served.
    let limits = broker_kafka::Limits {
        node_id: kafka_id,
        peers,
        group_offsets: false,
        producers: false,
        ..broker_kafka::Limits::from(&config)
    };
    let kafka = match broker_kafka::Kafka::start(listener, handle, limits, move || {
        let _ = stop_tx.send(());
    }) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: cannot serve Kafka clients: {e}");
            return ExitCode::from(1);
        }
    };
    let ready = serde_json::json!({
        "event": "listening", "node": node_id, "boot": boot, "kafka": address.to_string(), "store": store,
    });
    println!("{ready}");
    eprintln!("node {node_id}: serving Kafka clients on {address} over {store}");
    let _ = stop_rx.recv();
    eprintln!("node {node_id}: stopping");
    kafka.stop();
    if let Some(registry) = registry {
        // Its beats go, so that the others stop naming it at once rather than after
        // their liveness window.
        let _ = runtime.block_on(async { tokio::time::timeout(Duration::from_secs(2), registry.leave()).await });
    }
    task.abort();
    ExitCode::SUCCESS
}

/// Writes the node's state to `path` every second, whole (a new file renamed over the
/// old), with the wall-clock time it was written; a failed write is said once.
async fn write_status(path: std::path::PathBuf, id: serde_json::Value, health: Arc<Mutex<Health>>) {
    let temp = path.with_extension("tmp");
    let mut failing = false;
    loop {
        let mut state = health.lock().unwrap_or_else(|p| p.into_inner()).to_json();
        state["node"] = id["node"].clone();
        state["boot"] = id["boot"].clone();
        state["written_ms"] = serde_json::json!(now_ms());
        let written = std::fs::write(&temp, format!("{state}\n")).and_then(|()| std::fs::rename(&temp, &path));
        match written {
            Err(e) if !failing => {
                eprintln!("status file {}: {e}", path.display());
                failing = true;
            }
            Ok(()) => failing = false,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `node-status PATH`: what the node last wrote, and how long ago.
fn node_status(path: &std::path::Path, json: bool) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e} (is a node running with --status-file {0}?)", path.display());
            return ExitCode::from(1);
        }
    };
    let mut state: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}: not a node's status file: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    let age = now_ms().saturating_sub(state["written_ms"].as_u64().unwrap_or(0));
    state["age_ms"] = serde_json::json!(age);
    if json {
        println!("{state}");
        return ExitCode::SUCCESS;
    }
    let error = |key: &str| state[key].as_str().map_or("none".to_string(), str::to_string);
    println!("node: {} (boot {})", state["node"], state["boot"]);
    println!("written: {:.1} s ago{}", age as f64 / 1e3, if age > 5_000 { " (the node may be stopped)" } else { "" });
    println!("journal position: {}", state["position"]);
    println!("live topics: {}", state["live_topics"]);
    println!("pending removals: {}", state["pending_removals"]);
    println!("store operations: {} ({} failed or of unknown outcome)", state["store_ops"], state["store_errors"]);
    println!("produces carried in another's object: {}", state["produces_carried"]);
    println!("last read error: {}", error("read_error"));
    println!("last write error: {}", error("write_error"));
    ExitCode::SUCCESS
}
