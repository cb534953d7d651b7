//! broker-core's Kafka front end, which `broker-fs serve --kafka ADDR` runs: Kafka clients create, produce
//! to, fetch from, list and delete topics of broker-core.
//!
//! - **APIs**: ApiVersions, Metadata, CreateTopics, DeleteTopics, Produce, Fetch,
//!   ListOffsets, OffsetForLeaderEpoch, and the admin APIs DescribeConfigs,
//!   DescribeCluster and CreatePartitions (refused for every topic: a partition count is
//!   fixed at creation), at the versions [`apis::SUPPORTED`] lists, one module of
//!   [`handlers`] each; and, where the broker keeps groups' committed offsets
//!   ([`Limits::group_offsets`]), the consumer-group APIs of [`apis::GROUPS`]; where it
//!   keeps producers ([`Limits::producers`]), InitProducerId ([`apis::PRODUCERS`]).
//!   Anything else closes the connection with the reason on standard error
//!   ([`listener`]).
//! - **Idempotent producers**: InitProducerId hands out the core's producer ids (a new
//!   one at epoch 0, also to a producer that names its old one, as Kafka does without a
//!   transactional id), and a produce whose batch carries an id is the core's
//!   `ProduceIdempotent`: a retry is answered with its first offsets and appended once,
//!   and Kafka's errors answer a sequence gap, an old epoch and an unknown id.
//! - **Transactions** are refused: FindCoordinator for a transactional id and
//!   InitProducerId with one answer `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, which
//!   clients take as fatal at once; no transaction API is advertised.
//! - **Consumer groups**: this listener coordinates every group, with Kafka's classic
//!   protocol; membership is held in its memory ([`groups`]: sessions, rebalances, the
//!   leader's assignments, bounded by [`groups::GroupLimits`]), committed offsets are the
//!   core's (`Command::CommitOffsets`), kept by incarnation, so a topic created again
//!   starts every group afresh. Static membership is refused.
//! - **Records** are Kafka v2 record batches, compressed (gzip, snappy, lz4, zstd) or
//!   not, checked whole on produce (CRC, and every record, decompressed within a bound:
//!   [`batches`]) and stored whole, as they came, served back byte for byte; each Kafka
//!   offset is a core offset ([`stored`]). Compressed bytes that do not decompress are
//!   refused with `CORRUPT_MESSAGE`.
//! - **Offsets by time**: ListOffsets answers a timestamp with the first offset whose
//!   record's timestamp is at least it, and (version 7) the record of the largest
//!   timestamp, from an index held in memory and rebuilt from the log ([`time_index`]).
//! - **Deletion**: a topic whose deletion is acknowledged is gone from Metadata at once,
//!   and produce and fetch get `UNKNOWN_TOPIC_OR_PARTITION`, while its logs are removed in
//!   the background; creating the name again works at once, with a new topic id, a
//!   higher leader epoch, and offsets past the old incarnation's, so that a consumer of
//!   the old one is told its offset is out of range.
//!   Metadata never creates a topic.
//! - **acks**: `acks=all` (-1) and `acks=1` both answer once the records are durable
//!   (fsynced) in their partition's log: this broker is the only replica, so the two are
//!   the same. `acks=0` gets no answer, as Kafka specifies; its records are appended
//!   (and made durable) all the same, and a failure closes the connection.
//! - **Partitioning** is the client's: a produce lands in the partition it names.
//!   Kafka's Java client and kafka-python choose `murmur2(key) % partitions`, the core's
//!   own [`broker_core::partition_for_key`]; librdkafka does with `partitioner=murmur2_random`.
//!
//! The listener runs on a tokio runtime of its own and serves any broker behind the
//! [`Broker`] trait: every request becomes commands passed to it, answered in the order
//! they were passed. `broker-fs serve --kafka` passes them to the thread that runs its
//! broker, beside (not through) the JSON-lines requests of standard input.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apis;
#[cfg(feature = "fuzzing")]
pub mod batch_fuzzing;
pub mod batches;
pub mod compression;
pub mod errors;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod groups;
pub mod guard;
pub mod handlers;
pub mod listener;
pub mod stored;
pub mod time_index;

use broker_core::{BrokerError, Command, Config, Reply};
use std::net::TcpListener;
use std::sync::Arc;
use tokio::sync::oneshot;

/// How long a client may read none of a response before it is cut off, by default.
pub const WRITE_TIMEOUT_MS: u64 = 30_000;

