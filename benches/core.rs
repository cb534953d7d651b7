//! Core throughput: commands per second through the pure core, against the floor a pure
//! state machine can approach (the same operations on a plain `BTreeMap` of `Vec`s), in
//! one run, with allocations counted per command.
//!
//! Three runners get the same pre-built commands:
//!
//! - **core + zero-cost executor**: `Broker` driven directly; every storage operation
//!   completes at once with a canned success (appends and syncs are `Done`, a read
//!   returns synthesized records), so only the core's own work is measured.
//! - **core + `Executor<MemFs>`**: `SyncDriver` over the in-memory file system: the
//!   core plus the real storage executor (framing, CRC32C, copies into memory).
//! - **floor**: a `BTreeMap<String, Vec<Vec<StoredRecord>>>` that validates the same
//!   inputs, partitions the same way and builds the same replies, with no durability.
//!
//! ```sh
//! cargo bench -p broker-core --bench core
//! BENCH_CORE_N=1000000 BENCH_REPS=7 cargo bench -p broker-core --bench core
//! ```
//!
//! Each phase is timed over `BENCH_CORE_N` commands (default 200,000; creates and
//! deletes use a fifth of that), `BENCH_REPS` times (default 5), and the median is shown.
//! Building the commands is not timed; dropping the replies is.

use broker_core::{
    partition_for_key, validate_topic_name, Broker, BrokerError, Command, Config, Durability, Effect, MemFs, OpOutput,
    OpResult, Phase, ProduceRecord, RecordPosition, Reply, RequestId, StorageOp, StoredRecord, SyncDriver, Time,
    TopicId, TopicSettings,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts every allocation (and reallocation) the process makes.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TOPIC: &str = "bench";
const PARTITIONS: u32 = 8;
const VALUE: usize = 100;

/// Something that takes commands and answers them.
trait Runner {
    fn name(&self) -> &'static str;
    /// Handles every command; returns how many succeeded.
    fn run(&mut self, commands: Vec<Command>) -> usize;
    /// Acknowledges produces as `durability` says from now on (the floor has no such
    /// thing).
    fn set_durability(&mut self, _durability: Durability) {}
}

// ---------------------------------------------------------------------------------
// The core with a zero-cost executor.

/// `Broker` driven directly; every storage operation completes at once.
struct ZeroCost {
    broker: Broker,
    next_request: u64,
    ok: usize,
    value: Vec<u8>,
}

impl ZeroCost {
    fn new() -> ZeroCost {
        let mut z = ZeroCost {
            broker: Broker::start(Config::default(), Time::ZERO),
            next_request: 1,
            ok: 0,
            value: vec![7; VALUE],
        };
        z.drain();
        assert_eq!(z.broker.phase(), Phase::Serving);
        z
    }

    /// The canned result of `op`: success, with records synthesized for a read.
    fn complete(&self, op: &StorageOp) -> OpResult {
        Ok(match op {
            StorageOp::ReadJournal => OpOutput::Journal(None),
            StorageOp::ListLogs => OpOutput::Logs(Vec::new()),
            StorageOp::OpenLog { .. } => OpOutput::Opened { next_offset: 0, damaged: vec![], tail_cut: None },
            StorageOp::Read { offset, max_records, .. } => OpOutput::Records(
                (0..u64::from(*max_records))
                    .map(|i| StoredRecord { offset: offset + i, key: None, value: self.value.clone().into() })
                    .collect(),
            ),
            _ => OpOutput::Done,
        })
    }

    fn drain(&mut self) {
        while let Some(effect) = self.broker.poll_effect() {
            match effect {
                Effect::Storage { id, op } => {
                    let result = self.complete(&op);
                    drop(op);
                    self.broker.handle_completion(Time::ZERO, id, result);
                }
                Effect::Reply { reply, .. } => self.ok += usize::from(reply.is_ok()),
                Effect::Notice(_) => {}
                Effect::Halt(reason) => panic!("halted: {reason}"),
            }
        }
    }
}

impl Runner for ZeroCost {
    fn name(&self) -> &'static str {
        "core + zero-cost executor"
    }
    fn set_durability(&mut self, durability: Durability) {
        self.broker.set_durability(durability);
        self.drain();
    }
    fn run(&mut self, commands: Vec<Command>) -> usize {
        self.ok = 0;
        for command in commands {
            let request = RequestId(self.next_request);
            self.next_request += 1;
            self.broker.handle_command(Time::ZERO, request, command);
            self.drain();
        }
        self.ok
    }
}

