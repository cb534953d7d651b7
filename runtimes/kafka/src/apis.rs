//! Which Kafka APIs and versions the listener serves, and their requests and responses
//! on the wire (through the `kafka-protocol` crate's codecs).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

/// Every API served, with the versions advertised (inclusive). The lowest are Kafka 4.0's
/// own minimums; the highest stop before each API's switch from topic names to topic ids
/// (Produce 13, Fetch 13, DeleteTopics 6), so that every request names its topics;
/// ListOffsets stops at 7, whose addition is the lookup of the largest timestamp
/// (answered from the listener's time index, [`crate::time_index`]), before 8's of
/// tiered storage. The admin APIs that tools call
/// (DescribeConfigs, DescribeCluster, CreatePartitions) need only what every broker
/// behind the listener answers (a topic's description), so cluster nodes serve them too.
pub const SUPPORTED: [(ApiKey, i16, i16); 11] = [
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
];

/// The consumer-group APIs (Kafka's classic group protocol), served where the broker
/// keeps groups' committed offsets ([`crate::Limits::group_offsets`]), at every version
/// `kafka-protocol` and Kafka 4.0 share, up to the switch to topic ids (OffsetCommit 10,
/// OffsetFetch 10). Static membership (a group instance id, JoinGroup 5 on) is refused
/// where it is asked for, not by version.
pub const GROUPS: [(ApiKey, i16, i16); 10] = [
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
];

/// The idempotent producers' API, served where the broker hands out producer ids
/// ([`crate::Limits::producers`]), at every version `kafka-protocol` and Kafka 4.0 share.
/// A transactional id is refused where it is asked for: there are no transactions.
pub const PRODUCERS: [(ApiKey, i16, i16); 1] = [(ApiKey::InitProducerId, 0, 5)];

/// The versions of `api` this listener can serve (with groups and producers), if any.
pub fn supported(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().chain(&GROUPS).chain(&PRODUCERS).find(|(a, _, _)| *a == api).map(|(_, lo, hi)| (*lo, *hi))
}

/// Every API a listener within `limits` serves, with its versions: [`SUPPORTED`], and
/// [`GROUPS`] and [`PRODUCERS`] where the broker keeps what they need.
fn table(limits: &crate::Limits) -> impl Iterator<Item = &'static (ApiKey, i16, i16)> {
    let groups: &[(ApiKey, i16, i16)] = if limits.group_offsets { &GROUPS } else { &[] };
    let producers: &[(ApiKey, i16, i16)] = if limits.producers { &PRODUCERS } else { &[] };
    SUPPORTED.iter().chain(groups).chain(producers)
}

/// The versions of `api` served by a listener within `limits`, if any.
pub fn served(api: ApiKey, limits: &crate::Limits) -> Option<(i16, i16)> {
    table(limits).find(|(a, _, _)| *a == api).map(|(_, lo, hi)| (*lo, *hi))
}

/// A decoded request of a served API.
#[derive(Debug)]
pub enum Request {
    /// ApiVersions.
    ApiVersions(ApiVersionsRequest),
    /// Metadata.
    Metadata(MetadataRequest),
    /// Produce.
    Produce(ProduceRequest),
    /// Fetch.
    Fetch(FetchRequest),
    /// ListOffsets.
    ListOffsets(ListOffsetsRequest),
    /// CreateTopics.
    CreateTopics(CreateTopicsRequest),
    /// DeleteTopics.
    DeleteTopics(DeleteTopicsRequest),
    /// OffsetForLeaderEpoch.
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchRequest),
    /// FindCoordinator.
    FindCoordinator(FindCoordinatorRequest),
    /// JoinGroup.
    JoinGroup(JoinGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupRequest),
    /// SyncGroup.
    SyncGroup(SyncGroupRequest),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsRequest),
    /// ListGroups.
    ListGroups(ListGroupsRequest),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsRequest),
    /// InitProducerId.
    InitProducerId(InitProducerIdRequest),
    /// DescribeConfigs.
    DescribeConfigs(DescribeConfigsRequest),
    /// DescribeCluster.
    DescribeCluster(DescribeClusterRequest),
    /// CreatePartitions.
    CreatePartitions(CreatePartitionsRequest),
}

