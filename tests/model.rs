//! Model-based test: a reference model of topics, offsets and deletions against the
//! broker (`SyncDriver` over `MemFs`), driven by generated command sequences with
//! crashes, recoveries and settles interleaved. Every reply must equal the model's, and
//! after every step the broker's live topics, pending deletions and the logs on disk
//! must match the model. A failure shrinks to a minimal sequence; proptest records it in
//! `tests/model.proptest-regressions` (commit that file so the case is replayed first).
//!
//! With `--features planted-bugs`, `model_catches_planted_bugs` runs the same model
//! against a broker with a bug switched on, and asserts that the model fails and that
//! the failure shrinks to a short sequence.

use broker_core::{
    partition_for_key, BrokerError, Command, Config, LogId, MemFs, Phase, ProduceRecord, RecordPosition, Reply,
    StoredRecord, SyncDriver, TopicDescription, TopicId, TopicSettings,
};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// `x.y` and `x_y` collide: never both live.
const NAMES: [&str; 5] = ["a", "b", "c", "x.y", "x_y"];
const KEYS: [&str; 3] = ["k1", "k2", "k3"];
/// Timers a settle may fire; far more than any generated sequence arms.
const SETTLE_TIMERS: usize = 10_000;

thread_local! {
    /// The broker configuration of the running test (a planted bug switches one on).
    static CONFIG: RefCell<Config> = RefCell::new(model_config());
}

/// Small limits, and compaction after a handful of records so snapshots are exercised.
fn model_config() -> Config {
    Config {
        max_partitions: 3,
        max_fetch_records: 4,
        compaction_min_records: 4,
        compaction_ratio: 2,
        removal_concurrency: 2,
        ..Config::default()
    }
}

fn config() -> Config {
    CONFIG.with(|c| c.borrow().clone())
}

/// One step of a test sequence.
#[derive(Clone, Debug)]
pub enum Transition {
    Create {
        name: &'static str,
        partitions: u32,
        grace_ms: u64,
    },
    Delete {
        name: &'static str,
    },
    Produce {
        name: &'static str,
        records: Vec<(Option<&'static str>, String)>,
    },
    Fetch {
        name: &'static str,
        partition: u32,
        offset: u64,
        max_records: u32,
    },
    List,
    Describe {
        name: &'static str,
    },
    /// Drop the broker (keeping the disk) and start a new one, which recovers.
    CrashRestart,
    /// Fire every timer: pending deletions finish.
    Settle,
}

#[derive(Clone, Debug)]
pub struct ModelTopic {
    id: u64,
    partitions: u32,
    grace_ms: u64,
    /// The first offset of every partition.
    base: u64,
    /// Acknowledged records per partition; offsets are `base` plus indexes.
    logs: Vec<Vec<StoredRecord>>,
    /// Round-robin cursor of keyless records (a new broker starts it at 0).
    cursor: u32,
}

/// The reference model.
#[derive(Clone, Debug, Default)]
pub struct Model {
    next_id: u64,
    live: BTreeMap<&'static str, ModelTopic>,
    /// Acknowledged deletions whose logs still exist (waiting out a grace delay): id → (name, partitions).
    pending: BTreeMap<u64, (&'static str, u32)>,
    /// Past every offset a deleted topic acknowledged: where the next topic begins.
    floor: u64,
}

impl Model {
    fn describe(&self, name: &str, t: &ModelTopic) -> TopicDescription {
        TopicDescription {
            name: name.to_string(),
            id: TopicId(t.id),
            partitions: t.partitions,
            settings: TopicSettings { deletion_grace_ms: t.grace_ms },
            high_watermarks: t.logs.iter().map(|l| t.base + l.len() as u64).collect(),
            log_start: t.base,
        }
    }

    fn list(&self) -> Vec<TopicDescription> {
        self.live.iter().map(|(name, t)| self.describe(name, t)).collect()
    }

    /// The newest incarnation of `name` still being removed.
    fn pending_named(&self, name: &str) -> Option<u64> {
        self.pending.iter().rev().find(|(_, (n, _))| *n == name).map(|(id, _)| *id)
    }

