//! The seeded client workload: creates, deletes and re-creates of a few names (so
//! incarnations collide), keyed and keyless produces, fetches, lists and describes.

use crate::rng::SimRng;
use crate::swarm::SwarmParams;
use broker_core::{Command, ProduceRecord, TopicSettings};

/// Generates a seed's commands.
#[derive(Debug)]
pub struct Workload {
    script: Option<std::collections::VecDeque<Vec<Command>>>,
    rng: SimRng,
    params: SwarmParams,
    issued: u32,
    values: u64,
}

impl Workload {
    /// The workload of `seed` under `params`.
    pub fn new(seed: u64, params: &SwarmParams) -> Workload {
        Workload { script: None, rng: SimRng::fork(seed, "workload"), params: params.clone(), issued: 0, values: 0 }
    }

    /// A workload that issues exactly these groups of commands: the commands of a
    /// group back to back, the next group only once the client is idle.
    pub fn scripted(groups: &[Vec<Command>]) -> Workload {
        let commands = groups.iter().map(Vec::len).sum::<usize>() as u32;
        let params = SwarmParams { commands, ..SwarmParams::draw(0) };
        let script = groups.iter().map(|g| g.iter().rev().cloned().collect()).collect();
        Workload { script: Some(script), rng: SimRng::new(0), params, issued: 0, values: 0 }
    }

    /// Whether every command of the run has been handed out.
    pub fn exhausted(&self) -> bool {
        self.issued >= self.params.commands
    }

    fn name(&mut self) -> String {
        format!("t{}", self.rng.below(u64::from(self.params.names)))
    }

    /// The next command, or `None` once the workload is exhausted (or, for a script,
    /// while the client is busy with the previous group).
    pub fn next_command(&mut self, client_idle: bool) -> Option<Command> {
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
                let n = self.rng.between(1, u64::from(self.params.max_batch));
                let records = (0..n)
                    .map(|_| {
                        self.values += 1;
                        let key =
                            self.rng.chance(self.params.keyed).then(|| format!("k{}", self.rng.below(16)).into_bytes());
                        // Unique values, padded so logs span several sectors, yet small
                        // enough that a batch (at most 6 records) stays under one 512-byte
                        // sector: then every whole sector holds the start of a frame, and
                        // bit rot, which the disk injects only in a sector with a whole
                        // durable sector after it, is always followed by a valid frame that
                        // reveals it. Rot in a log's last frame looks exactly like a torn
                        // write on one node and would be cut off unseen (see the README).
                        let mut value = format!("v{}-", self.values).into_bytes();
                        value.resize(value.len() + self.rng.below(48) as usize, b'.');
                        ProduceRecord { key, value }
                    })
                    .collect();
                Command::Produce { topic, records }
            }
            3 => Command::Fetch {
                topic: self.name(),
                partition: self.rng.below(u64::from(self.params.max_partitions)) as u32,
                offset: self.rng.below(8),
                max_records: self.rng.between(1, 8) as u32,
            },
            4 => Command::ListTopics,
            _ => Command::DescribeTopic { name: self.name() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::logcodec::encode_records;
    use broker_core::{AppendRecord, LogId, TopicId};

    /// Every batch the workload can produce frames into less than one 512-byte sector.
    #[test]
    fn batches_fit_in_one_sector() {
        for seed in 0..200 {
            let params = SwarmParams::draw(seed);
            let mut w = Workload::new(seed, &params);
            while let Some(cmd) = w.next_command(true) {
                if let Command::Produce { records, .. } = cmd {
                    let batch: Vec<AppendRecord> = records
                        .into_iter()
                        .enumerate()
                        .map(|(i, record)| AppendRecord { offset: i as u64, record })
                        .collect();
                    let log = LogId { topic: TopicId(1), partition: 0 };
                    assert!(encode_records(log, &batch).len() < 512, "seed {seed}");
                }
            }
        }
    }
}
