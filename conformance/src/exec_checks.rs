//! The executor checks. Each is a function with a doc comment stating its rule (from
//! the runtime contract, `broker_core::effect`); [`all`] pairs it with its [`Check`].
//!
//! The checks drive the executor through [`StorageOp`]s only, and only as the core
//! would: log contents are produced by `Append` (their format is the executor's
//! business), journal contents are bytes the executor must give back (a
//! `ReplaceJournal`'s as they are, opaque; an `AppendJournal`'s records laid out as
//! `JournalRecord::encode_commit_into` lays them out where they land), a read
//! never asks past the records the log holds, and `acked_end` always falls at the end
//! of an append (the core acknowledges whole appends). A check returns `Err(what was
//! seen)` when the executor breaks its rule; operations the rule does not cover, but
//! the check needs to succeed, fail the check with the operation and its error.

use crate::checks::{differ, pattern, Run};
use crate::{Check, ExecutorSubject};
use broker_core::{
    AppendRecord, DamagedRange, JournalRecord, LogId, OpOutput, ProduceRecord, StorageError, StorageOp, StoredRecord,
    TopicId,
};

type Seen = Result<(), String>;

/// Every check, in order, with its body.
pub(crate) fn all<S: ExecutorSubject>() -> Vec<(Check, Run<S>)> {
    fn plain(name: &'static str, rule: &'static str) -> Check {
        Check { name, rule, needs_crash: false, needs_fault: None }
    }
    fn crash(name: &'static str, rule: &'static str) -> Check {
        Check { name, rule, needs_crash: true, needs_fault: None }
    }
    vec![
        (
            plain(
                "fresh-store-is-empty",
                "ReadJournal of fresh storage returns Journal(None) (no journal exists before the first \
                 ReplaceJournal), and ListLogs returns no logs",
            ),
            fresh_store_is_empty::<S>,
        ),
        (
            plain(
                "replace-journal-then-read",
                "ReplaceJournal replaces the journal whole: ReadJournal then returns exactly its contents (an \
                 empty journal is Journal(Some) of no bytes), whatever the journal held before; the output is \
                 Done, or with keep_old BackedUp(file) or Done; journal files are never listed as logs",
            ),
            replace_journal_then_read::<S>,
        ),
        (
            plain(
                "append-journal-appends",
                "AppendJournal adds one commit of its records at the end of the journal, after the last \
                 ReplaceJournal's contents and the earlier appends, laid out for where it lands (the bytes of \
                 JournalRecord::encode_commit at that position: copy A, zeros up to the next 4 KiB boundary, copy \
                 B): after SyncJournal, ReadJournal returns them all, in order",
            ),
            append_journal_appends::<S>,
        ),
        (
            plain(
                "create-log-idempotent-and-listed",
                "CreateLog makes an empty log; on an existing log it changes nothing (its records stay); \
                 ListLogs lists every log once, ordered by LogId, and nothing else",
            ),
            create_log_idempotent_and_listed::<S>,
        ),
        (
            plain(
                "open-absent-log-not-found",
                "OpenLog of a log that does not exist fails with NotFound, whatever its acked_end, and creates \
                 nothing",
            ),
            open_absent_log_not_found::<S>,
        ),
        (
            plain(
                "append-sync-read",
                "records appended (in batches, offsets dense) and synced read back as appended: offsets dense \
                 from the one asked, keys (none, empty or not) and values byte for byte; a read below the \
                 log's end returns at least one record and at most max_records",
            ),
            append_sync_read::<S>,
        ),
        (
            plain(
                "read-honours-max-records",
                "Read returns at most max_records records (and at least one), from the offset asked",
            ),
            read_honours_max_records::<S>,
        ),
        (
            plain(
                "read-honours-max-bytes",
                "Read returns records whose key and value bytes sum to at most max_bytes, except that the \
                 first record is always returned, whatever its size (so a read always makes progress)",
            ),
            read_honours_max_bytes::<S>,
        ),
        (
            plain(
                "open-log-at-acked-end",
                "OpenLog with acked_end the number of records appended and synced reports next_offset \
                 acked_end and no damage; the records read back whole, and appends continue at acked_end",
            ),
            open_log_at_acked_end::<S>,
        ),
        (
            plain(
                "open-log-cuts-unacknowledged",
                "OpenLog with an acked_end below the log's end reports next_offset acked_end and no damage, \
                 and cuts everything from acked_end on: reads see only the records below it, and appends at \
                 acked_end take the cut records' place",
            ),
            open_log_cuts_unacknowledged::<S>,
        ),
        (
            plain(
                "open-log-reports-missing-acked",
                "OpenLog with an acked_end past the records the log holds still reports next_offset \
                 acked_end, with the missing offsets in damaged ranges (and no offset below them); every read \
                 of a missing offset fails with Corrupt, and appends continue at acked_end",
            ),
            open_log_reports_missing_acked::<S>,
        ),
        (
            plain(
                "remove-log-idempotent",
                "RemoveLog deletes the log (ListLogs no longer lists it, OpenLog of it is NotFound, a later \
                 CreateLog makes a new, empty log); RemoveLog of an absent log succeeds",
            ),
            remove_log_idempotent::<S>,
        ),
        (
            crash(
                "synced-appends-survive-crash",
                "after Append and SyncLog, a crash keeps the records: a new executor's OpenLog with acked_end \
                 at the synced end reports no damage, reads them back, and appends continue there (unsynced \
                 appends after them are cut)",
            ),
            synced_appends_survive_crash::<S>,
        ),
        (
            crash(
                "replaced-journal-survives-crash",
                "a completed ReplaceJournal is durable: after a crash, ReadJournal returns its contents whole \
                 (with keep_old too)",
            ),
            replaced_journal_survives_crash::<S>,
        ),
        (
            crash(
                "synced-journal-appends-survive-crash",
                "after AppendJournal and SyncJournal, a crash keeps the journal with the appended commit at its \
                 end",
            ),
            synced_journal_appends_survive_crash::<S>,
        ),
        (
            crash(
                "created-log-survives-crash",
                "a completed CreateLog is durable: after a crash ListLogs lists the log, and it opens empty \
                 (OpenLog with acked_end 0: next_offset 0, no damage) and takes appends",
            ),
            created_log_survives_crash::<S>,
        ),
        (
            crash(
                "removed-log-stays-gone-after-crash",
                "a completed RemoveLog is durable: after a crash ListLogs does not list the log, and OpenLog of \
                 it fails with NotFound",
            ),
            removed_log_stays_gone_after_crash::<S>,
        ),
    ]
}

