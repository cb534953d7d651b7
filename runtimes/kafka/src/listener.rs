//! Connections: Kafka's framing (a 4-byte size, then the request), pipelining, the
//! memory each may hold, and the reasons a connection is closed.
//!
//! Each connection reads requests as fast as the client sends them (at most
//! [`MAX_IN_FLIGHT`] ahead of their responses) and answers them in the order they came.
//! A frame this listener cannot answer (too short, too long, an unknown API, a version
//! outside the advertised ranges, a body that does not decode) closes its connection
//! after the responses already owed, with the reason on standard error; nothing of it
//! reaches the broker. An ApiVersions request of a version this listener does not know
//! gets Kafka's standard answer: an `UNSUPPORTED_VERSION` error in a version 0 response
//! that lists what it serves.
//!
//! **Memory.** A request's bytes are held from when it is read until its response is
//! written, and a fetch reserves the most its response can hold before it runs. A
//! connection holds at most [`CONNECTION_BYTES`], so one client only ever waits for
//! itself; all connections together hold at most [`BUDGET_BYTES`], except that what a
//! request holds up to [`SMALL_BYTES`] counts against its own connection only, so a small
//! request (ApiVersions, Metadata, a small produce or fetch) never waits behind other
//! clients' big ones. A client that reads none of a response for the write timeout is
//! cut off, and what it held is freed.

use super::apis::{self, Response};
use super::guard;
use super::handlers::{self, Context, Outcome, Pending};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::decode_request_header_from_buffer;
use kafka_protocol::ResponseError;
use std::fmt::Display;
use std::io::ErrorKind;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The largest request accepted, in bytes (Kafka's own default is 100 MiB; a produce here
/// holds at most one core batch per partition, 16 MiB each by default).
pub const MAX_REQUEST_BYTES: usize = 64 << 20;
/// Requests of one connection read but not yet answered.
pub const MAX_IN_FLIGHT: usize = 16;
/// What one connection's requests and responses hold at most: the largest request, or a
/// fetch with the largest response.
pub const CONNECTION_BYTES: usize = 96 << 20;
/// What all connections' requests and responses hold at most, beyond each request's
/// first [`SMALL_BYTES`].
pub const BUDGET_BYTES: usize = 256 << 20;
/// What a request may hold on its connection's account alone.
pub const SMALL_BYTES: usize = 16 << 10;
/// What each array element and tagged field of a request ([`crate::guard::check`]) is
/// charged, the request held at least its bytes: what its decoded struct and its part
/// of the response take. Measured: a DescribeGroups of 8 million empty group ids, 16 MiB
/// on the wire, took 3 GiB at the peak (375 bytes an element) with the request, its
/// decoded form and the 144 MB response together. A request whose elements come to more
/// than [`CONNECTION_BYTES`] (196,608 elements) is refused.
pub const ELEMENT_BYTES: usize = 512;
/// Connections served at once; more are closed at once, with a reason in the log.
const MAX_CONNECTIONS: usize = 1024;
/// Responses are written this many bytes at a time, each within the write timeout.
const WRITE_CHUNK: usize = 256 << 10;
/// A request's buffer starts at most this large, and grows as its bytes arrive.
const READ_CHUNK: usize = 64 << 10;

/// Memory held by a request and its response, in KiB: from its connection's share and,
/// past [`SMALL_BYTES`], from the listener's budget. Freed when dropped.
struct Held {
    _own: Option<OwnedSemaphorePermit>,
    _shared: Option<OwnedSemaphorePermit>,
}

/// The memory all connections of one listener share: [`BUDGET_BYTES`], counted in KiB.
#[derive(Clone)]
pub struct Budget(Arc<Semaphore>);

impl Budget {
    /// A listener's whole budget, none of it taken.
    pub fn new() -> Budget {
        Budget(Arc::new(Semaphore::new(BUDGET_BYTES / 1024)))
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

/// A connection's share of memory, and the listener's budget.
struct Shares {
    own: Arc<Semaphore>,
    shared: Arc<Semaphore>,
}

impl Shares {
    /// Takes `bytes`, waiting while the connection (and, for more than [`SMALL_BYTES`],
    /// the listener) holds too much: the connection's share first, so that a connection
    /// waits in the listener's queue for no more than its share.
    async fn take(&self, bytes: usize) -> Held {
        let kib = u32::try_from(bytes.div_ceil(1024).min(CONNECTION_BYTES / 1024)).unwrap_or(u32::MAX);
        let own = self.own.clone().acquire_many_owned(kib).await.ok();
        let shared = if bytes > SMALL_BYTES { self.shared.clone().acquire_many_owned(kib).await.ok() } else { None };
        Held { _own: own, _shared: shared }
    }
}

/// Accepts connections until the runtime stops.
pub async fn accept(listener: TcpListener, ctx: Context) {
    let budget = Budget::new();
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("warning: kafka: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = connections.clone().try_acquire_owned() else {
            eprintln!("warning: kafka: {peer}: refused, {MAX_CONNECTIONS} connections are open already");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut ctx = ctx.clone();
        if let Ok(local) = stream.local_addr() {
            ctx.local = local;
        }
        ctx.peer = Some(peer);
        let budget = budget.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, ctx, budget).await;
            drop(slot);
        });
    }
}

