//! Consumer groups at the protocol level, against a running `broker-fs serve --kafka`:
//! two members joining, syncing, heartbeating and leaving; the errors Kafka gives to
//! unknown members and stale generations; commits checked against the membership and
//! stored by the core; OffsetFetch of a topic created again (never the old
//! incarnation's position); groups listed, described and deleted; and hostile requests
//! (huge member metadata, a thousand members, a client that never reads), which get
//! Kafka's codes, change nothing and hold up no one else.

mod common;

use bytes::Bytes;
use common::wire::{batch, closed, connect, frame, name, record, response, start};
use common::{KafkaServer, TempDir};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::ResponseError as E;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group(s: &str) -> GroupId {
    GroupId(text(s))
}

/// One client connection: requests sent, responses read in order.
struct Client {
    s: TcpStream,
    id: i32,
}

impl Client {
    fn new(server: &KafkaServer) -> Client {
        Client { s: connect(server), id: 0 }
    }

    fn send<Q: Encodable + HeaderVersion>(&mut self, api: ApiKey, v: i16, request: &Q) {
        self.id += 1;
        self.s.write_all(&frame(api, v, self.id, request)).unwrap();
    }

    fn recv<R: Decodable + HeaderVersion>(&mut self, v: i16) -> R {
        response::<R>(&mut self.s, v).1
    }

    fn call<Q: Encodable + HeaderVersion, R: Decodable + HeaderVersion>(
        &mut self,
        api: ApiKey,
        v: i16,
        request: &Q,
    ) -> R {
        self.send(api, v, request);
        self.recv(v)
    }

    fn create(&mut self, topic: &str, partitions: i32) {
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
        let r: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &create);
        assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    }

    fn delete(&mut self, topic: &str) {
        let delete = DeleteTopicsRequest::default().with_topic_names(vec![name(topic)]);
        let r: DeleteTopicsResponse = self.call(ApiKey::DeleteTopics, 5, &delete);
        assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    }

    /// `n` records to partition `p` of `topic`.
    fn produce(&mut self, topic: &str, p: i32, n: i64) {
        let records: Vec<_> = (0..n).map(|i| record(i, None, format!("v{i}"))).collect();
        let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![
                PartitionProduceData::default().with_index(p).with_records(Some(batch(&records))),
            ]),
        ]);
        let r: ProduceResponse = self.call(ApiKey::Produce, 9, &produce);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "{r:?}");
    }

    /// The leader epoch (the incarnation's) of partition 0 of `topic`, by Metadata.
    fn epoch(&mut self, topic: &str) -> i32 {
        let asked = vec![metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic)))];
        let r: MetadataResponse = self.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(Some(asked)));
        r.topics[0].partitions[0].leader_epoch
    }

    /// The ListOffsets earliest offset of partition 0 of `topic`.
    fn earliest(&mut self, topic: &str) -> i64 {
        use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-2)])]);
        let r: ListOffsetsResponse = self.call(ApiKey::ListOffsets, 6, &request);
        r.topics[0].partitions[0].offset
    }
}

fn join_request(g: &str, member: &str, metadata: &[u8], session_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::copy_from_slice(metadata))])
}

/// JoinGroup v7 with an empty member id: MEMBER_ID_REQUIRED and the id to join with.
fn member_id(c: &mut Client, g: &str) -> String {
    let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 7, &join_request(g, "", b"", 10_000));
    assert_eq!(r.error_code, E::MemberIdRequired.code(), "{r:?}");
    assert_eq!(r.generation_id, -1);
    r.member_id.to_string()
}

fn heartbeat(c: &mut Client, g: &str, generation: i32, member: &str) -> i16 {
    let request =
        HeartbeatRequest::default().with_group_id(group(g)).with_generation_id(generation).with_member_id(text(member));
    let r: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &request);
    r.error_code
}

fn sync_request(g: &str, generation: i32, member: &str, assignments: &[(&str, &[u8])]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group(g))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        )
}

fn describe(c: &mut Client, g: &str) -> describe_groups_response::DescribedGroup {
    let request = DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    let mut r: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 6, &request);
    r.groups.remove(0)
}