    /// Where each record goes, and the cursor after them (without changing the model).
    fn place(t: &ModelTopic, records: &[(Option<&'static str>, String)]) -> (Vec<u32>, u32) {
        let mut cursor = t.cursor;
        let parts = records
            .iter()
            .map(|(key, _)| match key {
                Some(k) => partition_for_key(k.as_bytes(), t.partitions),
                None => {
                    let p = cursor % t.partitions;
                    cursor = cursor.wrapping_add(1);
                    p
                }
            })
            .collect();
        (parts, cursor)
    }

    /// The reply the broker must give to `transition` in this (pre-transition) state.
    fn expected(&self, transition: &Transition) -> Option<Result<Reply, BrokerError>> {
        let not_found = |name: &str| Err(BrokerError::TopicNotFound { name: name.to_string() });
        Some(match transition {
            Transition::Create { name, .. } => {
                let unified = |n: &str| n.replace('.', "_");
                let collides = self.live.keys().find(|l| *l != name && unified(l) == unified(name));
                match (self.live.contains_key(name), collides) {
                    (true, _) => Err(BrokerError::TopicAlreadyExists { name: name.to_string() }),
                    (false, Some(other)) => Err(BrokerError::InvalidTopicName {
                        name: name.to_string(),
                        reason: format!(
                            "collides with the topic {other:?}: names that differ only in `.` and `_` collide \
                             (as in Kafka)"
                        ),
                    }),
                    (false, None) => Ok(Reply::Created { topic: TopicId(self.next_id) }),
                }
            }
            Transition::Delete { name } => match (self.live.get(name), self.pending_named(name)) {
                (Some(t), _) => Ok(Reply::DeleteAccepted { topic: TopicId(t.id) }),
                (None, Some(id)) => Ok(Reply::DeleteAccepted { topic: TopicId(id) }),
                (None, None) => not_found(name),
            },
            Transition::Produce { name, records } => match self.live.get(name) {
                None => not_found(name),
                Some(t) => {
                    let (parts, _) = Model::place(t, records);
                    let mut next: Vec<u64> = t.logs.iter().map(|l| t.base + l.len() as u64).collect();
                    let positions = parts
                        .into_iter()
                        .map(|p| {
                            let offset = next[p as usize];
                            next[p as usize] += 1;
                            RecordPosition { partition: p, offset }
                        })
                        .collect();
                    Ok(Reply::Produced { topic: TopicId(t.id), positions })
                }
            },
            Transition::Fetch { name, partition, offset, max_records } => match self.live.get(name) {
                None => not_found(name),
                Some(t) if *partition >= t.partitions => Err(BrokerError::PartitionNotFound {
                    name: name.to_string(),
                    partition: *partition,
                    partitions: t.partitions,
                }),
                Some(t) => {
                    let log = &t.logs[*partition as usize];
                    let hw = t.base + log.len() as u64;
                    if *offset < t.base {
                        Err(BrokerError::OffsetBeforeStart { offset: *offset, log_start: t.base })
                    } else if *offset > hw {
                        Err(BrokerError::OffsetOutOfRange { offset: *offset, high_watermark: hw })
                    } else {
                        let end = (*offset + u64::from(*max_records)).min(hw);
                        let records = log[(*offset - t.base) as usize..(end - t.base) as usize].to_vec();
                        Ok(Reply::Fetched { topic: TopicId(t.id), records, high_watermark: hw })
                    }
                }
            },
            Transition::List => Ok(Reply::Topics(self.list())),
            Transition::Describe { name } => match self.live.get(name) {
                None => not_found(name),
                Some(t) => Ok(Reply::Described(self.describe(name, t))),
            },
            Transition::CrashRestart | Transition::Settle => return None,
        })
    }

    /// The logs that must exist: every partition of live topics and of pending deletions.
    fn logs(&self) -> Vec<LogId> {
        let live = self.live.values().map(|t| (t.id, t.partitions));
        let pending = self.pending.iter().map(|(id, (_, n))| (*id, *n));
        let mut logs: Vec<LogId> = live
            .chain(pending)
            .flat_map(|(id, n)| (0..n).map(move |p| LogId { topic: TopicId(id), partition: p }))
            .collect();
        logs.sort();
        logs
    }
}

fn name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&NAMES[..])
}

fn record() -> impl Strategy<Value = (Option<&'static str>, String)> {
    (prop::option::of(prop::sample::select(&KEYS[..])), "[a-z]{0,3}")
}

impl ReferenceStateMachine for Model {
    type State = Model;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Transition> {
        // Fetches mostly near a live topic's first offset, sometimes at small offsets
        // (below the first offset of a topic created after a deletion).
        let bases: BTreeMap<&'static str, u64> = state.live.iter().map(|(n, t)| (*n, t.base)).collect();
        prop_oneof![
            3 => (name(), 1..=3u32, prop_oneof![Just(0u64), Just(5u64)])
                .prop_map(|(name, partitions, grace_ms)| Transition::Create { name, partitions, grace_ms }),
            2 => name().prop_map(|name| Transition::Delete { name }),
            4 => (name(), prop::collection::vec(record(), 1..=3))
                .prop_map(|(name, records)| Transition::Produce { name, records }),
            2 => (name(), 0..3u32, 0..4u64, 1..=4u32, prop::bool::weighted(0.2)).prop_map(
                move |(name, partition, rel, max_records, absolute)| {
                    let offset = if absolute { rel } else { bases.get(name).copied().unwrap_or(0) + rel };
                    Transition::Fetch { name, partition, offset, max_records }
                }
            ),
            1 => Just(Transition::List),
            1 => name().prop_map(|name| Transition::Describe { name }),
            2 => Just(Transition::CrashRestart),
            1 => Just(Transition::Settle),
        ]
        .boxed()
    }

