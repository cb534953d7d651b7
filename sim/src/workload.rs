//! The seeded client workload: creates, deletes and re-creates of a few names (so
//! incarnations collide), keyed and keyless produces (some to a named partition), fetches, lists and describes;
//! for one broker, consumer groups' commits, reads, lists and deletions of offsets too,
//! and idempotent producers (in `producers.rs`).

mod producers;

use crate::model::{ValueId, LABEL_MAX};
use crate::rng::SimRng;
use crate::swarm::SwarmParams;
use crate::value_crc;
use broker_core::{
    Command, CommittedOffset, ProduceRecord, ProducerBatch, TopicDescription, TopicId, TopicSettings, MAX_GROUP_BYTES,
};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::rc::Rc;

/// The most records one produce may carry (`Config::max_batch_records`, unchanged).
const MAX_BATCH_RECORDS: u64 = 10_000;

/// How often a produce names its partition instead of letting keys choose.
const NAMED_PARTITION: f64 = 0.15;

/// The consumer groups clients use (besides an empty id and one a byte too long).
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];

/// What the clients learned of a name's live incarnation from lists, describes and
/// produce replies: where group commits aim.
#[derive(Clone, Debug)]
struct KnownTopic {
    id: TopicId,
    /// Incarnations of the name seen before this one, oldest first (a few).
    older: Vec<TopicId>,
    log_start: u64,
    /// By partition: the highest high watermark seen.
    high_watermarks: Vec<u64>,
    /// Whether the last reply that named it showed it live.
    live: bool,
}

impl KnownTopic {
    /// A reply showed `partition` holding records up to `end`.
    fn saw_end(&mut self, partition: u32, end: u64) {
        let p = partition as usize;
        if self.high_watermarks.len() <= p {
            self.high_watermarks.resize(p + 1, self.log_start);
        }
        self.high_watermarks[p] = self.high_watermarks[p].max(end);
    }
}

// The idempotent producers' clients' state (`producers.rs` holds what they do).

/// One batch as sent: what a retry sends again, byte for byte.
#[derive(Clone, Debug)]
struct Sent {
    topic: String,
    partition: u32,
    producer: ProducerBatch,
    records: Vec<ProduceRecord>,
    values: Rc<[ValueId]>,
    /// Sent in sequence by its producer (not hostile): a refusal of it tells the
    /// producer where the broker stands.
    in_sequence: bool,
    /// A retry: its refusal tells the producer nothing new.
    retry: bool,
}

/// One producer: its id, epoch, and the next sequence number of each partition it
/// writes to.
#[derive(Clone, Debug)]
struct Producer {
    id: u64,
    epoch: u16,
    next: BTreeMap<(String, u32), u32>,
}

/// What the producers' clients know and have to send.
#[derive(Debug, Default)]
struct Clients {
    producers: Vec<Producer>,
    /// Batches to send next, before any other command: pipelined batches and
    /// immediate retries.
    queued: VecDeque<Sent>,
    /// Batches sent and not answered yet.
    in_flight: Vec<Sent>,
    /// Batches whose reply a crash or halt cut off: retried after the restart.
    lost: Vec<Sent>,
    /// Batches acknowledged lately.
    acked: VecDeque<Sent>,
    /// Batches sent in sequence lately, whatever became of them.
    recent: VecDeque<Sent>,
    /// Producer draws left that retry first (after a restart).
    retry_burst: u32,
    /// The largest producer id a reply showed.
    largest_id: Option<u64>,
    /// The records of every batch sent, by what names a batch to the broker (topic,
    /// partition, producer id, epoch, first sequence, record count); `None` for a batch
    /// too large to keep. A batch named as one sent before carries its records: the
    /// broker tells batches apart by their names only, and so must a retry.
    contents: BTreeMap<BatchName, Option<Records>>,
}

/// What names a batch to the broker.
type BatchName = (String, u32, u64, u16, u32, usize);

/// A batch's records, and their values' ids.
type Records = (Vec<ProduceRecord>, Rc<[ValueId]>);

