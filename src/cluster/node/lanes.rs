//! Rule D's lanes, group commit per partition: a node has at most one segment write
//! under way per partition. A produce whose partition has one waits in the partition's
//! lane; when that write is done, the first produce waiting leads the next write and
//! carries in its segment the records of the produces queued behind it (up to one
//! batch's limits), so that produces to one partition cost one segment per store round
//! trip, not one each, and no longer race each other for the same key.
//!
//! The riders' records follow the leader's in the segment, in queue order; each rider's
//! offsets are the segment's base plus where its records begin. A rider is written when
//! its leader's segment is, then waits for its own second fence as any produce does;
//! if the leader ends without its segment (a corrupt segment, a removal, offsets run
//! out), its riders end with it, for their records went with its create.

use super::*;

/// One partition's writes on this node.
#[derive(Debug, Default)]
pub(super) struct Lane {
    /// The produce whose segment this node is writing, from learning the partition's
    /// end until its create is known to have landed.
    leader: Option<RequestId>,
    /// Produces waiting for it, in arrival order.
    queued: VecDeque<RequestId>,
}

impl Node {
    /// Makes `request` lead the write to `partition`, to start once the commands that
    /// its fence round released are all placed ([`Node::start_lanes`]), so that those
    /// to the same partition ride with it; or queues it behind the write under way.
    pub(super) fn enter_lane(&mut self, request: RequestId, topic: TopicId, partition: u32) {
        let lane = self.data.lanes.entry((topic, partition)).or_default();
        if lane.leader.is_some() {
            lane.queued.push_back(request);
            return;
        }
        lane.leader = Some(request);
        self.data.starting.push((request, topic, partition));
    }

    /// Starts the writes whose leaders entered their lanes since the last call.
    pub(super) fn start_lanes(&mut self) {
        for (request, topic, partition) in std::mem::take(&mut self.data.starting) {
            let leads = self.data.lanes.get(&(topic, partition)).is_some_and(|l| l.leader == Some(request));
            if leads && self.part(request, partition).is_some() {
                self.lead(request, topic, partition);
            }
        }
    }

    fn lead(&mut self, request: RequestId, topic: TopicId, partition: u32) {
        match self.data.ends.get(&(topic, partition)) {
            Some(&end) => self.write_part(request, partition, end),
            None => self.list_segments(request, topic, partition, None),
        }
    }

    /// Holds the first create of `request`, the lane's leader, for the gathering window,
    /// if there is one and it has not waited it out yet: whether it did.
    pub(super) fn hold(&mut self, request: RequestId, partition: u32, base: u64) -> bool {
        let window = self.options.gather_ms;
        let at = self.now.plus_millis(window);
        match self.part_mut(request, partition) {
            Some(part) if window > 0 && !part.waited => {
                part.waited = true;
                self.data.held.insert((at, request, partition, base));
                true
            }
            _ => false,
        }
    }

    /// Starts the segment writes whose gathering window ended at or before `now` (those
    /// whose produce ended meanwhile find nothing to write).
    pub(super) fn release_held(&mut self, now: Time) {
        while self.data.held.first().is_some_and(|(at, ..)| *at <= now) {
            if let Some((_, request, partition, base)) = self.data.held.pop_first() {
                self.write_part(request, partition, base);
            }
        }
    }

    /// Moves into the part of `request`, the lane's leader, the records of the produces
    /// queued behind it, in order, while one batch holds them. Called once, before its
    /// first create: a create whose outcome is unknown is issued again with the same
    /// bytes, or a rider could be acknowledged by a segment that does not hold it.
    pub(super) fn gather(&mut self, request: RequestId, topic: TopicId, partition: u32) {
        let Some(mut records) = self.part_mut(request, partition).map(|p| {
            p.sealed = true;
            std::mem::take(&mut p.records)
        }) else {
            return;
        };
        let queued = match self.data.lanes.get_mut(&(topic, partition)) {
            Some(lane) => std::mem::take(&mut lane.queued),
            None => VecDeque::new(),
        };
        let (max_records, max_bytes) = (self.options.config.max_batch_records, self.options.config.batch_bytes_limit());
        let mut bytes = crate::logcodec::batch_bytes(&records);
        let mut riders = Vec::new();
        let mut left = VecDeque::new();
        for rider in queued {
            let Some(part) = self.part_mut(rider, partition) else { continue };
            let more = crate::logcodec::batch_bytes(&part.records) - 12;
            if !left.is_empty() || records.len() + part.records.len() > max_records || bytes + more > max_bytes {
                // The first that does not fit, and all after it, wait for the next write.
                left.push_back(rider);
                continue;
            }
            riders.push((rider, records.len() as u64));
            records.append(&mut part.records);
            bytes += more;
        }
        if let Some(lane) = self.data.lanes.get_mut(&(topic, partition)) {
            lane.queued = left;
        }
        self.data.rides += riders.len() as u64;
        if let Some(part) = self.part_mut(request, partition) {
            part.records = records;
            part.riders = riders;
        }
    }

    /// The segment of `request`, the lane's leader, is known to hold its records (and
    /// its riders') at `base`: each rider is written, and the next produce queued leads.
    pub(super) fn lane_written(&mut self, request: RequestId, topic: TopicId, partition: u32, base: u64) {
        let riders = self.part_mut(request, partition).map(|p| std::mem::take(&mut p.riders)).unwrap_or_default();
        for (rider, at) in riders {
            let misplaced = planted!(self.options.config, ClusterRiderAtLeaderBase);
            if let Some(part) = self.part_mut(rider, partition) {
                part.base = Some(if misplaced { base } else { base + at });
                part.written = true;
                self.when_written(rider);
            }
        }
        self.next_in_lane(request, topic, partition);
    }

    /// `request` (a produce's, fetch's or describe's work, removed) ended without its
    /// segments: the lanes it led go on with the next produce, it leaves those it waits
    /// in, and the riders whose records its creates carried are returned, to end as it
    /// did.
    pub(super) fn leave_lanes(&mut self, request: RequestId, work: &Work) -> Vec<RequestId> {
        let Work::Produce { topic, parts, .. } = work else { return Vec::new() };
        let mut riders = Vec::new();
        for (&partition, part) in parts {
            let Some(lane) = self.data.lanes.get_mut(&(*topic, partition)) else { continue };
            if lane.leader == Some(request) {
                riders.extend(part.riders.iter().map(|(r, _)| *r));
                self.next_in_lane(request, *topic, partition);
            } else {
                lane.queued.retain(|r| *r != request);
            }
        }
        riders
    }

    /// Hands the lane that `request` led to the first produce queued in it that is still
    /// under way, or drops the lane if none is.
    fn next_in_lane(&mut self, request: RequestId, topic: TopicId, partition: u32) {
        let key = (topic, partition);
        let Some(lane) = self.data.lanes.get_mut(&key) else { return };
        if lane.leader != Some(request) {
            return;
        }
        lane.leader = None;
        while let Some(next) = self.data.lanes.get_mut(&key).and_then(|l| l.queued.pop_front()) {
            if self.part(next, partition).is_some() {
                if let Some(lane) = self.data.lanes.get_mut(&key) {
                    lane.leader = Some(next);
                }
                return self.lead(next, topic, partition);
            }
        }
        self.data.lanes.remove(&key);
    }

    fn part_mut(&mut self, request: RequestId, partition: u32) -> Option<&mut Part> {
        match self.data.work.get_mut(&request) {
            Some(Work::Produce { parts, .. }) => parts.get_mut(&partition),
            _ => None,
        }
    }
}
