//! Every version of every API that ApiVersions advertises is answered: for each, the
//! requests a client sends (and the errors they can meet) get a response that decodes
//! at that version, on a connection that stays open. The consumer-group APIs and
//! InitProducerId are among them (broker-fs keeps groups' offsets and producers), and so
//! are the admin APIs DescribeConfigs, DescribeCluster and CreatePartitions. A version
//! whose response cannot be encoded (a field set that does not exist at it) closes the
//! connection instead, which clients report as a network or authentication failure.

mod common;

use bytes::{Buf, Bytes};
use common::wire::{batch, connect, frame, name, record, rotten_batch, start};
use common::TempDir;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use std::io::{Read, Write};
use std::net::TcpStream;

/// One request of `api` at `v`, and its response decoded at `v`, or what went wrong.
fn exchange<Q, R>(s: &mut TcpStream, api: ApiKey, v: i16, id: &mut i32, request: &Q) -> Result<R, String>
where
    Q: Encodable + HeaderVersion,
    R: Decodable + HeaderVersion,
{
    *id += 1;
    s.write_all(&frame(api, v, *id, request)).map_err(|e| format!("send: {e}"))?;
    let mut size = [0; 4];
    s.read_exact(&mut size).map_err(|e| format!("no response (the connection closed?): {e}"))?;
    let mut body = vec![0; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).map_err(|e| format!("a response cut short: {e}"))?;
    let mut buf = Bytes::from(body);
    let header = ResponseHeader::decode(&mut buf, R::header_version(v)).map_err(|e| format!("header: {e}"))?;
    if header.correlation_id != *id {
        return Err(format!("correlation id {} for request {id}", header.correlation_id));
    }
    let r = R::decode(&mut buf, v).map_err(|e| format!("body: {e}"))?;
    if buf.has_remaining() {
        return Err(format!("{} bytes after the response", buf.remaining()));
    }
    Ok(r)
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn create(name_: &str, partitions: i32, replication: i16) -> CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatableTopic::default()
        .with_name(name(name_))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)])
}

fn produce(topic: &str, records: Bytes) -> ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![TopicProduceData::default()
        .with_name(name(topic))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(records))])])
}

fn fetch(topic: &str, offset: i64) -> FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    FetchRequest::default().with_replica_id(BrokerId(-1)).with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![
        FetchTopic::default().with_topic(name(topic)).with_partitions(vec![FetchPartition::default()
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20)]),
    ])
}

fn list_offsets(topic: &str, timestamp: i64) -> ListOffsetsRequest {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
        .with_name(name(topic))
        .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(timestamp)])])
}

/// Names the case an error happened in.
fn at(case: &str) -> impl Fn(String) -> String + '_ {
    move |e| format!("{case}: {e}")
}