/// Generates a seed's commands.
#[derive(Debug)]
pub struct Workload {
    script: Option<std::collections::VecDeque<Vec<Command>>>,
    rng: SimRng,
    params: SwarmParams,
    issued: u32,
    values: u64,
    /// The largest offset a produce reply has shown: offsets of topics created after a
    /// deletion begin past the deleted ones', so fetches aim near it as well as near 0.
    newest_offset: u64,
    /// The ids of the values of the command being built.
    ids: Vec<ValueId>,
    /// The CRC32C of a run of padding, by length (a batch's values share theirs).
    padding_crc: BTreeMap<usize, u32>,
    /// Whether group-offset commands are drawn (one broker: a cluster node keeps none).
    group_offsets: bool,
    /// What the clients know of each name's live incarnation (learned only with
    /// `group_offsets`).
    known: BTreeMap<String, KnownTopic>,
    /// Metadata strings made so far (each begins with a unique label).
    metadata_made: u64,
    /// Whether idempotent producers' commands are drawn (one broker: a cluster node
    /// refuses them).
    idempotent: bool,
    /// The idempotent producers' clients.
    producers: Clients,
    /// The ids of the values of the command being handed out, when it is not a plain
    /// produce whose values were built just now (an idempotent batch, new or retried).
    issue_values: Option<Rc<[ValueId]>>,
}

/// A command the workload hands out, with the ids of the values it produces (none for
/// any other command), taken as the values were built.
#[derive(Debug)]
pub struct Issue {
    /// The command.
    pub command: Command,
    /// The ids of its values, in record order.
    pub values: Rc<[ValueId]>,
}

impl Issue {
    /// `command`, its values checksummed whole.
    pub fn new(command: Command) -> Issue {
        Issue { values: ValueId::of_command(&command), command }
    }
}

impl Workload {
    /// The workload of `seed` under `params`.
    pub fn new(seed: u64, params: &SwarmParams) -> Workload {
        Workload {
            script: None,
            rng: SimRng::fork(seed, "workload"),
            params: params.clone(),
            issued: 0,
            values: 0,
            newest_offset: 0,
            ids: Vec::new(),
            padding_crc: BTreeMap::new(),
            group_offsets: false,
            known: BTreeMap::new(),
            metadata_made: 0,
            idempotent: false,
            producers: Clients::default(),
            issue_values: None,
        }
    }

    /// This workload, drawing the group-offset commands too, at the seed's weight
    /// ([`crate::swarm::CommandMix::groups`]).
    pub fn with_group_offsets(mut self) -> Workload {
        self.group_offsets = true;
        self
    }

    /// This workload, drawing idempotent producers' commands too, at the seed's weight
    /// ([`crate::swarm::CommandMix::producers`]).
    pub fn with_idempotent_producers(mut self) -> Workload {
        self.idempotent = true;
        self
    }

    /// A workload that issues exactly these groups of commands: the commands of a
    /// group back to back, the next group only once the client is idle.
    pub fn scripted(groups: &[Vec<Command>]) -> Workload {
        let commands = groups.iter().map(Vec::len).sum::<usize>() as u32;
        let params = SwarmParams { commands, ..SwarmParams::draw(0) };
        let script = groups.iter().map(|g| g.iter().rev().cloned().collect()).collect();
        Workload {
            script: Some(script),
            rng: SimRng::new(0),
            params,
            issued: 0,
            values: 0,
            newest_offset: 0,
            ids: Vec::new(),
            padding_crc: BTreeMap::new(),
            group_offsets: false,
            known: BTreeMap::new(),
            metadata_made: 0,
            idempotent: false,
            producers: Clients::default(),
            issue_values: None,
        }
    }

    /// Learns from a reply where offsets are (clients read near what they wrote).
    pub fn observe(&mut self, reply: &Result<broker_core::Reply, broker_core::BrokerError>) {
        if let Ok(broker_core::Reply::Produced { positions, .. }) = reply {
            let newest = positions.iter().map(|p| p.offset).max().unwrap_or(0);
            self.newest_offset = self.newest_offset.max(newest);
        }
    }