// --- helpers ---------------------------------------------------------------------------

/// A short description of an operation for messages (no bytes, no records).
fn show(op: &StorageOp) -> String {
    match op {
        StorageOp::ReadJournal => "ReadJournal".into(),
        StorageOp::AppendJournal { epoch, records } => {
            format!("AppendJournal(epoch {epoch}, {} records)", records.len())
        }
        StorageOp::SyncJournal => "SyncJournal".into(),
        StorageOp::ReplaceJournal { contents, keep_old } => {
            format!("ReplaceJournal({} bytes, keep_old: {keep_old})", contents.len())
        }
        StorageOp::ListLogs => "ListLogs".into(),
        StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false } => format!("CreateLog({log})"),
        StorageOp::CreateLog { log, first_offset, keep_whole_tail: false } => {
            format!("CreateLog({log}, first_offset: {first_offset})")
        }
        StorageOp::CreateLog { log, first_offset, keep_whole_tail: true } => {
            format!("CreateLog({log}, first_offset: {first_offset}, keep_whole_tail)")
        }
        StorageOp::OpenLog { log, acked_end, first_offset: 0, keep_whole_tail: false } => {
            format!("OpenLog({log}, acked_end: {acked_end})")
        }
        StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail: true } => {
            format!("OpenLog({log}, acked_end: {acked_end}, first_offset: {first_offset}, keep_whole_tail)")
        }
        StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail: false } => {
            format!("OpenLog({log}, acked_end: {acked_end}, first_offset: {first_offset})")
        }
        StorageOp::Append { log, records } => match (records.first(), records.last()) {
            (Some(a), Some(b)) => format!("Append({log}, offsets {}..={})", a.offset, b.offset),
            _ => format!("Append({log}, no records)"),
        },
        StorageOp::SyncLog { log } => format!("SyncLog({log})"),
        StorageOp::Read { log, offset, max_records, max_bytes: u64::MAX } => {
            format!("Read({log}, offset: {offset}, max_records: {max_records}, max_bytes: u64::MAX)")
        }
        StorageOp::Read { log, offset, max_records, max_bytes } => {
            format!("Read({log}, offset: {offset}, max_records: {max_records}, max_bytes: {max_bytes})")
        }
        StorageOp::RemoveLog { log } => format!("RemoveLog({log})"),
    }
}

/// A short description of an output for messages.
fn show_out(out: &OpOutput) -> String {
    match out {
        OpOutput::Done => "Done".into(),
        OpOutput::Journal(None) => "Journal(None)".into(),
        OpOutput::Journal(Some(b)) => format!("Journal(Some({} bytes))", b.len()),
        OpOutput::Logs(logs) => format!("Logs({})", show_logs(logs)),
        OpOutput::Opened { next_offset, damaged, tail_cut: None } => {
            format!("Opened {{ next_offset: {next_offset}, damaged: {} }}", show_damaged(damaged))
        }
        OpOutput::Opened { next_offset, damaged, tail_cut: Some(cut) } => {
            let damaged = show_damaged(damaged);
            format!("Opened {{ next_offset: {next_offset}, damaged: {damaged}, tail_cut: {} bytes }}", cut.bytes)
        }
        OpOutput::Records(r) => format!("Records({} records)", r.len()),
        OpOutput::BackedUp(name) => format!("BackedUp({name:?})"),
    }
}

fn show_logs(logs: &[LogId]) -> String {
    format!("[{}]", logs.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", "))
}

fn show_damaged(damaged: &[DamagedRange]) -> String {
    format!("[{}]", damaged.iter().map(|d| format!("{}..{}", d.from, d.to)).collect::<Vec<_>>().join(", "))
}

fn log(topic: u64, partition: u32) -> LogId {
    LogId { topic: TopicId(topic), partition }
}

/// The epoch the checks' journal appends name (the journal's contents are theirs, so any
/// epoch will do; the executor salts the commit with it).
const JOURNAL_EPOCH: u64 = 5;