    fn apply(mut m: Model, transition: &Transition) -> Model {
        match transition {
            Transition::Create { name, partitions, grace_ms } => {
                if matches!(m.expected(transition), Some(Ok(_))) {
                    let t = ModelTopic {
                        id: m.next_id,
                        partitions: *partitions,
                        grace_ms: *grace_ms,
                        base: m.floor,
                        logs: vec![Vec::new(); *partitions as usize],
                        cursor: 0,
                    };
                    m.live.insert(name, t);
                    m.next_id += 1;
                }
            }
            Transition::Delete { name } => {
                if let Some(t) = m.live.remove(name) {
                    let end = t.logs.iter().map(|l| t.base + l.len() as u64).max().unwrap_or(t.base);
                    m.floor = m.floor.max(end);
                    // Without a grace delay the logs go at once; with one, at the next settle.
                    if t.grace_ms > 0 {
                        m.pending.insert(t.id, (name, t.partitions));
                    }
                }
            }
            Transition::Produce { name, records } => {
                if let Some(t) = m.live.get_mut(name) {
                    let (parts, cursor) = Model::place(t, records);
                    t.cursor = cursor;
                    for (p, (key, value)) in parts.into_iter().zip(records) {
                        let log = &mut t.logs[p as usize];
                        log.push(StoredRecord {
                            offset: t.base + log.len() as u64,
                            key: key.map(|k| k.as_bytes().to_vec()),
                            value: value.as_bytes().to_vec().into(),
                        });
                    }
                }
            }
            Transition::CrashRestart => {
                for t in m.live.values_mut() {
                    t.cursor = 0;
                }
            }
            Transition::Settle => m.pending.clear(),
            Transition::Fetch { .. } | Transition::List | Transition::Describe { .. } => {}
        }
        m
    }
}

fn command(transition: &Transition) -> Option<Command> {
    Some(match transition {
        Transition::Create { name, partitions, grace_ms } => Command::CreateTopic {
            name: name.to_string(),
            partitions: *partitions,
            settings: TopicSettings { deletion_grace_ms: *grace_ms },
        },
        Transition::Delete { name } => Command::DeleteTopic { name: name.to_string() },
        Transition::Produce { name, records } => Command::Produce {
            topic: name.to_string(),
            partition: None,
            records: records
                .iter()
                .map(|(k, v)| ProduceRecord {
                    key: k.map(|k| k.as_bytes().to_vec()),
                    value: v.as_bytes().to_vec().into(),
                })
                .collect(),
        },
        Transition::Fetch { name, partition, offset, max_records } => Command::Fetch {
            topic: name.to_string(),
            partition: *partition,
            offset: *offset,
            max_records: *max_records,
            max_bytes: None,
        },
        Transition::List => Command::ListTopics,
        Transition::Describe { name } => Command::DescribeTopic { name: name.to_string() },
        Transition::CrashRestart | Transition::Settle => return None,
    })
}

/// The broker under test, with the model state before the transition being applied
/// (the expected reply is computed from it).
pub struct BrokerUnderTest {
    driver: SyncDriver<MemFs>,
    before: Model,
}

impl StateMachineTest for BrokerUnderTest {
    type SystemUnderTest = BrokerUnderTest;
    type Reference = Model;