    /// Learns from a reply to `command` as [`Workload::observe`] does and, when it draws
    /// group commits, which incarnation of a name is live, with which log start and
    /// high watermarks: where a consumer's commits aim.
    pub fn observe_answer(
        &mut self,
        command: Option<&Command>,
        reply: &Result<broker_core::Reply, broker_core::BrokerError>,
    ) {
        use broker_core::{BrokerError, Reply};
        self.observe(reply);
        if self.idempotent {
            self.producer_answered(command, reply);
        }
        if !self.group_offsets && !self.idempotent {
            return;
        }
        match (reply, command) {
            (Err(BrokerError::TopicNotFound { name }), _) => {
                if let Some(k) = self.known.get_mut(name) {
                    k.live = false;
                }
            }
            (Ok(Reply::DeleteAccepted { topic }), Some(Command::DeleteTopic { name })) => {
                if let Some(k) = self.known.get_mut(name).filter(|k| k.id <= *topic) {
                    k.live = false;
                }
            }
            (Ok(Reply::OffsetsCommitted { topic }), Some(Command::CommitOffsets { topic: name, .. })) => {
                self.incarnation(name, *topic);
            }
            (Ok(Reply::Created { topic }), Some(Command::CreateTopic { name, partitions, .. })) => {
                // It begins past its name's older incarnations, as far as the clients saw.
                if let Some(k) = self.incarnation(name, *topic).filter(|k| k.high_watermarks.is_empty()) {
                    k.high_watermarks = vec![k.log_start; *partitions as usize];
                }
            }
            (Ok(Reply::Produced { topic, positions }), Some(Command::Produce { topic: name, .. }))
            | (Ok(Reply::Produced { topic, positions }), Some(Command::ProduceIdempotent { topic: name, .. })) => {
                if let Some(k) = self.incarnation(name, *topic) {
                    for p in positions {
                        k.saw_end(p.partition, p.offset + 1);
                    }
                }
            }
            (Ok(Reply::Fetched { topic, high_watermark, .. }), Some(Command::Fetch { topic: name, partition, .. })) => {
                if let Some(k) = self.incarnation(name, *topic) {
                    k.saw_end(*partition, *high_watermark);
                }
            }
            (Ok(Reply::Offsets { topic, .. }), Some(Command::FetchOffsets { topic: name, .. })) => {
                self.incarnation(name, *topic);
            }
            (Ok(Reply::Topics(list)), _) => {
                for k in self.known.values_mut() {
                    k.live = false;
                }
                for d in list {
                    self.learn(d);
                }
            }
            (Ok(Reply::Described(d)), _) => self.learn(d),
            _ => {}
        }
    }

    /// What the clients know of `name` once a reply showed its incarnation `id` live;
    /// `None` if they know a newer one (the reply is old news).
    fn incarnation(&mut self, name: &str, id: TopicId) -> Option<&mut KnownTopic> {
        let known = self.known.entry(name.to_string()).or_insert_with(|| KnownTopic {
            id,
            older: Vec::new(),
            log_start: 0,
            high_watermarks: Vec::new(),
            live: true,
        });
        if id < known.id {
            return None;
        }
        if id > known.id {
            known.older.push(known.id);
            if known.older.len() > 4 {
                known.older.remove(0);
            }
            let floor = known.high_watermarks.iter().copied().max().unwrap_or(0).max(known.log_start);
            let older = std::mem::take(&mut known.older);
            *known = KnownTopic { id, older, log_start: floor, high_watermarks: Vec::new(), live: true };
        }
        known.live = true;
        Some(known)
    }

    /// Learns a live incarnation from a list or describe.
    fn learn(&mut self, d: &TopicDescription) {
        if let Some(known) = self.incarnation(&d.name, d.id) {
            known.log_start = d.log_start;
            for (p, hw) in d.high_watermarks.iter().enumerate() {
                known.saw_end(p as u32, *hw);
            }
            known.high_watermarks.truncate(d.high_watermarks.len());
        }
    }

