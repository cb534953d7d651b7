//! Shared helpers of the integration tests: a readable rendering of effects (journal
//! appends decoded into record kinds), a hand-driven harness that holds completions
//! back, a file system that fails on purpose, and small command builders.

#![allow(dead_code)]

use broker_core::command::StoredRecord;
use broker_core::journal::{decode_journal, JournalRecord, TopicMeta, JOURNAL_FILE};
use broker_core::{
    AppendRecord, Broker, BrokerError, Command, Config, Effect, Executor, FileSystem, HaltReason, LogId, MemFs, OpId,
    OpOutput, OpResult, ProduceRecord, Reply, RequestId, StorageError, StorageOp, Time, TopicSettings,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

// ---------------------------------------------------------------------------------
// Command builders
// ---------------------------------------------------------------------------------

/// `CreateTopic` with default settings.
pub fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

/// `CreateTopic` with a deletion grace delay.
pub fn create_grace(name: &str, partitions: u32, grace_ms: u64) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings { deletion_grace_ms: grace_ms } }
}

/// `DeleteTopic`.
pub fn delete(name: &str) -> Command {
    Command::DeleteTopic { name: name.into() }
}

/// A record with an optional key.
pub fn rec(key: Option<&str>, value: &str) -> ProduceRecord {
    ProduceRecord { key: key.map(|k| k.as_bytes().to_vec()), value: value.as_bytes().to_vec() }
}

/// `Produce` of keyless records with these values.
pub fn produce(topic: &str, values: &[&str]) -> Command {
    Command::Produce { topic: topic.into(), records: values.iter().map(|v| rec(None, v)).collect() }
}

/// `Produce` of keyed records `(key, value)`.
pub fn produce_keyed(topic: &str, records: &[(&str, &str)]) -> Command {
    Command::Produce { topic: topic.into(), records: records.iter().map(|(k, v)| rec(Some(k), v)).collect() }
}

/// `Fetch`.
pub fn fetch(topic: &str, partition: u32, offset: u64, max_records: u32) -> Command {
    Command::Fetch { topic: topic.into(), partition, offset, max_records }
}

/// The values of fetched records, as strings.
pub fn values(records: &[StoredRecord]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()).collect()
}

/// Unwraps a `Fetched` reply into its records and high watermark.
#[track_caller]
pub fn fetched(reply: Result<Reply, BrokerError>) -> (Vec<StoredRecord>, u64) {
    match reply {
        Ok(Reply::Fetched { records, high_watermark, .. }) => (records, high_watermark),
        other => panic!("expected Fetched, got {other:?}"),
    }
}

/// Unwraps a `Created` reply into the new topic id.
#[track_caller]
pub fn created(reply: Result<Reply, BrokerError>) -> broker_core::TopicId {
    match reply {
        Ok(Reply::Created { topic }) => topic,
        other => panic!("expected Created, got {other:?}"),
    }
}

