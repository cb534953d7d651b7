//! One group's state machine, Kafka's classic protocol: `Empty` (no member),
//! `PreparingRebalance` (members rejoin), `CompletingRebalance` (the leader assigns),
//! `Stable` (everyone has its assignment), and the moves between them.

use super::member::Member;
use super::messages::{JoinOutcome, Joined, State, Synced};
use super::timers::{Timer, Timers};
use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;
use tokio::time::Instant;

/// What a group takes against the byte budget besides its id.
pub(super) const GROUP_OVERHEAD: usize = 512;
/// What a member told `MEMBER_ID_REQUIRED` takes besides its id.
pub(super) const PENDING_OVERHEAD: usize = 128;

/// What every group shares: the deadlines and the bytes held.
#[derive(Debug, Default)]
pub(super) struct Books {
    pub timers: Timers,
    pub bytes: usize,
}

pub(super) struct Group {
    pub id: String,
    pub state: State,
    pub generation: i32,
    /// The members' protocol type, set by the first to join an empty group.
    pub protocol_type: Option<String>,
    /// The protocol chosen for the current generation.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids given out with `MEMBER_ID_REQUIRED`, not yet joined: their deadlines.
    pub pending: BTreeMap<String, Instant>,
    pub rebalance_deadline: Option<Instant>,
}

impl Group {
    pub fn new(id: String) -> Group {
        Group {
            id,
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            rebalance_deadline: None,
        }
    }

