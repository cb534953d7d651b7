//! Rule D's lanes, group commit per incarnation: a node has at most one object write
//! under way per incarnation. A produce to an incarnation that has one waits in its
//! lane; when that write is done, the first produce waiting leads the next write and
//! carries in its object the records of the produces queued behind it (up to one
//! batch's limits), whatever partitions they go to, so that produces to one topic cost
//! one object per store round trip, not one per produce or per partition, and no longer
//! race each other for the same key.
//!
//! In each partition's part of the object, the riders' records follow the leader's, in
//! queue order; each rider's offsets are its partition's base in the object plus where
//! its records begin. A rider is written when its leader's object is, then waits for
//! its own second fence as any produce does; if the leader ends without its object (a
//! corrupt object, a removal, offsets run out), its riders end with it, for their
//! records went with its create.

use super::*;

/// One incarnation's writes on this node.
#[derive(Debug, Default)]
pub(super) struct Lane {
    /// The produce whose object this node is writing, from learning where it goes until
    /// its create is known to have landed.
    leader: Option<RequestId>,
    /// Produces waiting for it, in arrival order.
    queued: VecDeque<RequestId>,
}

impl Node {
    /// Makes `request` lead the write to `topic`, to start once the commands that its
    /// fence round released are all placed ([`Node::start_lanes`]), so that those to the
    /// same incarnation ride with it; or queues it behind the write under way.
    pub(super) fn enter_lane(&mut self, request: RequestId, topic: TopicId) {
        let lane = self.data.lanes.entry(topic).or_default();
        if lane.leader.is_some() {
            lane.queued.push_back(request);
            return;
        }
        lane.leader = Some(request);
        self.data.starting.push((request, topic));
    }

    /// Starts the writes whose leaders entered their lanes since the last call.
    pub(super) fn start_lanes(&mut self) {
        for (request, topic) in std::mem::take(&mut self.data.starting) {
            let leads = self.data.lanes.get(&topic).is_some_and(|l| l.leader == Some(request));
            if leads && self.write(request).is_some() {
                self.lead(request, topic);
            }
        }
    }

    fn lead(&mut self, request: RequestId, topic: TopicId) {
        match self.data.objects.get(&topic).and_then(ObjectIndex::newest) {
            Some(_) => self.write_object(request),
            None => self.list_objects(request, topic),
        }
    }

    /// Holds the first create of `request`, the lane's leader, for the gathering window,
    /// if there is one and it has not waited it out yet: whether it did.
    pub(super) fn hold(&mut self, request: RequestId) -> bool {
        let window = self.options.gather_ms;
        let at = self.now.plus_millis(window);
        match self.write_mut(request) {
            Some(write) if window > 0 && !write.waited => {
                write.waited = true;
                self.data.held.insert((at, request));
                true
            }
            _ => false,
        }
    }

