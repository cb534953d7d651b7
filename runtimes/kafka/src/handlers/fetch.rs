//! Fetch: each partition read within the response's bound, waiting while `min_bytes`
//! asks for more than there is.

use super::context::{epoch_mismatch, leader_epoch, ready, Context, Outcome, Pending};
use crate::apis::Response;
use crate::batches;
use crate::errors::code;
use crate::stored::{self, kept, Kept};
use crate::{Answer, Core};
use broker_core::{Command, Reply, TopicDescription};
use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a fetch that found nothing waits between two looks, while its
/// `max_wait_ms` lasts.
const FETCH_POLL: Duration = Duration::from_millis(20);
/// The longest a fetch waits for records, whatever it asks.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(30);

/// The fetch version from which a consumer reads zstd batches (Kafka 2.1's): an older
/// one is answered `UNSUPPORTED_COMPRESSION_TYPE` where one would be served, as Kafka does.
const ZSTD_FETCH_VERSION: i16 = 10;
/// The compression codec bits of zstd.
const ZSTD: i16 = 4;

/// How a fetch's partitions are served.
#[derive(Clone, Copy, Debug)]
struct Serving {
    /// The most core records one read asks for.
    max_records: u32,
    /// Whether zstd batches may be served (see [`ZSTD_FETCH_VERSION`]).
    zstd: bool,
}

/// One partition of a fetch.
#[derive(Clone, Debug)]
struct Wanted {
    topic: TopicName,
    partition: i32,
    /// The leader epoch the client believes in (-1: none given).
    leader_epoch: i32,
    offset: i64,
    max_bytes: i64,
}

/// The most bytes a fetch response carries, whatever the request asks (Kafka's broker
/// setting `fetch.max.bytes`, 55 MiB there): a consumer that asks for more gets less, as
/// Kafka allows, and comes back for the rest. The first record served may pass it, so
/// that a consumer always makes progress.
pub const FETCH_RESPONSE_MAX: i64 = 32 << 20;

/// The bytes a fetch's response may hold, which the listener reserves before the
/// request runs: the request's own bound, at most [`FETCH_RESPONSE_MAX`], plus one
/// record whatever its size (`max_record`) and the response's framing.
pub fn fetch_reservation(r: &FetchRequest, max_record: usize) -> usize {
    let asked = i64::from(r.max_bytes.max(0)).min(FETCH_RESPONSE_MAX) as usize;
    let partitions: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
    asked + max_record + batches::BATCH_HEADER + 64 * (partitions + r.topics.len()) + 1024
}

/// The partitions of a fetch, each once: Kafka keys them by topic and partition, so one
/// listed twice is read once, with its last entry's position, in its first entry's place.
fn wanted_partitions(r: &FetchRequest) -> Vec<Wanted> {
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut at = BTreeMap::new();
    for topic in &r.topics {
        for p in &topic.partitions {
            let w = Wanted {
                topic: topic.topic.clone(),
                partition: p.partition,
                leader_epoch: p.current_leader_epoch,
                offset: p.fetch_offset,
                max_bytes: i64::from(p.partition_max_bytes.max(0)),
            };
            match at.get(&(&topic.topic, w.partition)) {
                Some(&i) => wanted[i] = w,
                None => {
                    at.insert((&topic.topic, w.partition), wanted.len());
                    wanted.push(w);
                }
            }
        }
    }
    wanted
}

/// Fetch, without sessions: a full fetch (session epoch 0 or -1) is served and gets
/// session id 0, which tells the client no session was made, so it never sends an
/// incremental one; one that does anyway (epoch above 0) names a session that does
/// not exist, and is told so (`FETCH_SESSION_ID_NOT_FOUND`), as Kafka would.
pub(super) fn fetch(ctx: &Context, v: i16, r: FetchRequest) -> Pending {
    if r.session_epoch > 0 {
        return ready(Response::Fetch(FetchResponse::default().with_error_code(E::FetchSessionIdNotFound.code())));
    }
    let wanted = wanted_partitions(&r);
    let core = ctx.core.clone();
    let how = Serving { max_records: ctx.limits.core.max_fetch_records, zstd: v >= ZSTD_FETCH_VERSION };
    // The topics' high watermarks as this request is read, in the connection's order.
    let first = describe_topics(&core, &wanted);
    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT);
    let min_bytes = i64::from(r.min_bytes.max(0));
    let max_bytes = i64::from(r.max_bytes.max(0)).min(FETCH_RESPONSE_MAX);
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + wait;
        let mut described = first;
        loop {
            let (response, bytes, failed) = read_partitions(&core, &wanted, described, max_bytes, how).await;
            let now = tokio::time::Instant::now();
            // min_bytes 0 asks for no wait at all; an error is news worth answering at once.
            if bytes >= min_bytes || failed || now >= deadline {
                return Outcome::Respond(Response::Fetch(response));
            }
            tokio::time::sleep(FETCH_POLL.min(deadline - now)).await;
            described = describe_topics(&core, &wanted);
        }
    })
}