/// Waits (10 s at most) until `g` is in `state`.
fn wait_for_state(c: &mut Client, g: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = describe(c, g).group_state.to_string();
        if now == state {
            return;
        }
        assert!(Instant::now() < deadline, "{g} is {now}, not {state}, after 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// OffsetCommit v8 of `(partition, offset, leader epoch)` of `topic`; each partition's error.
fn commit(
    c: &mut Client,
    g: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64, i32)],
) -> Vec<i16> {
    let partitions = offsets
        .iter()
        .map(|(p, o, e)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
                .with_committed_leader_epoch(*e)
                .with_committed_metadata(Some(text("meta")))
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(name(topic)).with_partitions(partitions)]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &request);
    r.topics[0].partitions.iter().map(|p| p.error_code).collect()
}

/// OffsetFetch v7 of `partitions` of `topic`: each (offset, leader epoch, metadata, error).
fn fetch_offsets(c: &mut Client, g: &str, topic: &str, partitions: &[i32]) -> Vec<(i64, i32, String, i16)> {
    let request = OffsetFetchRequest::default().with_group_id(group(g)).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(name(topic)).with_partition_indexes(partitions.to_vec()),
    ]));
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &request);
    assert_eq!(r.error_code, 0);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.committed_leader_epoch, p.metadata.as_ref().unwrap().to_string(), p.error_code))
        .collect()
}

