//! Group commit of journal records, and compaction, one journal operation at a time.
//!
//! Records are queued with a sequence number. When nothing is in flight, the queue is
//! written as one append followed by one sync; or, when compaction is due, the whole
//! state is written as a snapshot into a new journal (atomic replace), which makes
//! every queued record durable at once. Waiters learn durability by sequence number.

use crate::journal::{encode_compacted, JournalRecord, Snapshot};

/// When compaction is due (from [`crate::Config`]).
#[derive(Debug, Clone)]
pub(crate) struct CompactionLimits {
    pub min_records: u64,
    pub ratio: u64,
    pub min_bytes: u64,
}

/// What the in-flight journal work makes durable once it completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Flight {
    /// An append and a sync; `ops_left` of the two are outstanding.
    AppendSync { upto: u64, records: u64, bytes: u64, ops_left: u8 },
    /// An atomic replace with a snapshot, creating journal `epoch` of `bytes` bytes.
    Replace { upto: u64, epoch: u64, bytes: u64 },
}

/// The next journal operation(s) to issue.
#[derive(Debug)]
pub(crate) enum JournalIo {
    /// One commit of `records` to journal `epoch`; the executor lays out its bytes.
    AppendSync { epoch: u64, records: Vec<JournalRecord> },
    /// A new journal file of `contents`, replacing the current one.
    Replace { contents: Vec<u8>, keep_old: bool },
}

#[derive(Debug, Default)]
pub(crate) struct JournalWriter {
    pub epoch: u64,
    queue: Vec<JournalRecord>,
    last_seq: u64,
    durable_seq: u64,
    pub flight: Option<Flight>,
    /// Records in the current journal file (snapshot included).
    records_in_file: u64,
    /// The current journal file's length: where the next commit starts, which places
    /// its second copy (see [`crate::journal`]); counted, commit by commit, with
    /// [`JournalRecord::commit_len`].
    file_len: u64,
    /// The size of the last journal file written whole (a snapshot): the measure of the
    /// live metadata in bytes.
    snapshot_len: u64,
    /// A replace is required before anything else (first start, torn tail).
    forced_replace: Option<bool>,
}

impl JournalWriter {
    /// A writer continuing journal `epoch`, `file_len` bytes long, that already holds
    /// `records`.
    pub fn resume(epoch: u64, records: u64, file_len: u64) -> JournalWriter {
        JournalWriter { epoch, records_in_file: records, file_len, ..JournalWriter::default() }
    }

    /// Requires a replace before the next append (`keep_old`: back up the old file).
    pub fn force_replace(&mut self, keep_old: bool) {
        self.forced_replace = Some(keep_old || self.forced_replace.unwrap_or(false));
    }

    /// Queues a record; returns its sequence number.
    pub fn push(&mut self, rec: JournalRecord) -> u64 {
        self.queue.push(rec);
        self.last_seq += 1;
        self.last_seq
    }

    /// Nothing in flight and no replace owed.
    pub fn idle(&self) -> bool {
        self.flight.is_none() && self.forced_replace.is_none()
    }

    /// Whether every record queued so far is durable.
    pub fn all_durable(&self) -> bool {
        self.durable_seq == self.last_seq
    }

    /// The sequence number of the newest record queued.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn durable_seq(&self) -> u64 {
        self.durable_seq
    }

    pub fn is_durable(&self, seq: u64) -> bool {
        seq <= self.durable_seq
    }

    /// Whether compaction is due: by records against the live metadata, or by bytes
    /// against the last snapshot written.
    fn compaction_due(&self, live_entries: u64, limits: &CompactionLimits) -> bool {
        let file = self.records_in_file + self.queue.len() as u64;
        let by_records = file >= limits.min_records && file > limits.ratio.saturating_mul(live_entries.max(1));
        let by_bytes =
            self.file_len >= limits.min_bytes && self.file_len > limits.ratio.saturating_mul(self.snapshot_len.max(1));
        by_records || by_bytes
    }

    /// The next I/O to issue, if nothing is in flight and there is work.
    /// `snapshot` is called only when a replace is chosen.
    pub fn next_io(
        &mut self,
        live_entries: u64,
        limits: &CompactionLimits,
        snapshot: impl FnOnce() -> Snapshot,
    ) -> Option<JournalIo> {
        if self.flight.is_some() {
            return None;
        }
        let keep_old = self.forced_replace;
        if keep_old.is_some() || (!self.queue.is_empty() && self.compaction_due(live_entries, limits)) {
            let epoch = self.epoch + 1;
            self.queue.clear();
            self.forced_replace = None;
            let contents = encode_compacted(epoch, snapshot());
            self.flight = Some(Flight::Replace { upto: self.last_seq, epoch, bytes: contents.len() as u64 });
            return Some(JournalIo::Replace { contents, keep_old: keep_old.unwrap_or(false) });
        }
        if self.queue.is_empty() {
            return None;
        }
        let records = std::mem::take(&mut self.queue);
        let bytes = JournalRecord::commit_len(&records, self.file_len);
        let count = records.len() as u64;
        self.flight = Some(Flight::AppendSync { upto: self.last_seq, records: count, bytes, ops_left: 2 });
        Some(JournalIo::AppendSync { epoch: self.epoch, records })
    }

    /// One journal operation completed successfully. Returns true if the in-flight
    /// work is now durable (and `durable_seq` advanced).
    pub fn op_done(&mut self) -> bool {
        match self.flight.take() {
            Some(Flight::AppendSync { upto, records, bytes, ops_left }) if ops_left > 1 => {
                self.flight = Some(Flight::AppendSync { upto, records, bytes, ops_left: ops_left - 1 });
                false
            }
            Some(Flight::AppendSync { upto, records, bytes, .. }) => {
                self.durable_seq = upto;
                self.records_in_file += records;
                self.file_len += bytes;
                true
            }
            Some(Flight::Replace { upto, epoch, bytes }) => {
                self.durable_seq = upto;
                self.epoch = epoch;
                self.records_in_file = 1;
                self.file_len = bytes;
                self.snapshot_len = bytes;
                true
            }
            None => false,
        }
    }
}
