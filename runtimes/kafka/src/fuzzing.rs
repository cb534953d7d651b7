//! Target `kafka_connection`: arbitrary bytes as what Kafka clients send on their
//! connections, against the listener over an in-memory broker.

use crate::apis::{self, Response};
use crate::handlers::Context;
use crate::listener::{serve_connection, Budget};
use crate::{guard, Broker, Core, Limits};
use broker_core::{BrokerError, Command, Config, MemFs, RecordPosition, Reply, SyncDriver, TopicId};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Bytes in flight each way on one in-memory connection before a writer waits.
const PIPE_BYTES: usize = 64 << 10;
/// Virtual time after which a run that has not ended is taken for a hang: far past
/// every wait the listener has (a fetch waits at most 30 s, a write 30 s, a JoinGroup
/// or SyncGroup at most 30 min, the longest rebalance and session timeouts, and a few
/// of those may follow one another as a group empties).
const HANG: Duration = Duration::from_secs(24 * 3600);
/// The correlation id of the ApiVersions requests that check the listener still serves.
const PROBE_ID: i32 = 0x7072_6f62;

/// Target `kafka_connection`: arbitrary bytes as everything one to three Kafka clients
/// send on their connections (frames, sizes, versions, bodies, half-closed streams),
/// served by the listener over a broker on the in-memory disk, on one thread with a
/// virtual clock (a fetch's wait passes at once, and the run is the same every time).
///
/// Input layout: byte 0 sets the number of connections (`1 + b % 3`); then operations
/// until the input ends: an op byte with bit 7 clear sends on connection
/// `(op & 0x7f) % n` the next `L` bytes (`L` a little-endian u16 that follows; fewer if
/// the input ends first); one with bit 7 set half-closes connection `(op & 0x7f) % n`
/// (the client sends no more, and reads on). After the last operation every connection
/// is half-closed, and each runs until the listener closes it. `fuzz/capture-kafka-seeds`
/// writes the real requests of the client libraries the tests drive in this layout.
///
/// Checks:
/// - no panic, and no hang: every connection ends within an hour of virtual time;
/// - the bytes the listener writes are whole response frames, in the order of the
///   requests they answer (by correlation id), each of which decodes as its API's
///   response at the request's version (version 0 for an ApiVersions too new);
/// - a bad frame closes only its own connection: a connection opened before the
///   operations and one opened after them are both answered an ApiVersions request
///   sent after them;
/// - nothing is written that was not answered with success: every partition a Produce
///   response reports appended at an offset, and every topic a CreateTopics response
///   reports created, the broker appended and created; and, where each such response
///   can be told apart (no correlation id used twice on a connection by requests of
///   these APIs, and no produce with `acks=0`, which Kafka answers with nothing), every
///   append and create the broker made is reported so to a client.
///
/// Allocation is bounded by libFuzzer's `-malloc_limit_mb` (a request's buffer grows
/// with the bytes that arrive, not with the size its frame claims).
pub fn fuzz_kafka_connection(data: &[u8]) {
    run_kafka_connection(data, None);
}

/// What a run of `kafka_connection` saw, for tests of the target itself.
#[derive(Debug)]
pub struct ConnectionRun {
    /// Responses received on the fuzzed connections.
    pub responses: usize,
    /// Appends and creates the broker made.
    pub written: usize,
    /// Whether every one of them could be matched to the response that reported it.
    pub all_told: bool,
}

/// A bug planted in the in-memory broker, to show that the target's checks catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// Produce commands are carried out, and answered as if they had failed.
    ProduceLost,
    /// Produce commands are answered as if carried out, and never were.
    ProduceFaked,
}

