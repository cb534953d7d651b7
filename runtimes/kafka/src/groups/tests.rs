//! The coordinator's state machine, with time passed in: joins, syncs, heartbeats,
//! leaves, deadlines, commits' checks and the bounds on memory.

use super::*;
use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use std::time::Duration;
use tokio::sync::oneshot::error::TryRecvError;
use tokio::time::Instant;

fn join_request(member: &str, metadata: &str) -> JoinRequest {
    JoinRequest {
        group: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from(metadata.to_string()))],
        require_known_member_id: true,
    }
}

/// The answer now (panics if it waits).
fn now<T: std::fmt::Debug>(w: Wait<T>) -> T {
    match w {
        Wait::Now(t) => t,
        Wait::Later(_) => panic!("waits"),
    }
}

fn later<T>(w: Wait<T>) -> tokio::sync::oneshot::Receiver<T> {
    match w {
        Wait::Later(rx) => rx,
        Wait::Now(_) => panic!("answered at once"),
    }
}

fn joined(rx: &mut tokio::sync::oneshot::Receiver<JoinOutcome>) -> Joined {
    match rx.try_recv() {
        Ok(JoinOutcome::Joined(j)) => j,
        other => panic!("not joined: {other:?}"),
    }
}

/// A member id given out with MEMBER_ID_REQUIRED.
fn new_id(c: &mut Coordinator, t: Instant, metadata: &str) -> String {
    match now(c.join(t, join_request("", metadata))) {
        JoinOutcome::Failed { error: E::MemberIdRequired, member_id } => member_id,
        other => panic!("{other:?}"),
    }
}

fn sync_request(member: &str, generation: i32, assignments: &[(&str, &str)]) -> SyncRequest {
    SyncRequest {
        group: "g".into(),
        member_id: member.into(),
        generation,
        assignments: assignments.iter().map(|(m, a)| (m.to_string(), Bytes::from(a.to_string()))).collect(),
        ..SyncRequest::default()
    }
}