// ---------------------------------------------------------------------------------
// The core with the real storage executor over memory.

struct OverMemFs {
    driver: SyncDriver<MemFs>,
}

impl Runner for OverMemFs {
    fn name(&self) -> &'static str {
        "core + Executor<MemFs>"
    }
    fn set_durability(&mut self, durability: Durability) {
        self.driver.set_durability(durability);
    }
    fn run(&mut self, commands: Vec<Command>) -> usize {
        let mut ok = 0;
        for command in commands {
            let request = self.driver.submit(command);
            ok += usize::from(self.driver.take_reply(request).is_some_and(|r| r.is_ok()));
        }
        ok
    }
}

// ---------------------------------------------------------------------------------
// The floor: the same operations on a plain map of vectors.

struct FloorTopic {
    id: TopicId,
    round_robin: u32,
    partitions: Vec<Vec<StoredRecord>>,
}

/// A `BTreeMap` of topics, each a `Vec` of partitions, each a `Vec` of records.
#[derive(Default)]
struct Floor {
    topics: BTreeMap<String, FloorTopic>,
    next_id: u64,
    max_partitions: u32,
}

impl Floor {
    fn handle(&mut self, command: Command) -> Result<Reply, BrokerError> {
        match command {
            Command::CreateTopic { name, partitions, .. } => {
                validate_topic_name(&name)?;
                if partitions == 0 || partitions > self.max_partitions {
                    return Err(BrokerError::InvalidPartitionCount { requested: partitions, max: self.max_partitions });
                }
                if self.topics.contains_key(&name) {
                    return Err(BrokerError::TopicAlreadyExists { name });
                }
                let id = TopicId(self.next_id);
                self.next_id += 1;
                let t = FloorTopic { id, round_robin: 0, partitions: vec![Vec::new(); partitions as usize] };
                self.topics.insert(name, t);
                Ok(Reply::Created { topic: id })
            }
            Command::DeleteTopic { name } => match self.topics.remove(&name) {
                Some(t) => Ok(Reply::DeleteAccepted { topic: t.id }),
                None => Err(BrokerError::TopicNotFound { name }),
            },
            Command::Produce { topic, partition, records } => {
                let t =
                    self.topics.get_mut(&topic).ok_or_else(|| BrokerError::TopicNotFound { name: topic.clone() })?;
                let n = t.partitions.len() as u32;
                let mut positions = Vec::with_capacity(records.len());
                for r in records {
                    let p = match (partition, &r.key) {
                        (Some(p), _) if p < n => p,
                        (Some(partition), _) => {
                            return Err(BrokerError::PartitionNotFound { name: topic, partition, partitions: n })
                        }
                        (None, Some(key)) => partition_for_key(key, n),
                        (None, None) => {
                            let p = t.round_robin % n;
                            t.round_robin = t.round_robin.wrapping_add(1);
                            p
                        }
                    };
                    let log = &mut t.partitions[p as usize];
                    let offset = log.len() as u64;
                    log.push(StoredRecord { offset, key: r.key, value: r.value });
                    positions.push(RecordPosition { partition: p, offset });
                }
                Ok(Reply::Produced { topic: t.id, positions })
            }
            Command::Fetch { topic, partition, offset, max_records, .. } => {
                let t = self.topics.get(&topic).ok_or(BrokerError::TopicNotFound { name: topic.clone() })?;
                let log = t.partitions.get(partition as usize).ok_or(BrokerError::PartitionNotFound {
                    name: topic,
                    partition,
                    partitions: t.partitions.len() as u32,
                })?;
                let high_watermark = log.len() as u64;
                if offset > high_watermark {
                    return Err(BrokerError::OffsetOutOfRange { offset, high_watermark });
                }
                let end = (offset + u64::from(max_records)).min(high_watermark);
                let records = log[offset as usize..end as usize].to_vec();
                Ok(Reply::Fetched { topic: t.id, records, high_watermark })
            }
            Command::ListTopics
            | Command::DescribeTopic { .. }
            | Command::CommitOffsets { .. }
            | Command::FetchOffsets { .. }
            | Command::ListGroups
            | Command::DeleteGroup { .. }
            | Command::InitProducer
            | Command::ProduceIdempotent { .. } => Err(BrokerError::InvalidRequest("not benchmarked".into())),
        }
    }
}

