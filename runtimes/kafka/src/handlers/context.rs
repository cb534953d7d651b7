//! What every handler shares: the [`Context`] a request is handled in, the [`Outcome`]
//! it ends in, and the lookups of topics, partitions and epochs that several APIs make.

use crate::apis::Response;
use crate::groups::Groups;
use crate::time_index::{IndexLimits, TimeIndex};
use crate::Answer;
use crate::{Core, Limits};
use broker_core::{BrokerError, Command, Reply, TopicDescription, TopicId};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use uuid::Uuid;

/// What a request gets once its handler is done.
pub enum Outcome {
    /// Its response.
    Respond(Response),
    /// No response: a produce with `acks=0`.
    Silent,
    /// No response, and the connection is closed once the responses owed before it are
    /// written, for this reason: a produce with `acks=0` that failed, which Kafka answers
    /// so, since the client waits for nothing and learns of the failure only by the
    /// closed connection (it then refreshes its metadata).
    Close(String),
}

/// A response still being worked out.
pub type Pending = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The cluster id Metadata reports.
pub(super) const CLUSTER_ID: &str = "broker-core";

/// Where a request is handled: the core, its limits, the consumer groups' coordinator,
/// and the addresses of the connection.
#[derive(Clone)]
pub struct Context {
    /// The broker core.
    pub core: Core,
    /// The core's limits, so that oversized records get Kafka's own errors.
    pub limits: Limits,
    /// The listener address this connection came in on: what Metadata advertises.
    pub local: SocketAddr,
    /// The client's address, if known (DescribeGroups shows it as a member's host).
    pub peer: Option<SocketAddr>,
    /// The consumer groups' membership, shared by every connection of the listener.
    pub groups: Groups,
    /// The partitions' time indexes, for ListOffsets by timestamp, shared by every
    /// connection of the listener.
    pub times: TimeIndex,
}

impl Context {
    /// The context of a listener on `local` serving `core` within `limits`, with no
    /// group yet; member ids carry `nonce` (see [`Groups::new`]).
    pub fn new(core: Core, limits: Limits, local: SocketAddr, nonce: u64) -> Context {
        let groups = Groups::new(limits.groups.clone(), nonce);
        let times = TimeIndex::new(IndexLimits::default(), limits.core.max_fetch_records);
        Context { core, limits, local, peer: None, groups, times }
    }
}

/// The brokers Metadata and DescribeCluster name, in id order, as (node id, host,
/// port): this one at the address the connection came in on, and, on a cluster node,
/// the other live ones it knows.
pub(super) fn brokers(ctx: &Context) -> Vec<(i32, String, u16)> {
    let (local, node) = (ctx.local, ctx.limits.node_id);
    let mut brokers = vec![(node, local.ip().to_string(), local.port())];
    if let Some(peers) = &ctx.limits.peers {
        brokers.extend(peers.others().into_iter().filter(|(id, _, _)| *id != node));
    }
    brokers.sort_by_key(|(id, _, _)| *id);
    brokers.dedup_by_key(|(id, _, _)| *id);
    brokers
}

/// Kafka's ACL operations (`AclOperation`) that apply to the cluster: create, alter,
/// describe, cluster action, describe configs, alter configs, idempotent write.
pub(super) const CLUSTER_OPERATIONS: [u8; 7] = [5, 7, 8, 9, 10, 11, 12];

/// The authorized operations a client asked for, as Kafka's bit field: this broker has
/// no authorization, so every operation on the resource is allowed to everyone, as a
/// Kafka broker without an authorizer answers.
pub(super) fn operations(allowed: &[u8]) -> i32 {
    allowed.iter().fold(0, |bits, op| bits | 1 << op)
}

/// The Kafka topic id of an incarnation: its core id in the low 64 bits, under a fixed
/// prefix (never the nil id Kafka reserves for "no id").
pub fn topic_uuid(id: TopicId) -> Uuid {
    Uuid::from_u64_pair(0x6272_6f6b_6572_2d63, id.0)
}

/// The leader epoch of every partition of an incarnation: its id (saturated), which
/// grows with every create. A consumer still fetching with the epoch of the name's
/// previous incarnation is told `OFFSET_OUT_OF_RANGE` (and applies its reset policy);
/// one that validates its position asks OffsetForLeaderEpoch where its old epoch ends,
/// which is where this incarnation begins (see `offsets_for_epochs`). A client that
/// sends no epoch (-1) is not checked: for it, the new incarnation's offsets beginning
/// past the old one's is the guard.
pub fn leader_epoch(id: TopicId) -> i32 {
    i32::try_from(id.0).unwrap_or(i32::MAX)
}

/// The error for a request that names `asked` as the leader epoch (-1: none) of a
/// partition of incarnation `id`, if they differ.
pub(super) fn epoch_mismatch(asked: i32, id: TopicId) -> Option<i16> {
    let epoch = leader_epoch(id);
    match asked {
        a if a < 0 || a == epoch => None,
        a if a < epoch => Some(E::FencedLeaderEpoch.code()),
        _ => Some(E::UnknownLeaderEpoch.code()),
    }
}

/// A partition of a topic a DescribeTopic answered, as ListOffsets and
/// OffsetForLeaderEpoch look it up: the topic and the partition's high watermark, or the
/// error code to answer (the describe failed, there is no such partition, or the
/// client's current leader epoch is not the incarnation's).
pub(super) fn described_partition(
    described: &Result<Reply, BrokerError>,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<(&TopicDescription, u64), i16> {
    let t = match described {
        Ok(Reply::Described(t)) => t,
        Ok(_) => return Err(E::UnknownServerError.code()),
        Err(e) => return Err(crate::errors::code(e)),
    };
    let hw = usize::try_from(partition).ok().and_then(|i| t.high_watermarks.get(i).copied());
    let hw = hw.ok_or(E::UnknownTopicOrPartition.code())?;
    match epoch_mismatch(current_leader_epoch, t.id) {
        Some(error) => Err(error),
        None => Ok((t, hw)),
    }
}

/// The client's host as Kafka shows a member's (`/` and its address), or "".
pub(super) fn client_host(ctx: &Context) -> String {
    ctx.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default()
}

pub(super) fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub(super) fn ready(response: Response) -> Pending {
    Box::pin(async move { Outcome::Respond(response) })
}

/// Each topic of a request with a DescribeTopic submitted for it, in order.
pub(super) fn described<T>(ctx: &Context, topics: Vec<T>, name: impl Fn(&T) -> &TopicName) -> Vec<(T, Answer)> {
    topics
        .into_iter()
        .map(|t| {
            let answer = ctx.core.submit(Command::DescribeTopic { name: name(&t).0.to_string() });
            (t, answer)
        })
        .collect()
}