#[test]
fn two_members_join_sync_heartbeat_and_leave() {
    let dir = TempDir::new("kafka-groups-flow");
    let server = start(&dir);
    let (mut a, mut b, mut admin) = (Client::new(&server), Client::new(&server), Client::new(&server));

    // FindCoordinator names this broker, batched or not.
    let r: FindCoordinatorResponse =
        admin.call(ApiKey::FindCoordinator, 3, &FindCoordinatorRequest::default().with_key(text("g")));
    assert_eq!(
        (r.error_code, r.node_id.0, r.port),
        (0, 0, server.address.rsplit(':').next().unwrap().parse().unwrap())
    );
    let batched = FindCoordinatorRequest::default().with_coordinator_keys(vec![text("g"), text("h")]);
    let r: FindCoordinatorResponse = admin.call(ApiKey::FindCoordinator, 4, &batched);
    assert_eq!(
        r.coordinators.iter().map(|c| (c.key.to_string(), c.error_code)).collect::<Vec<_>>(),
        [("g".into(), 0), ("h".into(), 0)]
    );
    let transactions = FindCoordinatorRequest::default().with_key(text("tx")).with_key_type(1);
    let r: FindCoordinatorResponse = admin.call(ApiKey::FindCoordinator, 3, &transactions);
    // The one error every client takes at once as fatal for a transactional producer.
    assert_eq!(r.error_code, E::TransactionalIdAuthorizationFailed.code(), "no transaction coordinator: {r:?}");
    let share = FindCoordinatorRequest::default().with_coordinator_keys(vec![text("s")]).with_key_type(2);
    let r: FindCoordinatorResponse = admin.call(ApiKey::FindCoordinator, 6, &share);
    assert_eq!(r.coordinators[0].error_code, E::InvalidRequest.code(), "no share-group coordinator: {r:?}");

    // The first member alone: leader of generation 1 at once.
    let ma = member_id(&mut a, "g");
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &ma, b"meta-a", 10_000));
    assert_eq!((r.error_code, r.generation_id, r.leader.to_string(), r.members.len()), (0, 1, ma.clone(), 1));
    assert_eq!(
        (r.protocol_type.unwrap().to_string(), r.protocol_name.unwrap().to_string()),
        ("consumer".into(), "range".into())
    );
    let r: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 1, &ma, &[(&ma, b"all")]));
    assert_eq!((r.error_code, &r.assignment[..]), (0, &b"all"[..]));
    assert_eq!(heartbeat(&mut a, "g", 1, &ma), 0);

    // The second member's join waits for the first to rejoin, which its heartbeat tells it to.
    let mb = member_id(&mut b, "g");
    b.send(ApiKey::JoinGroup, 7, &join_request("g", &mb, b"meta-b", 10_000));
    wait_for_state(&mut admin, "g", "PreparingRebalance");
    assert_eq!(heartbeat(&mut a, "g", 1, &ma), E::RebalanceInProgress.code());
    let ra: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &ma, b"meta-a", 10_000));
    let rb: JoinGroupResponse = b.recv(7);
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!((ra.leader.to_string(), rb.leader.to_string()), (ma.clone(), ma.clone()));
    let metadata: Vec<(String, Vec<u8>)> =
        ra.members.iter().map(|m| (m.member_id.to_string(), m.metadata.to_vec())).collect();
    assert_eq!(
        metadata,
        [(ma.clone(), b"meta-a".to_vec()), (mb.clone(), b"meta-b".to_vec())],
        "the leader gets everyone's"
    );
    assert!(rb.members.is_empty(), "a follower gets no member list");

    // The follower's SyncGroup waits for the leader's.
    b.send(ApiKey::SyncGroup, 5, &sync_request("g", 2, &mb, &[]));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(describe(&mut admin, "g").group_state.to_string(), "CompletingRebalance", "the follower waits");
    let r: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 2, &ma, &[(&ma, b"p0"), (&mb, b"p1")]));
    assert_eq!((r.error_code, &r.assignment[..]), (0, &b"p0"[..]));
    let r: SyncGroupResponse = b.recv(5);
    assert_eq!((r.error_code, &r.assignment[..]), (0, &b"p1"[..]));
    let d = describe(&mut admin, "g");
    assert_eq!(
        (d.error_code, d.group_state.to_string(), d.protocol_data.to_string()),
        (0, "Stable".into(), "range".into())
    );
    let members: Vec<(String, Vec<u8>, Vec<u8>)> = d
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_metadata.to_vec(), m.member_assignment.to_vec()))
        .collect();
    assert_eq!(
        members,
        [(ma.clone(), b"meta-a".to_vec(), b"p0".to_vec()), (mb.clone(), b"meta-b".to_vec(), b"p1".to_vec())]
    );
    assert!(d.members.iter().all(|m| m.client_id.to_string() == "protocol-test" && m.client_host.starts_with('/')));

    // What Kafka answers a stranger and a stale generation.
    assert_eq!(heartbeat(&mut a, "g", 2, &ma), 0);
    assert_eq!(heartbeat(&mut a, "g", 1, &ma), E::IllegalGeneration.code());
    assert_eq!(heartbeat(&mut a, "g", 2, "stranger"), E::UnknownMemberId.code());
    assert_eq!(heartbeat(&mut a, "nogroup", 2, &ma), E::UnknownMemberId.code());
    let r: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 1, &ma, &[]));
    assert_eq!(r.error_code, E::IllegalGeneration.code());
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", "stranger", b"", 10_000));
    assert_eq!(r.error_code, E::UnknownMemberId.code());
    let other_protocol = join_request("g", "", b"", 10_000).with_protocol_type(text("connect"));
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &other_protocol);
    assert_eq!(r.error_code, E::InconsistentGroupProtocol.code());
    let r: JoinGroupResponse = a.call(
        ApiKey::JoinGroup,
        7,
        &join_request("g", "", b"", 10_000).with_group_instance_id(Some(text("static-1"))),
    );
    assert_eq!(r.error_code, E::UnsupportedVersion.code(), "static membership is refused");
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", "", b"", 500));
    assert_eq!(r.error_code, E::InvalidSessionTimeout.code());

    // ListGroups: the group, stable, of the consumer protocol.
    let r: ListGroupsResponse = admin.call(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
    let listed: Vec<(String, String, String, String)> = r
        .groups
        .iter()
        .map(|g| {
            (g.group_id.to_string(), g.protocol_type.to_string(), g.group_state.to_string(), g.group_type.to_string())
        })
        .collect();
    assert_eq!(listed, [("g".to_string(), "consumer".to_string(), "Stable".to_string(), "classic".to_string())]);
    let filtered = ListGroupsRequest::default().with_states_filter(vec![text("empty")]);
    let r: ListGroupsResponse = admin.call(ApiKey::ListGroups, 5, &filtered);
    assert!(r.groups.is_empty(), "{r:?}");

    // DeleteGroups refuses a group with members.
    let r: DeleteGroupsResponse =
        admin.call(ApiKey::DeleteGroups, 2, &DeleteGroupsRequest::default().with_groups_names(vec![group("g")]));
    assert_eq!(r.results[0].error_code, E::NonEmptyGroup.code());

    // The leader leaves (batched, with a stranger): the other member rebalances alone and leads.
    let leave = LeaveGroupRequest::default().with_group_id(group("g")).with_members(vec![
        MemberIdentity::default().with_member_id(text(&ma)),
        MemberIdentity::default().with_member_id(text("stranger")),
    ]);
    let r: LeaveGroupResponse = a.call(ApiKey::LeaveGroup, 5, &leave);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.members.iter().map(|m| m.error_code).collect::<Vec<_>>(), [0, E::UnknownMemberId.code()]);
    assert_eq!(heartbeat(&mut b, "g", 2, &mb), E::RebalanceInProgress.code());
    let r: JoinGroupResponse = b.call(ApiKey::JoinGroup, 7, &join_request("g", &mb, b"meta-b", 10_000));
    assert_eq!((r.generation_id, r.leader.to_string(), r.members.len()), (3, mb.clone(), 1));
    assert_eq!(heartbeat(&mut a, "g", 3, &ma), E::UnknownMemberId.code(), "the leaver is gone");

    // The last member leaves (version 0: one member, the error at the top): the group
    // is gone, described as Dead.
    let r: LeaveGroupResponse = b.call(
        ApiKey::LeaveGroup,
        0,
        &LeaveGroupRequest::default().with_group_id(group("g")).with_member_id(text(&mb)),
    );
    assert_eq!(r.error_code, 0);
    let d = describe(&mut admin, "g");
    assert_eq!(
        (d.error_code, d.group_state.to_string(), d.members.len()),
        (E::GroupIdNotFound.code(), "Dead".into(), 0)
    );
}