/// `n` journal records for one append, in variant `seed`: acknowledged ends, 20 bytes of
/// payload each.
fn journal_records(n: usize, seed: u64) -> Vec<JournalRecord> {
    (0..n).map(|i| JournalRecord::LogEnd { log: log(seed, i as u32), end: seed * 1000 + i as u64 }).collect()
}

/// The record the checks append at `offset` of a log, in variant `seed`: keys absent,
/// empty or not; values of 0 to 40 bytes.
fn record(offset: u64, seed: u64) -> ProduceRecord {
    let mix = offset.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7));
    let key = match mix % 3 {
        0 => None,
        1 => Some(Vec::new()),
        _ => Some(pattern(1 + (mix % 9) as usize, mix ^ 0x55)),
    };
    ProduceRecord { key, value: pattern((mix % 41) as usize, mix ^ 0xaa).into() }
}

/// The records the checks expect to read at `offsets`, in variant `seed`.
fn stored(offsets: std::ops::Range<u64>, seed: u64) -> Vec<StoredRecord> {
    offsets
        .map(|offset| {
            let r = record(offset, seed);
            StoredRecord { offset, key: r.key, value: r.value }
        })
        .collect()
}

/// Key and value bytes of a record, as `max_bytes` counts them.
fn record_bytes(r: &StoredRecord) -> u64 {
    (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64
}

/// Fails unless `got` equals `want`, naming the first record that differs.
fn expect_records(what: &str, got: &[StoredRecord], want: &[StoredRecord]) -> Seen {
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        let (g, w) = (&got[i], &want[i]);
        let field = if g.offset != w.offset {
            format!("offset {} instead of {}", g.offset, w.offset)
        } else if g.key != w.key {
            format!("key {:?} instead of {:?}", g.key.as_ref().map(Vec::len), w.key.as_ref().map(Vec::len))
        } else {
            format!("a value of {} bytes that differs from the {} appended", g.value.len(), w.value.len())
        };
        return Err(format!("{what}: record {i} (offset {}) has {field} (key lengths shown)", w.offset));
    }
    if got.len() != want.len() {
        return Err(format!("{what}: {} records instead of {} (the common part matches)", got.len(), want.len()));
    }
    Ok(())
}

/// An executor under test and the subject that runs it.
struct Store<'s, S: ExecutorSubject> {
    s: &'s mut S,
    exec: S::Exec,
}

impl<'s, S: ExecutorSubject> Store<'s, S> {
    fn fresh(s: &'s mut S) -> Self {
        let exec = s.fresh();
        Store { s, exec }
    }

    /// The store after a crash, with a new executor over what survived.
    fn crash(self) -> Result<Self, String> {
        let Store { s, exec } = self;
        match s.crash(exec) {
            Some(exec) => Ok(Store { s, exec }),
            None => Err("ExecutorSubject::crash returned None during the check, though it crashed before".into()),
        }
    }

    fn run(&mut self, op: &StorageOp) -> Result<OpOutput, StorageError> {
        self.s.execute(&mut self.exec, op)
    }

    /// Runs `op`, failing the check if it fails.
    fn ok(&mut self, op: &StorageOp) -> Result<OpOutput, String> {
        self.run(op).map_err(|e| format!("{} failed: {e}", show(op)))
    }

    /// Runs `op`, failing the check unless it returns `Done`.
    fn done(&mut self, op: StorageOp) -> Seen {
        match self.ok(&op)? {
            OpOutput::Done => Ok(()),
            other => Err(format!("{} returned {} instead of Done", show(&op), show_out(&other))),
        }
    }

    fn journal(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self.ok(&StorageOp::ReadJournal)? {
            OpOutput::Journal(j) => Ok(j),
            other => Err(format!("ReadJournal returned {} instead of Journal", show_out(&other))),
        }
    }

    fn expect_journal(&mut self, when: &str, want: &[u8]) -> Seen {
        match self.journal()? {
            Some(got) if got == want => Ok(()),
            Some(got) => Err(format!("{when}, ReadJournal returned {}", differ(&got, want))),
            None => Err(format!("{when}, ReadJournal returned Journal(None), not the journal's {} bytes", want.len())),
        }
    }

    fn replace(&mut self, contents: &[u8]) -> Seen {
        self.done(StorageOp::ReplaceJournal { contents: contents.to_vec(), keep_old: false })
    }

    /// Appends one commit of `records` to the journal, whose bytes so far are `journal`,
    /// and adds to `journal` the bytes the commit must take there.
    fn append_journal(&mut self, journal: &mut Vec<u8>, records: &[JournalRecord]) -> Seen {
        self.done(StorageOp::AppendJournal { epoch: JOURNAL_EPOCH, records: records.to_vec() })?;
        JournalRecord::encode_batch(records, JOURNAL_EPOCH, journal);
        Ok(())
    }

    fn logs(&mut self) -> Result<Vec<LogId>, String> {
        match self.ok(&StorageOp::ListLogs)? {
            OpOutput::Logs(logs) => Ok(logs),
            other => Err(format!("ListLogs returned {} instead of Logs", show_out(&other))),
        }
    }

    fn expect_logs(&mut self, when: &str, want: &[LogId]) -> Seen {
        let got = self.logs()?;
        if got == want {
            Ok(())
        } else {
            Err(format!("{when}, ListLogs returned {} instead of {}", show_logs(&got), show_logs(want)))
        }
    }

