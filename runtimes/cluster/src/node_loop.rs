//! One node on tokio: the core's `Node` (a state machine with no I/O) driven by one
//! task, which passes it clients' commands, the results of its store operations and
//! the passing of time, and carries out what it asks: store operations (each a task of
//! its own, with a deadline), and replies.
//!
//! The node's clock is the time since the loop started (monotonic); a store operation
//! that has no answer by its deadline is abandoned: a read as failed (nothing was
//! learned), a write as of unknown outcome (it may land later), as the store contract
//! says, and the node resolves or retries it by its rules.

use crate::store::adapter::shown;
use crate::store::Store;
use broker_core::cluster::node::{Node, NodeEffect, NodeOptions, StoreOpId};
use broker_core::cluster::store::{StoreError, StoreOp, StoreResult};
use broker_core::{BrokerError, Command, Reply, RequestId, Time};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// What the loop is asked.
enum Msg {
    Command(Command, oneshot::Sender<Result<Reply, BrokerError>>),
}

/// A handle on a running node: passes it commands (the Kafka front end's broker).
#[derive(Clone)]
pub struct NodeHandle {
    tx: mpsc::UnboundedSender<Msg>,
}

impl broker_kafka::Broker for NodeHandle {
    fn submit(&self, command: Command, reply: oneshot::Sender<Result<Reply, BrokerError>>) -> bool {
        self.tx.send(Msg::Command(command, reply)).is_ok()
    }
}

impl NodeHandle {
    /// Passes `command` and waits for its reply.
    pub async fn call(&self, command: Command) -> Result<Reply, BrokerError> {
        let (tx, rx) = oneshot::channel();
        if !broker_kafka::Broker::submit(self, command, tx) {
            return Err(BrokerError::Halted("the node stopped".into()));
        }
        rx.await.unwrap_or_else(|_| Err(BrokerError::Halted("the node stopped before answering".into())))
    }
}

/// What the loop has seen of the store, and where the node stands, for the log and
/// for `serve --status-file`.
#[derive(Clone, Debug, Default)]
pub struct Health {
    /// The seq of the last journal entry the node has folded.
    pub position: u64,
    /// The live topics in its catalog.
    pub live_topics: usize,
    /// The deleted incarnations whose objects are not all removed yet, in its catalog.
    pub pending_removals: usize,
    /// The last error of a read (get, list), if no read has succeeded since.
    pub read_error: Option<String>,
    /// The last error of a write (create, delete), if no write has succeeded since.
    pub write_error: Option<String>,
    /// Store operations carried out.
    pub ops: u64,
    /// How many of them failed or had an unknown outcome.
    pub errors: u64,
    /// Produces whose records rode in another produce's object (group commit).
    pub rides: u64,
}

/// How long `serve` holds a topic's next object write for more produces to ride
/// in it, in milliseconds, unless `--gather-ms` says otherwise (BENCHMARKS.md,
/// section 8, measures the choice).
pub const DEFAULT_GATHER_MS: u64 = 0;

/// The loop's tuning.
#[derive(Clone, Debug)]
pub struct LoopOptions {
    /// A store operation with no answer after this long is abandoned.
    pub op_timeout: Duration,
}

/// Starts the node's loop on the current tokio runtime; it runs until every handle is
/// dropped. `health` is updated as store operations complete; a store that starts or
/// stops failing is said on standard error, once each way.
pub fn start(
    options: NodeOptions,
    store: Arc<dyn Store>,
    loop_options: LoopOptions,
    health: Arc<Mutex<Health>>,
) -> (NodeHandle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(Node::new(options), store, loop_options, health, rx));
    (NodeHandle { tx }, task)
}