/// Two members, the second joining a stable group: a rebalance that completes when the
/// first rejoins (after a heartbeat tells it to), the leader's sync answering the
/// follower's, heartbeats, and a leave that starts the next rebalance.
#[test]
fn two_members_join_sync_heartbeat_and_leave() {
    let mut c = Coordinator::new(GroupLimits::default(), 7);
    let t = Instant::now();
    let a = new_id(&mut c, t, "a-meta");
    assert!(a.starts_with("client-"), "{a}");
    let mut ja = later(c.join(t, join_request(&a, "a-meta")));
    let j = joined(&mut ja);
    assert_eq!((j.generation, j.leader.as_str(), j.members.len()), (1, a.as_str(), 1), "alone: leader at once");
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    let s = now_or_later(c.sync(t, sync_request(&a, 1, &[(&a, "all")]))).unwrap();
    assert_eq!(s.assignment, "all");
    assert_eq!(c.heartbeat(t, "g", 1, &a, false), Ok(()));

    // A second member: MEMBER_ID_REQUIRED, then its join waits for the first to rejoin.
    let b = new_id(&mut c, t, "b-meta");
    assert_ne!(a, b);
    let mut jb = later(c.join(t, join_request(&b, "b-meta")));
    assert_eq!(jb.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(c.heartbeat(t, "g", 1, &a, false), Err(E::RebalanceInProgress));
    assert_eq!(now(c.sync(t, sync_request(&a, 1, &[]))), Err(E::RebalanceInProgress));
    let mut ja = later(c.join(t, join_request(&a, "a-meta")));
    let (ja, jb) = (joined(&mut ja), joined(&mut jb));
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!((ja.leader.as_str(), jb.leader.as_str()), (a.as_str(), a.as_str()), "the first member leads");
    let metadata: Vec<(String, String)> =
        ja.members.iter().map(|(m, d)| (m.clone(), String::from_utf8(d.to_vec()).unwrap())).collect();
    assert_eq!(metadata, [(a.clone(), "a-meta".to_string()), (b.clone(), "b-meta".to_string())]);
    assert!(jb.members.is_empty(), "a follower gets no member list");

    // The follower's sync waits for the leader's.
    let mut sb = later(c.sync(t, sync_request(&b, 2, &[])));
    assert_eq!(sb.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(c.heartbeat(t, "g", 2, &b, false), Ok(()), "mid-assignment heartbeats are fine");
    let sa = now_or_later(c.sync(t, sync_request(&a, 2, &[(&a, "p0"), (&b, "p1")])));
    assert_eq!(sa.unwrap().assignment, "p0");
    assert_eq!(sb.try_recv().unwrap().unwrap().assignment, "p1");
    let view = c.describe("g").unwrap();
    assert_eq!((view.state, view.protocol.as_str(), view.members.len()), (State::Stable, "range", 2));

    // Errors a heartbeat gets.
    assert_eq!(c.heartbeat(t, "g", 1, &a, false), Err(E::IllegalGeneration));
    assert_eq!(c.heartbeat(t, "g", 2, "nobody", false), Err(E::UnknownMemberId));
    assert_eq!(c.heartbeat(t, "other", 2, &a, false), Err(E::UnknownMemberId));
    assert_eq!(c.heartbeat(t, "", 2, &a, false), Err(E::InvalidGroupId));

    // The leader leaves: a rebalance, which the remaining member completes alone, and
    // leads.
    assert_eq!(c.leave(t, "g", &[(a.clone(), None)]), Ok(vec![Ok(())]));
    assert_eq!(c.heartbeat(t, "g", 2, &b, false), Err(E::RebalanceInProgress));
    let mut jb = later(c.join(t, join_request(&b, "b-meta")));
    let j = joined(&mut jb);
    assert_eq!((j.generation, j.leader.as_str(), j.members.len()), (3, b.as_str(), 1));
    assert_eq!(c.leave(t, "g", &[(a.clone(), None)]), Ok(vec![Err(E::UnknownMemberId)]));
    assert_eq!(c.leave(t, "g", &[(b.clone(), None)]), Ok(vec![Ok(())]));
    assert!(c.describe("g").is_none(), "the group left memory with its last member");
    assert_eq!((c.bytes(), c.deadlines()), (0, 0), "nothing held");
}

fn now_or_later<T: std::fmt::Debug>(w: Wait<T>) -> T {
    match w {
        Wait::Now(t) => t,
        Wait::Later(mut rx) => rx.try_recv().expect("answered"),
    }
}

/// A member that sends no heartbeat for its session timeout is removed and the group
/// rebalances; one that does not rejoin by the rebalance's deadline is removed too.
#[test]
fn sessions_and_rebalance_deadlines_remove_silent_members() {
    let mut c = Coordinator::new(GroupLimits::default(), 1);
    let t = Instant::now();
    let a = new_id(&mut c, t, "");
    joined(&mut later(c.join(t, join_request(&a, ""))));
    let b = new_id(&mut c, t, "");
    let mut jb = later(c.join(t, join_request(&b, "")));
    joined(&mut later(c.join(t, join_request(&a, ""))));
    joined(&mut jb);
    now_or_later(c.sync(t, sync_request(&a, 2, &[]))).unwrap();
    now_or_later(c.sync(t, sync_request(&b, 2, &[]))).unwrap();

    // b heartbeats, a does not: a's session (10 s) ends.
    let t1 = t + Duration::from_secs(6);
    assert_eq!(c.heartbeat(t1, "g", 2, &b, false), Ok(()));
    c.tick(t + Duration::from_secs(10));
    assert_eq!(c.heartbeat(t1, "g", 2, &a, false), Err(E::UnknownMemberId), "a was removed");
    assert_eq!(c.describe("g").unwrap().state, State::PreparingRebalance);
    let j = joined(&mut later(c.join(t1, join_request(&b, ""))));
    assert_eq!((j.generation, j.leader.as_str()), (3, b.as_str()));

    // A third member joins; b never rejoins: at the rebalance deadline (60 s) the
    // rebalance completes without b.
    let t2 = t + Duration::from_secs(12);
    now_or_later(c.sync(t2, sync_request(&b, 3, &[]))).unwrap();
    let d = new_id(&mut c, t2, "");
    let mut jd = later(c.join(t2, join_request(&d, "")));
    // b keeps heartbeating (told to rejoin), and does not rejoin.
    for s in 1..6 {
        let at = t2 + Duration::from_secs(9 * s);
        assert_eq!(c.heartbeat(at, "g", 3, &b, false), Err(E::RebalanceInProgress));
        c.tick(at);
    }
    assert_eq!(jd.try_recv().unwrap_err(), TryRecvError::Empty);
    c.tick(t2 + Duration::from_secs(60));
    let j = joined(&mut jd);
    assert_eq!((j.generation, j.leader.as_str(), j.members.len()), (4, d.as_str(), 1));
    assert_eq!(c.heartbeat(t2, "g", 4, &b, false), Err(E::UnknownMemberId));

    // A member told MEMBER_ID_REQUIRED that never joins is forgotten after its session.
    let e = new_id(&mut c, t2, "");
    c.tick(t2 + Duration::from_secs(70));
    let late = now(c.join(t2 + Duration::from_secs(70), join_request(&e, "")));
    assert_eq!(late, JoinOutcome::failed(E::UnknownMemberId, e));

    // d goes silent too: the group empties and leaves memory.
    c.tick(t2 + Duration::from_secs(3600));
    assert!(c.describe("g").is_none());
    assert_eq!((c.bytes(), c.deadlines()), (0, 0));
}

#[test]
fn joins_that_cannot_be_taken_change_nothing() {
    let limits = GroupLimits { max_members: 3, ..GroupLimits::default() };
    let mut c = Coordinator::new(limits, 1);
    let t = Instant::now();
    let a = new_id(&mut c, t, "");
    joined(&mut later(c.join(t, join_request(&a, ""))));
    let before = (c.bytes(), c.deadlines());
    let refused = |c: &mut Coordinator, r: JoinRequest| match now(c.join(t, r)) {
        JoinOutcome::Failed { error, .. } => error,
        other => panic!("{other:?}"),
    };
    let other_type = JoinRequest { protocol_type: "connect".into(), ..join_request("", "") };
    assert_eq!(refused(&mut c, other_type), E::InconsistentGroupProtocol);
    let other_protocol = JoinRequest { protocols: vec![("sticky".into(), Bytes::new())], ..join_request("", "") };
    assert_eq!(refused(&mut c, other_protocol), E::InconsistentGroupProtocol);
    assert_eq!(
        refused(&mut c, JoinRequest { protocols: vec![], ..join_request("", "") }),
        E::InconsistentGroupProtocol
    );
    assert_eq!(
        refused(&mut c, JoinRequest { session_timeout_ms: 10, ..join_request("", "") }),
        E::InvalidSessionTimeout
    );
    let static_member = JoinRequest { group_instance_id: Some("i".into()), ..join_request("", "") };
    assert_eq!(refused(&mut c, static_member), E::UnsupportedVersion);
    assert_eq!(refused(&mut c, join_request("nobody", "")), E::UnknownMemberId);
    assert_eq!(refused(&mut c, JoinRequest { group: "".into(), ..join_request("", "") }), E::InvalidGroupId);
    let huge = "x".repeat(1 << 20);
    assert_eq!(refused(&mut c, join_request("", &huge)), E::UnknownServerError);
    assert_eq!((c.bytes(), c.deadlines()), before, "nothing of them held");
    let view = c.describe("g").unwrap();
    assert_eq!((view.state, view.generation, view.members.len()), (State::CompletingRebalance, 1, 1));

    // Members past the group's size, counting those told MEMBER_ID_REQUIRED.
    new_id(&mut c, t, "");
    new_id(&mut c, t, "");
    let before = (c.bytes(), c.deadlines());
    assert_eq!(refused(&mut c, join_request("", "")), E::GroupMaxSizeReached);
    assert_eq!((c.bytes(), c.deadlines()), before);
}

#[test]
fn memory_is_bounded_across_groups() {
    let limits = GroupLimits { max_groups: 2, max_bytes: 8 << 10, ..GroupLimits::default() };
    let mut c = Coordinator::new(limits, 1);
    let t = Instant::now();
    let join = |c: &mut Coordinator, group: &str, metadata: &str| {
        let r = JoinRequest { group: group.into(), require_known_member_id: false, ..join_request("", metadata) };
        match c.join(t, r) {
            Wait::Now(JoinOutcome::Failed { error, .. }) => Err(error),
            Wait::Now(other) => panic!("{other:?}"),
            Wait::Later(_) => Ok(()),
        }
    };
    assert_eq!(join(&mut c, "a", ""), Ok(()));
    assert_eq!(join(&mut c, "b", ""), Ok(()));
    assert_eq!(join(&mut c, "c", ""), Err(E::CoordinatorNotAvailable), "a third group");
    assert!(c.bytes() < 8 << 10);
    assert_eq!(join(&mut c, "a", &"m".repeat(7 << 10)), Err(E::CoordinatorNotAvailable), "past the bytes");
    assert!(c.bytes() < 8 << 10);
    assert!(c.describe("c").is_none());
}

/// Kafka's checks of a classic group's OffsetCommit.
#[test]
fn commits_are_checked_against_the_membership() {
    let mut c = Coordinator::new(GroupLimits::default(), 1);
    let t = Instant::now();
    // No member: a simple consumer's commit (generation -1) goes ahead; one naming a
    // generation comes from a member that is gone.
    assert_eq!(c.check_commit(t, "g", -1, "", false), Ok(()));
    assert_eq!(c.check_commit(t, "g", 1, "m", false), Err(E::UnknownMemberId));
    let a = new_id(&mut c, t, "");
    assert_eq!(c.check_commit(t, "g", -1, "", false), Ok(()), "only pending members: still empty");
    joined(&mut later(c.join(t, join_request(&a, ""))));
    assert_eq!(c.check_commit(t, "g", 1, &a, false), Err(E::RebalanceInProgress), "not yet assigned");
    now_or_later(c.sync(t, sync_request(&a, 1, &[]))).unwrap();
    assert_eq!(c.check_commit(t, "g", 1, &a, false), Ok(()));
    assert_eq!(c.check_commit(t, "g", 0, &a, false), Err(E::IllegalGeneration));
    assert_eq!(c.check_commit(t, "g", 1, "nobody", false), Err(E::UnknownMemberId));
    assert_eq!(c.check_commit(t, "g", -1, "", false), Err(E::UnknownMemberId), "the group has members");
    assert_eq!(c.check_commit(t, "g", -1, &a, false), Err(E::IllegalGeneration));
    // Mid-rebalance, the current generation's member may still commit (Kafka's rule).
    let b = new_id(&mut c, t, "");
    let _wait = later(c.join(t, join_request(&b, "")));
    assert_eq!(c.check_commit(t, "g", 1, &a, false), Ok(()));
}

/// A leader's assignment over what a member may hold is refused and changes nothing;
/// a rebalance timeout past the bound waits only the bound.
#[test]
fn oversized_assignments_and_rebalance_timeouts_are_bounded() {
    let mut c = Coordinator::new(GroupLimits::default(), 1);
    let t = Instant::now();
    let a = new_id(&mut c, t, "");
    let long = JoinRequest { rebalance_timeout_ms: i32::MAX, ..join_request(&a, "") };
    joined(&mut later(c.join(t, long)));
    let before = c.bytes();
    let huge = "a".repeat((1 << 20) + 1);
    let refused = now(c.sync(t, sync_request(&a, 1, &[(&a, &huge)])));
    assert_eq!(refused, Err(E::UnknownServerError));
    assert_eq!(c.bytes(), before);
    assert_eq!(c.describe("g").unwrap().state, State::CompletingRebalance, "still awaiting the assignment");
    now_or_later(c.sync(t, sync_request(&a, 1, &[(&a, "fine")]))).unwrap();

    // A second member joins; the first never rejoins: the rebalance ends after 30 min,
    // not the 24 days the first member asked for.
    let t1 = t + Duration::from_secs(1);
    let b = new_id(&mut c, t1, "");
    let mut jb = later(c.join(t1, join_request(&b, "")));
    for minutes in 1..30 {
        let at = t1 + Duration::from_secs(60 * minutes);
        // b's session is kept alive by its waiting join; a keeps heartbeating.
        assert_eq!(c.heartbeat(at, "g", 1, &a, false), Err(E::RebalanceInProgress));
        c.tick(at);
    }
    assert_eq!(jb.try_recv().unwrap_err(), TryRecvError::Empty);
    c.tick(t1 + Duration::from_secs(30 * 60));
    let j = joined(&mut jb);
    assert_eq!((j.generation, j.leader.as_str(), j.members.len()), (2, b.as_str(), 1));
}