/// Sends `api`'s requests at version `v`; the first failure, with what was sent.
fn check(s: &mut TcpStream, api: ApiKey, v: i16, id: &mut i32) -> Result<(), String> {
    let one = |topic: &str| Some(vec![metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic)))]);
    match api {
        ApiKey::ApiVersions => {
            let r = ApiVersionsRequest::default();
            let r = if v >= 3 {
                r.with_client_software_name(text("versions-test")).with_client_software_version(text("1"))
            } else {
                r
            };
            let got: ApiVersionsResponse = exchange(s, api, v, id, &r).map_err(at("ApiVersions"))?;
            expect(got.error_code == 0, "ApiVersions answers no error")?;
        }
        ApiKey::Metadata => {
            let every = if v == 0 { Some(vec![]) } else { None };
            for (case, topics) in [("every topic", every), ("one topic", one("t")), ("an unknown topic", one("nope"))] {
                let r = MetadataRequest::default().with_topics(topics);
                let r = if v >= 4 { r.with_allow_auto_topic_creation(false) } else { r };
                let _: MetadataResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
            }
        }
        ApiKey::CreateTopics => {
            let topic = format!("c-{v}");
            for (case, r) in [
                ("a create", create(&topic, 2, 1)),
                ("a name that exists", create(&topic, 2, 1)),
                ("three replicas", create("c-bad", 1, 3)),
            ] {
                let _: CreateTopicsResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
            }
        }
        ApiKey::DeleteTopics => {
            let topic = format!("d-{v}");
            let _: CreateTopicsResponse = exchange(s, ApiKey::CreateTopics, 7, id, &create(&topic, 1, 1))?;
            for (case, t) in [("a delete", topic.as_str()), ("an unknown topic", "nope")] {
                let r = DeleteTopicsRequest::default().with_timeout_ms(30_000).with_topic_names(vec![name(t)]);
                let got: DeleteTopicsResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
                expect(got.responses.len() == 1, "one result")?;
            }
        }
        ApiKey::Produce => {
            let good = batch(&[record(0, Some("k".into()), format!("v{v}"))]);
            for (case, r) in [
                ("a produce", produce("t", good.clone())),
                ("an unknown topic", produce("nope", good)),
                ("a batch failing its CRC", produce("t", Bytes::from(rotten_batch()))),
            ] {
                let got: ProduceResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
                expect(got.responses.len() == 1, "one topic in the response")?;
            }
        }
        ApiKey::Fetch => {
            for (case, r) in [
                ("a fetch", fetch("t", 0)),
                ("past the end", fetch("t", 1 << 40)),
                ("an unknown topic", fetch("nope", 0)),
            ] {
                let got: FetchResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
                expect(got.responses.len() == 1, "one topic in the response")?;
            }
        }
        ApiKey::ListOffsets => {
            for (case, r) in [
                ("latest", list_offsets("t", -1)),
                ("earliest", list_offsets("t", -2)),
                ("by time", list_offsets("t", 1_000)),
                ("an unknown topic", list_offsets("nope", -1)),
            ] {
                let _: ListOffsetsResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
            }
        }
        ApiKey::OffsetForLeaderEpoch => {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            let ask = |topic: &str, epoch: i32| {
                OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
                    OffsetForLeaderTopic::default()
                        .with_topic(name(topic))
                        .with_partitions(vec![OffsetForLeaderPartition::default().with_leader_epoch(epoch)]),
                ])
            };
            for (case, r) in [
                ("an old epoch", ask("t", 0)),
                ("an epoch past the current", ask("t", i32::MAX)),
                ("an unknown topic", ask("nope", 0)),
            ] {
                let got: OffsetForLeaderEpochResponse = exchange(s, api, v, id, &r).map_err(at(case))?;
                expect(got.topics.len() == 1, "one topic in the response")?;
            }
        }
        ApiKey::FindCoordinator => {
            let r = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![text("g"), text("h")])
            } else {
                FindCoordinatorRequest::default().with_key(text("g"))
            };
            let got: FindCoordinatorResponse = exchange(s, api, v, id, &r).map_err(at("a group"))?;
            let errors: Vec<i16> =
                if v >= 4 { got.coordinators.iter().map(|c| c.error_code).collect() } else { vec![got.error_code] };
            expect(errors.iter().all(|e| *e == 0) && !errors.is_empty(), "this broker coordinates groups")?;
            if v >= 1 {
                let r = r.with_key_type(1);
                let got: FindCoordinatorResponse = exchange(s, api, v, id, &r).map_err(at("a transaction"))?;
                let errors: Vec<i16> =
                    if v >= 4 { got.coordinators.iter().map(|c| c.error_code).collect() } else { vec![got.error_code] };
                expect(errors.iter().all(|e| *e == 53), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: no transactions")?;
            }
        }
        ApiKey::JoinGroup => {
            let g = format!("join-{v}");
            let first: JoinGroupResponse = exchange(s, api, v, id, &join(&g, "", v)).map_err(at("a new member"))?;
            let joined = if v >= 4 {
                expect(first.error_code == 35 + 44, "MEMBER_ID_REQUIRED")?;
                let m = first.member_id.to_string();
                exchange(s, api, v, id, &join(&g, &m, v)).map_err(at("a member with its id"))?
            } else {
                first
            };
            expect(joined.error_code == 0 && joined.generation_id == 1, "joined, generation 1")?;
            let _: JoinGroupResponse =
                exchange(s, api, v, id, &join(&g, "stranger", v)).map_err(at("an unknown member"))?;
            if v >= 5 {
                let r = join(&g, "", v).with_group_instance_id(Some(text("static")));
                let _: JoinGroupResponse = exchange(s, api, v, id, &r).map_err(at("a static member"))?;
            }
        }
        ApiKey::SyncGroup => {
            let g = format!("sync-{v}");
            let m = joined(s, id, &g)?;
            let r = SyncGroupRequest::default()
                .with_group_id(GroupId(text(&g)))
                .with_generation_id(1)
                .with_member_id(text(&m));
            let r = if v >= 5 {
                r.with_protocol_type(Some(text("consumer"))).with_protocol_name(Some(text("range")))
            } else {
                r
            };
            let r = r.with_assignments(vec![sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(text(&m))
                .with_assignment(Bytes::from_static(b"assigned"))]);
            let got: SyncGroupResponse = exchange(s, api, v, id, &r).map_err(at("the leader's sync"))?;
            expect(got.error_code == 0 && got.assignment == "assigned", "its assignment")?;
            let _: SyncGroupResponse =
                exchange(s, api, v, id, &r.with_member_id(text("stranger"))).map_err(at("an unknown member"))?;
        }
        ApiKey::Heartbeat => {
            let g = format!("heartbeat-{v}");
            let m = synced(s, id, &g)?;
            let r = HeartbeatRequest::default()
                .with_group_id(GroupId(text(&g)))
                .with_generation_id(1)
                .with_member_id(text(&m));
            let got: HeartbeatResponse = exchange(s, api, v, id, &r).map_err(at("a heartbeat"))?;
            expect(got.error_code == 0, "no error")?;
            let _: HeartbeatResponse =
                exchange(s, api, v, id, &r.with_generation_id(0)).map_err(at("a stale generation"))?;
        }
        ApiKey::LeaveGroup => {
            let g = format!("leave-{v}");
            let m = joined(s, id, &g)?;
            let r = LeaveGroupRequest::default().with_group_id(GroupId(text(&g)));
            let r = if v >= 3 {
                r.with_members(vec![leave_group_request::MemberIdentity::default().with_member_id(text(&m))])
            } else {
                r.with_member_id(text(&m))
            };
            let got: LeaveGroupResponse = exchange(s, api, v, id, &r).map_err(at("a leave"))?;
            expect(got.error_code == 0 && got.members.iter().all(|m| m.error_code == 0), "left")?;
            let _: LeaveGroupResponse = exchange(s, api, v, id, &r).map_err(at("a member gone"))?;
        }
        ApiKey::OffsetCommit => {
            let g = format!("commit-{v}");
            let got: OffsetCommitResponse = exchange(s, api, v, id, &commit(&g, -1, "t")).map_err(at("a commit"))?;
            expect(got.topics[0].partitions[0].error_code == 0, "committed")?;
            let _: OffsetCommitResponse =
                exchange(s, api, v, id, &commit(&g, 3, "t")).map_err(at("an unknown member"))?;
            let _: OffsetCommitResponse =
                exchange(s, api, v, id, &commit(&g, -1, "nope")).map_err(at("an unknown topic"))?;
        }
        ApiKey::OffsetFetch => {
            let _: OffsetCommitResponse = exchange(s, ApiKey::OffsetCommit, 8, id, &commit("fetched", -1, "t"))?;
            use offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics};
            let named = |g: &str| {
                if v >= 8 {
                    let topics = ["t", "nope"].map(|t| {
                        OffsetFetchRequestTopics::default().with_name(name(t)).with_partition_indexes(vec![0, 1])
                    });
                    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(text(g)))
                        .with_topics(Some(topics.to_vec()))])
                } else {
                    let topics = ["t", "nope"].map(|t| {
                        OffsetFetchRequestTopic::default().with_name(name(t)).with_partition_indexes(vec![0, 1])
                    });
                    OffsetFetchRequest::default().with_group_id(GroupId(text(g))).with_topics(Some(topics.to_vec()))
                }
            };
            let got: OffsetFetchResponse = exchange(s, api, v, id, &named("fetched")).map_err(at("named topics"))?;
            let offset = if v >= 8 {
                got.groups[0].topics[0].partitions[0].committed_offset
            } else {
                got.topics[0].partitions[0].committed_offset
            };
            expect(offset == 0, "the committed offset")?;
            let _: OffsetFetchResponse = exchange(s, api, v, id, &named("nobody")).map_err(at("a group with none"))?;
            if v >= 2 {
                let every = if v >= 8 {
                    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(text("fetched")))
                        .with_topics(None)])
                } else {
                    OffsetFetchRequest::default().with_group_id(GroupId(text("fetched"))).with_topics(None)
                };
                let got: OffsetFetchResponse = exchange(s, api, v, id, &every).map_err(at("every topic"))?;
                let topics = if v >= 8 { got.groups[0].topics.len() } else { got.topics.len() };
                expect(topics == 1, "one topic with a position")?;
            }
        }
        ApiKey::DescribeGroups => {
            let _ = synced(s, id, &format!("described-{v}"))?;
            let r = DescribeGroupsRequest::default()
                .with_groups(vec![
                    GroupId(text(&format!("described-{v}"))),
                    GroupId(text("fetched")),
                    GroupId(text("nobody")),
                ])
                .with_include_authorized_operations(v >= 3);
            let got: DescribeGroupsResponse =
                exchange(s, api, v, id, &r).map_err(at("a stable group, one with offsets only and none"))?;
            let states: Vec<String> = got.groups.iter().map(|g| g.group_state.to_string()).collect();
            expect(states == ["Stable", "Empty", "Dead"], "their states")?;
        }
        ApiKey::ListGroups => {
            let r = ListGroupsRequest::default();
            let r = if v >= 4 { r.with_states_filter(vec![text("Stable"), text("Empty")]) } else { r };
            let r = if v >= 5 { r.with_types_filter(vec![text("classic")]) } else { r };
            let got: ListGroupsResponse = exchange(s, api, v, id, &r).map_err(at("a list"))?;
            expect(got.error_code == 0 && !got.groups.is_empty(), "groups")?;
        }
        ApiKey::DeleteGroups => {
            let g = format!("deleted-{v}");
            let _: OffsetCommitResponse = exchange(s, ApiKey::OffsetCommit, 8, id, &commit(&g, -1, "t"))?;
            let r = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(&g)), GroupId(text("nobody"))]);
            let got: DeleteGroupsResponse = exchange(s, api, v, id, &r).map_err(at("a delete"))?;
            let errors: Vec<i16> = got.results.iter().map(|r| r.error_code).collect();
            expect(errors == [0, 69], "deleted, and GROUP_ID_NOT_FOUND")?;
        }
        ApiKey::InitProducerId => {
            let r = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000);
            let got: InitProducerIdResponse = exchange(s, api, v, id, &r).map_err(at("an idempotent producer"))?;
            expect(
                got.error_code == 0 && got.producer_id.0 >= 0 && got.producer_epoch == 0,
                &format!("a producer id: {got:?}"),
            )?;
            if v >= 3 {
                // KIP-360: a producer naming its id and epoch gets a new id, as from Kafka.
                let again = r.clone().with_producer_id(got.producer_id).with_producer_epoch(got.producer_epoch);
                let bumped: InitProducerIdResponse =
                    exchange(s, api, v, id, &again).map_err(at("a producer naming its id"))?;
                expect(bumped.error_code == 0 && bumped.producer_id != got.producer_id, "a new producer id")?;
            }
            let txn = r.with_transactional_id(Some(TransactionalId(text("txn"))));
            let got: InitProducerIdResponse = exchange(s, api, v, id, &txn).map_err(at("a transactional producer"))?;
            expect(got.error_code == 53 && got.producer_id.0 == -1, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")?;
        }
        ApiKey::DescribeConfigs => {
            use describe_configs_request::DescribeConfigsResource;
            let resource = |kind: i8, name_: &str, keys: Option<Vec<&str>>| {
                DescribeConfigsResource::default()
                    .with_resource_type(kind)
                    .with_resource_name(text(name_))
                    .with_configuration_keys(keys.map(|k| k.into_iter().map(text).collect()))
            };
            let r = DescribeConfigsRequest::default()
                .with_resources(vec![
                    resource(2, "t", None),
                    resource(2, "t", Some(vec!["retention.ms", "no.such.config"])),
                    resource(2, "nope", None),
                    resource(4, "0", None),
                    resource(4, "", None),
                    resource(8, "0", None),
                ])
                .with_include_synonyms(true)
                .with_include_documentation(v >= 3);
            let got: DescribeConfigsResponse =
                exchange(s, api, v, id, &r).map_err(at("topics, brokers and a broker logger"))?;
            let errors: Vec<i16> = got.results.iter().map(|r| r.error_code).collect();
            expect(errors == [0, 0, 3, 0, 0, 42], &format!("UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST: {errors:?}"))?;
            let counts: Vec<usize> = got.results.iter().map(|r| r.configs.len()).collect();
            expect(counts[1] == 1 && counts[0] > 1 && counts[3] > 1 && counts[4] == 0, "the configs asked for")?;
        }
        ApiKey::DescribeCluster => {
            let r = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
            let r = if v >= 2 { r.with_include_fenced_brokers(true) } else { r };
            let got: DescribeClusterResponse = exchange(s, api, v, id, &r).map_err(at("the brokers"))?;
            expect(got.error_code == 0 && got.brokers.len() == 1 && got.controller_id.0 == 0, "one broker, 0")?;
            if v >= 1 {
                let controllers: DescribeClusterResponse =
                    exchange(s, api, v, id, &r.with_endpoint_type(2)).map_err(at("the controllers"))?;
                expect(controllers.error_code == 114, "MISMATCHED_ENDPOINT_TYPE")?;
            }
        }
        ApiKey::CreatePartitions => {
            use create_partitions_request::CreatePartitionsTopic;
            for validate_only in [false, true] {
                let r = CreatePartitionsRequest::default()
                    .with_topics(vec![
                        CreatePartitionsTopic::default().with_name(name("t")).with_count(2),
                        CreatePartitionsTopic::default().with_name(name("nope")).with_count(2),
                    ])
                    .with_timeout_ms(30_000)
                    .with_validate_only(validate_only);
                let got: CreatePartitionsResponse =
                    exchange(s, api, v, id, &r).map_err(at("a topic and an unknown one"))?;
                let errors: Vec<i16> = got.results.iter().map(|r| r.error_code).collect();
                expect(errors == [37, 3], "INVALID_PARTITIONS and UNKNOWN_TOPIC_OR_PARTITION")?;
            }
        }
        other => return Err(format!("{other:?} is advertised and this test sends nothing of it: add its requests")),
    }
    Ok(())
}

