//! Rule D, the data: a produce writes one segment per partition with a conditional
//! create at the end it knows; a fetch lists and reads a partition's segments; a
//! describe learns every partition's end as a fetch learns its high watermark; all
//! wait for a second fence before they answer.

use super::*;

impl Node {
    pub(super) fn produce(
        &mut self,
        request: RequestId,
        name: String,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) {
        let Some((topic, t)) = self.catalog.live(&name) else {
            return self.reply(request, Err(BrokerError::TopicNotFound { name }));
        };
        let partitions = t.partitions;
        if let Err(e) = check_produce(&self.options.config, &name, partitions, partition, &records) {
            return self.reply(request, Err(e));
        }
        let cursor = self.data.cursors.get(&topic).copied().unwrap_or(0);
        let Placement { batches, positions, cursor } = place(partitions, cursor, partition, records);
        self.data.cursors.insert(topic, cursor);
        let mut parts = BTreeMap::new();
        for (p, records) in batches {
            let writer = EntryWriter { node: self.options.node, boot: self.options.boot, nonce: self.next_nonce };
            self.next_nonce += 1;
            let riders = Vec::new();
            parts.insert(p, Part { records, writer, base: None, written: false, sealed: false, waited: false, riders });
        }
        let ps: Vec<u32> = parts.keys().copied().collect();
        self.data.work.insert(request, Work::Produce { name, topic, positions, parts });
        for p in ps {
            self.enter_lane(request, topic, p);
        }
    }

    pub(super) fn fetch(
        &mut self,
        request: RequestId,
        name: String,
        partition: u32,
        offset: u64,
        max_records: u32,
        max_bytes: Option<u64>,
    ) {
        let Some((topic, t)) = self.catalog.live(&name) else {
            return self.reply(request, Err(BrokerError::TopicNotFound { name }));
        };
        if partition >= t.partitions {
            let partitions = t.partitions;
            return self.reply(request, Err(BrokerError::PartitionNotFound { name, partition, partitions }));
        }
        let max = self.options.config.max_fetch_records;
        if max_records == 0 || max_records > max {
            let e = BrokerError::InvalidRequest(format!("max_records must be between 1 and {max}"));
            return self.reply(request, Err(e));
        }
        let limit = self.options.config.max_fetch_bytes;
        let max_bytes = max_bytes.map_or(limit, |b| b.min(limit));
        let work = Work::Fetch { name, topic, offset, max_records, max_bytes, bases: Vec::new(), high_watermark: None };
        self.data.work.insert(request, work);
        self.list_segments(request, topic, partition, None);
    }

    /// A describe of a live incarnation after its fence: `shown`, once every
    /// partition's end is read from its last segment.
    pub(super) fn describe_ends(&mut self, request: RequestId, name: String, shown: TopicDescription) {
        let (topic, partitions) = (shown.id, shown.partitions);
        self.data.work.insert(request, Work::Describe { name, topic, shown, learned: BTreeSet::new() });
        for p in 0..partitions {
            self.list_segments(request, topic, p, None);
        }
    }

    pub(super) fn part(&self, request: RequestId, partition: u32) -> Option<&Part> {
        match self.data.work.get(&request) {
            Some(Work::Produce { parts, .. }) => parts.get(&partition),
            _ => None,
        }
    }

    pub(super) fn list_segments(&mut self, request: RequestId, topic: TopicId, partition: u32, after: Option<u64>) {
        self.list_segments_after(request, topic, partition, after, None);
    }

    /// Lists the partition past `after`'s segment, or past `key` (the last key of the page
    /// before, a foreign key maybe).
    pub(super) fn list_segments_after(
        &mut self,
        request: RequestId,
        topic: TopicId,
        partition: u32,
        after: Option<u64>,
        key: Option<String>,
    ) {
        let op = StoreOp::List {
            prefix: partition_prefix(topic, partition),
            after: key.or_else(|| after.map(|base| segment_key(topic, partition, base))),
            limit: self.options.list_limit.max(1),
        };
        self.issue(op, Purpose::Segments { request, partition, after });
    }

