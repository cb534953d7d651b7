//! Which Kafka APIs and versions the listener serves, and their requests and responses
//! on the wire (through the `kafka-protocol` crate's codecs).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

/// Every API served, with the versions advertised (inclusive). The lowest are Kafka 4.0's
/// own minimums; the highest stop before each API's switch from topic names to topic ids
/// (Produce 13, Fetch 13, DeleteTopics 6), so that every request names its topics, and
/// before ListOffsets 7, whose only addition is a lookup of the newest timestamp, which
/// needs a time index this broker does not keep.
pub const SUPPORTED: [(ApiKey, i16, i16); 8] = [
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
];

/// The versions of `api` served, if it is served.
pub fn supported(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().find(|(a, _, _)| *a == api).map(|(_, lo, hi)| (*lo, *hi))
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
    };
    Ok(out.freeze())
}

/// The ApiVersions response listing [`SUPPORTED`], with `error_code`.
pub fn api_versions(error_code: i16) -> ApiVersionsResponse {
    let keys = SUPPORTED
        .iter()
        .map(|(api, lo, hi)| {
            ApiVersion::default().with_api_key(*api as i16).with_min_version(*lo).with_max_version(*hi)
        })
        .collect();
    ApiVersionsResponse::default().with_error_code(error_code).with_api_keys(keys)
}