/// Unwraps a `Produced` reply into `(partition, offset)` pairs.
#[track_caller]
pub fn produced(reply: Result<Reply, BrokerError>) -> Vec<(u32, u64)> {
    match reply {
        Ok(Reply::Produced { positions, .. }) => positions.iter().map(|p| (p.partition, p.offset)).collect(),
        other => panic!("expected Produced, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// Inspecting storage
// ---------------------------------------------------------------------------------

/// Every log file in the file system, parsed back to its id.
pub fn log_files(fs: &MemFs) -> Vec<LogId> {
    fs.names().iter().filter_map(|n| LogId::parse_file_name(n)).collect()
}

/// The records of the journal file (which must decode cleanly, with no torn tail).
#[track_caller]
pub fn journal_records(fs: &MemFs) -> Vec<JournalRecord> {
    let bytes = fs.file(JOURNAL_FILE).expect("a journal file exists");
    let d = decode_journal(bytes).expect("the journal decodes");
    assert!(d.torn_tail.is_none(), "the journal has a torn tail: {:?}", d.torn_tail);
    d.records.into_iter().map(|(_, r)| r).collect()
}

/// The journal file rendered one record a line.
pub fn journal_text(fs: &MemFs) -> String {
    journal_records(fs).iter().map(record_text).collect::<Vec<_>>().join("\n")
}

// ---------------------------------------------------------------------------------
// Rendering effects
// ---------------------------------------------------------------------------------

fn bytes_text(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

fn meta_text(m: &TopicMeta) -> String {
    format!("{} {:?} x{} grace={}ms", m.id, m.name, m.partitions, m.settings.deletion_grace_ms)
}

/// One journal record, readably.
pub fn record_text(r: &JournalRecord) -> String {
    match r {
        JournalRecord::TopicCreated(m) => format!("TopicCreated({})", meta_text(m)),
        JournalRecord::TopicDeleted { id, remove_after } => format!("TopicDeleted({id} after {remove_after})"),
        JournalRecord::PartitionRemoved { id, partition } => format!("PartitionRemoved({id}/p{partition})"),
        JournalRecord::DeletionCompleted { id } => format!("DeletionCompleted({id})"),
        JournalRecord::Snapshot(s) => {
            let live: Vec<String> = s.live.iter().map(meta_text).collect();
            let deleting: Vec<String> =
                s.deleting.iter().map(|d| format!("{} removed={:?}", meta_text(&d.topic), d.removed)).collect();
            let ends: Vec<String> = s.ends.iter().map(|(log, end)| format!("{log}:{end}")).collect();
            format!(
                "Snapshot(next_id={} live=[{}] deleting=[{}] ends=[{}])",
                s.next_topic_id,
                live.join(", "),
                deleting.join(", "),
                ends.join(", ")
            )
        }
        JournalRecord::LogEnd { log, end } => format!("LogEnd({log} {end})"),
    }
}

/// Decodes the records of one `AppendJournal` (one commit, salted with `epoch`).
pub fn decode_appended(bytes: &[u8], epoch: u64) -> Result<Vec<JournalRecord>, String> {
    broker_core::journal::decode_commit(bytes, epoch)
}

fn append_records_text(records: &[AppendRecord]) -> String {
    let parts: Vec<String> = records
        .iter()
        .map(|r| match &r.record.key {
            Some(k) => format!("{}: key={} value={}", r.offset, bytes_text(k), bytes_text(&r.record.value)),
            None => format!("{}: value={}", r.offset, bytes_text(&r.record.value)),
        })
        .collect();
    parts.join(", ")
}

fn stored_text(records: &[StoredRecord]) -> String {
    let parts: Vec<String> = records
        .iter()
        .map(|r| match &r.key {
            Some(k) => format!("{}: key={} value={}", r.offset, bytes_text(k), bytes_text(&r.value)),
            None => format!("{}: value={}", r.offset, bytes_text(&r.value)),
        })
        .collect();
    parts.join(", ")
}

/// A storage operation, readably; `epoch` is the journal epoch its appends are salted with.
pub fn op_text(op: &StorageOp, epoch: &mut u64) -> String {
    match op {
        StorageOp::ReadJournal => "ReadJournal".into(),
        StorageOp::AppendJournal { bytes } => match decode_appended(bytes, *epoch) {
            Ok(recs) => format!("AppendJournal [{}]", recs.iter().map(record_text).collect::<Vec<_>>().join(", ")),
            Err(e) => format!("AppendJournal <{e}>"),
        },
        StorageOp::SyncJournal => "SyncJournal".into(),
        StorageOp::ReplaceJournal { contents, keep_old } => match decode_journal(contents) {
            Ok(d) => {
                *epoch = d.epoch;
                let recs: Vec<String> = d.records.iter().map(|(_, r)| record_text(r)).collect();
                format!("ReplaceJournal epoch={} keep_old={keep_old} [{}]", d.epoch, recs.join(", "))
            }
            Err(e) => format!("ReplaceJournal <corrupt at {}: {}>", e.offset, e.detail),
        },
        StorageOp::ListLogs => "ListLogs".into(),
        StorageOp::CreateLog { log } => format!("CreateLog {log}"),
        StorageOp::OpenLog { log, acked_end } => format!("OpenLog {log} acked {acked_end}"),
        StorageOp::Append { log, records } => format!("Append {log} [{}]", append_records_text(records)),
        StorageOp::SyncLog { log } => format!("SyncLog {log}"),
        StorageOp::Read { log, offset, max_records, .. } => format!("Read {log} from {offset} max {max_records}"),
        StorageOp::RemoveLog { log } => format!("RemoveLog {log}"),
    }
}

/// A reply, readably.
pub fn reply_text(reply: &Result<Reply, BrokerError>) -> String {
    match reply {
        Ok(Reply::Created { topic }) => format!("Ok(Created {topic})"),
        Ok(Reply::DeleteAccepted { topic }) => format!("Ok(DeleteAccepted {topic})"),
        Ok(Reply::Produced { topic, positions }) => {
            let p: Vec<String> = positions.iter().map(|p| format!("p{}@{}", p.partition, p.offset)).collect();
            format!("Ok(Produced {topic} [{}])", p.join(", "))
        }
        Ok(Reply::Fetched { topic, records, high_watermark }) => {
            format!("Ok(Fetched {topic} hw={high_watermark} [{}])", stored_text(records))
        }
        Ok(Reply::Topics(ts)) => {
            let t: Vec<String> =
                ts.iter().map(|t| format!("{:?}={} hw={:?}", t.name, t.id, t.high_watermarks)).collect();
            format!("Ok(Topics [{}])", t.join(", "))
        }
        Ok(Reply::Described(t)) => {
            format!("Ok(Described {:?}={} x{} hw={:?})", t.name, t.id, t.partitions, t.high_watermarks)
        }
        Err(e) => format!("Err({e:?})"),
    }
}

/// Renders effects one a line. `epoch` is the journal epoch when the first was issued;
/// a `ReplaceJournal` in the trace moves it on.
pub fn render(effects: &[Effect], mut epoch: u64) -> String {
    let mut out = String::new();
    for e in effects {
        let line = match e {
            Effect::Storage { id, op } => format!("storage #{} {}", id.0, op_text(op, &mut epoch)),
            Effect::Reply { request, reply } => format!("reply req#{} {}", request.0, reply_text(reply)),
            Effect::Notice(notice) => format!("notice {notice}"),
            Effect::Halt(reason) => format!("halt {reason:?}"),
        };
        let _ = writeln!(out, "{line}");
    }
    out
}

// ---------------------------------------------------------------------------------
// A hand-driven harness: completions are delivered only when a test says so
// ---------------------------------------------------------------------------------

/// A broker, an executor and everything in between, driven one completion at a time.
pub struct Hand<F: FileSystem = MemFs> {
    pub broker: Broker,
    pub exec: Executor<F>,
    pub now: Time,
    /// Issued storage operations not yet completed.
    pub pending: BTreeMap<OpId, StorageOp>,
    /// Completed operations, for duplicate completions.
    pub done: BTreeMap<OpId, StorageOp>,
    /// Replies received and not yet taken.
    pub replies: BTreeMap<RequestId, Result<Reply, BrokerError>>,
    /// Every reply ever received, in order (a request must be answered at most once).
    pub answered: Vec<RequestId>,
    /// Halt effects received.
    pub halts: Vec<HaltReason>,
    /// Notices received.
    pub notices: Vec<broker_core::Notice>,
    /// Every effect, in the order the broker emitted it.
    pub trace: Vec<Effect>,
    next_request: u64,
}

impl Hand<MemFs> {
    /// A broker over `fs`, recovered and serving (every operation completed, no timer fired).
    pub fn start(config: Config, fs: MemFs) -> Hand<MemFs> {
        Hand::start_on(config, fs)
    }
}

impl<F: FileSystem> Hand<F> {
    /// A broker over `fs`, nothing completed yet.
    pub fn new(config: Config, fs: F) -> Hand<F> {
        let mut h = Hand {
            broker: Broker::start(config, Time::ZERO),
            exec: Executor::new(fs),
            now: Time::ZERO,
            pending: BTreeMap::new(),
            done: BTreeMap::new(),
            replies: BTreeMap::new(),
            answered: Vec::new(),
            halts: Vec::new(),
            notices: Vec::new(),
            trace: Vec::new(),
            next_request: 1,
        };
        h.collect();
        h
    }

    /// A broker over `fs`, recovered (every operation completed, no timer fired).
    pub fn start_on(config: Config, fs: F) -> Hand<F> {
        let mut h = Hand::new(config, fs);
        h.run();
        h
    }

    /// Takes every queued effect from the broker.
    pub fn collect(&mut self) {
        while let Some(e) = self.broker.poll_effect() {
            self.trace.push(e.clone());
            match e {
                Effect::Storage { id, op } => {
                    assert!(
                        !self.pending.contains_key(&id) && !self.done.contains_key(&id),
                        "op id {} issued twice",
                        id.0
                    );
                    self.pending.insert(id, op);
                }
                Effect::Reply { request, reply } => {
                    self.answered.push(request);
                    self.replies.insert(request, reply);
                }
                Effect::Notice(notice) => self.notices.push(notice),
                Effect::Halt(reason) => self.halts.push(reason),
            }
        }
    }

    /// Sends a command; returns its request id.
    pub fn submit(&mut self, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.broker.handle_command(self.now, request, command);
        self.collect();
        request
    }

    /// Sends a command and runs every operation to completion (no timers); returns the reply.
    #[track_caller]
    pub fn request(&mut self, command: Command) -> Result<Reply, BrokerError> {
        let r = self.submit(command);
        self.run();
        self.take_reply(r).expect("the command was answered")
    }

    /// Sends a command and returns its reply if it came at once, completing nothing.
    pub fn ask(&mut self, command: Command) -> Option<Result<Reply, BrokerError>> {
        let r = self.submit(command);
        self.take_reply(r)
    }

    /// The reply to `request`, if it came.
    pub fn take_reply(&mut self, request: RequestId) -> Option<Result<Reply, BrokerError>> {
        self.replies.remove(&request)
    }

    /// Carries out pending operation `id` with the executor and feeds its result back.
    pub fn complete(&mut self, id: OpId) {
        let op = self.pending.remove(&id).expect("the operation is pending");
        let result = self.exec.execute(&op);
        self.done.insert(id, op);
        self.broker.handle_completion(self.now, id, result);
        self.collect();
    }

    /// Feeds `result` for operation `id` without carrying it out (it need not be pending).
    pub fn complete_with(&mut self, id: OpId, result: OpResult) {
        if let Some(op) = self.pending.remove(&id) {
            self.done.insert(id, op);
        }
        self.broker.handle_completion(self.now, id, result);
        self.collect();
    }

    /// Pending operations matching `pred`, oldest first.
    pub fn pending_where(&self, pred: impl Fn(&StorageOp) -> bool) -> Vec<OpId> {
        self.pending.iter().filter(|(_, op)| pred(op)).map(|(id, _)| *id).collect()
    }

    /// The single oldest pending operation matching `pred`.
    #[track_caller]
    pub fn first_pending(&self, pred: impl Fn(&StorageOp) -> bool) -> OpId {
        *self.pending_where(pred).first().expect("a matching operation is pending")
    }

    /// Completes pending operations, oldest first, except those `hold` keeps back,
    /// until none is left to complete.
    pub fn run_holding(&mut self, hold: impl Fn(&StorageOp) -> bool) {
        while let Some(id) = self.pending_where(|op| !hold(op)).first().copied() {
            self.complete(id);
        }
    }

    /// Completes every pending operation (and those they lead to), firing no timer.
    pub fn run(&mut self) {
        self.run_holding(|_| false);
    }

    /// Moves the clock to the broker's next deadline and lets the time pass, completing
    /// nothing. False if no timer is armed.
    pub fn fire_next_timer_only(&mut self) -> bool {
        let Some(at) = self.broker.poll_timeout() else { return false };
        self.now = self.now.max(at);
        self.broker.handle_timeout(self.now);
        self.collect();
        true
    }

    /// Moves the clock to the earliest armed timer, fires it and runs. False if none is armed.
    pub fn fire_next_timer(&mut self) -> bool {
        let fired = self.fire_next_timer_only();
        self.run();
        fired
    }

    /// Runs and fires timers until nothing is left (at most `max` timers).
    pub fn settle(&mut self, max: usize) {
        self.run();
        for _ in 0..max {
            if !self.fire_next_timer() {
                break;
            }
        }
    }

    /// The effects traced since `from` (an index into `trace`).
    pub fn trace_since(&self, from: usize) -> &[Effect] {
        &self.trace[from..]
    }

    /// Storage operations in the trace since `from` that match `pred`.
    pub fn ops_since(&self, from: usize, pred: impl Fn(&StorageOp) -> bool) -> Vec<StorageOp> {
        self.trace[from..]
            .iter()
            .filter_map(|e| match e {
                Effect::Storage { op, .. } if pred(op) => Some(op.clone()),
                _ => None,
            })
            .collect()
    }

    /// Drops the broker (a crash) and hands back the storage.
    pub fn crash(self) -> F {
        self.exec.into_fs()
    }
}

/// Whether `op` is a `RemoveLog`.
pub fn is_remove(op: &StorageOp) -> bool {
    matches!(op, StorageOp::RemoveLog { .. })
}

/// Whether `op` is a journal operation.
pub fn is_journal(op: &StorageOp) -> bool {
    matches!(op, StorageOp::AppendJournal { .. } | StorageOp::SyncJournal | StorageOp::ReplaceJournal { .. })
}

// ---------------------------------------------------------------------------------
// A file system that fails on purpose
// ---------------------------------------------------------------------------------

/// A `MemFs` that fails on purpose: its `remove` fails with an I/O error the first
/// `fail_removes` times, its `sync_dir` the next `fail_dir_syncs` times (the entries then
/// stay as they are: a `MemFs` is always durable), and with a `capacity` (0: none) a
/// write that would grow the files past it fails as a full disk, writing nothing, until
/// space is freed.
#[derive(Debug, Default, Clone)]
pub struct FaultyFs {
    pub inner: MemFs,
    pub fail_removes: u32,
    pub failed: u32,
    pub removes: u32,
    pub fail_dir_syncs: u32,
    pub dir_syncs: u32,
    pub capacity: u64,
}

/// A [`FaultyFs`] set up to fail removals.
pub type FlakyRemoveFs = FaultyFs;
/// A [`FaultyFs`] set up to fail directory fsyncs.
pub type FlakyDirSyncFs = FaultyFs;

impl FaultyFs {
    /// The bytes its files hold.
    pub fn used(&self) -> u64 {
        self.inner.names().iter().map(|n| self.inner.file(n).map_or(0, |f| f.len() as u64)).sum()
    }
}

impl FileSystem for FaultyFs {
    fn create(&mut self, name: &str) -> Result<(), StorageError> {
        self.inner.create(name)
    }
    fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let len = self.inner.file(name).map_or(0, |f| f.len() as u64);
        let growth = (offset + data.len() as u64).saturating_sub(len);
        if self.capacity > 0 && self.used() + growth > self.capacity {
            return Err(StorageError::DiskFull(format!("{name}: no space left")));
        }
        self.inner.write_at(name, offset, data)
    }
    fn read_at(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        self.inner.read_at(name, offset, len)
    }
    fn len(&mut self, name: &str) -> Result<u64, StorageError> {
        self.inner.len(name)
    }
    fn truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.inner.truncate(name, len)
    }
    fn sync_file(&mut self, name: &str) -> Result<(), StorageError> {
        self.inner.sync_file(name)
    }
    fn sync_dir(&mut self) -> Result<(), StorageError> {
        self.dir_syncs += 1;
        if self.fail_dir_syncs > 0 {
            self.fail_dir_syncs -= 1;
            return Err(StorageError::Io("injected failure of the directory fsync".into()));
        }
        self.inner.sync_dir()
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), StorageError> {
        self.inner.rename(from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), StorageError> {
        self.removes += 1;
        if self.failed < self.fail_removes {
            self.failed += 1;
            return Err(StorageError::Io(format!("injected failure removing {name}")));
        }
        self.inner.remove(name)
    }
    fn list(&mut self) -> Result<Vec<String>, StorageError> {
        self.inner.list()
    }
}

/// Set of the logs a trace removed.
pub fn removed_logs(ops: &[StorageOp]) -> BTreeSet<LogId> {
    ops.iter()
        .filter_map(|op| match op {
            StorageOp::RemoveLog { log } => Some(*log),
            _ => None,
        })
        .collect()
}

/// A successful `Done` result.
pub fn done() -> OpResult {
    Ok(OpOutput::Done)
}
