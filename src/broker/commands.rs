//! Client commands: validation first (a rejected command changes nothing), then effects.

use super::state::{Deletion, DeletionStage, PartitionWrite, Topic};
use super::{describe, Broker, JournalWaiter, PendingOp, ProduceProgress};
use crate::command::{Command, ProduceRecord, Reply, TopicSettings};
use crate::effect::{AppendRecord, StorageOp};
use crate::error::BrokerError;
use crate::ids::{LogId, RequestId, TopicId};
use crate::journal::{JournalRecord, TopicMeta};
use crate::placement::{check_produce, place_as, Placement};

impl Broker {
    pub(super) fn command(&mut self, request: RequestId, command: Command) {
        let writes = match &command {
            Command::CreateTopic { .. } => Some("create"),
            Command::DeleteTopic { .. } => Some("delete"),
            Command::Produce { .. } | Command::ProduceIdempotent { .. } => Some("produce"),
            Command::InitProducer => Some("init producer"),
            Command::CommitOffsets { .. } => Some("commit"),
            Command::DeleteGroup { .. } => Some("delete group"),
            Command::Fetch { .. }
            | Command::ListTopics
            | Command::DescribeTopic { .. }
            | Command::FetchOffsets { .. }
            | Command::ListGroups => None,
        };
        if let Some(what) = writes.filter(|_| self.config.read_only) {
            return self.reply(request, Err(BrokerError::ReadOnly(what.to_string())));
        }
        let result = match command {
            Command::CreateTopic { name, partitions, settings } => self.create(request, name, partitions, settings),
            Command::DeleteTopic { name } => self.delete(request, name),
            Command::Produce { topic, partition, records } => self.produce(request, &topic, partition, records),
            Command::Fetch { topic, partition, offset, max_records, max_bytes } => {
                self.fetch(request, &topic, partition, offset, max_records, max_bytes)
            }
            Command::ListTopics => Ok(Some(Reply::Topics(self.live_topics()))),
            Command::DescribeTopic { name } => self.visible(&name).map(|t| Some(Reply::Described(describe(t)))),
            Command::CommitOffsets { group, topic, incarnation, offsets } => {
                self.commit_offsets(request, group, &topic, incarnation, offsets)
            }
            Command::FetchOffsets { group, topic } => self.fetch_offsets(request, &group, &topic),
            Command::InitProducer => self.init_producer(request),
            Command::ProduceIdempotent { topic, partition, producer, records } => {
                self.produce_idempotent(request, &topic, partition, producer, records)
            }
            Command::ListGroups => self.list_groups(request),
            Command::DeleteGroup { group } => self.delete_group(request, group),
        };
        match result {
            Ok(Some(reply)) => self.reply(request, Ok(reply)),
            Ok(None) => {} // answered later
            Err(e) => self.reply(request, Err(e)),
        }
    }

    /// The live, created topic named `name`.
    pub(super) fn visible(&self, name: &str) -> Result<&Topic, BrokerError> {
        self.live_names
            .get(name)
            .and_then(|id| self.topics.get(id))
            .filter(|t| t.visible())
            .ok_or_else(|| BrokerError::TopicNotFound { name: name.to_string() })
    }

    fn create(
        &mut self,
        request: RequestId,
        name: String,
        partitions: u32,
        settings: TopicSettings,
    ) -> Result<Option<Reply>, BrokerError> {
        self.config.check_new_topic(&name, partitions, &settings)?;
        let taken = if planted!(self.config, CreateChecksOnlyVisibleNames) {
            self.visible(&name).is_ok()
        } else {
            self.live_names.contains_key(&name)
        };
        if taken {
            return Err(BrokerError::TopicAlreadyExists { name });
        }
        crate::name::check_collision(&name, self.live_names.keys().map(String::as_str))?;
        // The largest id is never handed out: replay saturates the next id there, so it
        // means the journal already names it and every id is used.
        let Some(after) = self.next_topic_id.checked_add(1) else {
            return Err(BrokerError::Unavailable("no topic id is left: the journal names the largest one".into()));
        };
        let id = TopicId(self.next_topic_id);
        self.next_topic_id = after;
        let offset_base = if planted!(self.config, OffsetsIgnoreFloor) { 0 } else { self.offset_floor };
        let meta = TopicMeta { id, name: name.clone(), partitions, settings, offset_base };
        self.wait_for_journal(JournalRecord::TopicCreated(meta.clone()), JournalWaiter::Created(id));
        self.inherit_offsets(&name, id);
        let mut topic = Topic::new(meta, false);
        topic.create_waiter = Some((request, partitions));
        self.topics.insert(id, topic);
        self.live_names.insert(name, id);
        Ok(None)
    }

