//! Connections: Kafka's framing (a 4-byte size, then the request), pipelining, and the
//! reasons a connection is closed.
//!
//! Each connection reads requests as fast as the client sends them and answers them in
//! the order they came. Requests wait in a bounded queue per connection, and the bytes
//! of all requests not yet answered count against one budget for the whole listener,
//! so memory stays bounded whatever clients send. A frame this listener cannot answer
//! (too short, too long, an unknown API, a version outside the advertised ranges, a
//! body that does not decode) closes its connection after the responses already owed,
//! with the reason on standard error; nothing of it reaches the broker. An ApiVersions
//! request of a version this listener does not know gets Kafka's standard answer: an
//! `UNSUPPORTED_VERSION` error in a version 0 response that lists what it serves.

use super::apis::{self, Response};
use super::guard;
use super::handlers::{self, Context, Pending};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::decode_request_header_from_buffer;
use kafka_protocol::ResponseError;
use std::io::ErrorKind;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The largest request accepted, in bytes (Kafka's own default is 100 MiB; a produce here
/// holds at most one core batch per partition, 16 MiB each by default).
pub const MAX_REQUEST_BYTES: usize = 64 << 20;
/// Requests of one connection read but not yet answered.
const MAX_IN_FLIGHT: usize = 16;
/// The bytes of requests read but not yet answered, over every connection, in KiB.
const BUDGET_KIB: usize = 256 << 10;
/// Connections served at once; more are closed at once, with a reason in the log.
const MAX_CONNECTIONS: usize = 1024;

/// Accepts connections until the runtime stops.
pub async fn accept(listener: TcpListener, ctx: Context) {
    let budget = Arc::new(Semaphore::new(BUDGET_KIB));
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
        let budget = budget.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, ctx, budget).await;
            drop(slot);
        });
    }
}

/// A response on its way, with the budget its request holds until it is written.
struct Queued {
    pending: Pending,
    correlation_id: i32,
    version: i16,
    _budget: Option<OwnedSemaphorePermit>,
}

/// Serves one connection until the client closes it or sends what cannot be served; the
/// reason for closing it is logged before it is closed.
async fn serve_connection(stream: TcpStream, peer: std::net::SocketAddr, ctx: Context, budget: Arc<Semaphore>) {
    let (mut reader, mut writer) = stream.into_split();
    let (queue, mut answers) = mpsc::channel::<Queued>(MAX_IN_FLIGHT);
    let writing = tokio::spawn(async move {
        while let Some(q) = answers.recv().await {
            let Some(response) = q.pending.await else { continue };
            let frame = match apis::frame(q.correlation_id, q.version, &response) {
                Ok(frame) => frame,
                Err(e) => return Err(format!("cannot encode a response: {e}")),
            };
            if let Err(e) = writer.write_all(&frame).await {
                // A client that hangs up with a request unanswered (a consumer closing
                // during a fetch's wait) is no fault of anyone's: nothing to log.
                let hung_up = matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset);
                return if hung_up { Ok(()) } else { Err(format!("cannot write a response: {e}")) };
            }
        }
        let _ = writer.shutdown().await;
        Ok(())
    });
    if let Err(reason) = read_requests(&mut reader, &ctx, &budget, &queue).await {
        eprintln!("warning: kafka: {peer}: {reason}; closing the connection after the responses owed");
    }
    drop(queue);
    match writing.await {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => eprintln!("warning: kafka: {peer}: {reason}; connection closed"),
        Err(e) => eprintln!("warning: kafka: {peer}: the writer failed: {e}; connection closed"),
    }
}

async fn read_requests(
    reader: &mut tokio::net::tcp::OwnedReadHalf,
    ctx: &Context,
    budget: &Arc<Semaphore>,
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
        let kib = u32::try_from(size.div_ceil(1024)).unwrap_or(u32::MAX);
        let permit = budget.clone().acquire_many_owned(kib).await.ok();
        let mut body = vec![0; size];
        if let Err(e) = reader.read_exact(&mut body).await {
            return Err(format!("the connection ended inside a request of {size} bytes ({e})"));
        }
        let (key, version) = (i16::from_be_bytes([body[0], body[1]]), i16::from_be_bytes([body[2], body[3]]));
        let correlation_id = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
        let served = ApiKey::try_from(key).ok().and_then(|api| Some((api, apis::supported(api)?)));
        let queued = |pending| Queued { pending, correlation_id, version, _budget: permit };
        let api = match served {
            Some((ApiKey::ApiVersions, (_, max))) if version > max => {
                // Kafka's answer to a newer ApiVersions: version 0, with what is served.
                let response = Response::ApiVersions(apis::api_versions(ResponseError::UnsupportedVersion.code()));
                let mut q = queued(Box::pin(async move { Some(response) }) as Pending);
                q.version = 0;
                send(queue, q).await?;
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
        let mut buf = Bytes::from(body);
        decode_request_header_from_buffer(&mut buf)
            .map_err(|e| format!("malformed {api:?} v{version} request header: {e}"))?;
        guard::check(api, version, &buf).map_err(|e| format!("malformed {api:?} v{version} request: {e}"))?;
        let request = apis::decode_body(api, version, &mut buf)
            .map_err(|e| format!("malformed {api:?} v{version} request: {e}"))?;
        send(queue, queued(handlers::handle(ctx, version, request))).await?;
    }
}

async fn send(queue: &mpsc::Sender<Queued>, q: Queued) -> Result<(), String> {
    queue.send(q).await.map_err(|_| "the connection's writer stopped".to_string())
}