    pub(super) fn segments_listed(&mut self, request: RequestId, partition: u32, after: Option<u64>, page: Page) {
        let Some(work) = self.data.work.get_mut(&request) else { return };
        let topic = match work {
            Work::Produce { topic, .. } | Work::Fetch { topic, .. } | Work::Describe { topic, .. } => *topic,
        };
        let listed: Vec<u64> = page
            .keys
            .iter()
            .filter_map(|k| parse_segment_key(k))
            .filter(|(t, p, _)| *t == topic && *p == partition)
            .map(|(_, _, base)| base)
            .collect();
        let is_produce = matches!(work, Work::Produce { .. });
        if let Work::Fetch { bases, .. } = work {
            bases.extend(&listed);
        }
        let last = listed.last().copied().or(after);
        if page.more {
            return self.list_segments_after(request, topic, partition, last, page.next());
        }
        let cached = self.data.ends.get(&(topic, partition)).copied();
        match (last, after, cached) {
            // A produce that lost a race learned the end past the winner's segment; with
            // nothing after it, that end is the partition's.
            (Some(b), Some(a), Some(end)) if b == a && is_produce => self.end_known(request, partition, end, None),
            (Some(base), _, _) => {
                let key = segment_key(topic, partition, base);
                self.issue(StoreOp::Get { key }, Purpose::ReadSegment { request, partition, base });
            }
            (None, _, _) => self.end_known(request, partition, 0, None),
        }
    }

    pub(super) fn segment_read(&mut self, request: RequestId, partition: u32, base: u64, bytes: &Bytes) {
        let Some(work) = self.data.work.get(&request) else { return };
        let topic = match work {
            Work::Produce { topic, .. } | Work::Fetch { topic, .. } | Work::Describe { topic, .. } => *topic,
        };
        match segment::decode(topic, partition, base, bytes) {
            Ok(seg) => {
                let waiting_for_end = match work {
                    Work::Produce { .. } | Work::Describe { .. } => true,
                    Work::Fetch { high_watermark, .. } => high_watermark.is_none(),
                };
                if waiting_for_end {
                    let end = base + seg.records.len() as u64;
                    self.end_known(request, partition, end, Some((base, seg.records)));
                } else if let Some(Work::Fetch { offset, bases, high_watermark, .. }) = self.data.work.get_mut(&request)
                {
                    if base + (seg.records.len() as u64) <= *offset {
                        // The segment ends before the offset, below the end the walk
                        // found: segments landed behind the walk (keys outside the layout
                        // led it past their keys). The walk goes again from this one.
                        *high_watermark = None;
                        bases.retain(|b| *b <= base);
                        return self.list_segments(request, topic, partition, Some(base));
                    }
                    self.serve_fetch(request, base, seg.records);
                }
            }
            Err(e) => {
                let log = segment_key(topic, partition, base);
                self.end_request(
                    request,
                    Err(BrokerError::CorruptRecord { log, offset: base, end: base + 1, detail: e.to_string() }),
                );
            }
        }
    }

    /// The partition's end is `end`; `last` is its last segment, if read.
    pub(super) fn end_known(
        &mut self,
        request: RequestId,
        partition: u32,
        end: u64,
        last: Option<(u64, Vec<ProduceRecord>)>,
    ) {
        let Some(work) = self.data.work.get_mut(&request) else { return };
        match work {
            Work::Produce { topic, .. } => {
                let topic = *topic;
                self.data.ends.insert((topic, partition), end);
                self.write_part(request, partition, end);
            }
            Work::Describe { topic, shown, learned, .. } => {
                let topic = *topic;
                if let Some(hw) = shown.high_watermarks.get_mut(partition as usize) {
                    *hw = end;
                }
                learned.insert(partition);
                let done = learned.len() == shown.high_watermarks.len();
                let reply = done.then(|| Ok(Reply::Described(shown.clone())));
                let known = self.data.ends.entry((topic, partition)).or_insert(end);
                *known = (*known).max(end);
                // Answered only if a second fence shows the incarnation still live.
                if let Some(reply) = reply {
                    self.await_fence(request, After::Fetched(reply));
                }
            }
            Work::Fetch { topic, offset, bases, high_watermark, .. } => {
                let (topic, offset) = (*topic, *offset);
                *high_watermark = Some(end);
                if offset > end {
                    // The listing may have met a removal under way (segments past `end`
                    // already deleted): answered only if a second fence shows it live.
                    let reply = Err(BrokerError::OffsetOutOfRange { offset, high_watermark: end });
                    if planted!(self.options.config, ClusterUnfencedOutOfRange) {
                        self.data.work.remove(&request);
                        return self.reply(request, reply);
                    }
                    if planted!(self.options.config, ClusterSkipFence) {
                        return self.fetched(request, reply);
                    }
                    return self.await_fence(request, After::Fetched(reply));
                }
                if offset == end {
                    return self.serve_fetch(request, end, Vec::new());
                }
                // The segment that holds `offset`: the last one whose base is at most it.
                let base = bases.iter().copied().filter(|b| *b <= offset).max().unwrap_or(0);
                match last {
                    Some((last_base, records)) if last_base == base => self.serve_fetch(request, base, records),
                    _ => {
                        let key = segment_key(topic, partition, base);
                        self.issue(StoreOp::Get { key }, Purpose::ReadSegment { request, partition, base });
                    }
                }
            }
        }
    }