impl Runner for Floor {
    fn name(&self) -> &'static str {
        "floor: BTreeMap of Vec"
    }
    fn run(&mut self, commands: Vec<Command>) -> usize {
        commands.into_iter().map(|c| self.handle(c)).filter(Result::is_ok).count()
    }
}

// ---------------------------------------------------------------------------------
// The phases.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    ProduceKeyless,
    /// Keyless, under durability log-sync: no journal commit on the way.
    ProduceLogSync,
    ProduceKeyed,
    Fetch,
    Create,
    Delete,
}

impl Step {
    const ALL: [Step; 6] =
        [Step::ProduceKeyless, Step::ProduceLogSync, Step::ProduceKeyed, Step::Fetch, Step::Create, Step::Delete];

    fn label(self) -> &'static str {
        match self {
            Step::ProduceKeyless => "produce, keyless (1 x 100 B)",
            Step::ProduceLogSync => "produce, keyless, log-sync",
            Step::ProduceKeyed => "produce, keyed (1 x 100 B)",
            Step::Fetch => "fetch (1 record)",
            Step::Create => "create (1 partition)",
            Step::Delete => "delete (1 partition)",
        }
    }

    /// The commands of this phase; `n` of them.
    fn commands(self, n: usize) -> Vec<Command> {
        let value = vec![0x5a_u8; VALUE];
        let produce = |key: Option<Vec<u8>>| Command::Produce {
            topic: TOPIC.into(),
            partition: None,
            records: vec![ProduceRecord { key, value: value.clone().into() }],
        };
        match self {
            Step::ProduceKeyless | Step::ProduceLogSync => (0..n).map(|_| produce(None)).collect(),
            Step::ProduceKeyed => (0..n).map(|i| produce(Some(format!("key-{}", i % 1000).into_bytes()))).collect(),
            // After both produce phases every partition holds at least `n / 4` records.
            Step::Fetch => (0..n)
                .map(|i| Command::Fetch {
                    topic: TOPIC.into(),
                    partition: (i % PARTITIONS as usize) as u32,
                    offset: (i / PARTITIONS as usize) as u64,
                    max_records: 1,
                    max_bytes: None,
                })
                .collect(),
            Step::Create => (0..n)
                .map(|i| Command::CreateTopic {
                    name: format!("topic-{i}"),
                    partitions: 1,
                    settings: TopicSettings::default(),
                })
                .collect(),
            Step::Delete => (0..n).map(|i| Command::DeleteTopic { name: format!("topic-{i}") }).collect(),
        }
    }

    fn count(self, n: usize) -> usize {
        match self {
            Step::Create | Step::Delete => (n / 5).max(1),
            _ => n,
        }
    }
}

/// For profiling: `BENCH_CORE_PROFILE=N` runs only runner N (0: zero-cost, 1: MemFs,
/// 2: floor) through the keyless produce phase, ten times, and prints nothing else
/// (under durability log-sync with `BENCH_CORE_LOG_SYNC=1`).
fn profile(which: usize, n: usize) {
    let mut runner: Box<dyn Runner> = match which {
        0 => Box::new(ZeroCost::new()),
        1 => Box::new(OverMemFs { driver: SyncDriver::start(Config::default(), MemFs::new()) }),
        _ => Box::new(Floor { max_partitions: Config::default().max_partitions, ..Floor::default() }),
    };
    setup(runner.as_mut());
    if std::env::var_os("BENCH_CORE_LOG_SYNC").is_some() {
        runner.set_durability(Durability::LOG_SYNC);
    }
    let start = Instant::now();
    for _ in 0..10 {
        measure(runner.as_mut(), Step::ProduceKeyless, n);
    }
    println!(
        "{}: {:.0} produce/s (command building included)",
        runner.name(),
        10.0 * n as f64 / start.elapsed().as_secs_f64()
    );
}