/// Runs `kafka_connection` on `data` with every check, with `planted` in the broker.
pub fn run_kafka_connection(data: &[u8], planted: Option<PlantedBug>) -> ConnectionRun {
    let plan = Plan::parse(data);
    let config = Config { max_partitions: 4, max_batch_records: 64, ..Config::default() };
    let broker = Memory::start(config.clone(), planted);
    // The group and producer APIs are served, as by broker-fs, whose core keeps group
    // offsets and producers.
    let limits = Limits { group_offsets: true, producers: true, ..Limits::from(&config) };
    let ctx = Context::new(Core::new(broker.clone()), limits, ([127, 0, 0, 1], 9092).into(), 0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let outcome = runtime.block_on(async { tokio::time::timeout(HANG, play(&plan, &ctx)).await });
    let connections = outcome.unwrap_or_else(|_| panic!("connections still open after {HANG:?} of virtual time"));
    let written = std::mem::take(&mut broker.0.lock().expect("not poisoned").written);
    check(&connections, &written)
}

/// What the fuzzer's bytes ask for.
struct Plan<'a> {
    connections: usize,
    ops: Vec<Op<'a>>,
}

enum Op<'a> {
    Send(usize, &'a [u8]),
    HalfClose(usize),
}

impl<'a> Plan<'a> {
    fn parse(data: &'a [u8]) -> Plan<'a> {
        let Some((&first, mut rest)) = data.split_first() else { return Plan { connections: 1, ops: Vec::new() } };
        let connections = 1 + usize::from(first) % 3;
        let mut ops = Vec::new();
        while let Some((&op, after)) = rest.split_first() {
            let connection = usize::from(op & 0x7f) % connections;
            if op & 0x80 != 0 {
                ops.push(Op::HalfClose(connection));
                rest = after;
                continue;
            }
            let (len, after) = match after {
                [lo, hi, tail @ ..] => (usize::from(u16::from_le_bytes([*lo, *hi])), tail),
                [lo] => (usize::from(*lo), &after[1..]),
                [] => (0, after),
            };
            let (bytes, after) = after.split_at(len.min(after.len()));
            ops.push(Op::Send(connection, bytes));
            rest = after;
        }
        Plan { connections, ops }
    }
}

/// The broker on the in-memory disk, answering each command as it is submitted, with
/// what it wrote on the clients' behalf.
#[derive(Clone)]
struct Memory(Arc<Mutex<Recorded>>);

struct Recorded {
    driver: SyncDriver<MemFs>,
    written: Vec<Written>,
    planted: Option<PlantedBug>,
}

/// Something the broker did that a client must have been told of.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Written {
    /// Records appended to a partition, the first at this offset.
    Appended { topic: String, partition: i32, offset: i64 },
    /// A topic created.
    Created { name: String },
}

impl Memory {
    fn start(config: Config, planted: Option<PlantedBug>) -> Memory {
        let driver = SyncDriver::start(config, MemFs::new());
        Memory(Arc::new(Mutex::new(Recorded { driver, written: Vec::new(), planted })))
    }
}

impl Broker for Memory {
    fn submit(&self, command: Command, reply: oneshot::Sender<Result<Reply, BrokerError>>) -> bool {
        let mut recorded = self.0.lock().expect("not poisoned");
        let planted = recorded.planted;
        // What the command writes, once its reply says where (an append's first offset).
        let writes = match &command {
            Command::Produce { topic, partition: Some(p), .. } => Some((topic.clone(), Some(*p))),
            Command::CreateTopic { name, .. } => Some((name.clone(), None)),
            _ => None,
        };
        let mut answer = match (planted, &writes) {
            (Some(PlantedBug::ProduceFaked), Some((_, Some(partition)))) => {
                let position = RecordPosition { partition: *partition, offset: 1 << 40 };
                Ok(Reply::Produced { topic: TopicId(1), positions: vec![position] })
            }
            _ => recorded.driver.request(command),
        };
        let written = match (writes, &answer) {
            (Some((topic, Some(partition))), Ok(Reply::Produced { positions, .. })) => positions
                .first()
                .map(|first| Written::Appended { topic, partition: partition as i32, offset: first.offset as i64 }),
            (Some((name, None)), Ok(Reply::Created { .. })) => Some(Written::Created { name }),
            _ => None,
        };
        if let Some(w) = written {
            let appended = matches!(w, Written::Appended { .. });
            if !(appended && planted == Some(PlantedBug::ProduceFaked)) {
                recorded.written.push(w);
            }
            if appended && planted == Some(PlantedBug::ProduceLost) {
                answer = Err(BrokerError::Unavailable("planted: the append is reported lost".into()));
            }
        }
        let _ = reply.send(answer);
        true
    }
}

