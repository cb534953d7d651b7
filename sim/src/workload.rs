//! The seeded client workload: creates, deletes and re-creates of a few names (so
//! incarnations collide), keyed and keyless produces (some to a named partition), fetches, lists and describes.

use crate::model::{ValueId, LABEL_MAX};
use crate::rng::SimRng;
use crate::swarm::SwarmParams;
use crate::value_crc;
use broker_core::{Command, ProduceRecord, TopicSettings};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::rc::Rc;

/// The most records one produce may carry (`Config::max_batch_records`, unchanged).
const MAX_BATCH_RECORDS: u64 = 10_000;

/// How often a produce names its partition instead of letting keys choose.
const NAMED_PARTITION: f64 = 0.15;

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
        }
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
        }
    }

    /// Learns from a reply where offsets are (clients read near what they wrote).
    pub fn observe(&mut self, reply: &Result<broker_core::Reply, broker_core::BrokerError>) {
        if let Ok(broker_core::Reply::Produced { positions, .. }) = reply {
            let newest = positions.iter().map(|p| p.offset).max().unwrap_or(0);
            self.newest_offset = self.newest_offset.max(newest);
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
        let command = self.draw_command(client_idle)?;
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
        let m = &self.params.mix;
        let weights = [m.create, m.delete, m.produce, m.fetch, m.list, m.describe];
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
            _ => Command::DescribeTopic { name: self.name() },
        })
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