/// The listener's limits: the core's, which it checks itself so that a client gets
/// Kafka's own error for them (`MESSAGE_TOO_LARGE`) and a create that only validates is
/// judged as the core would, and its own; and the broker id it answers as.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The core's configuration.
    pub core: Config,
    /// A client that reads none of a response for this long is cut off.
    pub write_timeout: std::time::Duration,
    /// The broker id Metadata names this listener by, as the leader of every partition
    /// and the controller: 0 for one broker; a cluster node's own id, so that a client
    /// that learns of several nodes tells them apart.
    pub node_id: i32,
    /// The other brokers Metadata names, over which it spreads the partitions'
    /// leadership; `None`: this listener is the only broker and leads every partition.
    pub peers: Option<Arc<dyn Peers>>,
    /// Whether the broker keeps consumer groups' committed offsets (the core's
    /// `CommitOffsets` and the commands beside it): only then are the group APIs
    /// ([`apis::GROUPS`]) advertised and served, with this listener as every group's
    /// coordinator. A cluster node keeps none; broker-fs does.
    pub group_offsets: bool,
    /// Whether the broker hands out producer ids and keeps their sequences (the core's
    /// `InitProducer` and `ProduceIdempotent`): only then is InitProducerId
    /// ([`apis::PRODUCERS`]) advertised and served, so that idempotent producers get
    /// their ids here. A cluster node keeps none; broker-fs does.
    pub producers: bool,
    /// The bounds on the groups' membership held in memory.
    pub groups: groups::GroupLimits,
}

impl From<&Config> for Limits {
    fn from(c: &Config) -> Limits {
        Limits {
            core: c.clone(),
            write_timeout: std::time::Duration::from_millis(WRITE_TIMEOUT_MS),
            node_id: 0,
            peers: None,
            group_offsets: false,
            producers: false,
            groups: groups::GroupLimits::default(),
        }
    }
}

/// The brokers a cluster node knows to be live besides itself, for Metadata. Leadership
/// is a routing hint only where every broker serves every partition, so a stale answer
/// costs a client a retry, never a wrong reply.
pub trait Peers: Send + Sync + std::fmt::Debug {
    /// The other live brokers: node id, host and Kafka port.
    fn others(&self) -> Vec<(i32, String, u16)>;
}

/// What the listener needs of a broker: a way to pass it commands, answered in the
/// order they were passed. `broker-fs serve`'s broker thread is one (through its
/// mailbox); the `kafka_connection` fuzz target's in-memory broker is another.
pub trait Broker: Send + Sync + 'static {
    /// Passes `command` to the broker, which answers through `reply`; false if the
    /// broker is gone (nothing was passed).
    fn submit(&self, command: Command, reply: oneshot::Sender<Result<Reply, BrokerError>>) -> bool;
}

/// Sends commands to the broker.
#[derive(Clone)]
pub struct Core {
    broker: Arc<dyn Broker>,
}

/// The reply to a submitted command, to wait for.
pub struct Answer(Option<oneshot::Receiver<Result<Reply, BrokerError>>>);

impl Core {
    /// A handle on `broker`.
    pub fn new(broker: impl Broker) -> Core {
        Core { broker: Arc::new(broker) }
    }

    /// Submits `command` now (commands reach the broker in the order they are
    /// submitted); its reply comes through the [`Answer`].
    pub fn submit(&self, command: Command) -> Answer {
        let (tx, rx) = oneshot::channel();
        Answer(self.broker.submit(command, tx).then_some(rx))
    }
}

impl Answer {
    /// The reply. If the broker stopped before answering (a halt, or the end of
    /// `serve`), the outcome is unknown: [`BrokerError::Halted`].
    pub async fn get(self) -> Result<Reply, BrokerError> {
        let gone = || BrokerError::Halted("the broker stopped before answering".into());
        match self.0 {
            Some(rx) => rx.await.unwrap_or_else(|_| Err(gone())),
            None => Err(gone()),
        }
    }
}

/// The Kafka listener, running on its own runtime.
pub struct Kafka {
    runtime: tokio::runtime::Runtime,
}

impl Kafka {
    /// Serves Kafka clients on `listener` (already bound, so that a bind error can be
    /// reported before the broker recovers) with `broker`; the first SIGINT or SIGTERM
    /// calls `on_signal` (which stops the broker, as its owner sees fit).
    pub fn start(
        listener: TcpListener,
        broker: impl Broker,
        limits: Limits,
        on_signal: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Kafka> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("broker-kafka")
            .enable_io()
            .enable_time()
            .build()?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let listener = runtime.block_on(async { tokio::net::TcpListener::from_std(listener) })?;
        // Member ids differ from run to run, so that a client holding one from before a
        // restart cannot pass for a member given the same id after it.
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(48));
        let ctx = handlers::Context::new(Core::new(broker), limits, local, nonce);
        runtime.spawn(listener::accept(listener, ctx));
        let stop = runtime.block_on(async { stop_signals() })?;
        runtime.spawn(async move {
            stop.await;
            on_signal();
        });
        Ok(Kafka { runtime })
    }

    /// Stops serving: open connections are dropped.
    pub fn stop(self) {
        self.runtime.shutdown_background();
    }
}

/// A future that resolves at the first SIGINT or SIGTERM.
#[cfg(unix)]
fn stop_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// A future that resolves at the first Ctrl-C.
#[cfg(not(unix))]
fn stop_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