    /// Whether every command of the run has been handed out.
    pub fn exhausted(&self) -> bool {
        self.issued >= self.params.commands
    }

    /// A record with a unique value (the model tells records apart by value), padded by
    /// `pad` bytes.
    fn record(&mut self, pad: u64) -> ProduceRecord {
        self.values += 1;
        let key = self.rng.chance(self.params.keyed).then(|| format!("k{}", self.rng.below(16)).into_bytes());
        let pad = pad as usize;
        let mut value = Vec::with_capacity(LABEL_MAX + pad);
        let _ = write!(value, "v{}-", self.values);
        let label_len = value.len();
        self.params.padding.fill(&mut value, pad);
        // Its checksum from its parts' when it is long: the label's, and the padding's,
        // which the batch's other values share.
        let crc = if value.len() < value_crc::DIRECT_BELOW {
            crc32c::crc32c(&value)
        } else {
            let padding = *self.padding_crc.entry(pad).or_insert_with(|| crc32c::crc32c(&value[label_len..]));
            value_crc::append_known(crc32c::crc32c(&value[..label_len]), padding, pad)
        };
        if self.padding_crc.len() > 1024 {
            self.padding_crc.clear();
        }
        self.ids.push(ValueId::with_crc(&value, crc));
        ProduceRecord { key, value: value.into() }
    }

    /// A produce sized against the broker's limits: from half the batch limit to 30% past
    /// it, in records from a few bytes to 10% past the record limit (at most one record
    /// more than a produce may carry).
    fn big_batch(&mut self) -> Vec<ProduceRecord> {
        let limit = self.params.batch_limit;
        let target = limit / 2 + self.rng.below(limit * 8 / 10 + 1);
        let largest = (self.params.record_limit as u64 * 11 / 10).min(target).max(1);
        let smallest = (target / MAX_BATCH_RECORDS).clamp(1, largest);
        let size = self.rng.between(smallest, largest);
        let count = (target / (size + 10)).clamp(1, MAX_BATCH_RECORDS + 1);
        (0..count).map(|_| self.record(size.saturating_sub(8))).collect()
    }

    fn name(&mut self) -> String {
        format!("t{}", self.rng.below(u64::from(self.params.names)))
    }

    /// The next command, or `None` once the workload is exhausted (or, for a script,
    /// while the client is busy with the previous group).
    pub fn next_command(&mut self, client_idle: bool) -> Option<Issue> {
        self.ids.clear();
        self.issue_values = None;
        let command = self.draw_command(client_idle)?;
        if let Some(values) = self.issue_values.take() {
            return Some(Issue { command, values });
        }
        let values = match &command {
            Command::Produce { records, .. } if self.ids.len() == records.len() => {
                Rc::from(std::mem::take(&mut self.ids))
            }
            _ => return Some(Issue::new(command)),
        };
        Some(Issue { command, values })
    }

