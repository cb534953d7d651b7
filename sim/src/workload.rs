//! The seeded client workload: creates, deletes and re-creates of a few names (so
//! incarnations collide), keyed and keyless produces, fetches, lists and describes.

use crate::rng::SimRng;
use crate::swarm::SwarmParams;
use broker_core::{Command, ProduceRecord, TopicSettings};

/// Generates a seed's commands.
#[derive(Debug)]
pub struct Workload {
    script: Option<std::collections::VecDeque<Command>>,
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

    /// A workload that issues exactly `commands`, in order.
    pub fn scripted(commands: &[Command]) -> Workload {
        let params = SwarmParams { commands: commands.len() as u32, ..SwarmParams::draw(0) };
        Workload { script: Some(commands.iter().cloned().collect()), rng: SimRng::new(0), params, issued: 0, values: 0 }
    }

    /// Whether every command of the run has been handed out.
    pub fn exhausted(&self) -> bool {
        self.issued >= self.params.commands
    }

    fn name(&mut self) -> String {
        format!("t{}", self.rng.below(u64::from(self.params.names)))
    }

    /// The next command, or `None` once the workload is exhausted.
    pub fn next_command(&mut self) -> Option<Command> {
        if self.exhausted() {
            return None;
        }
        self.issued += 1;
        if let Some(script) = self.script.as_mut() {
            return script.pop_front();
        }
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
                        ProduceRecord { key, value: format!("v{}", self.values).into_bytes() }
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