    fn delete(&mut self, request: RequestId, name: String) -> Result<Option<Reply>, BrokerError> {
        if let Some(id) = self.live_names.remove(&name) {
            let grace = self.topics.get(&id).map_or(0, |t| t.meta.settings.deletion_grace_ms);
            let remove_after = self.now.plus_millis(grace);
            // No later incarnation's offsets begin below an end this one journaled (the
            // journal's replay takes the same ends: those queued before the tombstone).
            // Ends acknowledged but not journaled yet go first.
            self.journal_acked_ends(Some(id));
            let ended = self.topics.get(&id).and_then(|t| t.partitions.iter().map(|p| p.journaled_end).max());
            self.offset_floor = self.offset_floor.max(ended.unwrap_or(0));
            let seq =
                self.wait_for_journal(JournalRecord::TopicDeleted { id, remove_after }, JournalWaiter::Tombstone(id));
            self.drop_offsets_of(id);
            let early_ack = planted!(self.config, AckDeleteBeforeTombstoneDurable);
            if let Some(t) = self.topics.get_mut(&id) {
                t.deletion = Some(Deletion {
                    stage: DeletionStage::AwaitTombstone,
                    tombstone_seq: seq,
                    waiters: if early_ack { vec![] } else { vec![request] },
                    removed: Default::default(),
                    removing: Default::default(),
                    backing_off: Default::default(),
                    remove_after,
                    removal_due: None,
                });
            }
            self.deleting_names.entry(name).or_default().insert(id);
            return Ok(early_ack.then_some(Reply::DeleteAccepted { topic: id }));
        }
        if planted!(self.config, DeleteIgnoresPendingDeletion) {
            return Err(BrokerError::TopicNotFound { name });
        }
        // Already being deleted: accepted once more, no second pipeline.
        // One whose acknowledgement waits for its I/O to drain waits with the first.
        let newest = self.deleting_names.get(&name).and_then(|ids| ids.last()).copied();
        let unacknowledged = newest.is_some_and(|id| self.draining.contains(&id));
        let pending = newest.and_then(|id| self.topics.get_mut(&id));
        match pending.and_then(|t| t.deletion.as_mut().map(|d| (t.meta.id, d))) {
            Some((id, d)) if d.stage != DeletionStage::AwaitTombstone && !unacknowledged => {
                Ok(Some(Reply::DeleteAccepted { topic: id }))
            }
            Some((_, d)) => {
                d.waiters.push(request);
                Ok(None)
            }
            None => Err(BrokerError::TopicNotFound { name }),
        }
    }