    fn create(&mut self, log: LogId) -> Seen {
        self.done(StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false })
    }

    /// Appends one batch: the records at `offsets`, in variant `seed`.
    fn append(&mut self, log: LogId, offsets: std::ops::Range<u64>, seed: u64) -> Seen {
        let records = offsets.map(|offset| AppendRecord { offset, record: record(offset, seed) }).collect();
        self.done(StorageOp::Append { log, records })
    }

    /// Appends batches of `sizes` records from `from` on, in variant `seed`; returns the
    /// end.
    fn append_batches(&mut self, log: LogId, from: u64, sizes: &[u64], seed: u64) -> Result<u64, String> {
        let mut at = from;
        for &n in sizes {
            self.append(log, at..at + n, seed)?;
            at += n;
        }
        Ok(at)
    }

    fn sync(&mut self, log: LogId) -> Seen {
        self.done(StorageOp::SyncLog { log })
    }

    fn open(&mut self, log: LogId, acked_end: u64) -> Result<(u64, Vec<DamagedRange>), String> {
        let op = StorageOp::OpenLog { log, acked_end, first_offset: 0, keep_whole_tail: false };
        match self.ok(&op)? {
            OpOutput::Opened { next_offset, damaged, tail_cut: None } => Ok((next_offset, damaged)),
            other => Err(format!("{} returned {} instead of Opened", show(&op), show_out(&other))),
        }
    }

    /// Opens `log`, failing unless it reports `next_offset` `acked_end` and no damage.
    fn open_clean(&mut self, log: LogId, acked_end: u64, when: &str) -> Seen {
        let (next, damaged) = self.open(log, acked_end)?;
        if next != acked_end || !damaged.is_empty() {
            return Err(format!(
                "{when}, OpenLog({log}, acked_end: {acked_end}) reported next_offset {next} and damaged {} \
                 (expected next_offset {acked_end}, no damage)",
                show_damaged(&damaged)
            ));
        }
        Ok(())
    }

    /// One read, failing unless it returns 1 to `max_records` records, dense from `offset`.
    fn read(&mut self, log: LogId, offset: u64, max_records: u32, max_bytes: u64) -> Result<Vec<StoredRecord>, String> {
        let op = StorageOp::Read { log, offset, max_records, max_bytes };
        let records = match self.ok(&op)? {
            OpOutput::Records(records) => records,
            other => return Err(format!("{} returned {} instead of Records", show(&op), show_out(&other))),
        };
        if records.is_empty() {
            return Err(format!("{} below the log's end returned no records", show(&op)));
        }
        if records.len() > max_records as usize {
            return Err(format!("{} returned {} records, more than max_records", show(&op), records.len()));
        }
        if let Some(i) = records.iter().enumerate().position(|(i, r)| r.offset != offset + i as u64) {
            return Err(format!(
                "{} returned offset {} as record {i}, not {} (offsets dense from the one asked)",
                show(&op),
                records[i].offset,
                offset + i as u64
            ));
        }
        Ok(records)
    }

    /// The records `from..to` (below the log's end), read as a consumer does: one read
    /// after another, each from where the last one stopped.
    fn read_range(&mut self, log: LogId, from: u64, to: u64) -> Result<Vec<StoredRecord>, String> {
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let batch = self.read(log, at, (to - at).min(u64::from(u32::MAX)) as u32, u64::MAX)?;
            at += batch.len() as u64;
            out.extend(batch);
        }
        Ok(out)
    }

    /// Fails unless the records `from..to` of `log` read back as `want`.
    fn expect_read(&mut self, log: LogId, from: u64, to: u64, want: &[StoredRecord], when: &str) -> Seen {
        let got = self.read_range(log, from, to)?;
        expect_records(&format!("{when}, reading {log} from {from} to {to}"), &got, want)
    }

    fn expect_not_found(&mut self, op: StorageOp, when: &str) -> Seen {
        match self.run(&op) {
            Err(StorageError::NotFound(_)) => Ok(()),
            Err(e) => Err(format!("{when}, {} failed with {e:?} instead of NotFound", show(&op))),
            Ok(out) => {
                Err(format!("{when}, {} returned {} instead of failing with NotFound", show(&op), show_out(&out)))
            }
        }
    }
}

// --- plain behaviour ---------------------------------------------------------------------

/// ReadJournal of fresh storage returns Journal(None) (no journal exists before the
/// first ReplaceJournal), and ListLogs returns no logs.
fn fresh_store_is_empty<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    if let Some(j) = st.journal()? {
        return Err(format!(
            "ReadJournal of fresh storage returned Journal(Some({} bytes)) instead of Journal(None)",
            j.len()
        ));
    }
    st.expect_logs("on fresh storage", &[])
}

