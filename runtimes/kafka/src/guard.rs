//! A structural check of a request body before `kafka-protocol` decodes it.
//!
//! The crate's decoders size every array from the count on the wire before reading an
//! element (`Vec::with_capacity(count)`), so a few bytes declaring two billion topics make
//! an allocation the system refuses, and a refused allocation aborts the process: one
//! hostile client would take the broker down. This walk follows the schema of each
//! request this listener accepts, field by field, and refuses any array whose count is
//! larger than the bytes left (every element takes at least one byte), as well as any
//! string or byte field that runs past the end. It allocates nothing.
//!
//! It also counts the request's array elements and tagged fields: what the request will
//! hold once decoded, and what its response will hold, grows with them, not with its
//! bytes (a DescribeGroups of 8 million empty group ids is 16 MiB on the wire and took
//! 3 GiB at the peak, decoded and answered), so the listener charges each of them
//! against the connection's memory ([`crate::listener::ELEMENT_BYTES`]).
//!
//! The schemas are Apache Kafka's (`clients/src/main/resources/common/message/*.json`),
//! for the versions [`crate::apis::SUPPORTED`], [`crate::apis::GROUPS`] and
//! [`crate::apis::PRODUCERS`] list; a walk and the crate's
//! decoder disagreeing is caught by the tests, which encode each request at each version
//! with the crate's own encoder and walk it.

use kafka_protocol::messages::ApiKey;

/// A cursor over a request body.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Whether this version uses the compact ("flexible") encodings and tagged fields.
    flexible: bool,
    /// The array elements and tagged fields walked so far.
    elements: u64,
}

type Step = Result<(), String>;

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn skip(&mut self, n: usize, what: &str) -> Step {
        if n > self.left() {
            return Err(format!("{what} needs {n} bytes at byte {}, {} are left", self.at, self.left()));
        }
        self.at += n;
        Ok(())
    }

    fn fixed(&mut self, n: usize) -> Step {
        self.skip(n, "a fixed-size field")
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for i in 0..5 {
            let Some(&b) = self.bytes.get(self.at) else { return Err(format!("a varint runs past byte {}", self.at)) };
            self.at += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("a varint longer than 5 bytes at byte {}", self.at))
    }

    fn i16_len(&mut self) -> Result<i16, String> {
        let b = self.bytes.get(self.at..self.at + 2).ok_or("a length runs past the end")?;
        self.at += 2;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32_len(&mut self) -> Result<i32, String> {
        let b = self.bytes.get(self.at..self.at + 4).ok_or("a length runs past the end")?;
        self.at += 4;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A string, nullable or not (the walk does not care which).
    fn string(&mut self) -> Step {
        if self.flexible {
            let n = self.uvarint()?;
            return self.skip(n.saturating_sub(1) as usize, "a string");
        }
        match self.i16_len()? {
            -1 => Ok(()),
            n if n >= 0 => self.skip(n as usize, "a string"),
            n => Err(format!("string length {n}")),
        }
    }

    /// A byte field (record batches), nullable or not.
    fn bytes(&mut self) -> Step {
        if self.flexible {
            let n = self.uvarint()?;
            return self.skip(n.saturating_sub(1) as usize, "a byte field");
        }
        match self.i32_len()? {
            -1 => Ok(()),
            n if n >= 0 => self.skip(n as usize, "a byte field"),
            n => Err(format!("byte field length {n}")),
        }
    }

    /// An array's element count, at most the bytes left.
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let n = if self.flexible {
            self.uvarint()?.saturating_sub(1)
        } else {
            match self.i32_len()? {
                -1 => 0,
                n if n >= 0 => n as u64,
                n => return Err(format!("{what}: array length {n}")),
            }
        };
        if n > self.left() as u64 {
            return Err(format!("{what}: an array of {n} elements in {} bytes", self.left()));
        }
        self.elements += n;
        Ok(n as usize)
    }

    /// The tagged fields of a flexible version, skipped by their sizes.
    fn tags(&mut self) -> Step {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        self.elements += n;
        for _ in 0..n {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.skip(size as usize, "a tagged field")?;
        }
        Ok(())
    }

    fn each(&mut self, what: &str, mut element: impl FnMut(&mut Self) -> Step) -> Step {
        for _ in 0..self.count(what)? {
            element(self)?;
        }
        Ok(())
    }
}