    pub(super) fn produce(
        &mut self,
        request: RequestId,
        topic: &str,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) -> Result<Option<Reply>, BrokerError> {
        let t = self.visible(topic)?;
        let n = t.meta.partitions;
        check_produce(&self.config, topic, n, partition, &records)?;
        // Assign partitions and group the records into one batch per partition, in
        // ascending partition order, without touching state, so a rejection changes
        // nothing. Offsets within each batch count from 0 until the checks pass.
        let partition = partition.filter(|_| !planted!(self.config, NamedPartitionIgnored));
        let make = |offset, record| AppendRecord { offset, record };
        let Placement { mut batches, mut positions, cursor } = place_as(n, t.round_robin, partition, records, make);
        // The first record, in the order given, whose partition has failed.
        if let Some((p, why)) = positions.iter().find_map(|pos| {
            let failed = t.partitions.get(pos.partition as usize).map(|part| part.failed.clone());
            (failed != Some(None)).then(|| (pos.partition, failed.flatten().unwrap_or_default()))
        }) {
            return Err(BrokerError::Storage(format!("partition {p} of {topic:?} is unavailable: {why}")));
        }
        if let Some((p, _)) =
            batches.iter().find(|(p, b)| t.partitions[*p as usize].next_offset.checked_add(b.len() as u64).is_none())
        {
            return Err(BrokerError::Storage(format!("partition {p} of {topic:?} has run out of offsets")));
        }
        let id = t.meta.id;
        let early_ack = planted!(self.config, AckProduceBeforeSync);
        // The log of partition `p` is `LogId { partition: p, ..log0 }`.
        let log0 = self.log_of(t, 0);
        let Some(t) = self.topics.get_mut(&id) else { return Err(BrokerError::TopicNotFound { name: topic.into() }) };
        t.round_robin = cursor;
        for position in &mut positions {
            position.offset += t.partitions[position.partition as usize].next_offset;
        }
        for (p, batch) in &mut batches {
            let part = &mut t.partitions[*p as usize];
            for r in batch.iter_mut() {
                r.offset += part.next_offset;
            }
            part.next_offset += batch.len() as u64;
            part.inflight += 2;
            part.writes.push_back(PartitionWrite { request, end: part.next_offset, ops_left: 2, producer: None });
        }
        let partitions_left = batches.len();
        for (p, records) in batches {
            let log = LogId { partition: p, ..log0 };
            let end = records.last().map_or(0, |r| r.offset + 1);
            self.op(StorageOp::Append { log, records }, PendingOp::Append { log, end });
            self.op(StorageOp::SyncLog { log }, PendingOp::SyncLog { log, end });
        }
        if early_ack {
            return Ok(Some(Reply::Produced { topic: id, positions }));
        }
        if let Some(progress) = self.requests.get_mut(&request) {
            *progress = Some(ProduceProgress { topic: id, positions, partitions_left });
        }
        Ok(None)
    }

    fn fetch(
        &mut self,
        request: RequestId,
        topic: &str,
        partition: u32,
        offset: u64,
        max_records: u32,
        max_bytes: Option<u64>,
    ) -> Result<Option<Reply>, BrokerError> {
        let t = match self.visible(topic) {
            Err(e) if planted!(self.config, FetchServesDeletedIncarnation) => self
                .deleting_names
                .get(topic)
                .and_then(|ids| ids.last())
                .and_then(|id| self.topics.get(id))
                .filter(|t| t.created)
                .ok_or(e)?,
            found => found?,
        };
        let Some(p) = t.partitions.get(partition as usize) else {
            return Err(BrokerError::PartitionNotFound {
                name: topic.to_string(),
                partition,
                partitions: t.meta.partitions,
            });
        };
        if max_records == 0 || max_records > self.config.max_fetch_records {
            return Err(BrokerError::InvalidRequest(format!(
                "max_records must be between 1 and {}",
                self.config.max_fetch_records
            )));
        }
        if let Some(why) = &p.failed {
            return Err(BrokerError::Storage(format!("partition {partition} of {topic:?} is unavailable: {why}")));
        }
        let high_watermark = p.high_watermark;
        if offset < t.meta.offset_base {
            return Err(BrokerError::OffsetBeforeStart { offset, log_start: t.meta.offset_base });
        }
        if offset > high_watermark {
            return Err(BrokerError::OffsetOutOfRange { offset, high_watermark });
        }
        if offset == high_watermark {
            if planted!(self.config, LoseFetchAtHighWatermark) {
                return Ok(None);
            }
            return Ok(Some(Reply::Fetched { topic: t.meta.id, records: vec![], high_watermark }));
        }
        let count = (high_watermark - offset).min(u64::from(max_records)) as u32;
        let max_bytes = max_bytes.map_or(self.config.max_fetch_bytes, |b| b.min(self.config.max_fetch_bytes));
        let (id, log) = (t.meta.id, self.log_of(t, partition));
        if let Some(p) = self.topics.get_mut(&id).and_then(|t| t.partitions.get_mut(partition as usize)) {
            p.inflight += 1;
        }
        self.op(
            StorageOp::Read { log, offset, max_records: count, max_bytes },
            PendingOp::Read { request, log, offset, count, high_watermark },
        );
        Ok(None)
    }
}
