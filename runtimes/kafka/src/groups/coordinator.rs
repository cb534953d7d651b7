//! The coordinator: every group in memory, the requests of Kafka's classic group
//! protocol against them, and the deadlines that move them on. Pure: time is passed in
//! (`now`), answers that must wait go out through the oneshot channels they were given.

use super::group::{Books, Group, GROUP_OVERHEAD, PENDING_OVERHEAD};
use super::member::{protocols_bytes, Member, MEMBER_OVERHEAD};
use super::messages::{
    GroupLimits, GroupView, JoinOutcome, JoinRequest, Listed, MemberView, State, SyncOutcome, SyncRequest, Synced, Wait,
};
use super::timers::Timer;
use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

/// The longest client id kept in a member id, in bytes (Kafka keeps all of it).
const MEMBER_ID_CLIENT_PREFIX: usize = 64;

/// Every group with a member (or a member told `MEMBER_ID_REQUIRED`) in memory.
pub struct Coordinator {
    groups: BTreeMap<String, Group>,
    books: Books,
    limits: GroupLimits,
    /// This coordinator's part of every member id it gives out, so that ids given out
    /// before a restart are not given out again.
    nonce: u64,
    issued: u64,
    joined: u64,
}

impl Coordinator {
    /// No groups, within `limits`; member ids carry `nonce`.
    pub fn new(limits: GroupLimits, nonce: u64) -> Coordinator {
        Coordinator { groups: BTreeMap::new(), books: Books::default(), limits, nonce, issued: 0, joined: 0 }
    }

    /// The bytes every group in memory takes, as the budget counts them.
    pub fn bytes(&self) -> usize {
        self.books.bytes
    }

    /// How many deadlines are set (for tests: none outlives what it bounds).
    pub fn deadlines(&self) -> usize {
        self.books.timers.len()
    }

    /// The soonest deadline, for the task that calls [`Coordinator::tick`].
    pub fn next_deadline(&self) -> Option<Instant> {
        self.books.timers.next()
    }