/// A member whose session ends without a heartbeat is removed: alone, its group is gone.
#[test]
fn a_silent_member_is_evicted_after_its_session() {
    let dir = TempDir::new("kafka-groups-session");
    let server = start(&dir);
    let (mut a, mut admin) = (Client::new(&server), Client::new(&server));
    let ma = member_id(&mut a, "quiet");
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("quiet", &ma, b"", 1_000));
    assert_eq!(r.generation_id, 1);
    let r: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("quiet", 1, &ma, &[]));
    assert_eq!(r.error_code, 0);
    assert_eq!(describe(&mut admin, "quiet").members.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while describe(&mut admin, "quiet").group_state.to_string() != "Dead" {
        assert!(Instant::now() < deadline, "the member is still there 10 s after its 1 s session");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(heartbeat(&mut a, "quiet", 1, &ma), E::UnknownMemberId.code());
}

/// Commits are checked against the membership, and a refused one changes nothing.
#[test]
fn commits_follow_the_generation_and_a_stale_one_changes_nothing() {
    let dir = TempDir::new("kafka-groups-commit");
    let server = start(&dir);
    let (mut a, mut b, mut admin) = (Client::new(&server), Client::new(&server), Client::new(&server));
    admin.create("t", 2);
    admin.produce("t", 0, 10);
    admin.produce("t", 1, 10);
    let epoch = admin.epoch("t");

    let ma = member_id(&mut a, "g");
    let _: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &ma, b"", 10_000));
    // Between the join and the leader's assignment: REBALANCE_IN_PROGRESS.
    assert_eq!(commit(&mut a, "g", 1, &ma, "t", &[(0, 1, epoch)]), [E::RebalanceInProgress.code()]);
    let _: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 1, &ma, &[]));
    assert_eq!(commit(&mut a, "g", 1, &ma, "t", &[(0, 3, epoch), (1, 4, -1)]), [0, 0]);
    assert_eq!(
        fetch_offsets(&mut admin, "g", "t", &[0, 1]),
        [(3, epoch, "meta".into(), 0), (4, epoch, "meta".into(), 0)],
        "each position with its incarnation's epoch"
    );

    // A second member: generation 2. The first's commit at generation 1 is refused.
    let mb = member_id(&mut b, "g");
    b.send(ApiKey::JoinGroup, 7, &join_request("g", &mb, b"", 10_000));
    wait_for_state(&mut admin, "g", "PreparingRebalance");
    // Mid-rebalance, the members of generation 1 may still commit (Kafka's rule).
    assert_eq!(commit(&mut a, "g", 1, &ma, "t", &[(0, 4, epoch)]), [0]);
    let _: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &ma, b"", 10_000));
    let _: JoinGroupResponse = b.recv(7);
    b.send(ApiKey::SyncGroup, 5, &sync_request("g", 2, &mb, &[]));
    let _: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 2, &ma, &[]));
    let _: SyncGroupResponse = b.recv(5);
    for (generation, member, want) in
        [(1, ma.as_str(), E::IllegalGeneration), (2, "stranger", E::UnknownMemberId), (-1, "", E::UnknownMemberId)]
    {
        let got = commit(&mut a, "g", generation, member, "t", &[(0, 9, epoch), (1, 9, epoch)]);
        assert_eq!(got, [want.code(), want.code()], "generation {generation}, member {member:?}");
    }
    assert_eq!(
        fetch_offsets(&mut admin, "g", "t", &[0, 1]),
        [(4, epoch, "meta".into(), 0), (4, epoch, "meta".into(), 0)],
        "unchanged"
    );

    // What the core refuses, partition by partition of one request.
    let got = commit(&mut b, "g", 2, &mb, "t", &[(0, 11, epoch)]);
    assert_eq!(got, [E::OffsetOutOfRange.code()], "past the high watermark");
    let got = commit(&mut b, "g", 2, &mb, "t", &[(0, 5, epoch), (0, 6, epoch), (1, -3, epoch), (-1, 2, epoch)]);
    assert_eq!(
        got,
        [
            E::InvalidRequest.code(),
            E::InvalidRequest.code(),
            E::OffsetOutOfRange.code(),
            E::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(commit(&mut b, "g", 2, &mb, "t", &[(7, 1, epoch)]), [E::UnknownTopicOrPartition.code()]);
    let long = OffsetCommitRequest::default()
        .with_group_id(group("g"))
        .with_generation_id_or_member_epoch(2)
        .with_member_id(text(&mb))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(name("t")).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_committed_offset(1)
                .with_committed_metadata(Some(text(&"m".repeat(4_097)))),
        ])]);
    let r: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &long);
    assert_eq!(r.topics[0].partitions[0].error_code, E::OffsetMetadataTooLarge.code());
    assert_eq!(commit(&mut b, "g", 2, &mb, "nope", &[(0, 1, -1)]), [E::UnknownTopicOrPartition.code()]);
    assert_eq!(
        fetch_offsets(&mut admin, "g", "t", &[0, 1]),
        [(4, epoch, "meta".into(), 0), (4, epoch, "meta".into(), 0)],
        "unchanged"
    );

    // A simple consumer (generation -1) commits to a group with no member.
    assert_eq!(commit(&mut admin, "simple", -1, "", "t", &[(1, 7, -1)]), [0]);
    assert_eq!(
        fetch_offsets(&mut admin, "simple", "t", &[0, 1]),
        [(-1, -1, "".into(), 0), (7, epoch, "meta".into(), 0)]
    );

    // ListGroups: both, the one with offsets only as Empty; DeleteGroups deletes it.
    let r: ListGroupsResponse = admin.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    let listed: Vec<(String, String)> =
        r.groups.iter().map(|g| (g.group_id.to_string(), g.group_state.to_string())).collect();
    assert_eq!(listed, [("g".to_string(), "Stable".to_string()), ("simple".to_string(), "Empty".to_string())]);
    let d = describe(&mut admin, "simple");
    assert_eq!((d.error_code, d.group_state.to_string()), (0, "Empty".into()));
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![
        group("simple"),
        group("g"),
        group("none"),
        group("simple"),
    ]);
    let r: DeleteGroupsResponse = admin.call(ApiKey::DeleteGroups, 2, &delete);
    let results: Vec<(String, i16)> = r.results.iter().map(|g| (g.group_id.to_string(), g.error_code)).collect();
    assert_eq!(
        results,
        [("simple".into(), 0), ("g".into(), E::NonEmptyGroup.code()), ("none".into(), E::GroupIdNotFound.code())]
    );
    assert_eq!(fetch_offsets(&mut admin, "simple", "t", &[1]), [(-1, -1, "".into(), 0)]);
}