/// One client connection: what it sent, and (once it ends) what it was sent.
struct Connection {
    writer: WriteHalf<DuplexStream>,
    /// False once a write failed: the listener closed the connection.
    open: bool,
    sent: Vec<u8>,
    received: JoinHandle<Vec<u8>>,
}

impl Connection {
    fn open(ctx: &Context, budget: &Budget, name: String) -> Connection {
        let (client, server) = tokio::io::duplex(PIPE_BYTES);
        tokio::spawn(serve_connection(server, name, ctx.clone(), budget.clone()));
        let (mut reader, writer) = tokio::io::split(client);
        let received = tokio::spawn(async move {
            let mut out = Vec::new();
            reader.read_to_end(&mut out).await.expect("an in-memory read cannot fail");
            out
        });
        Connection { writer, open: true, sent: Vec::new(), received }
    }

    async fn send(&mut self, bytes: &[u8]) {
        if self.open && !bytes.is_empty() {
            match self.writer.write_all(bytes).await {
                Ok(()) => self.sent.extend_from_slice(bytes),
                Err(_) => self.open = false,
            }
        }
    }

    async fn half_close(&mut self) {
        if self.open {
            let _ = self.writer.shutdown().await;
            self.open = false;
        }
    }

    async fn finish(mut self) -> Ended {
        self.half_close().await;
        let received = self.received.await.expect("the reading task does not panic");
        Ended { sent: self.sent, received }
    }
}

/// A connection once the listener closed it.
struct Ended {
    sent: Vec<u8>,
    received: Vec<u8>,
}

/// Plays the operations; returns the fuzzed connections once they have ended.
async fn play(plan: &Plan<'_>, ctx: &Context) -> Vec<Ended> {
    let budget = Budget::new();
    let bystander = Connection::open(ctx, &budget, "bystander".into());
    let mut connections: Vec<Connection> =
        (0..plan.connections).map(|i| Connection::open(ctx, &budget, format!("client {i}"))).collect();
    for op in &plan.ops {
        match *op {
            Op::Send(i, bytes) => connections[i].send(bytes).await,
            Op::HalfClose(i) => connections[i].half_close().await,
        }
        // Everything that can run runs before the next operation: the clock moves only
        // when every task waits.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut ended = Vec::new();
    for c in connections {
        ended.push(c.finish().await);
    }
    let latecomer = Connection::open(ctx, &budget, "latecomer".into());
    for (name, mut probe) in [("a connection open throughout", bystander), ("a new connection", latecomer)] {
        probe.send(&api_versions_v0(PROBE_ID)).await;
        let got = probe.finish().await.received;
        assert_api_versions_answer(name, &got);
    }
    ended
}

/// An ApiVersions v0 request frame with no client id.
fn api_versions_v0(correlation_id: i32) -> Vec<u8> {
    let mut frame = 10i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&18i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame
}

fn assert_api_versions_answer(who: &str, received: &[u8]) {
    let frames = whole_frames(received);
    assert!(
        frames.len() == 1 && frames[0].len() >= 4,
        "{who} sent an ApiVersions request after the fuzzed connections and got {} bytes back, not one answer",
        received.len()
    );
    let mut body = Bytes::copy_from_slice(&frames[0][4..]);
    assert_eq!(i32::from_be_bytes(frames[0][..4].try_into().expect("4 bytes")), PROBE_ID, "{who}: correlation id");
    let response = ApiVersionsResponse::decode(&mut body, 0).unwrap_or_else(|e| panic!("{who}: {e}"));
    assert_eq!(response.error_code, 0, "{who}: ApiVersions answered with an error");
}

/// Splits `bytes` into the bodies of its size-prefixed frames, asserting that they are
/// whole: the listener writes nothing else.
fn whole_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        assert!(rest.len() >= 4, "the listener wrote {} bytes that are not a frame", rest.len());
        let size = i32::from_be_bytes(rest[..4].try_into().expect("4 bytes"));
        let size = usize::try_from(size).unwrap_or_else(|_| panic!("the listener wrote a frame of size {size}"));
        assert!(rest.len() >= 4 + size, "the listener wrote part of a frame: {} of {size} bytes", rest.len() - 4);
        frames.push(&rest[4..4 + size]);
        rest = &rest[4 + size..];
    }
    frames
}