    /// Whether `group` has members (a group with only members told `MEMBER_ID_REQUIRED`
    /// has none).
    pub fn has_members(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|g| !g.members.is_empty())
    }

    fn new_member_id(&mut self, client_id: &str) -> String {
        self.issued += 1;
        let mut end = client_id.len().min(MEMBER_ID_CLIENT_PREFIX);
        while !client_id.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}-{}", &client_id[..end], Uuid::from_u64_pair(self.nonce, self.issued))
    }

    /// Drops `group` from memory if nothing is left of it.
    fn forget_if_gone(&mut self, group: &str) {
        if self.groups.get(group).is_some_and(Group::is_gone) {
            if let Some(mut g) = self.groups.remove(group) {
                g.release(&mut self.books);
                self.books.bytes -= GROUP_OVERHEAD + g.id.len();
            }
        }
    }

    /// JoinGroup (Kafka's classic protocol, without static membership).
    pub fn join(&mut self, now: Instant, r: JoinRequest) -> Wait<JoinOutcome> {
        let outcome = self.join_inner(now, &r);
        self.forget_if_gone(&r.group);
        match outcome {
            Ok(wait) => wait,
            Err(error) => Wait::Now(JoinOutcome::failed(error, r.member_id.clone())),
        }
    }

    fn join_inner(&mut self, now: Instant, r: &JoinRequest) -> Result<Wait<JoinOutcome>, E> {
        let limits = self.limits.clone();
        if broker_core::check_group(&r.group).is_err() {
            return Err(E::InvalidGroupId);
        }
        if r.group_instance_id.is_some() {
            // Static membership is not served: Kafka's answer where it is not enabled.
            return Err(E::UnsupportedVersion);
        }
        let session = Duration::from_millis(u64::try_from(r.session_timeout_ms).unwrap_or(0));
        if session < limits.min_session_timeout || session > limits.max_session_timeout {
            return Err(E::InvalidSessionTimeout);
        }
        let rebalance = match u64::try_from(r.rebalance_timeout_ms) {
            Ok(ms) => Duration::from_millis(ms).min(limits.max_rebalance_timeout),
            Err(_) => session, // version 0: the session timeout is the rebalance timeout
        };
        if r.protocol_type.is_empty() || r.protocols.is_empty() {
            return Err(E::InconsistentGroupProtocol);
        }
        let metadata_bytes = r.protocol_type.len() + protocols_bytes(&r.protocols);
        if metadata_bytes > limits.max_member_bytes {
            // Kafka's answer when a group's record is over its log's message size.
            return Err(E::UnknownServerError);
        }
        if !self.groups.contains_key(&r.group) {
            if !r.member_id.is_empty() {
                return Err(E::UnknownMemberId);
            }
            if self.groups.len() >= limits.max_groups {
                return Err(E::CoordinatorNotAvailable);
            }
            let needed = GROUP_OVERHEAD + r.group.len();
            if self.books.bytes + needed > limits.max_bytes {
                return Err(E::CoordinatorNotAvailable);
            }
            self.books.bytes += needed;
            self.groups.insert(r.group.clone(), Group::new(r.group.clone()));
        }
        let group = self.groups.get(&r.group).ok_or(E::UnknownServerError)?;
        if !group.supports(&r.protocol_type, &r.protocols) {
            return Err(E::InconsistentGroupProtocol);
        }
        let known = group.members.contains_key(&r.member_id) || group.pending.contains_key(&r.member_id);
        if !known && !r.member_id.is_empty() {
            return Err(E::UnknownMemberId);
        }
        if !known && !group.has_room(limits.max_members) {
            return Err(E::GroupMaxSizeReached);
        }
        let new_bytes = |id: &str| {
            MEMBER_OVERHEAD + id.len() + r.client_id.len() + r.client_host.len() + protocols_bytes(&r.protocols)
        };
        if r.member_id.is_empty() {
            let id = self.new_member_id(&r.client_id);
            if r.require_known_member_id {
                if self.books.bytes + PENDING_OVERHEAD + id.len() > limits.max_bytes {
                    return Err(E::CoordinatorNotAvailable);
                }
                let group = self.groups.get_mut(&r.group).ok_or(E::UnknownServerError)?;
                group.add_pending(id.clone(), now + session, &mut self.books);
                return Ok(Wait::Now(JoinOutcome::failed(E::MemberIdRequired, id)));
            }
            if self.books.bytes + new_bytes(&id) > limits.max_bytes {
                return Err(E::CoordinatorNotAvailable);
            }
            return Ok(self.add_member(now, r, id, (session, rebalance)));
        }
        let group = self.groups.get_mut(&r.group).ok_or(E::UnknownServerError)?;
        if group.pending.contains_key(&r.member_id) {
            let freed = PENDING_OVERHEAD + r.member_id.len();
            if self.books.bytes + new_bytes(&r.member_id) > limits.max_bytes + freed {
                return Err(E::CoordinatorNotAvailable);
            }
            group.remove_pending(&r.member_id, &mut self.books);
            return Ok(self.add_member(now, r, r.member_id.clone(), (session, rebalance)));
        }
        let member = group.members.get(&r.member_id).ok_or(E::UnknownMemberId)?;
        let unchanged = member.protocols == r.protocols;
        let old_protocols = protocols_bytes(&member.protocols);
        let answer_now = match group.state {
            State::CompletingRebalance => unchanged,
            State::Stable => unchanged && group.leader.as_deref() != Some(r.member_id.as_str()),
            State::PreparingRebalance | State::Empty => false,
        };
        if answer_now {
            // The member missed the answer to its join (or rejoins unchanged): the
            // generation as it stands.
            let current = group.current(&r.member_id);
            group.touch(&r.member_id, now, &mut self.books);
            return Ok(Wait::Now(JoinOutcome::Joined(current)));
        }
        if self.books.bytes + protocols_bytes(&r.protocols) > limits.max_bytes + old_protocols {
            return Err(E::CoordinatorNotAvailable);
        }
        let (tx, rx) = oneshot::channel();
        let protocols = r.protocols.clone();
        group.update_member(&r.member_id, protocols, (session, rebalance), tx, now, &mut self.books);
        Ok(Wait::Later(rx))
    }

    fn add_member(
        &mut self,
        now: Instant,
        r: &JoinRequest,
        id: String,
        timeouts: (Duration, Duration),
    ) -> Wait<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        self.joined += 1;
        let member = Member {
            id,
            seq: self.joined,
            client_id: r.client_id.clone(),
            client_host: r.client_host.clone(),
            session_timeout: timeouts.0,
            rebalance_timeout: timeouts.1,
            protocols: r.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: Some(tx),
            awaiting_sync: None,
            session_deadline: None,
        };
        if let Some(group) = self.groups.get_mut(&r.group) {
            group.add_member(member, &r.protocol_type, now, &mut self.books);
        }
        Wait::Later(rx)
    }

    /// SyncGroup.
    pub fn sync(&mut self, now: Instant, r: SyncRequest) -> Wait<SyncOutcome> {
        let limits = self.limits.clone();
        let books = &mut self.books;
        if broker_core::check_group(&r.group).is_err() {
            return Wait::Now(Err(E::InvalidGroupId));
        }
        let Some(group) = self.groups.get_mut(&r.group) else { return Wait::Now(Err(E::UnknownMemberId)) };
        if r.group_instance_id.is_some() {
            return Wait::Now(Err(E::UnsupportedVersion));
        }
        if !group.members.contains_key(&r.member_id) {
            return Wait::Now(Err(E::UnknownMemberId));
        }
        if r.generation != group.generation {
            return Wait::Now(Err(E::IllegalGeneration));
        }
        let inconsistent = |given: &Option<String>, group: &Option<String>| given.is_some() && given != group;
        if inconsistent(&r.protocol_type, &group.protocol_type) || inconsistent(&r.protocol_name, &group.protocol) {
            return Wait::Now(Err(E::InconsistentGroupProtocol));
        }
        match group.state {
            State::Empty => Wait::Now(Err(E::UnknownMemberId)),
            State::PreparingRebalance => Wait::Now(Err(E::RebalanceInProgress)),
            State::Stable => {
                group.touch(&r.member_id, now, books);
                let assignment = group.members.get(&r.member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                Wait::Now(Ok(Synced {
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol.clone(),
                    assignment,
                }))
            }
            State::CompletingRebalance => {
                let leads = group.leader.as_deref() == Some(r.member_id.as_str());
                let mut assignments = BTreeMap::new();
                if leads {
                    // The last assignment a member is named with counts, as in Kafka.
                    for (member, assignment) in r.assignments {
                        if group.members.contains_key(&member) {
                            assignments.insert(member, assignment);
                        }
                    }
                    let held: usize = group.members.values().map(|m| m.assignment.len()).sum();
                    let added: usize = assignments.values().map(Bytes::len).sum();
                    if assignments.values().any(|a| a.len() > limits.max_member_bytes) {
                        return Wait::Now(Err(E::UnknownServerError));
                    }
                    if books.bytes + added > limits.max_bytes + held {
                        return Wait::Now(Err(E::CoordinatorNotAvailable));
                    }
                }
                group.touch(&r.member_id, now, books);
                let (tx, rx) = oneshot::channel();
                if let Some(m) = group.members.get_mut(&r.member_id) {
                    if let Some(old) = m.awaiting_sync.replace(tx) {
                        let _ = old.send(Err(E::RebalanceInProgress));
                    }
                }
                if leads {
                    group.assign(assignments, books);
                }
                Wait::Later(rx)
            }
        }
    }

    /// Heartbeat.
    pub fn heartbeat(
        &mut self,
        now: Instant,
        group: &str,
        generation: i32,
        member: &str,
        instance: bool,
    ) -> Result<(), E> {
        if broker_core::check_group(group).is_err() {
            return Err(E::InvalidGroupId);
        }
        let Some(g) = self.groups.get_mut(group) else { return Err(E::UnknownMemberId) };
        if instance {
            return Err(E::UnsupportedVersion);
        }
        if !g.members.contains_key(member) {
            return Err(E::UnknownMemberId);
        }
        if generation != g.generation {
            return Err(E::IllegalGeneration);
        }
        g.touch(member, now, &mut self.books);
        match g.state {
            State::Empty => Err(E::UnknownMemberId),
            State::PreparingRebalance => Err(E::RebalanceInProgress),
            State::CompletingRebalance | State::Stable => Ok(()),
        }
    }

    /// LeaveGroup of `members` (member id, group instance id): each one's answer, or
    /// the group's if it has none in memory.
    pub fn leave(
        &mut self,
        now: Instant,
        group: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), E>>, E> {
        if broker_core::check_group(group).is_err() {
            return Err(E::InvalidGroupId);
        }
        let Some(g) = self.groups.get_mut(group) else { return Err(E::UnknownMemberId) };
        let mut answers = Vec::with_capacity(members.len());
        for (id, _instance) in members {
            // Leaving by group instance id alone (an empty member id) finds no one:
            // there are no static members here.
            let answer = if g.remove_pending(id, &mut self.books) || g.remove_member(id, now, &mut self.books) {
                Ok(())
            } else {
                Err(E::UnknownMemberId)
            };
            answers.push(answer);
        }
        self.forget_if_gone(group);
        Ok(answers)
    }

    /// Whether an OffsetCommit of `group` by `member` at `generation` may go ahead,
    /// as Kafka's classic groups judge it: generation -1 commits only to a group with no
    /// member (one that only keeps offsets, as simple consumers use); otherwise the
    /// member and the generation must be the group's, and not mid-assignment.
    pub fn check_commit(
        &mut self,
        now: Instant,
        group: &str,
        generation: i32,
        member: &str,
        instance: bool,
    ) -> Result<(), E> {
        let Some(g) = self.groups.get_mut(group) else {
            // No member: the group keeps offsets only (Kafka's empty group).
            return if generation < 0 { Ok(()) } else { Err(E::UnknownMemberId) };
        };
        if generation < 0 && g.state == State::Empty {
            return Ok(());
        }
        if generation >= 0 || !member.is_empty() || instance {
            if instance || !g.members.contains_key(member) {
                return Err(E::UnknownMemberId);
            }
            if generation != g.generation {
                return Err(E::IllegalGeneration);
            }
        } else if g.state != State::Empty {
            return Err(E::UnknownMemberId);
        }
        if g.state == State::CompletingRebalance {
            return Err(E::RebalanceInProgress);
        }
        g.touch(member, now, &mut self.books);
        Ok(())
    }

    /// `group` as DescribeGroups shows it, if it is in memory: members always, their
    /// metadata and assignments (and the protocol) only once it is stable, as in Kafka.
    pub fn describe(&self, group: &str) -> Option<GroupView> {
        let g = self.groups.get(group)?;
        let stable = g.state == State::Stable;
        let protocol = if stable { g.protocol.clone().unwrap_or_default() } else { String::new() };
        let mut members: Vec<&Member> = g.members.values().collect();
        members.sort_by_key(|m| m.seq);
        let members = members
            .into_iter()
            .map(|m| MemberView {
                member_id: m.id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable { m.metadata(&protocol) } else { Bytes::new() },
                assignment: if stable { m.assignment.clone() } else { Bytes::new() },
            })
            .collect();
        Some(GroupView {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol,
            generation: g.generation,
            leader: g.leader.clone().unwrap_or_default(),
            members,
        })
    }

    /// Every group in memory: id, state, protocol type.
    pub fn list(&self) -> Vec<Listed> {
        self.groups
            .values()
            .map(|g| Listed {
                group: g.id.clone(),
                state: g.state,
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// Carries out every deadline due at `now`: rebalances complete with the members
    /// that rejoined, members whose session ended are removed (and their groups
    /// rebalance), members told `MEMBER_ID_REQUIRED` that never joined are forgotten.
    pub fn tick(&mut self, now: Instant) {
        while let Some(timer) = self.books.timers.pop_due(now) {
            let group = match &timer {
                Timer::Rebalance { group } | Timer::Session { group, .. } | Timer::Pending { group, .. } => {
                    group.clone()
                }
            };
            let books = &mut self.books;
            let Some(g) = self.groups.get_mut(&group) else { continue };
            match timer {
                Timer::Rebalance { .. } => {
                    // Its entry is gone from the index: the slot only.
                    g.rebalance_deadline = None;
                    if g.state == State::PreparingRebalance {
                        g.complete_join(now, books);
                    }
                }
                Timer::Session { member, .. } => {
                    if let Some(m) = g.members.get_mut(&member) {
                        m.session_deadline = None;
                    }
                    g.remove_member(&member, now, books);
                }
                Timer::Pending { member, .. } => {
                    // Its entry is gone from the index: the member and its bytes only.
                    if g.pending.remove(&member).is_some() {
                        books.bytes -= PENDING_OVERHEAD + member.len();
                    }
                    g.try_complete_join(now, books);
                }
            }
            self.forget_if_gone(&group);
        }
    }
}