    fn draw_command(&mut self, client_idle: bool) -> Option<Command> {
        if self.exhausted() {
            return None;
        }
        if let Some(script) = self.script.as_mut() {
            if script.front().is_some_and(Vec::is_empty) && client_idle {
                script.pop_front();
            }
            let cmd = script.front_mut()?.pop()?;
            self.issued += 1;
            return Some(cmd);
        }
        self.issued += 1;
        if let Some(command) = self.next_queued() {
            return Some(command);
        }
        let m = &self.params.mix;
        let groups = if self.group_offsets { m.groups } else { 0 };
        let producers = if self.idempotent { m.producers } else { 0 };
        let weights = [m.create, m.delete, m.produce, m.fetch, m.list, m.describe, groups, producers];
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        let mut pick = self.rng.below(total.max(1));
        let mut which = 0;
        for (i, w) in weights.iter().enumerate() {
            if pick < u64::from(*w) {
                which = i;
                break;
            }
            pick -= u64::from(*w);
        }
        Some(match which {
            0 => {
                let grace = *self.rng.pick(&self.params.grace_choices).unwrap_or(&0);
                Command::CreateTopic {
                    name: self.name(),
                    partitions: self.rng.between(1, u64::from(self.params.max_partitions)) as u32,
                    settings: TopicSettings { deletion_grace_ms: grace },
                }
            }
            1 => Command::DeleteTopic { name: self.name() },
            2 => {
                let topic = self.name();
                let records = if self.rng.chance(self.params.big_batch) {
                    self.big_batch()
                } else {
                    let n = self.rng.between(1, u64::from(self.params.max_batch));
                    (0..n)
                        .map(|_| {
                            let pad = self.rng.below(self.params.value_pad + 1);
                            self.record(pad)
                        })
                        .collect()
                };
                // As a Kafka client does, a produce may name its partition, at times one
                // past the topic's last.
                let named = self.rng.chance(NAMED_PARTITION);
                let partition = named.then(|| self.rng.below(u64::from(self.params.max_partitions) + 1) as u32);
                Command::Produce { topic, partition, records }
            }
            3 => Command::Fetch {
                topic: self.name(),
                partition: self.rng.below(u64::from(self.params.max_partitions)) as u32,
                // Near the first offsets, or near the newest ones written.
                offset: match self.rng.chance(0.5) {
                    true => self.rng.below(8),
                    false => self.newest_offset.saturating_sub(self.rng.below(16)),
                },
                max_records: self.rng.between(1, 8) as u32,
                // Mostly the broker's own bound; sometimes a reader's, from none to past it.
                max_bytes: match self.rng.below(4) {
                    0 => Some(self.rng.below(200)),
                    1 => Some(u64::MAX),
                    _ => None,
                },
            },
            4 => Command::ListTopics,
            5 => Command::DescribeTopic { name: self.name() },
            6 => self.group_command(),
            _ => self.producer_command(),
        })
    }

    /// A commit (half the time), a read, a list or a deletion of group offsets.
    fn group_command(&mut self) -> Command {
        match self.rng.below(20) {
            0..=9 => self.commit(),
            10..=15 => Command::FetchOffsets { group: self.group(), topic: self.consumed_topic() },
            16..=17 => Command::ListGroups,
            _ => Command::DeleteGroup { group: self.group() },
        }
    }

    /// The topic a consumer commits to or reads its positions in: mostly one the clients
    /// last saw live, else any name.
    fn consumed_topic(&mut self) -> String {
        let live: Vec<&String> = self.known.iter().filter(|(_, k)| k.live).map(|(name, _)| name).collect();
        match self.rng.chance(0.8) {
            true if !live.is_empty() => live[self.rng.below(live.len() as u64) as usize].clone(),
            _ => self.name(),
        }
    }

    /// One of a few groups; now and then an empty id, or one at or a byte past the
    /// longest a group may have.
    fn group(&mut self) -> String {
        match self.rng.below(50) {
            0 => String::new(),
            1 => "g".repeat(MAX_GROUP_BYTES + 1),
            2 => "g".repeat(MAX_GROUP_BYTES),
            n => GROUPS[n as usize % GROUPS.len()].to_string(),
        }
    }