    /// Kafka's test for a joining member: an empty group takes any non-empty protocol
    /// type and list; otherwise the type must be the group's, and one of the member's
    /// protocols must be supported by every member.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| self.members.values().all(|m| m.supports(name)))
    }

    /// Whether a member not yet counted may join: Kafka's `group.max.size`, with the
    /// members told `MEMBER_ID_REQUIRED` counted too (they hold memory).
    pub fn has_room(&self, max_members: usize) -> bool {
        self.members.len() + self.pending.len() < max_members
    }

    /// Whether nothing is left of the group in memory.
    pub fn is_gone(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty()
    }

    fn session_timer(&self, member: &str) -> Timer {
        Timer::Session { group: self.id.clone(), member: member.to_string() }
    }

    /// Remembers `id`, given out with `MEMBER_ID_REQUIRED`, until `deadline`.
    pub fn add_pending(&mut self, id: String, deadline: Instant, books: &mut Books) {
        books.bytes += PENDING_OVERHEAD + id.len();
        let mut slot = None;
        books.timers.reset(&mut slot, Some(deadline), Timer::Pending { group: self.id.clone(), member: id.clone() });
        self.pending.insert(id, deadline);
    }

    /// Forgets the pending member `id`; false if it was not pending.
    pub fn remove_pending(&mut self, id: &str, books: &mut Books) -> bool {
        let Some(deadline) = self.pending.remove(id) else { return false };
        books.bytes -= PENDING_OVERHEAD + id.len();
        let mut slot = Some(deadline);
        books.timers.reset(&mut slot, None, Timer::Pending { group: self.id.clone(), member: id.to_string() });
        true
    }

    /// The member was heard from at `now`: its session starts again (unless it awaits
    /// a join, which the rebalance's deadline bounds).
    pub fn touch(&mut self, id: &str, now: Instant, books: &mut Books) {
        let timer = self.session_timer(id);
        if let Some(m) = self.members.get_mut(id) {
            if m.awaiting_join.is_none() {
                books.timers.reset(&mut m.session_deadline, Some(now + m.session_timeout), timer);
            }
        }
    }

    /// Adds `member` (of `protocol_type`), already waiting for its join, and starts or
    /// joins a rebalance.
    pub fn add_member(&mut self, member: Member, protocol_type: &str, now: Instant, books: &mut Books) {
        if self.members.is_empty() {
            self.protocol_type = Some(protocol_type.to_string());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        books.bytes += member.bytes();
        self.members.insert(member.id.clone(), member);
        self.rebalance(now, books);
    }

    /// The member `id` rejoins with `protocols` (and timeouts), waiting on `reply`.
    pub fn update_member(
        &mut self,
        id: &str,
        protocols: Vec<(String, Bytes)>,
        timeouts: (std::time::Duration, std::time::Duration),
        reply: tokio::sync::oneshot::Sender<JoinOutcome>,
        now: Instant,
        books: &mut Books,
    ) {
        let timer = self.session_timer(id);
        let Some(m) = self.members.get_mut(id) else { return };
        books.bytes -= m.bytes();
        m.protocols = protocols;
        (m.session_timeout, m.rebalance_timeout) = timeouts;
        books.bytes += m.bytes();
        // A join it sent before is superseded: answered as Kafka answers a join cut
        // short by a rebalance, so that a client still waiting on it joins again.
        if let Some(old) = m.awaiting_join.replace(reply) {
            let _ = old.send(JoinOutcome::failed(E::RebalanceInProgress, id.to_string()));
        }
        books.timers.reset(&mut m.session_deadline, None, timer);
        self.rebalance(now, books);
    }

    /// A member (re)joined: a rebalance begins unless one is under way, and completes
    /// if everyone is in.
    fn rebalance(&mut self, now: Instant, books: &mut Books) {
        if self.state == State::PreparingRebalance {
            self.try_complete_join(now, books);
        } else {
            self.prepare_rebalance(now, books);
        }
    }

    /// Begins a rebalance: the assignments of a generation not yet stable are void, and
    /// the members have until the longest of their rebalance timeouts to rejoin.
    pub fn prepare_rebalance(&mut self, now: Instant, books: &mut Books) {
        if self.state == State::CompletingRebalance {
            for m in self.members.values_mut() {
                books.bytes -= m.assignment.len();
                m.assignment = Bytes::new();
                if let Some(waiting) = m.awaiting_sync.take() {
                    let _ = waiting.send(Err(E::RebalanceInProgress));
                }
            }
        }
        self.state = State::PreparingRebalance;
        let timeout = self.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
        let timer = Timer::Rebalance { group: self.id.clone() };
        books.timers.reset(&mut self.rebalance_deadline, Some(now + timeout), timer);
        self.try_complete_join(now, books);
    }

    /// Completes the rebalance if every member rejoined and none is pending.
    pub fn try_complete_join(&mut self, now: Instant, books: &mut Books) {
        let all_in = self.members.values().all(|m| m.awaiting_join.is_some()) && self.pending.is_empty();
        if self.state == State::PreparingRebalance && all_in {
            self.complete_join(now, books);
        }
    }

    /// Completes the rebalance (everyone rejoined, or its deadline passed): members that
    /// did not rejoin are removed, a new generation begins with the protocol most
    /// members prefer, and every waiting join is answered, the leader's with every
    /// member's metadata.
    pub fn complete_join(&mut self, now: Instant, books: &mut Books) {
        let absent: Vec<String> =
            self.members.values().filter(|m| m.awaiting_join.is_none()).map(|m| m.id.clone()).collect();
        for id in absent {
            self.drop_member(&id, books);
        }
        let timer = Timer::Rebalance { group: self.id.clone() };
        books.timers.reset(&mut self.rebalance_deadline, None, timer);
        self.generation = self.generation.checked_add(1).unwrap_or(1);
        if self.members.is_empty() {
            self.state = State::Empty;
            self.protocol = None;
            self.protocol_type = None;
            self.leader = None;
            return;
        }
        let protocol = self.select_protocol();
        self.state = State::CompletingRebalance;
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.first_member();
        }
        let leader = self.leader.clone().unwrap_or_default();
        let mut ordered: Vec<&Member> = self.members.values().collect();
        ordered.sort_by_key(|m| m.seq);
        let everyone: Vec<(String, Bytes)> = ordered.iter().map(|m| (m.id.clone(), m.metadata(&protocol))).collect();
        let protocol_type = self.protocol_type.clone();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let timer = self.session_timer(&id);
            let Some(m) = self.members.get_mut(&id) else { continue };
            if let Some(waiting) = m.awaiting_join.take() {
                let members = if id == leader { everyone.clone() } else { Vec::new() };
                let _ = waiting.send(JoinOutcome::Joined(Joined {
                    generation: self.generation,
                    protocol_type: protocol_type.clone(),
                    protocol_name: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members,
                }));
            }
            books.timers.reset(&mut m.session_deadline, Some(now + m.session_timeout), timer);
        }
        self.protocol = Some(protocol);
    }

    /// The answer to a member rejoining a generation it is already in, unchanged: the
    /// generation as it stands, with every member's metadata for the leader.
    pub fn current(&self, id: &str) -> Joined {
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let members = if id == leader {
            let mut ordered: Vec<&Member> = self.members.values().collect();
            ordered.sort_by_key(|m| m.seq);
            ordered.iter().map(|m| (m.id.clone(), m.metadata(&protocol))).collect()
        } else {
            Vec::new()
        };
        Joined {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: Some(protocol),
            leader,
            member_id: id.to_string(),
            members,
        }
    }

    /// Kafka's choice: among the protocols every member supports, the one most members
    /// list first (of those); ties go to the earliest member's preference.
    fn select_protocol(&self) -> String {
        let mut ordered: Vec<&Member> = self.members.values().collect();
        ordered.sort_by_key(|m| m.seq);
        let Some(first) = ordered.first() else { return String::new() };
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| ordered.iter().all(|m| m.supports(name)))
            .collect();
        let mut best: Option<(&String, usize)> = None;
        for candidate in &candidates {
            let votes = ordered
                .iter()
                .filter(|m| m.protocols.iter().map(|(n, _)| n).find(|n| candidates.contains(n)) == Some(*candidate))
                .count();
            if best.is_none_or(|(_, most)| votes > most) {
                best = Some((candidate, votes));
            }
        }
        // Every join checks that a protocol is common to all; should none be, the first
        // member's first.
        best.map(|(name, _)| name.clone())
            .or_else(|| first.protocols.first().map(|(name, _)| name.clone()))
            .unwrap_or_default()
    }

    fn first_member(&self) -> Option<String> {
        self.members.values().min_by_key(|m| m.seq).map(|m| m.id.clone())
    }

    /// Takes `id` out of the group, answering what it waits for with
    /// `UNKNOWN_MEMBER_ID` (it is no longer a member), and hands the leadership on.
    fn drop_member(&mut self, id: &str, books: &mut Books) {
        let timer = self.session_timer(id);
        let Some(mut m) = self.members.remove(id) else { return };
        books.bytes -= m.bytes();
        books.timers.reset(&mut m.session_deadline, None, timer);
        if let Some(waiting) = m.awaiting_join.take() {
            let _ = waiting.send(JoinOutcome::failed(E::UnknownMemberId, id.to_string()));
        }
        if let Some(waiting) = m.awaiting_sync.take() {
            let _ = waiting.send(Err(E::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.first_member();
        }
    }

    /// A member left or its session ended: it is removed, and the group rebalances
    /// without it (or, mid-rebalance, may now be complete).
    pub fn remove_member(&mut self, id: &str, now: Instant, books: &mut Books) -> bool {
        if !self.members.contains_key(id) {
            return false;
        }
        self.drop_member(id, books);
        match self.state {
            State::Stable | State::CompletingRebalance => self.prepare_rebalance(now, books),
            State::PreparingRebalance => self.try_complete_join(now, books),
            State::Empty => {}
        }
        true
    }

    /// The leader's assignments: each member's is stored (a member the leader left out
    /// gets an empty one, one it names that is not a member is ignored), the group is
    /// stable, and every waiting SyncGroup is answered.
    pub fn assign(&mut self, assignments: BTreeMap<String, Bytes>, books: &mut Books) {
        for m in self.members.values_mut() {
            books.bytes -= m.assignment.len();
            m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
            books.bytes += m.assignment.len();
        }
        self.state = State::Stable;
        let (protocol_type, protocol_name) = (self.protocol_type.clone(), self.protocol.clone());
        for m in self.members.values_mut() {
            if let Some(waiting) = m.awaiting_sync.take() {
                let _ = waiting.send(Ok(Synced {
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: m.assignment.clone(),
                }));
            }
        }
    }

    /// Every deadline and byte the group holds, given back as it leaves memory.
    pub fn release(&mut self, books: &mut Books) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            self.drop_member(&id, books);
        }
        let pending: Vec<String> = self.pending.keys().cloned().collect();
        for id in pending {
            self.remove_pending(&id, books);
        }
        let timer = Timer::Rebalance { group: self.id.clone() };
        books.timers.reset(&mut self.rebalance_deadline, None, timer);
    }
}