    /// Starts the object writes whose gathering window ended at or before `now` (those
    /// whose produce ended meanwhile find nothing to write).
    pub(super) fn release_held(&mut self, now: Time) {
        while self.data.held.first().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, request)) = self.data.held.pop_first() {
                self.write_object(request);
            }
        }
    }

    /// Moves into the parts of `request`, the lane's leader, the records of the produces
    /// queued behind it, in order, while one batch holds them. Called once, before its
    /// first create: a create whose outcome is unknown is issued again with the same
    /// bytes, or a rider could be acknowledged by an object that does not hold it.
    pub(super) fn gather(&mut self, request: RequestId, topic: TopicId) {
        let Some(Work::Produce { parts, write, .. }) = self.data.work.get_mut(&request) else { return };
        write.sealed = true;
        let mut parts = std::mem::take(parts);
        let queued = match self.data.lanes.get_mut(&topic) {
            Some(lane) => std::mem::take(&mut lane.queued),
            None => VecDeque::new(),
        };
        let (max_records, max_bytes) = (self.options.config.max_batch_records, self.options.config.batch_bytes_limit());
        let mut count: usize = parts.values().map(Vec::len).sum();
        // As one batch of every record, whatever its partition: the object's records
        // frame then holds at most what one produce's batch may.
        let mut bytes = crate::logcodec::batch_bytes(parts.values().flatten());
        let mut riders = Vec::new();
        let mut left = VecDeque::new();
        for rider in queued {
            let Some(Work::Produce { parts: theirs, .. }) = self.data.work.get_mut(&rider) else { continue };
            let more_records: usize = theirs.values().map(Vec::len).sum();
            let more_bytes = crate::logcodec::batch_bytes(theirs.values().flatten()) - 12;
            if !left.is_empty() || count + more_records > max_records || bytes + more_bytes > max_bytes {
                // The first that does not fit, and all after it, wait for the next write.
                left.push_back(rider);
                continue;
            }
            let mut at = BTreeMap::new();
            for (partition, records) in theirs.iter_mut() {
                let part = parts.entry(*partition).or_default();
                at.insert(*partition, part.len() as u64);
                part.append(records);
            }
            riders.push((rider, at));
            count += more_records;
            bytes += more_bytes;
        }
        if let Some(lane) = self.data.lanes.get_mut(&topic) {
            lane.queued = left;
        }
        self.data.rides += riders.len() as u64;
        if let Some(Work::Produce { parts: mine, write, .. }) = self.data.work.get_mut(&request) {
            *mine = parts;
            write.riders = riders;
        }
    }

    /// The object of `request`, the lane's leader, is known to hold its records (and its
    /// riders') from `bases`: each rider is written, and the next produce queued leads.
    pub(super) fn lane_written(&mut self, request: RequestId, topic: TopicId, bases: &BTreeMap<u32, u64>) {
        let riders = self.write_mut(request).map(|w| std::mem::take(&mut w.riders)).unwrap_or_default();
        for (rider, at) in riders {
            let misplaced = planted!(self.options.config, ClusterRiderAtLeaderBase);
            if let Some(write) = self.write_mut(rider) {
                write.bases = rider_bases(bases, &at, misplaced);
                write.written = true;
                self.when_written(rider);
            }
        }
        self.next_in_lane(request, topic);
    }

    /// `request` (a produce's, fetch's or describe's work, removed) ended without its
    /// object: the lane it led goes on with the next produce, it leaves the one it waits
    /// in, and the riders whose records its creates carried are returned, to end as it
    /// did.
    pub(super) fn leave_lanes(&mut self, request: RequestId, work: &Work) -> Vec<RequestId> {
        let Work::Produce { topic, write, .. } = work else { return Vec::new() };
        let Some(lane) = self.data.lanes.get_mut(topic) else { return Vec::new() };
        if lane.leader == Some(request) {
            self.next_in_lane(request, *topic);
            return write.riders.iter().map(|(r, _)| *r).collect();
        }
        lane.queued.retain(|r| *r != request);
        Vec::new()
    }

    /// Hands the lane that `request` led to the first produce queued in it that is still
    /// under way, or drops the lane if none is.
    fn next_in_lane(&mut self, request: RequestId, topic: TopicId) {
        let Some(lane) = self.data.lanes.get_mut(&topic) else { return };
        if lane.leader != Some(request) {
            return;
        }
        lane.leader = None;
        while let Some(next) = self.data.lanes.get_mut(&topic).and_then(|l| l.queued.pop_front()) {
            if self.write(next).is_some() {
                if let Some(lane) = self.data.lanes.get_mut(&topic) {
                    lane.leader = Some(next);
                }
                return self.lead(next, topic);
            }
        }
        self.data.lanes.remove(&topic);
    }

    /// `request`, the leader of its lane's write, and its riders.
    pub(super) fn lane_of(&self, request: RequestId) -> Vec<RequestId> {
        let riders = self.write(request).map(|w| w.riders.iter().map(|(r, _)| *r).collect::<Vec<_>>());
        std::iter::once(request).chain(riders.unwrap_or_default()).collect()
    }

    pub(super) fn write(&self, request: RequestId) -> Option<&Write> {
        match self.data.work.get(&request) {
            Some(Work::Produce { write, .. }) => Some(write),
            _ => None,
        }
    }

    pub(super) fn write_mut(&mut self, request: RequestId) -> Option<&mut Write> {
        match self.data.work.get_mut(&request) {
            Some(Work::Produce { write, .. }) => Some(write),
            _ => None,
        }
    }
}

/// A rider's first offset in each partition it writes: its leader's object's base there
/// plus where its records begin (or, planted, the base itself).
pub(super) fn rider_bases(bases: &BTreeMap<u32, u64>, at: &BTreeMap<u32, u64>, misplaced: bool) -> BTreeMap<u32, u64> {
    at.iter()
        .map(|(p, at)| {
            let base = bases.get(p).copied().unwrap_or(0);
            (*p, if misplaced { base } else { base + at })
        })
        .collect()
}