/// A JoinGroup of `g` at version `v` (a rebalance timeout from version 1 on).
fn join(g: &str, member: &str, v: i16) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(g)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(if v >= 1 { 30_000 } else { -1 })
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"subscription"))])
}

/// A member that joined `g` alone (JoinGroup v7): generation 1, its leader. Its id.
fn joined(s: &mut TcpStream, id: &mut i32, g: &str) -> Result<String, String> {
    let first: JoinGroupResponse = exchange(s, ApiKey::JoinGroup, 7, id, &join(g, "", 7))?;
    let m = first.member_id.to_string();
    let got: JoinGroupResponse = exchange(s, ApiKey::JoinGroup, 7, id, &join(g, &m, 7))?;
    expect(got.error_code == 0 && got.generation_id == 1, "joined")?;
    Ok(m)
}

/// A member that joined `g` alone and has its assignment: the group is stable.
fn synced(s: &mut TcpStream, id: &mut i32, g: &str) -> Result<String, String> {
    let m = joined(s, id, g)?;
    let r = SyncGroupRequest::default().with_group_id(GroupId(text(g))).with_generation_id(1).with_member_id(text(&m));
    let got: SyncGroupResponse = exchange(s, ApiKey::SyncGroup, 5, id, &r)?;
    expect(got.error_code == 0, "synced")?;
    Ok(m)
}