    pub(super) fn serve_fetch(&mut self, request: RequestId, base: u64, records: Vec<ProduceRecord>) {
        let Some(Work::Fetch { topic, offset, max_records, max_bytes, high_watermark, .. }) =
            self.data.work.get(&request)
        else {
            return;
        };
        let (topic, offset, max_records, max_bytes) = (*topic, *offset, *max_records, *max_bytes);
        let high_watermark = high_watermark.unwrap_or(offset);
        let skip = offset.saturating_sub(base) as usize;
        let mut bytes = 0u64;
        let records: Vec<StoredRecord> = records
            .into_iter()
            .enumerate()
            .skip(skip)
            .take(max_records as usize)
            .map(|(i, r)| StoredRecord { offset: base + i as u64, key: r.key, value: r.value })
            .take_while(|r| {
                let first = bytes == 0;
                bytes += (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64;
                first || bytes <= max_bytes
            })
            .collect();
        // Answered only if a fence begun after the read still shows the topic live.
        let reply = Reply::Fetched { topic, records, high_watermark };
        if planted!(self.options.config, ClusterSkipFence) {
            return self.fetched(request, Ok(reply));
        }
        self.await_fence(request, After::Fetched(Ok(reply)));
    }

    /// Creates the segment of `request`'s part for `partition` at `base`: on its first
    /// try, once the gathering window is over, with the records of the produces queued
    /// behind it in the partition's lane.
    pub(super) fn write_part(&mut self, request: RequestId, partition: u32, base: u64) {
        let Some(Work::Produce { topic, parts, .. }) = self.data.work.get(&request) else { return };
        let topic = *topic;
        if parts.get(&partition).is_some_and(|p| !p.sealed) {
            if self.hold(request, partition, base) {
                return;
            }
            self.gather(request, topic, partition);
        }
        let Some(Work::Produce { name, parts, .. }) = self.data.work.get_mut(&request) else { return };
        let Some(part) = parts.get_mut(&partition) else { return };
        if base.checked_add(part.records.len() as u64).is_none() {
            // As on one node; only a forged store has a segment ending this far.
            let e = BrokerError::Storage(format!("partition {partition} of {name:?} has run out of offsets"));
            return self.end_request(request, Err(e));
        }
        part.base = Some(base);
        let bytes = segment::encode(topic, partition, base, part.writer, &part.records);
        // The riders' records are in the create: their outcome is its outcome. Their
        // base is set here as well as when the segment is known to have landed
        // (`lane_written`): a base says a create holding the records was issued, which
        // makes a produce that then meets its topic's removal answer an unknown outcome,
        // not not-found (`data_not_found`).
        let riders = part.riders.clone();
        for (rider, at) in riders {
            if let Some(Work::Produce { parts, .. }) = self.data.work.get_mut(&rider) {
                if let Some(p) = parts.get_mut(&partition) {
                    p.base = Some(base + at);
                }
            }
        }
        let op = StoreOp::Create { key: segment_key(topic, partition, base), bytes: bytes.into() };
        self.issue(op, Purpose::WriteSegment { request, partition });
    }

    pub(super) fn check_segment(&mut self, request: RequestId, partition: u32) {
        let Some(Work::Produce { topic, parts, .. }) = self.data.work.get(&request) else { return };
        let Some(base) = parts.get(&partition).and_then(|p| p.base) else { return };
        let key = segment_key(*topic, partition, base);
        self.issue(StoreOp::Get { key }, Purpose::CheckSegment { request, partition });
    }

    pub(super) fn segment_checked(&mut self, request: RequestId, partition: u32, bytes: &Bytes) {
        let Some(Work::Produce { topic, parts, .. }) = self.data.work.get(&request) else { return };
        let topic = *topic;
        let Some(part) = parts.get(&partition) else { return };
        let Some(base) = part.base else { return };
        match segment::decode(topic, partition, base, bytes) {
            Ok(seg) if seg.writer == part.writer => self.part_written(request, partition),
            Ok(seg) => {
                // Another node appended first: learn the end past its segment, retry.
                self.data.ends.insert((topic, partition), base + seg.records.len() as u64);
                self.list_segments(request, topic, partition, Some(base));
            }
            Err(e) => {
                let log = segment_key(topic, partition, base);
                self.end_request(
                    request,
                    Err(BrokerError::CorruptRecord { log, offset: base, end: base + 1, detail: e.to_string() }),
                );
            }
        }
    }

    pub(super) fn part_written(&mut self, request: RequestId, partition: u32) {
        let Some(Work::Produce { topic, parts, .. }) = self.data.work.get_mut(&request) else { return };
        let topic = *topic;
        let Some(part) = parts.get_mut(&partition) else { return };
        let Some(base) = part.base else { return };
        part.written = true;
        let end = base + part.records.len() as u64;
        let known = self.data.ends.entry((topic, partition)).or_insert(end);
        *known = (*known).max(end);
        self.lane_written(request, topic, partition, base);
        self.when_written(request);
    }

    /// Once every part of produce `request` is written: its second fence.
    pub(super) fn when_written(&mut self, request: RequestId) {
        let Some(Work::Produce { parts, .. }) = self.data.work.get(&request) else { return };
        if !parts.values().all(|p| p.written) {
            return;
        }
        if planted!(self.options.config, ClusterProduceUnverified) || planted!(self.options.config, ClusterSkipFence) {
            self.produced(request);
        } else {
            self.await_fence(request, After::Produced);
        }
    }

    /// Ends `request`'s work with `reply`; a produce leaves its partitions' lanes, and
    /// the riders whose records its creates carried end as it does.
    pub(super) fn end_request(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let Some(work) = self.data.work.remove(&request) else { return };
        let riders = self.leave_lanes(request, &work);
        self.reply(request, reply.clone());
        for rider in riders {
            self.end_request(rider, reply.clone());
        }
    }

    /// A produce whose segments all exist, after its second fence.
    pub(super) fn produced(&mut self, request: RequestId) {
        let Some(Work::Produce { name, topic, mut positions, parts }) = self.data.work.remove(&request) else { return };
        if self.catalog.live(&name).map(|(id, _)| id) != Some(topic) {
            let why = format!(
                "topic {name:?} ({topic}) was deleted while the produce was in flight: its records may have been \
                 written, and read, before the deletion"
            );
            return self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
        }
        for position in &mut positions {
            position.offset += parts.get(&position.partition).and_then(|p| p.base).unwrap_or(0);
        }
        self.reply(request, Ok(Reply::Produced { topic, positions }));
    }

    /// A fetch that has read its records, or a describe that has learned its ends, after
    /// its second fence.
    pub(super) fn fetched(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let Some(Work::Fetch { name, topic, .. } | Work::Describe { name, topic, .. }) =
            self.data.work.remove(&request)
        else {
            return;
        };
        let live = self.catalog.live_topics().any(|(_, id, _)| id == topic);
        if live {
            self.reply(request, reply);
        } else {
            self.reply(request, Err(BrokerError::TopicNotFound { name }));
        }
    }

    /// A segment vanished while a request read it: its topic is being removed.
    /// A produce that has issued a segment's create already may have had it land before
    /// the tombstone, and read: its outcome is unknown.
    pub(super) fn data_not_found(&mut self, request: RequestId) {
        let planted = planted!(self.options.config, ClusterProduceNotFoundAfterWrite);
        let Some(work) = self.data.work.remove(&request) else { return };
        let reply = match &work {
            Work::Produce { name, topic, parts, .. } if parts.values().any(|p| p.base.is_some()) && !planted => {
                BrokerError::OutcomeUnknown(format!(
                    "topic {name:?} ({topic}) was deleted while the produce was in flight: some of its records may \
                     have been written, and read, before the deletion"
                ))
            }
            Work::Produce { name, .. } | Work::Fetch { name, .. } | Work::Describe { name, .. } => {
                BrokerError::TopicNotFound { name: name.clone() }
            }
        };
        // Riders' records went with this produce's creates: each answers by its own.
        let riders = self.leave_lanes(request, &work);
        self.reply(request, Err(reply));
        for rider in riders {
            self.data_not_found(rider);
        }
    }
}