/// A topic deleted and created again: OffsetFetch answers -1 (the group starts by its
/// reset policy), never the old incarnation's position; a commit naming the old
/// incarnation's epoch is refused, one naming the new one's is kept.
#[test]
fn offset_fetch_of_a_recreated_topic_is_minus_one() {
    let dir = TempDir::new("kafka-groups-recreate");
    let server = start(&dir);
    let mut c = Client::new(&server);
    c.create("t", 1);
    c.create("u", 1);
    c.produce("t", 0, 15);
    c.produce("u", 0, 2);
    let old = c.epoch("t");
    assert_eq!(commit(&mut c, "g", -1, "", "t", &[(0, 15, old)]), [0]);
    assert_eq!(commit(&mut c, "g", -1, "", "u", &[(0, 2, -1)]), [0]);
    assert_eq!(fetch_offsets(&mut c, "g", "t", &[0]), [(15, old, "meta".into(), 0)]);

    c.delete("t");
    assert_eq!(fetch_offsets(&mut c, "g", "t", &[0]), [(-1, -1, "".into(), 0)], "an unknown topic: -1");
    c.create("t", 1);
    let new = c.epoch("t");
    assert!(new > old);
    assert_eq!(c.earliest("t"), 15, "the new incarnation begins where the old one's offsets ended");
    c.produce("t", 0, 30);
    assert_eq!(fetch_offsets(&mut c, "g", "t", &[0]), [(-1, -1, "".into(), 0)], "never the old incarnation's 15");
    // A commit of the old incarnation is refused; of the new one, kept.
    assert_eq!(commit(&mut c, "g", -1, "", "t", &[(0, 15, old)]), [E::UnknownTopicOrPartition.code()]);
    assert_eq!(fetch_offsets(&mut c, "g", "t", &[0]), [(-1, -1, "".into(), 0)]);
    assert_eq!(commit(&mut c, "g", -1, "", "t", &[(0, 20, new)]), [0]);
    assert_eq!(fetch_offsets(&mut c, "g", "t", &[0]), [(20, new, "meta".into(), 0)]);

    // Every topic (topics null), and several groups at once (version 8).
    let every = OffsetFetchRequest::default().with_group_id(group("g")).with_topics(None);
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &every);
    let got: Vec<(String, Vec<(i32, i64)>)> = r
        .topics
        .iter()
        .map(|t| (t.name.to_string(), t.partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect()))
        .collect();
    assert_eq!(got, [("t".to_string(), vec![(0, 20)]), ("u".to_string(), vec![(0, 2)])]);
    let batched = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default().with_group_id(group("g")).with_topics(None),
        OffsetFetchRequestGroup::default().with_group_id(group("nobody")).with_topics(None),
    ]);
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &batched);
    let got: Vec<(String, usize, i16)> =
        r.groups.iter().map(|g| (g.group_id.to_string(), g.topics.len(), g.error_code)).collect();
    assert_eq!(got, [("g".to_string(), 2, 0), ("nobody".to_string(), 0, 0)]);
}