/// A DescribeTopic for each topic of `wanted`, in the order they first appear.
fn describe_topics(core: &Core, wanted: &[Wanted]) -> Vec<(TopicName, Answer)> {
    let mut out: Vec<(TopicName, Answer)> = Vec::new();
    let mut seen = BTreeSet::new();
    for w in wanted {
        if seen.insert(&w.topic) {
            out.push((w.topic.clone(), core.submit(Command::DescribeTopic { name: w.topic.0.to_string() })));
        }
    }
    out
}

/// Reads the partitions one after another, each within what is left of `max_bytes` (the
/// first record served whatever its size), so that a response never holds more than
/// its bound and a record; a partition with nothing new past its position is not read.
/// Returns the response, the bytes it serves, and whether any partition failed.
async fn read_partitions(
    core: &Core,
    wanted: &[Wanted],
    described: Vec<(TopicName, Answer)>,
    max_bytes: i64,
    how: Serving,
) -> (FetchResponse, i64, bool) {
    let mut topics_seen = BTreeMap::new();
    for (name, answer) in described {
        topics_seen.insert(name, answer.get().await);
    }
    let mut total: i64 = 0;
    let mut failed = false;
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for w in wanted {
        let data = PartitionData::default().with_partition_index(w.partition).with_aborted_transactions(None);
        let described = topics_seen.get(&w.topic);
        let log_start = match described {
            Some(Ok(Reply::Described(t))) => t.log_start as i64,
            _ => -1,
        };
        let read = match described {
            Some(Ok(Reply::Described(t))) => read_partition(core, w, t, max_bytes - total, total == 0, how).await,
            Some(Err(e)) => Err(code(e)),
            Some(Ok(_)) | None => Err(E::UnknownServerError.code()),
        };
        let data = match read {
            Ok((records, hw)) => {
                total += records.len() as i64;
                data.with_high_watermark(hw)
                    .with_last_stable_offset(hw)
                    .with_log_start_offset(log_start)
                    .with_records(Some(Bytes::from(records)))
            }
            Err(error) => {
                failed = true;
                data.with_error_code(error).with_high_watermark(-1).with_records(Some(Bytes::new()))
            }
        };
        match topics.last_mut().filter(|t| t.topic == w.topic) {
            Some(t) => t.partitions.push(data),
            None => {
                topics.push(FetchableTopicResponse::default().with_topic(w.topic.clone()).with_partitions(vec![data]))
            }
        }
    }
    (FetchResponse::default().with_responses(topics), total, failed)
}