/// A request as the client sent it, read as far as the listener would read it.
struct Sent {
    api: Option<ApiKey>,
    version: i16,
    correlation_id: i32,
    /// The body, if the listener's guard passes it and it decodes.
    body: Option<Decoded>,
}

enum Decoded {
    Produce { acks: i16 },
    CreateTopics { validate_only: bool },
    Other,
}

/// The requests of `bytes`, up to the first frame that is not whole.
fn sent_requests(bytes: &[u8]) -> Vec<Sent> {
    let mut sent = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 4 {
        let size = i32::from_be_bytes(rest[..4].try_into().expect("4 bytes"));
        let Ok(size) = usize::try_from(size) else { break };
        if size < 8 || rest.len() < 4 + size {
            break;
        }
        let frame = &rest[4..4 + size];
        rest = &rest[4 + size..];
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).ok();
        let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let body = api.and_then(|api| decode_request(api, version, frame));
        sent.push(Sent { api, version, correlation_id, body });
    }
    sent
}

fn decode_request(api: ApiKey, version: i16, frame: &[u8]) -> Option<Decoded> {
    let (min, max) = apis::supported(api)?;
    if !(min..=max).contains(&version) {
        return None;
    }
    let mut buf = Bytes::copy_from_slice(frame);
    decode_request_header_from_buffer(&mut buf).ok()?;
    guard::check(api, version, &buf).ok()?;
    Some(match api {
        ApiKey::Produce => Decoded::Produce { acks: ProduceRequest::decode(&mut buf, version).ok()?.acks },
        ApiKey::CreateTopics => {
            Decoded::CreateTopics { validate_only: CreateTopicsRequest::decode(&mut buf, version).ok()?.validate_only }
        }
        _ => Decoded::Other,
    })
}

/// Decodes a response frame to the request `r`, asserting that it decodes whole.
fn decode_response(r: &Sent, frame: &[u8]) -> Option<Response> {
    let api = r.api.expect("only requests of known APIs are answered");
    let (_, max) = apis::supported(api).expect("only served APIs are answered");
    let version = if api == ApiKey::ApiVersions && r.version > max { 0 } else { r.version };
    let mut buf = Bytes::copy_from_slice(frame);
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .unwrap_or_else(|e| panic!("a {api:?} v{version} response header that does not decode: {e}"));
    assert_eq!(header.correlation_id, r.correlation_id);
    fn body<M: Decodable>(buf: &mut Bytes, api: ApiKey, version: i16) -> M {
        let m = M::decode(buf, version)
            .unwrap_or_else(|e| panic!("a {api:?} v{version} response that does not decode: {e}"));
        assert!(buf.is_empty(), "a {api:?} v{version} response with {} bytes after its end", buf.len());
        m
    }
    let b = &mut buf;
    Some(match api {
        ApiKey::Produce => Response::Produce(body(b, api, version)),
        ApiKey::CreateTopics => Response::CreateTopics(body(b, api, version)),
        ApiKey::ApiVersions => Response::ApiVersions(body(b, api, version)),
        ApiKey::Metadata => Response::Metadata(body(b, api, version)),
        ApiKey::Fetch => Response::Fetch(body(b, api, version)),
        ApiKey::ListOffsets => Response::ListOffsets(body(b, api, version)),
        ApiKey::DeleteTopics => Response::DeleteTopics(body(b, api, version)),
        ApiKey::OffsetForLeaderEpoch => Response::OffsetForLeaderEpoch(body(b, api, version)),
        ApiKey::OffsetCommit => Response::OffsetCommit(body(b, api, version)),
        ApiKey::OffsetFetch => Response::OffsetFetch(body(b, api, version)),
        ApiKey::FindCoordinator => Response::FindCoordinator(body(b, api, version)),
        ApiKey::JoinGroup => Response::JoinGroup(body(b, api, version)),
        ApiKey::Heartbeat => Response::Heartbeat(body(b, api, version)),
        ApiKey::LeaveGroup => Response::LeaveGroup(body(b, api, version)),
        ApiKey::SyncGroup => Response::SyncGroup(body(b, api, version)),
        ApiKey::DescribeGroups => Response::DescribeGroups(body(b, api, version)),
        ApiKey::ListGroups => Response::ListGroups(body(b, api, version)),
        ApiKey::DeleteGroups => Response::DeleteGroups(body(b, api, version)),
        ApiKey::DescribeConfigs => Response::DescribeConfigs(body(b, api, version)),
        ApiKey::DescribeCluster => Response::DescribeCluster(body(b, api, version)),
        ApiKey::CreatePartitions => Response::CreatePartitions(body(b, api, version)),
        _ => return None,
    })
}