/// Decodes the body of a request of a served API at a served version (after
/// [`crate::guard::check`] passed).
pub fn decode_body(api: ApiKey, v: i16, buf: &mut Bytes) -> Result<Request, String> {
    Ok(match api {
        ApiKey::ApiVersions => Request::ApiVersions(ApiVersionsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::Metadata => Request::Metadata(MetadataRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::Produce => Request::Produce(ProduceRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::Fetch => Request::Fetch(FetchRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::ListOffsets => Request::ListOffsets(ListOffsetsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::CreateTopics => Request::CreateTopics(CreateTopicsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::DeleteTopics => Request::DeleteTopics(DeleteTopicsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::OffsetForLeaderEpoch => {
            Request::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::OffsetCommit => Request::OffsetCommit(OffsetCommitRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::OffsetFetch => Request::OffsetFetch(OffsetFetchRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::FindCoordinator => {
            Request::FindCoordinator(FindCoordinatorRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::JoinGroup => Request::JoinGroup(JoinGroupRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::Heartbeat => Request::Heartbeat(HeartbeatRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::LeaveGroup => Request::LeaveGroup(LeaveGroupRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::SyncGroup => Request::SyncGroup(SyncGroupRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::DescribeGroups => {
            Request::DescribeGroups(DescribeGroupsRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::ListGroups => Request::ListGroups(ListGroupsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::DeleteGroups => Request::DeleteGroups(DeleteGroupsRequest::decode(buf, v).map_err(|e| e.to_string())?),
        ApiKey::InitProducerId => {
            Request::InitProducerId(InitProducerIdRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::DescribeConfigs => {
            Request::DescribeConfigs(DescribeConfigsRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::DescribeCluster => {
            Request::DescribeCluster(DescribeClusterRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        ApiKey::CreatePartitions => {
            Request::CreatePartitions(CreatePartitionsRequest::decode(buf, v).map_err(|e| e.to_string())?)
        }
        other => return Err(format!("{other:?} is not served")),
    })
}

/// A response ready to be framed.
#[derive(Debug)]
pub enum Response {
    /// ApiVersions.
    ApiVersions(ApiVersionsResponse),
    /// Metadata.
    Metadata(MetadataResponse),
    /// Produce.
    Produce(ProduceResponse),
    /// Fetch.
    Fetch(FetchResponse),
    /// ListOffsets.
    ListOffsets(ListOffsetsResponse),
    /// CreateTopics.
    CreateTopics(CreateTopicsResponse),
    /// DeleteTopics.
    DeleteTopics(DeleteTopicsResponse),
    /// OffsetForLeaderEpoch.
    OffsetForLeaderEpoch(OffsetForLeaderEpochResponse),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitResponse),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchResponse),
    /// FindCoordinator.
    FindCoordinator(FindCoordinatorResponse),
    /// JoinGroup.
    JoinGroup(JoinGroupResponse),
    /// Heartbeat.
    Heartbeat(HeartbeatResponse),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupResponse),
    /// SyncGroup.
    SyncGroup(SyncGroupResponse),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsResponse),
    /// ListGroups.
    ListGroups(ListGroupsResponse),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsResponse),
    /// InitProducerId.
    InitProducerId(InitProducerIdResponse),
    /// DescribeConfigs.
    DescribeConfigs(DescribeConfigsResponse),
    /// DescribeCluster.
    DescribeCluster(DescribeClusterResponse),
    /// CreatePartitions.
    CreatePartitions(CreatePartitionsResponse),
}

/// The whole response frame (size, header, body) for a request with `correlation_id`,
/// encoded at `version`. The buffer is sized once from the message's own size, so a
/// fetch response of many MiB is neither regrown nor copied on its way to the socket.
pub fn frame(correlation_id: i32, version: i16, response: &Response) -> Result<Bytes, String> {
    fn body<M: Encodable + HeaderVersion>(m: &M, v: i16, correlation_id: i32) -> Result<BytesMut, String> {
        let header = ResponseHeader::default().with_correlation_id(correlation_id);
        let hv = M::header_version(v);
        let size = header.compute_size(hv).and_then(|h| Ok(h + m.compute_size(v)?)).map_err(|e| e.to_string())?;
        let size = i32::try_from(size).map_err(|_| "a response over 2 GiB".to_string())?;
        let mut out = BytesMut::with_capacity(4 + size as usize);
        out.put_i32(size);
        header.encode(&mut out, hv).map_err(|e| e.to_string())?;
        m.encode(&mut out, v).map_err(|e| e.to_string())?;
        debug_assert_eq!(out.len(), 4 + size as usize);
        Ok(out)
    }
    let out = match response {
        Response::ApiVersions(m) => body(m, version, correlation_id)?,
        Response::Metadata(m) => body(m, version, correlation_id)?,
        Response::Produce(m) => body(m, version, correlation_id)?,
        Response::Fetch(m) => body(m, version, correlation_id)?,
        Response::ListOffsets(m) => body(m, version, correlation_id)?,
        Response::CreateTopics(m) => body(m, version, correlation_id)?,
        Response::DeleteTopics(m) => body(m, version, correlation_id)?,
        Response::OffsetForLeaderEpoch(m) => body(m, version, correlation_id)?,
        Response::OffsetCommit(m) => body(m, version, correlation_id)?,
        Response::OffsetFetch(m) => body(m, version, correlation_id)?,
        Response::FindCoordinator(m) => body(m, version, correlation_id)?,
        Response::JoinGroup(m) => body(m, version, correlation_id)?,
        Response::Heartbeat(m) => body(m, version, correlation_id)?,
        Response::LeaveGroup(m) => body(m, version, correlation_id)?,
        Response::SyncGroup(m) => body(m, version, correlation_id)?,
        Response::DescribeGroups(m) => body(m, version, correlation_id)?,
        Response::ListGroups(m) => body(m, version, correlation_id)?,
        Response::DeleteGroups(m) => body(m, version, correlation_id)?,
        Response::InitProducerId(m) => body(m, version, correlation_id)?,
        Response::DescribeConfigs(m) => body(m, version, correlation_id)?,
        Response::DescribeCluster(m) => body(m, version, correlation_id)?,
        Response::CreatePartitions(m) => body(m, version, correlation_id)?,
    };
    Ok(out.freeze())
}

/// A fetch response's frame as chunks to write in order, with each partition's records
/// the very buffer the handler built, not copied into the frame: [`frame`] copies them,
/// which was a tenth of the listener's time serving a consumer.
///
/// The fields around the records are still `kafka-protocol`'s: the response is encoded
/// twice without its records, once with every partition's records null and once empty.
/// The two frames have the same length and differ only where each partition's records
/// field begins (a null and an empty field are written in as many bytes), so the runs
/// of differing bytes locate the fields, in partition order; each is then written with
/// the records' real length, followed by the records. Anything unexpected (runs that do
/// not match the partitions) falls back to [`frame`], whose bytes these are.
pub fn fetch_frame(correlation_id: i32, version: i16, response: &FetchResponse) -> Result<Vec<Bytes>, String> {
    let whole = || frame(correlation_id, version, &Response::Fetch(response.clone())).map(|f| vec![f]);
    let records: Vec<Option<Bytes>> =
        response.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.records.clone())).collect();
    let without = |records: Option<Bytes>| {
        let mut r = response.clone();
        for p in r.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.records = records.clone();
        }
        frame(correlation_id, version, &Response::Fetch(r))
    };
    let (null, empty) = (without(None)?, without(Some(Bytes::new()))?);
    let field = if version >= 12 { 1 } else { 4 }; // a varint 0 or 1; an i32 -1 or 0
    let mut runs = Vec::new();
    let mut at = 0;
    while at < null.len().min(empty.len()) {
        if null[at] == empty[at] {
            at += 1;
            continue;
        }
        let start = at;
        while at < null.len() && null[at] != empty[at] {
            at += 1;
        }
        runs.push((start, at - start));
    }
    if null.len() != empty.len() || runs.len() != records.len() || runs.iter().any(|(_, len)| *len != field) {
        return whole();
    }
    let mut out = Chunks::default();
    let mut size = null.len() - 4;
    let mut from = 0; // the size too: the first chunk's first bytes, patched at the end
    for ((start, _), r) in runs.into_iter().zip(records) {
        out.small(&null[from..start]);
        match r {
            None => out.small(&null[start..start + field]),
            Some(r) => {
                // The records field's length prefix, as kafka-protocol writes it (a
                // compact length plus one from version 12 on, an i32 before): its
                // encoders are crate-private, so it is written here, and the unit test
                // below holds it byte for byte to the crate's frame at every version.
                let mut head = Vec::new();
                if version >= 12 {
                    let mut n = r.len() as u64 + 1;
                    while n >= 0x80 {
                        head.push((n as u8 & 0x7f) | 0x80);
                        n >>= 7;
                    }
                    head.push(n as u8);
                } else {
                    let len = i32::try_from(r.len()).map_err(|_| "records over 2 GiB".to_string())?;
                    head.extend_from_slice(&len.to_be_bytes());
                }
                size = size - field + head.len() + r.len();
                out.small(&head);
                out.large(r);
            }
        }
        from = start + field;
    }
    out.small(&null[from..]);
    let size = i32::try_from(size).map_err(|_| "a response over 2 GiB".to_string())?;
    let mut chunks = out.done();
    let first = chunks.first_mut().ok_or("an empty frame")?;
    let mut patched = BytesMut::from(&first[..]);
    patched[..4].copy_from_slice(&size.to_be_bytes());
    *first = patched.freeze();
    Ok(chunks)
}

/// A frame built as chunks: small pieces copied together, large ones kept as they are.
#[derive(Default)]
struct Chunks {
    done: Vec<Bytes>,
    small: BytesMut,
}

impl Chunks {
    fn small(&mut self, bytes: &[u8]) {
        self.small.extend_from_slice(bytes);
    }

    fn large(&mut self, bytes: Bytes) {
        if !self.small.is_empty() {
            self.done.push(self.small.split().freeze());
        }
        self.done.push(bytes);
    }

    fn done(mut self) -> Vec<Bytes> {
        if !self.small.is_empty() {
            self.done.push(self.small.split().freeze());
        }
        self.done
    }
}

/// The ApiVersions response listing what a listener within `limits` serves ([`SUPPORTED`],
/// and [`GROUPS`] and [`PRODUCERS`] where the broker keeps what they need), with
/// `error_code`.
pub fn api_versions(error_code: i16, limits: &crate::Limits) -> ApiVersionsResponse {
    let keys = table(limits)
        .map(|(api, lo, hi)| {
            ApiVersion::default().with_api_key(*api as i16).with_min_version(*lo).with_max_version(*hi)
        })
        .collect();
    ApiVersionsResponse::default().with_error_code(error_code).with_api_keys(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, LeaderIdAndEpoch, PartitionData};
    use kafka_protocol::protocol::StrBytes;

    fn partition(index: i32, records: Option<&[u8]>) -> PartitionData {
        PartitionData::default()
            .with_partition_index(index)
            .with_error_code(if records.is_none() { 3 } else { 0 })
            .with_high_watermark(1_000 + i64::from(index))
            .with_last_stable_offset(900)
            .with_log_start_offset(7)
            .with_aborted_transactions(None)
            .with_records(records.map(Bytes::copy_from_slice))
    }

    fn topic(name: &str, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_string(name.to_string())))
            .with_partitions(partitions)
    }

    /// Responses of every shape a fetch gives: no topic; records null, empty, short,
    /// long enough for a two- and a three-byte varint, and bytes that look like the
    /// fields around them; several partitions and topics; a tagged field.
    fn responses() -> Vec<FetchResponse> {
        let long = vec![0xffu8; 200];
        let longer = vec![1u8; 20_000];
        let fields_alike = [0u8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        vec![
            FetchResponse::default(),
            FetchResponse::default().with_responses(vec![topic("t", vec![partition(0, Some(b"abc"))])]),
            FetchResponse::default().with_responses(vec![topic("t", vec![partition(0, None)])]),
            FetchResponse::default().with_responses(vec![topic("t", vec![partition(0, Some(b""))])]),
            FetchResponse::default().with_error_code(0).with_responses(vec![
                topic("orders", vec![partition(0, Some(&long)), partition(1, None), partition(2, Some(&longer))]),
                topic("a.b-c_d", vec![partition(5, Some(&fields_alike)), partition(6, Some(b""))]),
            ]),
            FetchResponse::default().with_responses(vec![topic(
                "t",
                vec![partition(0, Some(b"x"))
                    .with_current_leader(LeaderIdAndEpoch::default().with_leader_id(BrokerId(2)).with_leader_epoch(9))],
            )]),
        ]
    }

    /// The chunks, put together, are exactly the frame `kafka-protocol` encodes, at every
    /// version served; and each partition's records are the handler's buffer itself.
    #[test]
    fn a_fetch_frame_in_chunks_is_the_encoded_frame_with_the_records_not_copied() {
        let (lo, hi) = supported(ApiKey::Fetch).unwrap();
        for version in lo..=hi {
            for (i, response) in responses().into_iter().enumerate() {
                let whole = frame(42, version, &Response::Fetch(response.clone())).unwrap();
                let chunks = fetch_frame(42, version, &response).unwrap();
                assert_eq!(chunks.concat(), whole.to_vec(), "version {version}, response {i}");
                for p in response.responses.iter().flat_map(|t| t.partitions.iter()) {
                    let Some(r) = p.records.as_ref().filter(|r| !r.is_empty()) else { continue };
                    let shared = chunks.iter().any(|c| c.as_ptr() == r.as_ptr() && c.len() == r.len());
                    assert!(shared, "version {version}, response {i}: records copied");
                }
            }
        }
    }
}