    fn init_test(model: &Model) -> BrokerUnderTest {
        BrokerUnderTest { driver: SyncDriver::start(config(), MemFs::new()), before: model.clone() }
    }

    fn apply(mut sut: BrokerUnderTest, after: &Model, transition: Transition) -> BrokerUnderTest {
        let expected = sut.before.expected(&transition);
        match (command(&transition), expected) {
            (Some(cmd), Some(expected)) => {
                let got = sut.driver.request(cmd);
                assert_eq!(got, expected, "reply to {transition:?}");
            }
            _ => match transition {
                Transition::CrashRestart => {
                    let now = sut.driver.now();
                    let disk = sut.driver.crash();
                    sut.driver = SyncDriver::start_at(config(), disk, now);
                }
                Transition::Settle => sut.driver.settle(SETTLE_TIMERS),
                _ => unreachable!("every other transition is a command"),
            },
        }
        sut.before = after.clone();
        sut
    }

    fn check_invariants(sut: &BrokerUnderTest, model: &Model) {
        let d = &sut.driver;
        assert_eq!(d.halted(), None, "the broker halted");
        assert_eq!(d.phase(), Phase::Serving);
        assert_eq!(d.broker().live_topics(), model.list(), "live topics");
        let pending: Vec<u64> = d.broker().pending_deletions().iter().map(|p| p.topic.0).collect();
        assert_eq!(pending, model.pending.keys().copied().collect::<Vec<_>>(), "pending deletions");
        let on_disk: Vec<LogId> = d.fs().names().iter().filter_map(|n| LogId::parse_file_name(n)).collect();
        assert_eq!(on_disk, model.logs(), "logs on disk");
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 2048,
        max_shrink_iters: 4096,
        // Keeps the default failure persistence: tests/model.proptest-regressions.
        ..ProptestConfig::default()
    })]

    #[test]
    fn broker_agrees_with_the_model(sequential 1..40 => BrokerUnderTest);
}

#[cfg(feature = "planted-bugs")]
mod planted {
    use super::*;
    use broker_core::planted::{Bug, PlantedBugs};
    use proptest::test_runner::{RngAlgorithm, TestError, TestRng, TestRunner};

    /// Runs the model against a broker with `bug` on; returns the shrunk failing sequence.
    fn shrunk_failure(bug: Bug) -> Vec<Transition> {
        CONFIG.with(|c| c.borrow_mut().bugs = PlantedBugs::only(bug));
        let config = ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() };
        let mut runner = TestRunner::new_with_rng(config.clone(), TestRng::deterministic_rng(RngAlgorithm::ChaCha));
        let result = runner.run(&Model::sequential_strategy(1..40), |(init, transitions, seen)| {
            BrokerUnderTest::test_sequential(config.clone(), init, transitions, seen);
            Ok(())
        });
        CONFIG.with(|c| *c.borrow_mut() = model_config());
        match result {
            Err(TestError::Fail(reason, (_, transitions, _))) => {
                eprintln!("planted bug {bug}: {reason}\nshrunk to {} transitions:", transitions.len());
                for (i, t) in transitions.iter().enumerate() {
                    eprintln!("  {}. {t:?}", i + 1);
                }
                transitions
            }
            other => panic!("the model did not catch planted bug {bug}: {other:?}"),
        }
    }

    #[test]
    fn model_catches_planted_bugs() {
        for bug in [Bug::ReloadClearsDeleting, Bug::SkipResumeDeletions, Bug::KeyStorageByName] {
            let shrunk = shrunk_failure(bug);
            assert!(shrunk.len() <= 6, "{bug} shrank only to {} transitions: {shrunk:#?}", shrunk.len());
        }
    }
}