/// ReplaceJournal replaces the journal whole: ReadJournal then returns exactly its
/// contents (an empty journal is `Journal(Some)` of no bytes), whatever the journal
/// held before; the output is Done, or with `keep_old` `BackedUp(file)` or Done;
/// journal files are never listed as logs.
fn replace_journal_then_read<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let backed_up = |st: &mut Store<'_, S>, contents: &[u8]| {
        let op = StorageOp::ReplaceJournal { contents: contents.to_vec(), keep_old: true };
        match st.ok(&op)? {
            OpOutput::Done | OpOutput::BackedUp(_) => Ok(()),
            other => Err(format!("{} returned {} instead of Done or BackedUp", show(&op), show_out(&other))),
        }
    };
    // With keep_old and no journal yet (nothing to keep).
    let first = pattern(3000, 200);
    backed_up(&mut st, &first)?;
    st.expect_journal("after the first ReplaceJournal (keep_old, no journal before)", &first)?;
    // Shorter, then longer, than the journal it replaces.
    let shorter = pattern(1000, 201);
    st.replace(&shorter)?;
    st.expect_journal("after ReplaceJournal of 1000 bytes over 3000", &shorter)?;
    let longer = pattern(5000, 202);
    st.replace(&longer)?;
    st.expect_journal("after ReplaceJournal of 5000 bytes over 1000", &longer)?;
    // With keep_old over an existing journal.
    let kept = pattern(2000, 203);
    backed_up(&mut st, &kept)?;
    st.expect_journal("after ReplaceJournal with keep_old over an existing journal", &kept)?;
    st.replace(b"")?;
    st.expect_journal("after ReplaceJournal of no bytes", b"")?;
    // Opaque bytes: anything, zeros included.
    let zeros = vec![0u8; 700];
    st.replace(&zeros)?;
    st.expect_journal("after ReplaceJournal of 700 zero bytes", &zeros)?;
    st.expect_logs("after journal replacements (and backups)", &[])
}

/// AppendJournal adds one commit of its records at the end of the journal, after the
/// last ReplaceJournal's contents and the earlier appends, laid out for where it lands
/// (the bytes of `JournalRecord::encode_commit` at that position: copy A, zeros up to
/// the next 4 KiB boundary, copy B): after SyncJournal, ReadJournal returns them all,
/// in order.
fn append_journal_appends<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let mut want = pattern(1500, 210);
    st.replace(&want)?;
    // One record, a commit whose copy A crosses a 4 KiB boundary, and a batch.
    for (i, n) in [1usize, 300, 3].into_iter().enumerate() {
        st.append_journal(&mut want, &journal_records(n, 211 + i as u64))?;
    }
    st.done(StorageOp::SyncJournal)?;
    st.expect_journal("after ReplaceJournal, three AppendJournal and SyncJournal", &want)?;
    // After a replacement, appends go after the new contents (a shorter journal).
    let mut want = pattern(300, 220);
    st.replace(&want)?;
    st.append_journal(&mut want, &journal_records(2, 221))?;
    st.done(StorageOp::SyncJournal)?;
    st.expect_journal(
        "after a ReplaceJournal of 300 bytes over a longer journal, AppendJournal and SyncJournal",
        &want,
    )?;
    // After ReadJournal (as a restarted broker does), appends still go at the end.
    st.append_journal(&mut want, &journal_records(1, 222))?;
    st.done(StorageOp::SyncJournal)?;
    st.expect_journal("after ReadJournal, another AppendJournal and SyncJournal", &want)
}

/// CreateLog makes an empty log; on an existing log it changes nothing (its records
/// stay); ListLogs lists every log once, ordered by LogId, and nothing else.
fn create_log_idempotent_and_listed<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    // Ids whose order a name without fixed-width digits would get wrong.
    let (a, b, c, d) = (log(9, 2), log(9, 10), log(10, 2), log(1 << 40, 0));
    st.replace(&pattern(100, 230))?;
    for l in [c, d, a, b] {
        st.create(l)?;
    }
    st.expect_logs("after CreateLog of four logs (and a journal)", &[a, b, c, d])?;
    st.open_clean(a, 0, "after CreateLog")?;
    st.create(a)?;
    st.expect_logs("after a second CreateLog of an existing log", &[a, b, c, d])?;
    // A log with records: CreateLog leaves it as it is.
    st.open_clean(b, 0, "after CreateLog")?;
    st.append_batches(b, 0, &[3, 2], 231)?;
    st.sync(b)?;
    st.create(b)?;
    st.expect_logs("after CreateLog of a log holding records", &[a, b, c, d])?;
    st.open_clean(b, 5, "after 5 records were appended and synced, and CreateLog of the log again")?;
    st.expect_read(b, 0, 5, &stored(0..5, 231), "after CreateLog of a log holding 5 records")
}

/// OpenLog of a log that does not exist fails with NotFound, whatever its `acked_end`,
/// and creates nothing.
fn open_absent_log_not_found<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(5, 0), log(5, 1));
    st.expect_not_found(
        StorageOp::OpenLog { log: a, acked_end: 0, first_offset: 0, keep_whole_tail: false },
        "on fresh storage",
    )?;
    st.expect_not_found(
        StorageOp::OpenLog { log: a, acked_end: 3, first_offset: 0, keep_whole_tail: false },
        "on fresh storage",
    )?;
    st.expect_logs("after OpenLog of absent logs", &[])?;
    st.create(b)?;
    st.expect_not_found(
        StorageOp::OpenLog { log: a, acked_end: 0, first_offset: 0, keep_whole_tail: false },
        "with only another log created",
    )?;
    st.expect_logs("after OpenLog of an absent log", &[b])
}