/// An OffsetCommit of offset 0 of partition 0 of `topic` for `g` at `generation`
/// (member "m" unless -1).
fn commit(g: &str, generation: i32, topic: &str) -> OffsetCommitRequest {
    use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    OffsetCommitRequest::default()
        .with_group_id(GroupId(text(g)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(if generation < 0 { "" } else { "m" }))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default().with_committed_metadata(Some(text("x")))])])
}

fn expect(ok: bool, what: &str) -> Result<(), String> {
    ok.then_some(()).ok_or_else(|| format!("expected: {what}"))
}

#[test]
fn every_advertised_version_of_every_api_is_answered() {
    let dir = TempDir::new("kafka-versions");
    let server = start(&dir);
    let mut s = connect(&server);
    let mut id = 0;
    let _: CreateTopicsResponse = exchange(&mut s, ApiKey::CreateTopics, 7, &mut id, &create("t", 1, 1)).unwrap();
    let advertised: ApiVersionsResponse =
        exchange(&mut s, ApiKey::ApiVersions, 3, &mut id, &ApiVersionsRequest::default()).unwrap();
    let mut failures = Vec::new();
    let mut answered = 0;
    for key in &advertised.api_keys {
        let api = ApiKey::try_from(key.api_key).expect("a known API key");
        for v in key.min_version..=key.max_version {
            if let Err(e) = check(&mut s, api, v, &mut id) {
                failures.push(format!("{api:?} v{v}: {e}"));
                s = connect(&server); // the broken version closed the connection
            } else {
                answered += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{} versions fail:\n{}\n{}", failures.len(), failures.join("\n"), server.stderr());
    assert!(answered >= 100, "only {answered} versions advertised");
}