/// A group's answer to OffsetFetch: its id, and each topic's (partition, offset).
type GroupPositions = (String, Vec<(String, Vec<(i32, i64)>)>);

/// A group, topic or partition named twice is answered once: a DescribeGroups naming a
/// stable group of 1 MiB of metadata and assignment 500 times is answered with it once
/// (not 500 MiB), and an OffsetFetch's repeated groups, topics and partitions merge.
#[test]
fn names_repeated_in_a_request_are_answered_once() {
    let dir = TempDir::new("kafka-groups-repeated");
    let server = start(&dir);
    let mut c = Client::new(&server);
    let wide = vec![5u8; 512 << 10];
    let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 3, &join_request("wide", "", &wide, 30_000));
    assert_eq!(r.error_code, 0, "{r:?}");
    let member = r.member_id.to_string();
    let sync = sync_request("wide", r.generation_id, &member, &[(&member, &wide)]);
    let r: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(r.error_code, 0, "{r:?}");
    let described = describe(&mut c, "wide");
    assert_eq!(described.members[0].member_metadata.len(), 512 << 10);
    let request = DescribeGroupsRequest::default().with_groups(vec![group("wide"); 500]);
    c.send(ApiKey::DescribeGroups, 6, &request);
    let mut size = [0; 4];
    std::io::Read::read_exact(&mut c.s, &mut size).unwrap();
    let size = i32::from_be_bytes(size) as usize;
    assert!(size < 2 << 20, "a group named 500 times was answered in {size} bytes");
    let mut body = vec![0; size];
    std::io::Read::read_exact(&mut c.s, &mut body).unwrap();
    let mut buf = Bytes::from(body);
    ResponseHeader::decode(&mut buf, DescribeGroupsResponse::header_version(6)).unwrap();
    let r = DescribeGroupsResponse::decode(&mut buf, 6).unwrap();
    let got: Vec<(String, usize)> = r.groups.iter().map(|g| (g.group_id.to_string(), g.members.len())).collect();
    assert_eq!(got, [("wide".to_string(), 1)]);

    c.create("t", 3);
    c.create("u", 1);
    c.produce("t", 0, 5);
    c.produce("t", 1, 5);
    c.produce("u", 0, 5);
    assert_eq!(commit(&mut c, "g", -1, "", "t", &[(0, 1, -1), (1, 2, -1)]), [0, 0]);
    assert_eq!(commit(&mut c, "g", -1, "", "u", &[(0, 3, -1)]), [0]);
    let topic = |t: &str, ps: &[i32]| {
        OffsetFetchRequestTopics::default().with_name(name(t)).with_partition_indexes(ps.to_vec())
    };
    let fetched = |c: &mut Client, groups: Vec<OffsetFetchRequestGroup>| -> Vec<GroupPositions> {
        let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &OffsetFetchRequest::default().with_groups(groups));
        r.groups
            .iter()
            .map(|g| {
                let topics = g
                    .topics
                    .iter()
                    .map(|t| {
                        (
                            t.name.to_string(),
                            t.partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect(),
                        )
                    })
                    .collect();
                (g.group_id.to_string(), topics)
            })
            .collect()
    };
    let named = |ts: Vec<OffsetFetchRequestTopics>| {
        OffsetFetchRequestGroup::default().with_group_id(group("g")).with_topics(Some(ts))
    };
    let got = fetched(
        &mut c,
        vec![named(vec![topic("t", &[0, 0, 1]), topic("u", &[0]), topic("t", &[1, 2])]), named(vec![topic("t", &[0])])],
    );
    let want = vec![(
        "g".to_string(),
        vec![("t".to_string(), vec![(0, 1), (1, 2), (2, -1)]), ("u".to_string(), vec![(0, 3)])],
    )];
    assert_eq!(got, want, "each group, topic and partition once, in the order first named");
    let every = OffsetFetchRequestGroup::default().with_group_id(group("g")).with_topics(None);
    let got = fetched(&mut c, vec![named(vec![topic("t", &[0])]), every]);
    let want = vec![("g".to_string(), vec![("t".to_string(), vec![(0, 1), (1, 2)]), ("u".to_string(), vec![(0, 3)])])];
    assert_eq!(got, want, "a group named once for every topic is answered every topic");
}