/// The checks on what the connections sent and received, and what the broker wrote.
fn check(connections: &[Ended], written: &[Written]) -> ConnectionRun {
    let mut responses = 0;
    let mut reported: BTreeMap<Written, usize> = BTreeMap::new();
    let mut all_told = true;
    for c in connections {
        let requests = sent_requests(&c.sent);
        let mut ids: BTreeMap<i32, usize> = BTreeMap::new();
        for r in &requests {
            if matches!(r.body, Some(Decoded::Produce { .. } | Decoded::CreateTopics { .. })) {
                *ids.entry(r.correlation_id).or_default() += 1;
            }
            if matches!(r.body, Some(Decoded::Produce { acks: 0 })) {
                all_told = false;
            }
        }
        if ids.values().any(|&n| n > 1) {
            all_told = false;
        }
        let mut next = 0;
        for frame in whole_frames(&c.received) {
            responses += 1;
            assert!(frame.len() >= 4, "a response frame of {} bytes", frame.len());
            let id = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
            let Some(at) = requests[next..].iter().position(|r| r.correlation_id == id) else {
                panic!("a response with correlation id {id} answers no request sent after the one answered before it");
            };
            let r = &requests[next + at];
            next += at + 1;
            let response = decode_response(r, frame);
            let unique = ids.get(&r.correlation_id).is_none_or(|&n| n == 1);
            match (response, &r.body) {
                (Some(Response::Produce(p)), Some(Decoded::Produce { .. })) if unique => {
                    for t in &p.responses {
                        for part in t.partition_responses.iter().filter(|p| p.error_code == 0 && p.base_offset >= 0) {
                            let w = Written::Appended {
                                topic: t.name.0.to_string(),
                                partition: part.index,
                                offset: part.base_offset,
                            };
                            *reported.entry(w).or_default() += 1;
                        }
                    }
                }
                (Some(Response::CreateTopics(t)), Some(Decoded::CreateTopics { validate_only: false })) if unique => {
                    for t in t.topics.iter().filter(|t| t.error_code == 0) {
                        *reported.entry(Written::Created { name: t.name.0.to_string() }).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
    }
    let mut done: BTreeMap<Written, usize> = BTreeMap::new();
    for w in written {
        *done.entry(w.clone()).or_default() += 1;
    }
    for (w, n) in &reported {
        let made = done.get(w).copied().unwrap_or(0);
        assert!(made >= *n, "reported to a client {n} times but done {made} times by the broker: {w:?}");
    }
    if all_told {
        for (w, n) in &done {
            let told = reported.get(w).copied().unwrap_or(0);
            assert!(told >= *n, "done {n} times by the broker but reported to a client {told} times: {w:?}");
        }
    }
    ConnectionRun { responses, written: written.len(), all_told }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(name: &str) -> Vec<u8> {
        let path = format!("{}/../../fuzz/corpus/kafka_connection/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The whole session of each client library that creates its topic over Kafka (kcat
    /// cannot: its topic was made through `serve`'s standard input).
    const PRODUCING: [&str; 4] =
        ["seed-kafka-python-session", "seed-confluent-kafka-session", "seed-aiokafka-session", "seed-kafkajs-session"];

    /// A consumer group's session on one connection, as the seed
    /// `built-groups-session` holds it (not `seed-*`, which `fuzz/capture-kafka-seeds`
    /// replaces): a topic and records, then FindCoordinator, a
    /// member joining (MEMBER_ID_REQUIRED, then with the id the fuzz target's coordinator
    /// gives out first), its sync, heartbeat, commit, fetch of the commit, the group
    /// listed and described, the member leaving, and the group's offsets deleted.
    fn group_session() -> (Vec<u8>, usize) {
        use crate::groups::{Coordinator, GroupLimits, JoinOutcome, JoinRequest, Wait};
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
        use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
        const CLIENT: &str = "fuzz-seed";
        let text = |s: &str| StrBytes::from_string(s.to_string());
        // The id the target's coordinator (nonce 0) gives its first new member.
        let first = JoinRequest {
            group: "g".into(),
            client_id: CLIENT.into(),
            session_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::new())],
            require_known_member_id: true,
            ..JoinRequest::default()
        };
        let member = match Coordinator::new(GroupLimits::default(), 0).join(tokio::time::Instant::now(), first) {
            Wait::Now(JoinOutcome::Failed { member_id, .. }) => member_id,
            _ => unreachable!("a new member is told MEMBER_ID_REQUIRED"),
        };
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut push = |api: ApiKey, v: i16, body: &dyn Fn(&mut bytes::BytesMut, i16)| {
            let mut buf = bytes::BytesMut::new();
            let header = RequestHeader::default()
                .with_request_api_key(api as i16)
                .with_request_api_version(v)
                .with_correlation_id(frames.len() as i32 + 1)
                .with_client_id(Some(text(CLIENT)));
            header.encode(&mut buf, api.request_header_version(v)).expect("a header");
            body(&mut buf, v);
            let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
            frame.extend_from_slice(&buf);
            frames.push(frame);
        };
        fn put<M: Encodable + HeaderVersion>(m: M) -> impl Fn(&mut bytes::BytesMut, i16) {
            move |buf, v| m.encode(buf, v).expect("a request")
        }
        let g = || GroupId(text("g"));
        let join = |id: &str| {
            JoinGroupRequest::default()
                .with_group_id(g())
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(text(id))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(text("range"))])
        };
        let topic = TopicName(text("t"));
        let records = {
            let r = kafka_protocol::records::Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: kafka_protocol::records::TimestampType::Creation,
                offset: 0,
                sequence: -1,
                timestamp: 1,
                key: None,
                value: Some(Bytes::from_static(b"v")),
                headers: Default::default(),
            };
            let mut buf = bytes::BytesMut::new();
            let options = kafka_protocol::records::RecordEncodeOptions {
                version: 2,
                compression: kafka_protocol::records::Compression::None,
            };
            kafka_protocol::records::RecordBatchEncoder::encode(&mut buf, &[r], &options).expect("a batch");
            buf.freeze()
        };
        push(
            ApiKey::CreateTopics,
            7,
            &put(CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                .with_name(topic.clone())
                .with_num_partitions(1)
                .with_replication_factor(1)])),
        );
        push(
            ApiKey::Produce,
            9,
            &put(ProduceRequest::default().with_acks(-1).with_timeout_ms(1_000).with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic.clone())
                    .with_partition_data(vec![PartitionProduceData::default().with_records(Some(records))]),
            ])),
        );
        push(
            ApiKey::FindCoordinator,
            4,
            &put(FindCoordinatorRequest::default().with_coordinator_keys(vec![text("g")])),
        );
        push(ApiKey::JoinGroup, 7, &put(join("")));
        push(ApiKey::JoinGroup, 7, &put(join(&member)));
        let assignment = SyncGroupRequestAssignment::default().with_member_id(text(&member));
        push(
            ApiKey::SyncGroup,
            5,
            &put(SyncGroupRequest::default()
                .with_group_id(g())
                .with_generation_id(1)
                .with_member_id(text(&member))
                .with_assignments(vec![assignment])),
        );
        push(
            ApiKey::Heartbeat,
            4,
            &put(HeartbeatRequest::default().with_group_id(g()).with_generation_id(1).with_member_id(text(&member))),
        );
        push(
            ApiKey::OffsetCommit,
            8,
            &put(OffsetCommitRequest::default()
                .with_group_id(g())
                .with_generation_id_or_member_epoch(1)
                .with_member_id(text(&member))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(topic.clone())
                    .with_partitions(vec![OffsetCommitRequestPartition::default().with_committed_offset(1)])])),
        );
        push(
            ApiKey::OffsetFetch,
            8,
            &put(OffsetFetchRequest::default()
                .with_groups(vec![OffsetFetchRequestGroup::default().with_group_id(g()).with_topics(None)])),
        );
        push(ApiKey::ListGroups, 5, &put(ListGroupsRequest::default()));
        push(ApiKey::DescribeGroups, 6, &put(DescribeGroupsRequest::default().with_groups(vec![g()])));
        push(
            ApiKey::LeaveGroup,
            5,
            &put(LeaveGroupRequest::default()
                .with_group_id(g())
                .with_members(vec![kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                    .with_member_id(text(&member))])),
        );
        push(ApiKey::DeleteGroups, 2, &put(DeleteGroupsRequest::default().with_groups_names(vec![g()])));
        let mut seed = vec![0u8];
        for f in &frames {
            seed.push(0x00);
            seed.extend_from_slice(&(f.len() as u16).to_le_bytes());
            seed.extend_from_slice(f);
        }
        seed.push(0x80);
        (seed, frames.len())
    }

    /// The group session is answered whole (every request, none closing the
    /// connection), and the corpus holds it as built here; `BROKER_WRITE_SEEDS=1`
    /// writes it there.
    #[test]
    fn a_consumer_groups_session_is_answered_and_seeded() {
        let (session, frames) = group_session();
        let run = run_kafka_connection(&session, None);
        assert_eq!(run.responses, frames, "{run:?}");
        let path = format!("{}/../../fuzz/corpus/kafka_connection/built-groups-session", env!("CARGO_MANIFEST_DIR"));
        if std::env::var("BROKER_WRITE_SEEDS").as_deref() == Ok("1") {
            std::fs::write(&path, &session).expect("write the seed");
        }
        assert_eq!(seed("built-groups-session"), session, "{path} is not the session built here");
    }

    #[test]
    fn every_clients_produce_is_written_and_reported() {
        for name in PRODUCING {
            let run = run_kafka_connection(&seed(name), None);
            assert!(run.responses >= 3 && run.written >= 1 && run.all_told, "{name}: {run:?}");
        }
    }

    /// The message `planted` makes the target fail with on `seed`.
    fn failure(name: &str, planted: PlantedBug) -> String {
        let data = seed(name);
        let caught = std::panic::catch_unwind(|| run_kafka_connection(&data, Some(planted)));
        let payload = caught.expect_err(&format!("{name}: {planted:?} went unnoticed"));
        payload.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn an_append_reported_lost_is_caught() {
        for name in PRODUCING {
            let message = failure(name, PlantedBug::ProduceLost);
            assert!(message.contains("by the broker but reported to a client 0 times: Appended"), "{name}: {message}");
        }
    }

    #[test]
    fn an_append_reported_and_never_made_is_caught() {
        for name in PRODUCING {
            let message = failure(name, PlantedBug::ProduceFaked);
            assert!(message.contains("times but done 0 times by the broker: Appended"), "{name}: {message}");
        }
    }
}