    /// A commit as a consumer sends one, and as a confused or stale one may: positions
    /// below the log start, at it, inside, at and past the high watermark the clients
    /// last saw; the live incarnation named, or an older or unknown one; metadata up
    /// to and past the limit; now and then no partition, a partition the topic lacks,
    /// or one named twice.
    fn commit(&mut self) -> Command {
        let group = self.group();
        let topic = self.consumed_topic();
        let known = self.known.get(&topic).cloned();
        let incarnation = match self.rng.below(20) {
            0..=2 => known.as_ref().map(|k| k.id),
            3 => match known.as_ref().map(|k| k.older.as_slice()).filter(|o| !o.is_empty()) {
                Some(older) => self.rng.pick(older).copied(),
                None => Some(TopicId(self.rng.below(16))),
            },
            4 => Some(TopicId(self.rng.between(1 << 20, 1 << 40))),
            _ => None,
        };
        let partitions = known
            .as_ref()
            .map(|k| k.high_watermarks.len() as u64)
            .filter(|n| *n > 0)
            .unwrap_or(u64::from(self.params.max_partitions));
        let count = if self.rng.chance(0.04) { 0 } else { self.rng.between(1, partitions) };
        let first = self.rng.below(partitions);
        let mut chosen: Vec<u32> = (0..count).map(|i| ((first + i) % partitions) as u32).collect();
        if !chosen.is_empty() && self.rng.chance(0.05) {
            let i = self.rng.below(chosen.len() as u64) as usize;
            chosen[i] = partitions as u32;
        }
        if !chosen.is_empty() && self.rng.chance(0.06) {
            let again = chosen[self.rng.below(chosen.len() as u64) as usize];
            chosen.push(again);
        }
        let offsets = chosen
            .into_iter()
            .map(|partition| {
                let (log_start, hw) = match &known {
                    Some(k) => (k.log_start, k.high_watermarks.get(partition as usize).copied().unwrap_or(k.log_start)),
                    None => (0, self.newest_offset.min(8)),
                };
                let offset = self.commit_offset(log_start, hw);
                CommittedOffset { partition, offset, metadata: self.metadata() }
            })
            .collect();
        Command::CommitOffsets { group, topic, incarnation, offsets }
    }

    /// A position around the partition's log start and high watermark as last seen.
    fn commit_offset(&mut self, log_start: u64, hw: u64) -> u64 {
        let hw = hw.max(log_start);
        match self.rng.below(20) {
            0 => log_start.saturating_sub(self.rng.between(1, 3)),
            1..=2 => log_start,
            3..=11 => self.rng.between(log_start, hw),
            12..=15 => hw,
            16 => hw + 1,
            17 => hw + self.rng.between(2, 1_000),
            _ => self.rng.below(self.newest_offset + 16),
        }
    }

    /// Metadata: none half the time, else a unique label padded to a length from a few
    /// bytes to past the broker's limit.
    fn metadata(&mut self) -> String {
        let max = broker_core::Config::default().max_offset_metadata_bytes as u64;
        if self.rng.chance(0.5) {
            return String::new();
        }
        self.metadata_made += 1;
        let mut m = format!("m{}-", self.metadata_made);
        let label = m.len() as u64;
        let len = match self.rng.below(20) {
            0..=14 => label + self.rng.below(16),
            15..=16 => self.rng.between(label, max),
            17 => max,
            18 => max + 1,
            _ => self.rng.between(max + 2, 3 * max),
        };
        m.extend(std::iter::repeat_n('.', len.saturating_sub(label) as usize));
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::{batch_bytes, MAX_LOG_FRAME};

    /// Produces range from a few bytes to past every limit: the batch limit of each
    /// seed, the record limit, and one whole log frame.
    #[test]
    fn batch_sizes_reach_past_every_limit() {
        let (mut tiny, mut multi_sector, mut over_batch, mut over_record, mut over_frame) = (0, 0, 0, 0, 0);
        for seed in 0..400 {
            let params = SwarmParams::draw(seed);
            let mut w = Workload::new(seed, &params);
            while let Some(issue) = w.next_command(true) {
                if let Command::Produce { records, .. } = &issue.command {
                    assert_eq!(issue.values[..], ValueId::of_command(&issue.command)[..], "seed {seed}");
                    let records = records.clone();
                    let bytes = batch_bytes(&records);
                    tiny += u32::from(bytes < 64);
                    multi_sector += u32::from(bytes > 1024);
                    over_batch += u32::from(bytes > params.batch_limit);
                    over_frame += u32::from(bytes > MAX_LOG_FRAME as u64);
                    let largest = records.iter().map(|r| r.value.len() + r.key.as_ref().map_or(0, Vec::len)).max();
                    over_record += u32::from(largest.unwrap_or(0) > params.record_limit);
                }
            }
        }
        for (what, n) in [("tiny", tiny), ("multi-sector", multi_sector), ("over the batch limit", over_batch)] {
            assert!(n > 0, "no {what} batch");
        }
        assert!(
            over_record > 0 && over_frame > 0,
            "records over their limit: {over_record}, over a frame: {over_frame}"
        );
    }
}
