//! Rule D, the data: a produce writes one topic object, for every partition it (and
//! the produces riding with it) writes to, with a conditional create of the
//! incarnation's next object number; a fetch or describe lists the incarnation's
//! objects past the newest it knows and reads the newest header, which gives every
//! partition's end, then a fetch finds the object holding its offset by the headers
//! (`object_index.rs`); all wait for a second fence before they answer.

use super::*;

/// The headers a node keeps per incarnation (each 8 bytes per partition, and a few per
/// part): past them, a fetch of an old offset reads headers again.
const HEADERS_KEPT: usize = 64;

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
        let writer = EntryWriter { node: self.options.node, boot: self.options.boot, nonce: self.next_nonce };
        self.next_nonce += 1;
        let write = Write {
            writer,
            n: None,
            bytes: None,
            bases: BTreeMap::new(),
            written: false,
            sealed: false,
            waited: false,
            riders: Vec::new(),
        };
        let parts = batches.into_iter().collect();
        self.data.work.insert(request, Work::Produce { name, topic, partitions, positions, parts, write });
        self.enter_lane(request, topic);
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
        let partitions = t.partitions;
        let work =
            Work::Fetch { name, topic, partitions, partition, offset, max_records, max_bytes, high_watermark: None };
        self.data.work.insert(request, work);
        self.list_objects(request, topic);
    }

    /// A describe of a live incarnation after its fence: `shown`, once every partition's
    /// end is read from the newest object's header.
    pub(super) fn describe_ends(&mut self, request: RequestId, name: String, shown: TopicDescription) {
        let topic = shown.id;
        self.data.work.insert(request, Work::Describe { name, topic, shown });
        self.list_objects(request, topic);
    }

    /// The incarnation's ends as this node knows them (0 for every partition before its
    /// first object).
    pub(super) fn known_ends(&self, topic: TopicId, partitions: u32) -> Vec<u64> {
        match self.data.objects.get(&topic).and_then(ObjectIndex::ends) {
            Some(ends) => ends.to_vec(),
            None => vec![0; partitions as usize],
        }
    }

    /// Lists the incarnation's objects past the newest this node knows, to learn the
    /// newest there is.
    pub(super) fn list_objects(&mut self, request: RequestId, topic: TopicId) {
        let newest = self.data.objects.get(&topic).and_then(ObjectIndex::newest).map(|(n, _)| n);
        self.list_objects_after(request, topic, newest.map(|n| object_key(topic, n)), newest);
    }

    fn list_objects_after(&mut self, request: RequestId, topic: TopicId, key: Option<String>, newest: Option<u64>) {
        let op = StoreOp::List { prefix: topic_prefix(topic), after: key, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::Objects { request, newest });
    }

    /// A page of the incarnation's keys past the newest object known (`newest`, or the
    /// last listed so far).
    pub(super) fn objects_listed(&mut self, request: RequestId, newest: Option<u64>, page: Page) {
        let Some(topic) = self.data.work.get(&request).map(Work::topic) else { return };
        if let Some(key) = page.keys.iter().find(|k| parse_segment_key(k).is_some_and(|(t, _, _)| t == topic)) {
            // Records in the layout before topic objects, which this node does not read:
            // serving the topic without them would lose them silently.
            let e = BrokerError::Storage(format!(
                "{key} holds records of {topic} in the per-partition segment layout of an earlier version, which \
                 this version does not read; serve this store with the earlier version, or delete and re-create \
                 the topic"
            ));
            return self.end_request(request, Err(e));
        }
        let listed = page.keys.iter().filter_map(|k| parse_object_key(k)).filter(|(t, _)| *t == topic);
        let newest = listed.map(|(_, n)| n).max().max(newest);
        if page.more {
            return self.list_objects_after(request, topic, page.next(), newest);
        }
        match newest {
            Some(n) if self.data.objects.get(&topic).and_then(|i| i.header(n)).is_none() => {
                self.issue(StoreOp::Get { key: object_key(topic, n) }, Purpose::ReadObject { request, n });
            }
            _ => self.objects_known(request),
        }
    }

    /// Object `n` of `request`'s incarnation, read: its header is learned; a fetch serves
    /// from it if it holds the offset (its records are decoded only then: damage in an
    /// object a search passes through fails no fetch that does not read it).
    pub(super) fn object_read(&mut self, request: RequestId, n: u64, bytes: &Bytes) {
        let Some(work) = self.data.work.get(&request) else { return };
        let (topic, partitions) = (work.topic(), work.partitions());
        let target = match work {
            Work::Fetch { partition, offset, .. } => Some((*partition, *offset)),
            _ => None,
        };
        let header = match fitting_header(topic, partitions, n, bytes) {
            Ok((header, _)) => header,
            Err(e) => return self.corrupt_object(request, topic, n, &e),
        };
        let holding = target.and_then(|(partition, offset)| {
            let i = header.parts.iter().position(|p| {
                let base = header.base(p);
                p.partition == partition && base <= offset && offset < base + u64::from(p.count)
            })?;
            Some((partition, i, header.base(&header.parts[i])))
        });
        self.learn_object(topic, n, header);
        let Some((partition, i, base)) = holding else { return self.objects_known(request) };
        let mut object = match topic_object::decode(topic, n, bytes) {
            Ok(object) => object,
            Err(e) => return self.corrupt_object(request, topic, n, &e.to_string()),
        };
        // The newest object, read by a fetch's listing, gives its high watermark.
        let end = self.known_ends(topic, partitions).get(partition as usize).copied().unwrap_or(0);
        if let Some(Work::Fetch { high_watermark, .. }) = self.data.work.get_mut(&request) {
            *high_watermark = high_watermark.or(Some(end));
        }
        self.serve_fetch(request, base, object.records.swap_remove(i));
    }

    fn learn_object(&mut self, topic: TopicId, n: u64, header: topic_object::ObjectHeader) {
        self.data.objects.entry(topic).or_insert_with(|| ObjectIndex::new(HEADERS_KEPT)).learn(n, header);
    }

    fn corrupt_object(&mut self, request: RequestId, topic: TopicId, n: u64, detail: &str) {
        let log = object_key(topic, n);
        let detail = detail.to_string();
        self.end_request(request, Err(BrokerError::CorruptRecord { log, offset: 0, end: 1, detail }));
    }

    /// The node knows the newest object there was when `request` listed: a produce
    /// writes past it, a describe answers with its ends, a fetch learns its high
    /// watermark and looks for its offset.
    pub(super) fn objects_known(&mut self, request: RequestId) {
        let Some(work) = self.data.work.get_mut(&request) else { return };
        match work {
            Work::Produce { .. } => self.write_object(request),
            Work::Describe { topic, shown, .. } => {
                let (topic, partitions) = (*topic, shown.partitions);
                let ends = self.known_ends(topic, partitions);
                let Some(Work::Describe { shown, .. }) = self.data.work.get_mut(&request) else { return };
                shown.high_watermarks = ends;
                // Answered only if a second fence shows the incarnation still live.
                let reply = Ok(Reply::Described(shown.clone()));
                self.await_fence(request, After::Fetched(reply));
            }
            Work::Fetch { topic, partition, offset, high_watermark, .. } => {
                let (topic, partition, offset) = (*topic, *partition, *offset);
                let index = self.data.objects.get(&topic);
                let end =
                    index.and_then(ObjectIndex::ends).map_or(0, |e| e.get(partition as usize).copied().unwrap_or(0));
                let first = high_watermark.is_none();
                *high_watermark = high_watermark.or(Some(end));
                if first && offset > end {
                    // The listing may have met a removal under way (objects past `end`
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
                if first && offset == end {
                    return self.serve_fetch(request, end, Vec::new());
                }
                match index.map_or(Locate::Unknown, |i| i.locate(partition, offset)) {
                    Locate::In { n, .. } | Locate::Read(n) => {
                        self.issue(StoreOp::Get { key: object_key(topic, n) }, Purpose::ReadObject { request, n });
                    }
                    Locate::Inconsistent { n } => {
                        let detail = format!("the headers of the objects around {n} contradict each other");
                        self.corrupt_object(request, topic, n, &detail);
                    }
                    // Below the high watermark the newest header gives, neither can be:
                    // only a forged store has an end the index cannot find.
                    Locate::Unknown | Locate::AtOrPastEnd { .. } => {
                        let n = index.and_then(ObjectIndex::newest).map_or(0, |(n, _)| n);
                        self.corrupt_object(request, topic, n, "no object holds an offset below the end");
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

    /// Creates the object of `request` (a lane's leader) as the incarnation's next: on
    /// its first try, once the gathering window is over, with the records of the
    /// produces queued behind it in the lane.
    pub(super) fn write_object(&mut self, request: RequestId) {
        let Some(Work::Produce { topic, write, .. }) = self.data.work.get(&request) else { return };
        let topic = *topic;
        if !write.sealed {
            if self.hold(request) {
                return;
            }
            self.gather(request, topic);
        }
        let Some(Work::Produce { partitions, .. }) = self.data.work.get(&request) else { return };
        let ends = self.known_ends(topic, *partitions);
        let n = self.data.objects.get(&topic).map_or(0, ObjectIndex::next_object);
        let Some(Work::Produce { name, parts, write, .. }) = self.data.work.get_mut(&request) else { return };
        let split: Vec<(u32, &[ProduceRecord])> = parts.iter().map(|(p, r)| (*p, r.as_slice())).collect();
        let bytes = match topic_object::encode(topic, n, write.writer, &ends, &split) {
            Ok(bytes) => Bytes::from(bytes),
            Err(topic_object::ObjectError::OffsetsRunOut(p)) => {
                // As on one node; only a forged store has an end this far.
                let e = BrokerError::Storage(format!("partition {p} of {name:?} has run out of offsets"));
                return self.end_request(request, Err(e));
            }
            Err(e) => {
                // One batch's limits keep what a produce gathers within an object's.
                let e = BrokerError::Storage(format!("topic {name:?} cannot take the records: {e}"));
                return self.end_request(request, Err(e));
            }
        };
        write.bases = parts.keys().map(|p| (*p, ends.get(*p as usize).copied().unwrap_or(0))).collect();
        write.n = Some(n);
        write.bytes = Some(bytes.clone());
        // The riders' records are in the create: their outcome is its outcome. Their
        // bases are set here as well as when the object is known to have landed
        // (`lane_written`): a base says a create holding the records was issued, which
        // makes a produce that then meets its topic's removal answer an unknown outcome,
        // not not-found (`data_not_found`).
        let (bases, riders) = (write.bases.clone(), write.riders.clone());
        for (rider, at) in riders {
            if let Some(w) = self.write_mut(rider) {
                w.bases = lanes::rider_bases(&bases, &at, false);
                w.n = Some(n);
            }
        }
        self.issue(StoreOp::Create { key: object_key(topic, n), bytes }, Purpose::WriteObject { request });
    }

    /// Issues again the create of `request`'s object, with the same bytes (its outcome
    /// was unknown, and it is not there).
    pub(super) fn write_again(&mut self, request: RequestId) {
        let Some(Work::Produce { topic, write, .. }) = self.data.work.get(&request) else { return };
        if let (Some(n), Some(bytes)) = (write.n, write.bytes.clone()) {
            let key = object_key(*topic, n);
            self.issue(StoreOp::Create { key, bytes }, Purpose::WriteObject { request });
        }
    }

    pub(super) fn check_object(&mut self, request: RequestId) {
        let Some(Work::Produce { topic, write, .. }) = self.data.work.get(&request) else { return };
        let Some(n) = write.n else { return };
        let key = object_key(*topic, n);
        self.issue(StoreOp::Get { key }, Purpose::CheckObject { request });
    }

    pub(super) fn object_checked(&mut self, request: RequestId, bytes: &Bytes) {
        let Some(Work::Produce { topic, partitions, write, .. }) = self.data.work.get(&request) else { return };
        let (topic, partitions, writer) = (*topic, *partitions, write.writer);
        let Some(n) = write.n else { return };
        match fitting_header(topic, partitions, n, bytes) {
            Ok((header, _)) if header.writer == writer => self.object_written(request),
            Ok((header, _)) => {
                // Another node wrote object `n` first, so this produce's records (and its
                // riders') are in no object: it has written nothing. Learn the newest
                // object past it, and retry past that.
                self.learn_object(topic, n, header);
                for r in self.lane_of(request) {
                    if let Some(w) = self.write_mut(r) {
                        (w.n, w.bytes) = (None, None);
                        w.bases.clear();
                    }
                }
                self.list_objects(request, topic);
            }
            Err(e) => self.corrupt_object(request, topic, n, &e),
        }
    }

    /// The object of `request`, a lane's leader, is in the store.
    pub(super) fn object_written(&mut self, request: RequestId) {
        let Some(Work::Produce { topic, write, .. }) = self.data.work.get_mut(&request) else { return };
        let topic = *topic;
        let (Some(n), Some(bytes)) = (write.n, write.bytes.take()) else { return };
        write.written = true;
        let bases = write.bases.clone();
        if let Ok((header, _)) = topic_object::decode_header(topic, n, &bytes) {
            self.learn_object(topic, n, header);
        }
        self.lane_written(request, topic, &bases);
        self.when_written(request);
    }

    /// Once produce `request`'s object is written: its second fence.
    pub(super) fn when_written(&mut self, request: RequestId) {
        if !self.write(request).is_some_and(|w| w.written) {
            return;
        }
        if planted!(self.options.config, ClusterProduceUnverified) || planted!(self.options.config, ClusterSkipFence) {
            self.produced(request);
        } else {
            self.await_fence(request, After::Produced);
        }
    }

    /// Ends `request`'s work with `reply`; a produce leaves its lane, and the riders
    /// whose records its creates carried end as it does.
    pub(super) fn end_request(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let Some(work) = self.data.work.remove(&request) else { return };
        let riders = self.leave_lanes(request, &work);
        self.reply(request, reply.clone());
        for rider in riders {
            self.end_request(rider, reply.clone());
        }
    }

    /// A produce whose object exists, after its second fence.
    pub(super) fn produced(&mut self, request: RequestId) {
        let Some(Work::Produce { name, topic, mut positions, write, .. }) = self.data.work.remove(&request) else {
            return;
        };
        if self.catalog.live(&name).map(|(id, _)| id) != Some(topic) {
            // Its object may have landed before the tombstone, and been read: the produce
            // may have taken effect, so "not found" (nothing written) would be untrue.
            if planted!(self.options.config, ClusterProduceNotFoundAfterWrite) {
                return self.reply(request, Err(BrokerError::TopicNotFound { name }));
            }
            let why = format!(
                "topic {name:?} ({topic}) was deleted while the produce was in flight: its records may have been \
                 written, and read, before the deletion"
            );
            return self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
        }
        for position in &mut positions {
            position.offset += write.bases.get(&position.partition).copied().unwrap_or(0);
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

    /// An object vanished while a request read it: its topic is being removed. A produce
    /// with a create of its records issued and not known to have lost may have had it
    /// land before the tombstone, and read: its outcome is unknown. (A produce reads only
    /// before its first create and after one lost, so this is a safeguard.)
    pub(super) fn data_not_found(&mut self, request: RequestId) {
        let Some(work) = self.data.work.remove(&request) else { return };
        let reply = match &work {
            Work::Produce { name, topic, write, .. } if write.n.is_some() => BrokerError::OutcomeUnknown(format!(
                "topic {name:?} ({topic}) was deleted while the produce was in flight: some of its records may \
                     have been written, and read, before the deletion"
            )),
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

impl Work {
    pub(super) fn topic(&self) -> TopicId {
        match self {
            Work::Produce { topic, .. } | Work::Fetch { topic, .. } | Work::Describe { topic, .. } => *topic,
        }
    }

    /// The partition count of its incarnation.
    fn partitions(&self) -> u32 {
        match self {
            Work::Produce { partitions, .. } | Work::Fetch { partitions, .. } => *partitions,
            Work::Describe { shown, .. } => shown.partitions,
        }
    }
}

/// The header of object `n` of `topic`, which has `partitions` partitions: one that
/// gives the ends of another count is as corrupt as one that does not decode.
fn fitting_header(
    topic: TopicId,
    partitions: u32,
    n: u64,
    bytes: &[u8],
) -> Result<(topic_object::ObjectHeader, usize), String> {
    match topic_object::decode_header(topic, n, bytes) {
        Ok((header, at)) if header.ends.len() == partitions as usize => Ok((header, at)),
        Ok((header, _)) => Err(misfit(partitions, &header)),
        Err(e) => Err(e.to_string()),
    }
}

fn misfit(partitions: u32, header: &topic_object::ObjectHeader) -> String {
    format!("its header gives the ends of {} partitions; the topic has {partitions}", header.ends.len())
}