/// Hostile group requests: huge member metadata, a thousand members, a JoinGroup
/// declaring two billion protocols, and a client that never reads its answers. Each
/// gets Kafka's code (or its connection closed), changes nothing, and holds up no one.
#[test]
fn hostile_group_requests_change_nothing_and_stall_no_one() {
    let dir = TempDir::new("kafka-groups-hostile");
    let server = start(&dir);
    let (mut a, mut admin) = (Client::new(&server), Client::new(&server));

    // 2 MiB of member metadata: over what one member may hold.
    let huge = vec![7u8; 2 << 20];
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 3, &join_request("big", "", &huge, 10_000));
    assert_eq!(r.error_code, E::UnknownServerError.code());
    assert_eq!(describe(&mut admin, "big").group_state.to_string(), "Dead", "no group was made");

    // A thousand members (told MEMBER_ID_REQUIRED, pipelined), then one more.
    let mut many = Client::new(&server);
    for _ in 0..1_000 {
        many.send(ApiKey::JoinGroup, 7, &join_request("crowd", "", b"", 10_000));
    }
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..1_000 {
        let r: JoinGroupResponse = many.recv(7);
        assert_eq!(r.error_code, E::MemberIdRequired.code());
        ids.insert(r.member_id.to_string());
    }
    assert_eq!(ids.len(), 1_000, "every member id differs");
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("crowd", "", b"", 10_000));
    assert_eq!(r.error_code, E::GroupMaxSizeReached.code());
    // The members given ids may still join.
    let first = ids.iter().next().unwrap().clone();
    a.send(ApiKey::JoinGroup, 7, &join_request("crowd", &first, b"", 10_000));
    wait_for_state(&mut admin, "crowd", "PreparingRebalance");

    // A JoinGroup declaring two billion protocols closes only its own connection.
    let mut liar = Client::new(&server);
    let mut bytes = frame(ApiKey::JoinGroup, 5, 1, &join_request("g", "", b"", 10_000).with_protocols(vec![]));
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&i32::MAX.to_be_bytes());
    liar.s.write_all(&bytes).unwrap();
    assert!(closed(&mut liar.s), "the connection stays open");
    assert!(server.stderr().contains("malformed JoinGroup v5 request"), "{}", server.stderr());

    // A client that pipelines JoinGroups that wait (a rebalance the crowd never
    // completes) and reads nothing: another group's members are answered at once.
    let mut stalled = Client::new(&server);
    for _ in 0..16 {
        stalled.send(ApiKey::JoinGroup, 7, &join_request("crowd", &first, &[1u8; 60_000], 10_000));
    }
    let mut other = Client::new(&server);
    let started = Instant::now();
    let m = member_id(&mut other, "other");
    let r: JoinGroupResponse = other.call(ApiKey::JoinGroup, 7, &join_request("other", &m, b"", 10_000));
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    let r: SyncGroupResponse = other.call(ApiKey::SyncGroup, 5, &sync_request("other", 1, &m, &[(&m, b"x")]));
    assert_eq!(r.error_code, 0);
    assert_eq!(heartbeat(&mut other, "other", 1, &m), 0);
    assert_eq!(describe(&mut admin, "crowd").group_state.to_string(), "PreparingRebalance");
    assert!(started.elapsed() < Duration::from_secs(2), "another group waited {:?}", started.elapsed());
    drop(stalled);
}