async fn run(
    mut node: Node,
    store: Arc<dyn Store>,
    options: LoopOptions,
    health: Arc<Mutex<Health>>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let started = Instant::now();
    let now = || Time::ZERO.plus_micros(started.elapsed().as_micros() as u64);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(StoreOpId, bool, StoreResult)>();
    let mut waiting: HashMap<RequestId, oneshot::Sender<Result<Reply, BrokerError>>> = HashMap::new();
    let mut next_request = 0_u64;
    // Starts the node's clock, and with it its timers: an idle node reads the journal's
    // tail from the start, so an unreachable store is told at once, not at the first
    // command.
    node.handle_timeout(now());
    let mut counted: Option<Instant> = None;
    loop {
        while let Some(effect) = node.poll_effect() {
            match effect {
                NodeEffect::Store { id, op } => {
                    let (store, done, timeout) = (store.clone(), done_tx.clone(), options.op_timeout);
                    tokio::spawn(async move {
                        let write = !matches!(op, StoreOp::Get { .. } | StoreOp::List { .. });
                        // Named before the op goes: a timeout says what did not answer.
                        let what = shown(&op);
                        let result = match tokio::time::timeout(timeout, store.run(op)).await {
                            Ok(result) => result,
                            Err(_) if write => {
                                Err(StoreError::Unknown(format!("{what}: no answer from the store in {timeout:?}")))
                            }
                            Err(_) => {
                                Err(StoreError::Failed(format!("{what}: no answer from the store in {timeout:?}")))
                            }
                        };
                        let _ = done.send((id, write, result));
                    });
                }
                NodeEffect::Reply { request, reply } => {
                    if let Some(tx) = waiting.remove(&request) {
                        let _ = tx.send(reply);
                    }
                }
            }
        }
        // Counting the catalog's topics costs as many as it holds: at most every
        // quarter second, not at every event.
        if counted.is_none_or(|at| at.elapsed() >= Duration::from_millis(250)) {
            counted = Some(Instant::now());
            let catalog = node.catalog();
            let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
            h.position = catalog.position();
            h.live_topics = catalog.live_topics().count();
            h.pending_removals = catalog.deleting().count();
            h.rides = node.rides();
        }
        let deadline = node.poll_timeout().map(|at| {
            let wait = at.as_micros().saturating_sub(now().as_micros());
            tokio::time::Instant::now() + Duration::from_micros(wait)
        });
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Command(command, reply)) => {
                    let request = RequestId(next_request);
                    next_request += 1;
                    waiting.insert(request, reply);
                    node.handle_command(now(), request, command);
                }
                None => return,
            },
            Some((id, write, result)) = done_rx.recv() => {
                note(&health, write, &result);
                node.handle_store(now(), id, result);
            }
            () = sleep_until(deadline) => node.handle_timeout(now()),
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Counts a store result, and says on standard error when reads or writes start
/// failing (with the error) and when they succeed again: once each way, not at every
/// retry.
fn note(health: &Mutex<Health>, write: bool, result: &StoreResult) {
    let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
    h.ops += 1;
    let what = if write { "writes" } else { "reads" };
    if result.is_err() {
        h.errors += 1;
    }
    let last = if write { &mut h.write_error } else { &mut h.read_error };
    match result {
        Ok(_) => {
            if let Some(was) = last.take() {
                eprintln!("store: {what} succeed again (the last error was: {was})");
            }
        }
        Err(e) => {
            if last.is_none() {
                eprintln!("store: {what} failing: {e}; retrying with backoff");
            }
            *last = Some(e.to_string());
        }
    }
}

impl Health {
    /// As `serve --status-file` writes it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "position": self.position,
            "live_topics": self.live_topics,
            "pending_removals": self.pending_removals,
            "read_error": self.read_error,
            "write_error": self.write_error,
            "store_ops": self.ops,
            "store_errors": self.errors,
            "produces_carried": self.rides,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Pending;
    use broker_core::Config;

    /// A store that never answers.
    struct Silent;

    impl Store for Silent {
        fn run(&self, _: StoreOp) -> Pending {
            Box::pin(std::future::pending())
        }
    }

    /// An operation the store does not answer in time fails with what it was (here the
    /// first fence's listing of the journal), as the log and the status file say.
    #[test]
    fn an_operation_without_an_answer_is_named_when_it_times_out() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let health = Arc::new(Mutex::new(Health::default()));
        let options = NodeOptions {
            node: 1,
            boot: 1,
            config: Config::default(),
            list_limit: 10,
            tail_every_ms: 0,
            reconcile_every_ms: 0,
            compact_after_entries: 0,
            request_timeout_ms: 0,
            gather_ms: 0,
        };
        runtime.block_on(async {
            let loop_options = LoopOptions { op_timeout: Duration::from_millis(20) };
            let (handle, task) = start(options, Arc::new(Silent), loop_options, health.clone());
            let call = tokio::spawn(async move { handle.call(Command::ListTopics).await });
            for _ in 0..200 {
                if health.lock().unwrap().read_error.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            call.abort();
            task.abort();
        });
        let error = health.lock().unwrap().read_error.clone();
        assert_eq!(
            error.as_deref(),
            Some("store operation failed: listing \"j/\": no answer from the store in 20ms"),
            "{error:?}"
        );
    }
}