/// Records appended (in batches, offsets dense) and synced read back as appended:
/// offsets dense from the one asked, keys (none, empty or not) and values byte for
/// byte; a read below the log's end returns at least one record and at most
/// `max_records`.
fn append_sync_read<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(7, 0), log(7, 1));
    st.create(a)?;
    st.create(b)?;
    st.open_clean(a, 0, "after CreateLog")?;
    st.open_clean(b, 0, "after CreateLog")?;
    let end = st.append_batches(a, 0, &[1, 5, 2, 12], 240)?;
    st.append_batches(b, 0, &[4], 241)?; // another log's appends in between
    st.sync(a)?;
    st.sync(b)?;
    st.expect_read(a, 0, end, &stored(0..end, 240), "after 20 records in 4 appends and SyncLog")?;
    st.expect_read(a, 7, end, &stored(7..end, 240), "from inside an append")?;
    st.expect_read(b, 0, 4, &stored(0..4, 241), "the other log")?;
    let one = st.read(a, 3, 1, u64::MAX)?;
    expect_records(&format!("Read({a}, offset: 3, max_records: 1)"), &one, &stored(3..4, 240))?;
    // More appends after reads, synced again.
    let end2 = st.append_batches(a, end, &[3], 240)?;
    st.sync(a)?;
    st.expect_read(a, 0, end2, &stored(0..end2, 240), "after another append and SyncLog")
}

/// Read returns at most `max_records` records (and at least one), from the offset
/// asked.
fn read_honours_max_records<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let a = log(8, 0);
    st.create(a)?;
    st.open_clean(a, 0, "after CreateLog")?;
    let end = st.append_batches(a, 0, &[10, 3, 3, 4], 250)?;
    st.sync(a)?;
    for (offset, max) in [(0, 1), (0, 3), (2, 5), (9, 2), (12, 4), (19, 1), (0, 20)] {
        let got = st.read(a, offset, max, u64::MAX)?;
        let want = stored(offset..offset + got.len() as u64, 250);
        expect_records(&format!("Read({a}, offset: {offset}, max_records: {max}) of {end} records"), &got, &want)?;
    }
    Ok(())
}

/// Read returns records whose key and value bytes sum to at most `max_bytes`, except
/// that the first record is always returned, whatever its size (so a read always makes
/// progress).
fn read_honours_max_bytes<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let a = log(8, 1);
    st.create(a)?;
    st.open_clean(a, 0, "after CreateLog")?;
    // Six records of 100 bytes (a 10-byte key and a 90-byte value) in one append, then
    // four of 300 (no key) in one append each.
    let sized = |offset: u64| {
        let (key, value) = if offset < 6 { (Some(pattern(10, offset)), 90) } else { (None, 300) };
        ProduceRecord { key, value: pattern(value, 260 + offset).into() }
    };
    let batch = |from: u64, to: u64| (from..to).map(|offset| AppendRecord { offset, record: sized(offset) }).collect();
    st.done(StorageOp::Append { log: a, records: batch(0, 6) })?;
    for i in 6..10 {
        st.done(StorageOp::Append { log: a, records: batch(i, i + 1) })?;
    }
    st.sync(a)?;
    for (offset, max_bytes) in [(0, 250), (0, 0), (0, 99), (0, 100), (0, 599), (2, 150), (6, 299), (5, 650), (4, 1000)]
    {
        let max_records = (10 - offset) as u32;
        let got = st.read(a, offset, max_records, max_bytes)?;
        let want: Vec<StoredRecord> = (offset..offset + got.len() as u64)
            .map(|o| {
                let r = sized(o);
                StoredRecord { offset: o, key: r.key, value: r.value }
            })
            .collect();
        let what = format!("Read({a}, offset: {offset}, max_records: {max_records}, max_bytes: {max_bytes})");
        expect_records(&what, &got, &want)?;
        let bytes: u64 = got.iter().map(record_bytes).sum();
        if got.len() > 1 && bytes > max_bytes {
            return Err(format!(
                "{what} returned {} records of {bytes} key and value bytes, more than max_bytes",
                got.len()
            ));
        }
    }
    Ok(())
}

/// OpenLog with `acked_end` the number of records appended and synced reports
/// `next_offset` `acked_end` and no damage; the records read back whole, and appends
/// continue at `acked_end`.
fn open_log_at_acked_end<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let a = log(11, 0);
    st.create(a)?;
    st.open_clean(a, 0, "after CreateLog")?;
    let end = st.append_batches(a, 0, &[3, 4, 1], 270)?;
    st.sync(a)?;
    st.open_clean(a, end, "after 8 records were appended and synced")?;
    st.expect_read(a, 0, end, &stored(0..end, 270), "after OpenLog at the synced end")?;
    let end2 = st.append_batches(a, end, &[2], 270)?;
    st.sync(a)?;
    st.expect_read(a, 0, end2, &stored(0..end2, 270), "after an append at acked_end")?;
    // Opened again (as every restart does), and again: nothing changes.
    st.open_clean(a, end2, "after 10 records were appended and synced")?;
    st.open_clean(a, end2, "after OpenLog of the same log at the same acked_end")?;
    st.expect_read(a, 0, end2, &stored(0..end2, 270), "after OpenLog twice at the synced end")
}