/// One partition's records as served (within `left` bytes and its own bound, or one
/// record whatever its size if `first`) and its high watermark; or its error code.
async fn read_partition(
    core: &Core,
    w: &Wanted,
    t: &TopicDescription,
    left: i64,
    first: bool,
    how: Serving,
) -> Result<(Vec<u8>, i64), i16> {
    let partition = u32::try_from(w.partition).map_err(|_| E::UnknownTopicOrPartition.code())?;
    let hw = *t.high_watermarks.get(partition as usize).ok_or(E::UnknownTopicOrPartition.code())?;
    if let Some(error) = epoch_mismatch(w.leader_epoch, t.id) {
        // An older epoch is a position in an incarnation deleted since: it means
        // nothing in this one, so the consumer applies its offset reset policy.
        return Err(if error == E::FencedLeaderEpoch.code() { E::OffsetOutOfRange.code() } else { error });
    }
    let offset = u64::try_from(w.offset).map_err(|_| E::OffsetOutOfRange.code())?;
    // Before the first offset: a position of a deleted incarnation of the name (its
    // offsets all lie below this one's), which the consumer resets from.
    if offset > hw || offset < t.log_start {
        return Err(E::OffsetOutOfRange.code());
    }
    let limit = w.max_bytes.min(left).max(0);
    if offset == hw || (limit == 0 && !first) {
        return Ok((Vec::new(), hw as i64));
    }
    let command = Command::Fetch {
        topic: w.topic.0.to_string(),
        partition,
        offset,
        max_records: how.max_records.max(1),
        max_bytes: Some(limit as u64),
    };
    let (records, high_watermark) = match core.submit(command).get().await {
        // Re-created between the look and the read: answered as the next look will see it.
        Ok(Reply::Fetched { topic, high_watermark, .. }) if topic != t.id => {
            return Ok((Vec::new(), high_watermark as i64))
        }
        Ok(Reply::Fetched { records, high_watermark, .. }) => (records, high_watermark),
        Ok(_) => return Err(E::UnknownServerError.code()),
        Err(e) => return Err(code(&e)),
    };
    let stored: usize = records.iter().map(|r| r.value.len()).sum();
    let mut out = Vec::with_capacity(stored.min(limit as usize));
    let epoch = leader_epoch(t.id);
    // The first offset not served yet: a batch served covers its continuations.
    let mut next = offset;
    // A read from inside a batch serves the whole batch, from its first offset.
    if let Some(r) = records.first() {
        if let Kept::Continuation { back } = kept(r.key.as_deref(), &r.value) {
            if let Some((head, value)) = batch_before(core, w, t, r.offset, back).await? {
                if let Kept::Batch { records: n, codec } = kept(None, &value) {
                    if codec == ZSTD && !how.zstd {
                        return Err(E::UnsupportedCompressionType.code());
                    }
                    stored::serve_batch(&mut out, head, epoch, &value);
                    next = head + u64::from(n);
                }
            }
        }
    }
    for r in &records {
        if r.offset < next {
            continue;
        }
        // Served first and taken back if it does not fit: a stored batch is recognised
        // by its CRC, computed once.
        let from = out.len();
        match kept(r.key.as_deref(), &r.value) {
            Kept::Batch { codec, .. } if codec == ZSTD && !how.zstd => {
                if from == 0 {
                    return Err(E::UnsupportedCompressionType.code());
                }
                break;
            }
            Kept::Batch { records: n, .. } => {
                stored::serve_batch(&mut out, r.offset, epoch, &r.value);
                next = r.offset + u64::from(n);
            }
            // A continuation whose batch was not served is a record produced some other
            // way that looks like one: served as such.
            Kept::Continuation { .. } | Kept::Other => {
                stored::serve_other(&mut out, r.offset, epoch, r.key.as_deref(), &r.value);
            }
        }
        if out.len() as i64 > limit && !(first && from == 0) {
            out.truncate(from);
            break;
        }
    }
    Ok((out, high_watermark as i64))
}

/// The batch that a continuation at `offset`, `back` offsets past its batch's first,
/// continues: its first offset and bytes, if the record there is a batch that reaches
/// `offset`. None if it is not (the continuation was produced some other way), or if
/// the topic changed since `t` was described.
async fn batch_before(
    core: &Core,
    w: &Wanted,
    t: &TopicDescription,
    offset: u64,
    back: u32,
) -> Result<Option<(u64, Bytes)>, i16> {
    let Some(head) = offset.checked_sub(u64::from(back)).filter(|h| *h >= t.log_start) else { return Ok(None) };
    let partition = u32::try_from(w.partition).map_err(|_| E::UnknownTopicOrPartition.code())?;
    let command =
        Command::Fetch { topic: w.topic.0.to_string(), partition, offset: head, max_records: 1, max_bytes: None };
    match core.submit(command).get().await {
        Ok(Reply::Fetched { topic, records, .. }) if topic == t.id => Ok(records
            .into_iter()
            .next()
            .filter(|r| r.offset == head)
            .filter(|r| matches!(kept(r.key.as_deref(), &r.value), Kept::Batch { records, .. } if records > back))
            .map(|r| (head, r.value))),
        Ok(_) => Ok(None),
        Err(e) => Err(code(&e)),
    }
}