/// A response on its way, with the memory its request holds until it is written.
struct Queued {
    pending: Pending,
    correlation_id: i32,
    version: i16,
    _held: Held,
}

/// Serves one connection (a TCP stream, or any byte stream both ways: the
/// `kafka_connection` fuzz target's are in memory) until the client closes it, sends
/// what cannot be served, or stops reading its responses; the reason for closing it is
/// logged, with `peer`, before it is closed.
pub async fn serve_connection<S>(stream: S, peer: impl Display, ctx: Context, budget: Budget)
where
    S: AsyncRead + AsyncWrite + Send,
{
    let peer = peer.to_string();
    let peer = peer.as_str();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (queue, mut answers) = mpsc::channel::<Queued>(MAX_IN_FLIGHT);
    let write_timeout = ctx.limits.write_timeout;
    let writing = async move {
        while let Some(q) = answers.recv().await {
            let response = match q.pending.await {
                Outcome::Respond(response) => response,
                Outcome::Silent => continue,
                Outcome::Close(reason) => {
                    // Logged before the socket closes, so that the log says why by the
                    // time the client sees it closed.
                    eprintln!("warning: kafka: {peer}: {reason}; connection closed");
                    let _ = writer.shutdown().await;
                    return Ok(());
                }
            };
            // A fetch's records go to the socket from the buffers they were served into.
            let chunks = match &response {
                Response::Fetch(fetch) => apis::fetch_frame(q.correlation_id, q.version, fetch),
                _ => apis::frame(q.correlation_id, q.version, &response).map(|frame| vec![frame]),
            };
            let chunks = match chunks {
                Ok(chunks) => chunks,
                Err(e) => return Err(format!("cannot encode a response: {e}")),
            };
            drop(response);
            for chunk in chunks.iter().flat_map(|c| c.chunks(WRITE_CHUNK)) {
                match tokio::time::timeout(write_timeout, writer.write_all(chunk)).await {
                    Ok(Ok(())) => {}
                    // A client that hangs up with a request unanswered (a consumer closing
                    // during a fetch's wait) is no fault of anyone's: nothing to log.
                    Ok(Err(e)) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                        return Ok(())
                    }
                    Ok(Err(e)) => return Err(format!("cannot write a response: {e}")),
                    Err(_) => {
                        return Err(format!(
                            "the client stopped reading: none of a response could be written for {write_timeout:?}; \
                             cut off, freeing what it held"
                        ))
                    }
                }
            }
        }
        let _ = writer.shutdown().await;
        Ok(())
    };
    let shares = Shares { own: Arc::new(Semaphore::new(CONNECTION_BYTES / 1024)), shared: budget.0 };
    let reading = async {
        if let Err(reason) = read_requests(&mut reader, &ctx, &shares, &queue).await {
            // Logged before the responses owed are written and the socket closed.
            eprintln!("warning: kafka: {peer}: {reason}; closing the connection after the responses owed");
        }
        drop(queue); // the writer ends once the responses owed are written
    };
    tokio::pin!(writing);
    tokio::pin!(reading);
    // Reading and writing go on together; a writer that stops (a client cut off, or a
    // response that cannot be encoded) ends the reading too, so the socket is closed.
    let mut read = false;
    let write_outcome = loop {
        tokio::select! {
            outcome = &mut writing => break outcome,
            () = &mut reading, if !read => read = true,
        }
    };
    if let Err(reason) = write_outcome {
        eprintln!("warning: kafka: {peer}: {reason}; connection closed");
    }
}