/// OpenLog with an `acked_end` below the log's end reports `next_offset` `acked_end`
/// and no damage, and cuts everything from `acked_end` on: reads see only the records
/// below it, and appends at `acked_end` take the cut records' place.
fn open_log_cuts_unacknowledged<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(12, 0), log(12, 1));
    st.create(a)?;
    st.open_clean(a, 0, "after CreateLog")?;
    st.append_batches(a, 0, &[3, 3, 4], 280)?;
    st.sync(a)?;
    st.open_clean(a, 6, "with 10 records appended and synced")?;
    st.expect_read(a, 0, 6, &stored(0..6, 280), "after OpenLog with acked_end 6 of 10 records")?;
    // New records at 6..9, where the cut ones were.
    st.append_batches(a, 6, &[2, 1], 281)?;
    st.sync(a)?;
    let mut want = stored(0..6, 280);
    want.extend(stored(6..9, 281));
    st.expect_read(a, 0, 9, &want, "after the cut at 6 and appends of new records at 6..9")?;
    st.open_clean(a, 9, "after the cut at 6 and 3 new records appended and synced")?;
    st.expect_read(a, 0, 9, &want, "after opening the log again at 9")?;
    // Everything cut: acked_end 0.
    st.create(b)?;
    st.open_clean(b, 0, "after CreateLog")?;
    st.append_batches(b, 0, &[4], 282)?;
    st.sync(b)?;
    st.open_clean(b, 0, "with 4 records appended, synced but never acknowledged")?;
    st.append_batches(b, 0, &[2], 283)?;
    st.sync(b)?;
    st.expect_read(b, 0, 2, &stored(0..2, 283), "after a cut at 0 and 2 new records appended")?;
    st.open_clean(b, 2, "after a cut at 0 and 2 new records appended and synced")
}

/// OpenLog with an `acked_end` past the records the log holds still reports
/// `next_offset` `acked_end`, with the missing offsets in damaged ranges (and no offset
/// below them); every read of a missing offset fails with Corrupt, and appends continue
/// at `acked_end`.
fn open_log_reports_missing_acked<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let a = log(13, 0);
    st.create(a)?;
    st.open_clean(a, 0, "after CreateLog")?;
    st.append_batches(a, 0, &[2, 3], 290)?;
    st.sync(a)?;
    // The journal says 8 were acknowledged; the log holds 5.
    let (next, damaged) = st.open(a, 8)?;
    let when = "after 5 records were appended and synced";
    if next != 8 {
        return Err(format!("{when}, OpenLog({a}, acked_end: 8) reported next_offset {next}, not 8"));
    }
    let covered = |o: u64| damaged.iter().any(|d| d.from <= o && o < d.to);
    if !(5..8).all(covered) || (0..5).any(covered) {
        return Err(format!(
            "{when}, OpenLog({a}, acked_end: 8) reported damaged {}: expected ranges covering 5..8 (the missing \
             acknowledged records) and nothing below 5",
            show_damaged(&damaged)
        ));
    }
    let check_missing = |st: &mut Store<'_, S>, when: &str| -> Seen {
        for offset in 5..8 {
            let op = StorageOp::Read { log: a, offset, max_records: (8 - offset) as u32, max_bytes: u64::MAX };
            match st.run(&op) {
                Err(StorageError::Corrupt { .. }) => {}
                Err(e) => return Err(format!("{when}, {} failed with {e:?} instead of Corrupt", show(&op))),
                Ok(out) => {
                    return Err(format!(
                        "{when}, {} returned {} instead of failing with Corrupt",
                        show(&op),
                        show_out(&out)
                    ))
                }
            }
        }
        Ok(())
    };
    check_missing(&mut st, "with offsets 5..8 missing")?;
    st.expect_read(a, 0, 5, &stored(0..5, 290), "below the missing offsets")?;
    st.append_batches(a, 8, &[2], 291)?;
    st.sync(a)?;
    st.expect_read(a, 8, 10, &stored(8..10, 291), "after appends at acked_end 8 past missing offsets")?;
    check_missing(&mut st, "after appends at 8")
}

/// RemoveLog deletes the log (ListLogs no longer lists it, OpenLog of it is NotFound, a
/// later CreateLog makes a new, empty log); RemoveLog of an absent log succeeds.
fn remove_log_idempotent<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(14, 0), log(14, 1));
    st.done(StorageOp::RemoveLog { log: a })?;
    st.create(a)?;
    st.create(b)?;
    st.open_clean(a, 0, "after CreateLog")?;
    st.append_batches(a, 0, &[3], 300)?;
    st.sync(a)?;
    st.done(StorageOp::RemoveLog { log: a })?;
    st.expect_logs("after RemoveLog of one of two logs", &[b])?;
    st.expect_not_found(
        StorageOp::OpenLog { log: a, acked_end: 3, first_offset: 0, keep_whole_tail: false },
        "after RemoveLog",
    )?;
    st.done(StorageOp::RemoveLog { log: a })?;
    st.expect_logs("after a second RemoveLog of the same log", &[b])?;
    // The id again: a new, empty log.
    st.create(a)?;
    st.expect_logs("after CreateLog of a removed log", &[a, b])?;
    st.open_clean(a, 0, "after CreateLog of a removed log that held 3 records")?;
    st.append_batches(a, 0, &[2], 301)?;
    st.sync(a)?;
    st.expect_read(a, 0, 2, &stored(0..2, 301), "after RemoveLog, CreateLog and new appends")?;
    st.open_clean(a, 2, "after RemoveLog, CreateLog and 2 records appended and synced")
}