/// The first version of each request with the flexible encoding.
fn first_flexible(api: ApiKey) -> i16 {
    match api {
        ApiKey::Produce => 9,
        ApiKey::Fetch => 12,
        ApiKey::ListOffsets => 6,
        ApiKey::Metadata => 9,
        ApiKey::CreateTopics => 5,
        ApiKey::DeleteTopics => 4,
        ApiKey::ApiVersions => 3,
        ApiKey::OffsetForLeaderEpoch => 4,
        ApiKey::OffsetCommit => 8,
        ApiKey::OffsetFetch => 6,
        ApiKey::FindCoordinator => 3,
        ApiKey::JoinGroup => 6,
        ApiKey::Heartbeat => 4,
        ApiKey::LeaveGroup => 4,
        ApiKey::SyncGroup => 4,
        ApiKey::DescribeGroups => 5,
        ApiKey::ListGroups => 3,
        ApiKey::DeleteGroups => 2,
        ApiKey::InitProducerId => 2,
        ApiKey::DescribeConfigs => 4,
        ApiKey::DescribeCluster => 0,
        ApiKey::CreatePartitions => 2,
        _ => i16::MAX,
    }
}

/// Checks the header of a request of `api` at `v` (`frame`: the request from its API key
/// on): the number of tagged fields it holds, or what is wrong with it. The crate's
/// header decoder keeps each in a map, as a body's.
pub fn check_header(api: ApiKey, v: i16, frame: &[u8]) -> Result<u64, String> {
    let header_version = api.request_header_version(v);
    // The client id is a classic string in every header version.
    let w = &mut Walk { bytes: frame, at: 0, flexible: false, elements: 0 };
    w.fixed(2 + 2 + 4)?; // API key, version, correlation id
    if header_version >= 1 {
        w.string()?;
    }
    if header_version >= 2 {
        w.flexible = true;
        w.tags()?;
    }
    Ok(w.elements)
}