/// A restart forgets the membership (a member's heartbeat gets UNKNOWN_MEMBER_ID, on
/// which Kafka clients join again) and keeps the committed offsets.
#[test]
fn a_restart_forgets_members_and_keeps_committed_offsets() {
    let dir = TempDir::new("kafka-groups-restart");
    let (data, log) = (dir.path().join("data"), dir.path().join("stderr"));
    let server = KafkaServer::start(&data, &log);
    let mut a = Client::new(&server);
    a.create("t", 1);
    a.produce("t", 0, 5);
    let epoch = a.epoch("t");
    let m = member_id(&mut a, "g");
    let _: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &m, b"", 10_000));
    let _: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &sync_request("g", 1, &m, &[]));
    assert_eq!(commit(&mut a, "g", 1, &m, "t", &[(0, 4, epoch)]), [0]);
    drop(a);
    server.terminate();

    let server = KafkaServer::start(&data, &log);
    let mut a = Client::new(&server);
    assert_eq!(heartbeat(&mut a, "g", 1, &m), E::UnknownMemberId.code());
    assert_eq!(commit(&mut a, "g", 1, &m, "t", &[(0, 5, epoch)]), [E::UnknownMemberId.code()]);
    assert_eq!(fetch_offsets(&mut a, "g", "t", &[0]), [(4, epoch, "meta".into(), 0)]);
    let d = describe(&mut a, "g");
    assert_eq!((d.group_state.to_string(), d.members.len()), ("Empty".into(), 0), "offsets only");
    // The member joins again, as a new one, and carries on from its commit.
    let m2 = member_id(&mut a, "g");
    let r: JoinGroupResponse = a.call(ApiKey::JoinGroup, 7, &join_request("g", &m2, b"", 10_000));
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    server.terminate();
}