// --- durability at a crash -----------------------------------------------------------------

/// After Append and SyncLog, a crash keeps the records: a new executor's OpenLog with
/// `acked_end` at the synced end reports no damage, reads them back, and appends
/// continue there (unsynced appends after them are cut).
fn synced_appends_survive_crash<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(15, 0), log(15, 1));
    for l in [a, b] {
        st.create(l)?;
        st.open_clean(l, 0, "after CreateLog")?;
    }
    // a: two synced appends, then one not synced; b: each append synced.
    let synced = st.append_batches(a, 0, &[2, 3], 310)?;
    st.sync(a)?;
    st.append_batches(a, synced, &[4], 310)?;
    for (from, n) in [(0, 3), (3, 2)] {
        st.append_batches(b, from, &[n], 311)?;
        st.sync(b)?;
    }
    let mut st = st.crash()?;
    st.open_clean(a, synced, "after 5 records were appended and synced, 4 more appended, and a crash")?;
    st.expect_read(a, 0, synced, &stored(0..synced, 310), "after SyncLog and a crash")?;
    st.open_clean(b, 5, "after 5 records were appended and synced in two appends, and a crash")?;
    st.expect_read(b, 0, 5, &stored(0..5, 311), "after SyncLog and a crash")?;
    // Appends continue at the synced end, over whatever survived of the unsynced ones.
    st.append_batches(a, synced, &[2], 312)?;
    st.sync(a)?;
    let mut want = stored(0..synced, 310);
    want.extend(stored(synced..synced + 2, 312));
    st.expect_read(a, 0, synced + 2, &want, "after a crash and new appends at the synced end")
}

/// A completed ReplaceJournal is durable: after a crash, ReadJournal returns its
/// contents whole (with `keep_old` too).
fn replaced_journal_survives_crash<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let first = pattern(2000, 320);
    st.replace(&first)?;
    let mut st = st.crash()?;
    st.expect_journal("after the first ReplaceJournal and a crash", &first)?;
    let second = pattern(1200, 321);
    st.replace(&second)?;
    let mut st = st.crash()?;
    st.expect_journal("after ReplaceJournal over an existing journal and a crash", &second)?;
    let third = pattern(3500, 322);
    let op = StorageOp::ReplaceJournal { contents: third.clone(), keep_old: true };
    st.ok(&op)?;
    let mut st = st.crash()?;
    st.expect_journal("after ReplaceJournal with keep_old and a crash", &third)
}

/// After AppendJournal and SyncJournal, a crash keeps the journal with the appended
/// commit at its end.
fn synced_journal_appends_survive_crash<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let mut want = pattern(800, 330);
    st.replace(&want)?;
    for i in 0..3 {
        st.append_journal(&mut want, &journal_records(1 + 2 * i, 331 + i as u64))?;
        st.done(StorageOp::SyncJournal)?;
    }
    let mut st = st.crash()?;
    st.expect_journal("after ReplaceJournal, AppendJournal and SyncJournal three times, and a crash", &want)?;
    // Appends after a crash (and a ReadJournal) go at the surviving end, and survive too.
    st.append_journal(&mut want, &journal_records(4, 335))?;
    st.done(StorageOp::SyncJournal)?;
    let mut st = st.crash()?;
    st.expect_journal("after ReadJournal, AppendJournal and SyncJournal, and another crash", &want)
}

/// A completed CreateLog is durable: after a crash ListLogs lists the log, and it
/// opens empty (OpenLog with `acked_end` 0: `next_offset` 0, no damage) and takes
/// appends.
fn created_log_survives_crash<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b, c) = (log(16, 0), log(16, 1), log(17, 0));
    st.replace(&pattern(100, 340))?;
    for l in [a, b, c] {
        st.create(l)?;
    }
    let mut st = st.crash()?;
    st.expect_logs("after CreateLog of three logs and a crash", &[a, b, c])?;
    for l in [a, b, c] {
        st.open_clean(l, 0, "after CreateLog and a crash")?;
    }
    st.append_batches(b, 0, &[2], 341)?;
    st.sync(b)?;
    st.expect_read(b, 0, 2, &stored(0..2, 341), "after CreateLog, a crash and an append")
}

/// A completed RemoveLog is durable: after a crash ListLogs does not list the log, and
/// OpenLog of it fails with NotFound.
fn removed_log_stays_gone_after_crash<S: ExecutorSubject>(s: &mut S) -> Seen {
    let mut st = Store::fresh(s);
    let (a, b) = (log(18, 0), log(18, 1));
    st.replace(&pattern(100, 350))?;
    for l in [a, b] {
        st.create(l)?;
        st.open_clean(l, 0, "after CreateLog")?;
        st.append_batches(l, 0, &[3], 351)?;
        st.sync(l)?;
    }
    st.done(StorageOp::RemoveLog { log: a })?;
    let mut st = st.crash()?;
    st.expect_logs("after RemoveLog of one of two logs and a crash", &[b])?;
    st.expect_not_found(
        StorageOp::OpenLog { log: a, acked_end: 3, first_offset: 0, keep_whole_tail: false },
        "after RemoveLog and a crash",
    )
}