/// Checks the body of a request of `api` at `v` (a supported version): the number of
/// array elements and tagged fields it holds, or what is wrong with it. The bytes after
/// the last array, which the walk does not follow (fixed-size fields and, in a flexible
/// version, the request's own tagged fields), count as one element every two bytes, the
/// fewest a tagged field takes.
pub fn check(api: ApiKey, v: i16, body: &[u8]) -> Result<u64, String> {
    let w = &mut Walk { bytes: body, at: 0, flexible: v >= first_flexible(api), elements: 0 };
    match api {
        ApiKey::ApiVersions => {
            if v >= 3 {
                w.string()?;
                w.string()?;
            }
        }
        ApiKey::Metadata => {
            w.each("topics", |w| {
                if v >= 10 {
                    w.fixed(16)?;
                }
                w.string()?;
                w.tags()
            })?;
            // Booleans follow: allow_auto_topic_creation (v4+), the authorized operations (v8+).
        }
        ApiKey::Produce => {
            w.string()?; // transactional id
            w.fixed(2 + 4)?; // acks, timeout
            w.each("topics", |w| {
                w.string()?;
                w.each("partitions", |w| {
                    w.fixed(4)?;
                    w.bytes()?;
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::Fetch => {
            w.fixed(4 + 4 + 4 + 4 + 1)?; // replica id, max wait, min bytes, max bytes, isolation
            if v >= 7 {
                w.fixed(4 + 4)?; // session id and epoch
            }
            w.each("topics", |w| {
                w.string()?;
                w.each("partitions", |w| {
                    w.fixed(4)?; // partition
                    if v >= 9 {
                        w.fixed(4)?; // current leader epoch
                    }
                    w.fixed(8)?; // fetch offset
                    if v >= 12 {
                        w.fixed(4)?; // last fetched epoch
                    }
                    if v >= 5 {
                        w.fixed(8)?; // log start offset
                    }
                    w.fixed(4)?; // partition max bytes
                    w.tags()
                })?;
                w.tags()
            })?;
            if v >= 7 {
                w.each("forgotten topics", |w| {
                    w.string()?;
                    let n = w.count("forgotten partitions")?;
                    w.skip(4 * n, "forgotten partitions")?;
                    w.tags()
                })?;
            }
        }
        ApiKey::ListOffsets => {
            w.fixed(4)?; // replica id
            if v >= 2 {
                w.fixed(1)?; // isolation level
            }
            w.each("topics", |w| {
                w.string()?;
                w.each("partitions", |w| {
                    w.fixed(4)?;
                    if v >= 4 {
                        w.fixed(4)?; // current leader epoch
                    }
                    w.fixed(8)?; // timestamp
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::CreateTopics => {
            w.each("topics", |w| {
                w.string()?;
                w.fixed(4 + 2)?; // partitions, replication factor
                w.each("assignments", |w| {
                    w.fixed(4)?;
                    let n = w.count("broker ids")?;
                    w.skip(4 * n, "broker ids")?;
                    w.tags()
                })?;
                w.each("configs", |w| {
                    w.string()?;
                    w.string()?;
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::DeleteTopics => {
            w.each("topic names", |w| w.string())?;
        }
        ApiKey::OffsetForLeaderEpoch => {
            if v >= 3 {
                w.fixed(4)?; // replica id
            }
            w.each("topics", |w| {
                w.string()?;
                w.each("partitions", |w| {
                    w.fixed(4 + 4 + 4)?; // partition, current leader epoch, leader epoch
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::OffsetCommit => {
            w.string()?; // group id
            w.fixed(4)?; // generation id or member epoch
            w.string()?; // member id
            if v >= 7 {
                w.string()?; // group instance id
            }
            if v <= 4 {
                w.fixed(8)?; // retention time
            }
            w.each("topics", |w| {
                w.string()?;
                w.each("partitions", |w| {
                    w.fixed(4 + 8)?; // partition, committed offset
                    if v >= 6 {
                        w.fixed(4)?; // committed leader epoch
                    }
                    w.string()?; // committed metadata
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::OffsetFetch => {
            let topics = |w: &mut Walk| {
                w.each("topics", |w| {
                    w.string()?;
                    let n = w.count("partition indexes")?;
                    w.skip(4 * n, "partition indexes")?;
                    w.tags()
                })
            };
            if v <= 7 {
                w.string()?; // group id
                topics(w)?;
            } else {
                w.each("groups", |w| {
                    w.string()?; // group id
                    if v >= 9 {
                        w.string()?; // member id
                        w.fixed(4)?; // member epoch
                    }
                    topics(w)?;
                    w.tags()
                })?;
            }
        }
        ApiKey::FindCoordinator => {
            if v <= 3 {
                w.string()?; // key
            }
            if v >= 1 {
                w.fixed(1)?; // key type
            }
            if v >= 4 {
                w.each("coordinator keys", |w| w.string())?;
            }
        }
        ApiKey::JoinGroup => {
            w.string()?; // group id
            w.fixed(4)?; // session timeout
            if v >= 1 {
                w.fixed(4)?; // rebalance timeout
            }
            w.string()?; // member id
            if v >= 5 {
                w.string()?; // group instance id
            }
            w.string()?; // protocol type
            w.each("protocols", |w| {
                w.string()?;
                w.bytes()?;
                w.tags()
            })?;
            // A reason (version 8 on) follows.
        }
        ApiKey::SyncGroup => {
            w.string()?; // group id
            w.fixed(4)?; // generation
            w.string()?; // member id
            if v >= 3 {
                w.string()?; // group instance id
            }
            if v >= 5 {
                w.string()?; // protocol type
                w.string()?; // protocol name
            }
            w.each("assignments", |w| {
                w.string()?;
                w.bytes()?;
                w.tags()
            })?;
        }
        ApiKey::Heartbeat => {
            // Strings and fixed-size fields only: nothing sized from a count.
        }
        ApiKey::LeaveGroup => {
            w.string()?; // group id
            if v <= 2 {
                w.string()?; // member id
            } else {
                w.each("members", |w| {
                    w.string()?; // member id
                    w.string()?; // group instance id
                    if v >= 5 {
                        w.string()?; // reason
                    }
                    w.tags()
                })?;
            }
        }
        ApiKey::DescribeGroups => {
            w.each("groups", |w| w.string())?;
        }
        ApiKey::ListGroups => {
            if v >= 4 {
                w.each("states filter", |w| w.string())?;
            }
            if v >= 5 {
                w.each("types filter", |w| w.string())?;
            }
        }
        ApiKey::DeleteGroups => {
            w.each("group names", |w| w.string())?;
        }
        ApiKey::InitProducerId => {
            w.string()?; // transactional id
            w.fixed(4)?; // transaction timeout
            if v >= 3 {
                w.fixed(8 + 2)?; // producer id, producer epoch
            }
        }
        ApiKey::DescribeConfigs => {
            w.each("resources", |w| {
                w.fixed(1)?; // resource type
                w.string()?; // resource name
                w.each("configuration keys", |w| w.string())?; // nullable
                w.tags()
            })?;
            // Booleans follow: include synonyms, include documentation (v3+).
        }
        ApiKey::DescribeCluster => {
            // Booleans and an int8 only: nothing sized from a count.
        }
        ApiKey::CreatePartitions => {
            w.each("topics", |w| {
                w.string()?; // name
                w.fixed(4)?; // count
                w.each("assignments", |w| {
                    // nullable
                    let n = w.count("broker ids")?;
                    w.skip(4 * n, "broker ids")?;
                    w.tags()
                })?;
                w.tags()
            })?;
            // Fixed-size fields follow: timeout, validate only.
        }
        other => return Err(format!("no schema walk for {other:?}")),
    }
    // What follows the last array is fixed-size fields and tagged fields, which the
    // decoder reads without allocating from a count; the tagged fields it keeps in a map
    // are counted at the most there can be.
    Ok(w.elements + w.left() as u64 / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    /// The message at `version`, or `None` if it sets a field that version lacks.
    fn encoded(message: &impl Encodable, version: i16) -> Option<Vec<u8>> {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).ok()?;
        Some(buf.to_vec())
    }

    fn name(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.to_string()))
    }

    /// Every supported version of every request, as the crate encodes it with arrays
    /// filled in, walks without complaint; every truncation of it walks without a panic.
    #[test]
    fn requests_encoded_by_the_crate_pass_the_walk() {
        let produce = ProduceRequest::default().with_acks(-1).with_topic_data(vec![TopicProduceData::default()
            .with_name(name("t"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(2)
                .with_records(Some(bytes::Bytes::from_static(b"0123456789")))])]);
        let fetch = FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default(), FetchPartition::default().with_partition(1)])]);
        let fetch_forgetting = fetch.clone().with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic(name("old"))
            .with_partitions(vec![0, 1, 2])]);
        let metadata = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name("t")))]));
        let list_offsets = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])]);
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name("t"))
            .with_num_partitions(3)
            .with_assignments(vec![CreatableReplicaAssignment::default().with_broker_ids(vec![BrokerId(0)])])
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("deletion.grace.ms"))
                .with_value(Some(StrBytes::from_static_str("5")))])]);
        let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("a"), name("b")]);
        let epochs = {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![OffsetForLeaderPartition::default().with_leader_epoch(3); 2])])
        };
        let api_versions = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("test"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let groups = group_requests().into_iter().chain(producer_requests()).chain(admin_requests());
        type Encoder = Box<dyn Fn(i16) -> Option<Vec<u8>>>;
        let cases: Vec<(ApiKey, Encoder)> = vec![
            (ApiKey::Produce, Box::new(move |v| encoded(&produce, v))),
            (ApiKey::Fetch, Box::new(move |v| encoded(&fetch, v))),
            (ApiKey::Fetch, Box::new(move |v| encoded(&fetch_forgetting, v))),
            (ApiKey::Metadata, Box::new(move |v| encoded(&metadata, v))),
            (ApiKey::ListOffsets, Box::new(move |v| encoded(&list_offsets, v))),
            (ApiKey::CreateTopics, Box::new(move |v| encoded(&create, v))),
            (ApiKey::DeleteTopics, Box::new(move |v| encoded(&delete, v))),
            (ApiKey::ApiVersions, Box::new(move |v| encoded(&api_versions, v))),
            (ApiKey::OffsetForLeaderEpoch, Box::new(move |v| encoded(&epochs, v))),
        ];
        let mut cases = cases;
        for (api, encode) in groups {
            cases.push((api, encode));
        }
        for (api, encode) in cases {
            let range = crate::apis::supported(api).unwrap();
            let mut walked = 0;
            for v in range.0..=range.1 {
                let Some(body) = encode(v) else { continue };
                check(api, v, &body).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
                // The crate's own decoder reads the whole body.
                let mut buf = bytes::Bytes::from(body.clone());
                crate::apis::decode_body(api, v, &mut buf).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
                assert!(buf.is_empty(), "{api:?} v{v}: {} bytes left after decoding", buf.len());
                // Cut anywhere, the walk fails or stays inside the bytes, and never panics.
                for cut in 0..body.len() {
                    let _ = check(api, v, &body[..cut]);
                }
                walked += 1;
            }
            assert!(walked >= 1, "{api:?}: no version encoded");
            let admin = [ApiKey::DescribeConfigs, ApiKey::DescribeCluster, ApiKey::CreatePartitions];
            if crate::apis::GROUPS.iter().chain(&crate::apis::PRODUCERS).any(|(a, _, _)| *a == api)
                || admin.contains(&api)
            {
                assert_eq!(walked, range.1 - range.0 + 1, "{api:?}: every version is walked");
            }
        }
    }

    /// A request of each group API with every array filled in (two elements where it
    /// has arrays, nested ones too), at any version that has its fields.
    #[allow(clippy::type_complexity)]
    fn group_requests() -> Vec<(ApiKey, Box<dyn Fn(i16) -> Option<Vec<u8>>>)> {
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        use kafka_protocol::messages::leave_group_request::MemberIdentity;
        use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
        };
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        fn s(x: &str) -> StrBytes {
            StrBytes::from_string(x.to_string())
        }
        fn g(x: &str) -> GroupId {
            GroupId(s(x))
        }
        let commit = move |v: i16| {
            let partition = OffsetCommitRequestPartition::default()
                .with_partition_index(1)
                .with_committed_offset(5)
                .with_committed_metadata(Some(s("m")));
            let partition = if v >= 6 { partition.with_committed_leader_epoch(3) } else { partition };
            OffsetCommitRequest::default()
                .with_group_id(g("g"))
                .with_generation_id_or_member_epoch(2)
                .with_member_id(s("m-1"))
                .with_group_instance_id(if v >= 7 { Some(s("i")) } else { None })
                .with_retention_time_ms(if v <= 4 { 1000 } else { -1 })
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![partition.clone(); 2]),
                    OffsetCommitRequestTopic::default().with_name(name("u")).with_partitions(vec![partition]),
                ])
        };
        let fetch = move |v: i16| {
            if v >= 8 {
                let topics =
                    OffsetFetchRequestTopics::default().with_name(name("t")).with_partition_indexes(vec![0, 1]);
                let group = OffsetFetchRequestGroup::default().with_group_id(g("g")).with_topics(Some(vec![topics]));
                let group = if v >= 9 { group.with_member_id(Some(s("m"))).with_member_epoch(4) } else { group };
                OffsetFetchRequest::default().with_groups(vec![group.clone(), group.with_topics(None)])
            } else {
                let topics = OffsetFetchRequestTopic::default().with_name(name("t")).with_partition_indexes(vec![0, 1]);
                OffsetFetchRequest::default().with_group_id(g("g")).with_topics(Some(vec![topics.clone(), topics]))
            }
        };
        let find = move |v: i16| {
            if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s("a"), s("b")])
            } else {
                FindCoordinatorRequest::default().with_key(s("g")).with_key_type(if v >= 1 { 1 } else { 0 })
            }
        };
        let join = move |v: i16| {
            let protocol = JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::from_static(b"metadata"));
            JoinGroupRequest::default()
                .with_group_id(g("g"))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(if v >= 1 { 30_000 } else { -1 })
                .with_member_id(s("m"))
                .with_group_instance_id(if v >= 5 { Some(s("i")) } else { None })
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![protocol.clone(), protocol.with_name(s("roundrobin"))])
                .with_reason(if v >= 8 { Some(s("why")) } else { None })
        };
        let sync = move |v: i16| {
            let a = SyncGroupRequestAssignment::default()
                .with_member_id(s("m"))
                .with_assignment(bytes::Bytes::from_static(b"assigned"));
            SyncGroupRequest::default()
                .with_group_id(g("g"))
                .with_generation_id(1)
                .with_member_id(s("m"))
                .with_group_instance_id(if v >= 3 { Some(s("i")) } else { None })
                .with_protocol_type(if v >= 5 { Some(s("consumer")) } else { None })
                .with_protocol_name(if v >= 5 { Some(s("range")) } else { None })
                .with_assignments(vec![a.clone(), a])
        };
        let heartbeat = move |v: i16| {
            HeartbeatRequest::default()
                .with_group_id(g("g"))
                .with_generation_id(1)
                .with_member_id(s("m"))
                .with_group_instance_id(if v >= 3 { Some(s("i")) } else { None })
        };
        let leave = move |v: i16| {
            if v >= 3 {
                let m = MemberIdentity::default().with_member_id(s("m")).with_group_instance_id(Some(s("i")));
                let m = if v >= 5 { m.with_reason(Some(s("bye"))) } else { m };
                LeaveGroupRequest::default().with_group_id(g("g")).with_members(vec![m.clone(), m])
            } else {
                LeaveGroupRequest::default().with_group_id(g("g")).with_member_id(s("m"))
            }
        };
        let describe = move |v: i16| {
            DescribeGroupsRequest::default()
                .with_groups(vec![g("a"), g("b")])
                .with_include_authorized_operations(v >= 3)
        };
        let list = move |v: i16| {
            ListGroupsRequest::default()
                .with_states_filter(if v >= 4 { vec![s("Stable"), s("Empty")] } else { vec![] })
                .with_types_filter(if v >= 5 { vec![s("classic")] } else { vec![] })
        };
        let delete = move |_: i16| DeleteGroupsRequest::default().with_groups_names(vec![g("a"), g("b")]);
        vec![
            (ApiKey::OffsetCommit, Box::new(move |v| encoded(&commit(v), v))),
            (ApiKey::OffsetFetch, Box::new(move |v| encoded(&fetch(v), v))),
            (ApiKey::FindCoordinator, Box::new(move |v| encoded(&find(v), v))),
            (ApiKey::JoinGroup, Box::new(move |v| encoded(&join(v), v))),
            (ApiKey::SyncGroup, Box::new(move |v| encoded(&sync(v), v))),
            (ApiKey::Heartbeat, Box::new(move |v| encoded(&heartbeat(v), v))),
            (ApiKey::LeaveGroup, Box::new(move |v| encoded(&leave(v), v))),
            (ApiKey::DescribeGroups, Box::new(move |v| encoded(&describe(v), v))),
            (ApiKey::ListGroups, Box::new(move |v| encoded(&list(v), v))),
            (ApiKey::DeleteGroups, Box::new(move |v| encoded(&delete(v), v))),
        ]
    }

    /// InitProducerId requests: an idempotent producer's (no transactional id), one that
    /// names its current id and epoch (version 3 on), and a transactional one.
    #[allow(clippy::type_complexity)]
    fn producer_requests() -> Vec<(ApiKey, Box<dyn Fn(i16) -> Option<Vec<u8>>>)> {
        let init = move |v: i16| {
            let r = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("txn"))))
                .with_transaction_timeout_ms(60_000);
            if v >= 3 {
                r.with_producer_id(ProducerId(7)).with_producer_epoch(2)
            } else {
                r
            }
        };
        let idempotent = move |_: i16| InitProducerIdRequest::default().with_transaction_timeout_ms(-1);
        vec![
            (ApiKey::InitProducerId, Box::new(move |v| encoded(&init(v), v))),
            (ApiKey::InitProducerId, Box::new(move |v| encoded(&idempotent(v), v))),
        ]
    }

    /// The admin APIs' requests with every array filled in: DescribeConfigs of two
    /// resources, one naming keys and one asking for every key; DescribeCluster; and
    /// CreatePartitions of two topics, one with replica assignments.
    #[allow(clippy::type_complexity)]
    fn admin_requests() -> Vec<(ApiKey, Box<dyn Fn(i16) -> Option<Vec<u8>>>)> {
        use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        fn s(x: &str) -> StrBytes {
            StrBytes::from_string(x.to_string())
        }
        let configs = move |v: i16| {
            DescribeConfigsRequest::default()
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("t"))
                        .with_configuration_keys(Some(vec![s("retention.ms"), s("max.message.bytes")])),
                    DescribeConfigsResource::default().with_resource_type(4).with_resource_name(s("0")),
                ])
                .with_include_synonyms(true)
                .with_include_documentation(v >= 3)
        };
        let cluster = move |v: i16| {
            DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(true)
                .with_endpoint_type(if v >= 1 { 2 } else { 1 })
                .with_include_fenced_brokers(v >= 2)
        };
        let partitions = move |_: i16| {
            let assigned = CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(0), BrokerId(1)]);
            CreatePartitionsRequest::default()
                .with_topics(vec![
                    CreatePartitionsTopic::default().with_name(name("t")).with_count(3).with_assignments(None),
                    CreatePartitionsTopic::default()
                        .with_name(name("u"))
                        .with_count(4)
                        .with_assignments(Some(vec![assigned.clone(), assigned])),
                ])
                .with_timeout_ms(30_000)
                .with_validate_only(true)
        };
        vec![
            (ApiKey::DescribeConfigs, Box::new(move |v| encoded(&configs(v), v))),
            (ApiKey::DescribeCluster, Box::new(move |v| encoded(&cluster(v), v))),
            (ApiKey::CreatePartitions, Box::new(move |v| encoded(&partitions(v), v))),
        ]
    }

    /// Valid requests with bytes flipped: whatever the walk lets through, the crate's
    /// decoder reads without a panic or an outsized allocation.
    #[test]
    fn mutated_requests_never_get_past_the_walk_into_trouble() {
        let metadata = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("a"))),
            MetadataRequestTopic::default().with_name(Some(name("bb"))),
        ]));
        let produce = ProduceRequest::default().with_topic_data(vec![TopicProduceData::default()
            .with_name(name("t"))
            .with_partition_data(vec![
                PartitionProduceData::default().with_records(Some(bytes::Bytes::from_static(b"records")))
            ])]);
        let fetch = FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default()])]);
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name("t"))
            .with_configs(vec![CreatableTopicConfig::default().with_name(StrBytes::from_static_str("k"))])]);
        let mut bodies = Vec::new();
        for v in [1, 9, 12] {
            bodies.push((ApiKey::Metadata, v, encoded(&metadata, v).unwrap()));
        }
        for v in [3, 9, 12] {
            bodies.push((ApiKey::Produce, v, encoded(&produce, v).unwrap()));
        }
        for v in [4, 7, 12] {
            bodies.push((ApiKey::Fetch, v, encoded(&fetch, v).unwrap()));
        }
        for v in [2, 7] {
            bodies.push((ApiKey::CreateTopics, v, encoded(&create, v).unwrap()));
        }
        for (api, encode) in group_requests().into_iter().chain(producer_requests()).chain(admin_requests()) {
            let (lo, hi) = crate::apis::supported(api).unwrap();
            for v in [lo, (lo + hi) / 2, hi] {
                let body = encode(v).unwrap();
                if !body.is_empty() {
                    bodies.push((api, v, body));
                }
            }
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut passed = 0;
        for (api, v, body) in &bodies {
            for _ in 0..3_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut b = body.clone();
                let at = (x % b.len() as u64) as usize;
                b[at] = (x >> 24) as u8;
                if x & 4 == 0 {
                    let at2 = ((x >> 40) % b.len() as u64) as usize;
                    b[at2] = 0xff;
                }
                if check(*api, *v, &b).is_ok() {
                    passed += 1;
                    let _ = crate::apis::decode_body(*api, *v, &mut bytes::Bytes::from(b));
                }
            }
        }
        assert!(passed > 1_000, "the mutations reach the decoder too ({passed} did)");
    }

    /// Array counts far past the bytes are refused before the crate's decoder sees them.
    #[test]
    fn huge_array_counts_are_refused() {
        for (api, v, body) in [
            (ApiKey::Metadata, 1, i32::MAX.to_be_bytes().to_vec()),
            (ApiKey::Metadata, 9, vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
            (ApiKey::CreateTopics, 2, [i32::MAX.to_be_bytes(), [0; 4]].concat()),
            (ApiKey::DeleteTopics, 1, 2_000_000_000i32.to_be_bytes().to_vec()),
            (ApiKey::Produce, 3, [vec![0xff, 0xff, 0, 1, 0, 0, 0, 0], i32::MAX.to_be_bytes().to_vec()].concat()),
            // JoinGroup v5: group "g", session, rebalance, member "", instance null,
            // protocol type "c", then two billion protocols.
            (
                ApiKey::JoinGroup,
                5,
                [
                    vec![0, 1, b'g', 0, 0, 0x27, 0x10, 0, 0, 0x75, 0x30, 0, 0, 0xff, 0xff, 0, 1, b'c'],
                    i32::MAX.to_be_bytes().to_vec(),
                ]
                .concat(),
            ),
            // OffsetFetch v8: a billion groups, in the compact form.
            (ApiKey::OffsetFetch, 8, vec![0xff, 0xff, 0xff, 0xff, 0x03]),
            (ApiKey::DescribeGroups, 0, i32::MAX.to_be_bytes().to_vec()),
            // DescribeConfigs v1: one topic "t" whose keys are two billion names.
            (ApiKey::DescribeConfigs, 1, [vec![0, 0, 0, 1, 2, 0, 1, b't'], i32::MAX.to_be_bytes().to_vec()].concat()),
            // CreatePartitions v2 (compact): topic "t", count 3, a billion assignments.
            (ApiKey::CreatePartitions, 2, vec![2, 2, b't', 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0x03]),
        ] {
            let e = check(api, v, &body).expect_err("refused");
            assert!(e.contains("array of") || e.contains("length"), "{api:?}: {e}");
        }
    }

    /// A request's elements are counted: each array's, each tagged field, in the body and
    /// in the header, and the bytes after the walk at one element every two.
    #[test]
    fn elements_are_counted() {
        let groups =
            |n: usize| DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("")); n]);
        for n in [0, 1, 1000] {
            // Version 0: the array alone, nothing after it.
            assert_eq!(check(ApiKey::DescribeGroups, 0, &encoded(&groups(n), 0).unwrap()), Ok(n as u64));
        }
        // Version 5 (flexible): its boolean and tag count after the array count as one.
        let body = encoded(&groups(10), 5).unwrap();
        assert_eq!(check(ApiKey::DescribeGroups, 5, &body), Ok(11));
        // The same with 1,000 tagged fields of its own: at least 1,000 more.
        let mut tagged = groups(10);
        tagged.unknown_tagged_fields = (0..1000).map(|t| (t + 10, bytes::Bytes::new())).collect();
        let body = encoded(&tagged, 5).unwrap();
        let counted = check(ApiKey::DescribeGroups, 5, &body).unwrap();
        assert!((1010..=body.len() as u64).contains(&counted), "{counted}");
        // A header of version 2 with 1,000 tagged fields: counted; version 1: none.
        use kafka_protocol::protocol::encode_request_header_into_buffer;
        let mut header = RequestHeader::default()
            .with_request_api_key(ApiKey::DescribeGroups as i16)
            .with_request_api_version(5)
            .with_client_id(Some(StrBytes::from_static_str("c")));
        header.unknown_tagged_fields = (0..1000).map(|t| (t, bytes::Bytes::new())).collect();
        let mut frame = BytesMut::new();
        encode_request_header_into_buffer(&mut frame, &header).unwrap();
        assert_eq!(check_header(ApiKey::DescribeGroups, 5, &frame), Ok(1000));
        let mut frame = BytesMut::new();
        encode_request_header_into_buffer(&mut frame, &header.with_request_api_version(0)).unwrap();
        assert_eq!(check_header(ApiKey::DescribeGroups, 0, &frame), Ok(0));
        // A header cut inside its client id is refused.
        assert!(check_header(ApiKey::DescribeGroups, 0, &[0, 15, 0, 0, 0, 0, 0, 1, 0, 5, b'c']).is_err());
    }

    /// An InitProducerId has no array; a transactional id that runs past the end, in
    /// either encoding, is refused, as is a body cut inside its fixed-size fields.
    #[test]
    fn init_producer_id_strings_past_the_end_are_refused() {
        for (v, body) in [
            (0, vec![0x7f, 0xff, b't']),
            (1, vec![0, 3, b't', b'x', b'n', 0, 0]),
            (3, [vec![4, b't', b'x', b'n'], vec![0; 4 + 8]].concat()),
            (4, vec![0xff, 0xff, 0xff, 0xff, 0x07, b't']),
        ] {
            let e = check(ApiKey::InitProducerId, v, &body).expect_err("refused");
            assert!(e.contains("bytes") && e.contains("left"), "v{v}: {e}");
        }
    }
}