/// One measurement: elapsed time and allocations for `n` commands.
#[derive(Clone, Copy)]
struct Sample {
    time: Duration,
    allocs: u64,
}

fn measure(runner: &mut dyn Runner, phase: Step, n: usize) -> Sample {
    let commands = phase.commands(n);
    let allocs = ALLOCS.load(Ordering::Relaxed);
    let start = Instant::now();
    let ok = runner.run(commands);
    let time = start.elapsed();
    let allocs = ALLOCS.load(Ordering::Relaxed) - allocs;
    assert_eq!(ok, n, "{}: {phase:?}: {ok} of {n} commands succeeded", runner.name());
    Sample { time, allocs }
}

fn setup(runner: &mut dyn Runner) {
    let create =
        Command::CreateTopic { name: TOPIC.into(), partitions: PARTITIONS, settings: TopicSettings::default() };
    assert_eq!(runner.run(vec![create]), 1);
}

fn main() {
    // BROKER_BENCH_SMOKE: tiny sizes and one run, to show that it runs to the end.
    let smoke = std::env::var_os("BROKER_BENCH_SMOKE").is_some();
    let n: usize =
        std::env::var("BENCH_CORE_N").ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke { 2_000 } else { 200_000 });
    let n = n.max(16);
    if let Some(which) = std::env::var("BENCH_CORE_PROFILE").ok().and_then(|v| v.parse().ok()) {
        return profile(which, n);
    }
    let reps: usize =
        std::env::var("BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke { 1 } else { 5 }).max(1);
    // samples[runner][phase]
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); Step::ALL.len()]; 3];
    let mut names = Vec::new();
    for _ in 0..reps {
        let mut runners: Vec<Box<dyn Runner>> = vec![
            Box::new(ZeroCost::new()),
            Box::new(OverMemFs { driver: SyncDriver::start(Config::default(), MemFs::new()) }),
            Box::new(Floor { max_partitions: Config::default().max_partitions, ..Floor::default() }),
        ];
        names = runners.iter().map(|r| r.name()).collect();
        // Phases in order (fetch reads what produce wrote; delete removes what create
        // made); the runners take turns within each phase, so load drifts hit all alike.
        for r in runners.iter_mut() {
            setup(r.as_mut());
        }
        for (p, phase) in Step::ALL.into_iter().enumerate() {
            for (i, r) in runners.iter_mut().enumerate() {
                if phase == Step::ProduceLogSync {
                    r.set_durability(Durability::LOG_SYNC);
                }
                samples[i][p].push(measure(r.as_mut(), phase, phase.count(n)));
                r.set_durability(Durability::Journaled);
            }
        }
    }
    println!("core throughput: {n} commands per phase (creates and deletes: {}), {reps} run(s), median", n / 5);
    println!(
        "{:<30} {:>14} {:>10} {:>14} {:>10} {:>14} {:>10} {:>12} {:>12}",
        "command", "core+zero/s", "allocs", "core+MemFs/s", "allocs", "floor/s", "allocs", "zero/floor", "MemFs/floor"
    );
    for (p, phase) in Step::ALL.into_iter().enumerate() {
        let count = phase.count(n) as f64;
        let per_sec = |s: &mut Vec<Sample>| {
            s.sort_by_key(|s| s.time);
            let m = s[s.len() / 2];
            (count / m.time.as_secs_f64(), m.allocs as f64 / count)
        };
        let (zero, zero_allocs) = per_sec(&mut samples[0][p]);
        let (memfs, memfs_allocs) = per_sec(&mut samples[1][p]);
        let (floor, floor_allocs) = per_sec(&mut samples[2][p]);
        println!(
            "{:<30} {:>14.0} {:>10.1} {:>14.0} {:>10.1} {:>14.0} {:>10.1} {:>11.2}x {:>11.2}x",
            phase.label(),
            zero,
            zero_allocs,
            memfs,
            memfs_allocs,
            floor,
            floor_allocs,
            floor / zero,
            floor / memfs
        );
    }
    println!("(ratios: how many times slower than the floor; allocs: allocations per command)");
    println!("runners: {}", names.join(", "));
}