async fn read_requests(
    reader: &mut (impl AsyncRead + Unpin),
    ctx: &Context,
    shares: &Shares,
    queue: &mpsc::Sender<Queued>,
) -> Result<(), String> {
    loop {
        let mut size = [0u8; 4];
        match reader.read_exact(&mut size).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("read failed: {e}")),
        }
        let size = i32::from_be_bytes(size);
        let Ok(size) = usize::try_from(size) else { return Err(format!("a frame declares {size} bytes")) };
        if size > MAX_REQUEST_BYTES {
            return Err(format!("a request of {size} bytes is over the limit of {MAX_REQUEST_BYTES} bytes"));
        }
        if size < 8 {
            return Err(format!("a frame of {size} bytes is too short for a request header"));
        }
        let request_held = shares.take(size).await;
        let body = read_body(reader, size).await?;
        let (key, version) = (i16::from_be_bytes([body[0], body[1]]), i16::from_be_bytes([body[2], body[3]]));
        let correlation_id = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
        let served = ApiKey::try_from(key).ok().and_then(|api| Some((api, apis::served(api, &ctx.limits)?)));
        let api = match served {
            Some((ApiKey::ApiVersions, (_, max))) if version > max => {
                // Kafka's answer to a newer ApiVersions: version 0, with what is served.
                let response =
                    Response::ApiVersions(apis::api_versions(ResponseError::UnsupportedVersion.code(), &ctx.limits));
                let pending = Box::pin(async move { Outcome::Respond(response) }) as Pending;
                send(queue, Queued { pending, correlation_id, version: 0, _held: request_held }).await?;
                continue;
            }
            Some((api, (min, max))) if (min..=max).contains(&version) => api,
            Some((api, (min, max))) => {
                return Err(format!("{api:?} version {version} is not supported (versions {min} to {max} are)"));
            }
            None => {
                return Err(match ApiKey::try_from(key) {
                    Ok(api) => format!("{api:?} (API key {key}) is not served here (ApiVersions lists what is)"),
                    Err(_) => format!("API key {key} is unknown"),
                });
            }
        };
        let in_header = guard::check_header(api, version, &body)
            .map_err(|e| format!("malformed {api:?} v{version} request header: {e}"))?;
        let mut buf = Bytes::from(body);
        let header = decode_request_header_from_buffer(&mut buf)
            .map_err(|e| format!("malformed {api:?} v{version} request header: {e}"))?;
        let elements = in_header
            + guard::check(api, version, &buf).map_err(|e| format!("malformed {api:?} v{version} request: {e}"))?;
        // Held before it is decoded: its bytes, or what its elements take, if more.
        let charge = charge(api, size, elements)?;
        let request_held = if charge > size {
            drop(request_held);
            shares.take(charge).await
        } else {
            request_held
        };
        let request = apis::decode_body(api, version, &mut buf)
            .map_err(|e| format!("malformed {api:?} v{version} request: {e}"))?;
        // A fetch holds the most its response may hold, with its request's.
        let held = match &request {
            apis::Request::Fetch(r) => {
                drop(request_held);
                shares.take(charge + handlers::fetch_reservation(r, ctx.limits.core.max_record_bytes)).await
            }
            _ => request_held,
        };
        let client_id = header.client_id.as_deref().unwrap_or_default();
        let pending = handlers::handle(ctx, version, client_id, request);
        send(queue, Queued { pending, correlation_id, version, _held: held }).await?;
    }
}

/// What a request of `size` bytes holding `elements` array elements and tagged fields is
/// charged; refused past what one connection may hold.
fn charge(api: ApiKey, size: usize, elements: u64) -> Result<usize, String> {
    let decoded = usize::try_from(elements).unwrap_or(usize::MAX).saturating_mul(ELEMENT_BYTES);
    if decoded > CONNECTION_BYTES {
        return Err(format!(
            "a {api:?} request of {size} bytes holds {elements} array elements and tagged fields, which would take \
             {} MiB decoded and answered, over the {} MiB one connection may hold ({} elements); send fewer \
             topics, partitions or groups per request",
            decoded >> 20,
            CONNECTION_BYTES >> 20,
            CONNECTION_BYTES / ELEMENT_BYTES
        ));
    }
    Ok(size.max(decoded))
}

/// Reads a request of `size` bytes into a buffer that grows (doubling, from at most
/// [`READ_CHUNK`]) as its bytes arrive, so that a size no bytes follow allocates little,
/// and never past `size`, so that what the request holds is what its share counted.
async fn read_body(reader: &mut (impl AsyncRead + Unpin), size: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::with_capacity(size.min(READ_CHUNK));
    while body.len() < size {
        if body.len() == body.capacity() {
            body.reserve_exact((size - body.len()).min(body.len()));
        }
        let room = (body.capacity().min(size) - body.len()) as u64;
        match (&mut *reader).take(room).read_buf(&mut body).await {
            Ok(0) => {
                return Err(format!("the connection ended inside a request of {size} bytes, after {}", body.len()))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("the connection failed inside a request of {size} bytes ({e})")),
        }
    }
    Ok(body)
}

async fn send(queue: &mpsc::Sender<Queued>, q: Queued) -> Result<(), String> {
    queue.send(q).await.map_err(|_| "the connection's writer stopped".to_string())
}
