//! The storage executor: carries out every [`StorageOp`] over a [`FileSystem`] with the
//! fsync discipline of a careful database. The real runtime and the simulator share it,
//! so the simulator tests the real discipline.
//!
//! - A new log: create, write its header, fsync the file, fsync the directory.
//! - A removed log: unlink, fsync the directory.
//! - A journal append: one commit of the records, laid out (copy A, zeros, copy B; see
//!   [`crate::JournalRecord::encode_commit_into`]) for the journal's end, and written
//!   there.
//! - A journal replacement: write `journal.tmp`, fsync it, rename it over `journal`,
//!   fsync the directory.
//! - A log whose tail is torn is cut to its last whole record and fsynced on open; a cut
//!   whose fsync failed is made again by the next open, though the file looks cut.
//! - A torn or damaged journal is copied to `journal.torn.N` (written as `journal.tmp`,
//!   fsynced, renamed) before its replacement; only the [`MAX_JOURNAL_BACKUPS`] newest
//!   copies are kept.
//! - A journal write that finds the disk full releases the journal reserve and runs
//!   again, over whatever part of it landed (a full disk cuts a write short, as
//!   `write(2)` does); the reserve is taken again all at once or not at all.
//!
//! A failed directory fsync is reported as [`StorageError::DirSyncFailed`], distinct
//! from every other failure: the entry's durability is then unknown, and the core halts
//! rather than retry (a failure before anything changed, such as a create refused for
//! lack of space, stays an ordinary, retryable error).

use crate::command::StoredRecord;
use crate::crc_range::Prefixes;
use crate::effect::{OpOutput, OpResult, StorageOp};
use crate::error::StorageError;
use crate::frame::FRAME_HEADER_LEN;
use crate::fs::FileSystem;
use crate::ids::LogId;
use crate::journal::{JournalRecord, JOURNAL_FILE};
use crate::logcodec::{self, Hole, IndexEntry, LOG_HEADER_LEN};
use std::collections::{BTreeMap, BTreeSet};

/// The temporary file a journal replacement is written to before its rename.
pub const JOURNAL_TMP_FILE: &str = "journal.tmp";
/// Space held back for the journal: released when a journal write finds the disk full,
/// so that a delete's tombstone (and the journal rewrite of every start) still fits, and
/// taken again once space returns.
pub const JOURNAL_RESERVE_FILE: &str = "journal.reserve";
/// The smallest journal reserve; it also covers twice the journal's size.
pub const JOURNAL_RESERVE_MIN: u64 = 1 << 20;
/// Backups of torn journals are named `journal.torn.N`.
pub const JOURNAL_BACKUP_PREFIX: &str = "journal.torn.";
/// At most this many `journal.torn.N` copies are kept: a new copy is numbered one past
/// the highest, and the oldest (lowest-numbered) ones beyond this count are removed.
pub const MAX_JOURNAL_BACKUPS: usize = 8;

/// What the executor knows of an open log.
#[derive(Debug, Clone)]
struct OpenLog {
    len: u64,
    next_offset: u64,
    index: Vec<IndexEntry>,
    holes: Vec<Hole>,
    /// What opening it with `keep_whole_tail` cut, if anything.
    tail_cut: Option<crate::effect::TailCut>,
}

/// Executes storage operations one at a time over a file system.
///
/// It caches each open log's index; after a crash, build a new executor over the
/// surviving file system (the core's recovery reopens every log).
#[derive(Debug)]
pub struct Executor<F> {
    fs: F,
    logs: BTreeMap<LogId, OpenLog>,
    /// Where the next journal append goes: the end of the journal's last whole commit
    /// (`None` until the journal is read or written). It is kept across a failed append,
    /// whose bytes may have landed in part past it, so that the retry writes over them.
    journal_end: Option<u64>,
    /// The first offset of each log this executor created or opened (its topic's offset
    /// base), for reopening a log it forgot after a failure.
    first_offsets: BTreeMap<LogId, u64>,
    /// Logs whose cut of a never-acknowledged tail is not known to be durable: the fsync
    /// after it failed. The next open cuts and syncs again, though the file already
    /// looks cut (a failed fsync leaves the cut in the page cache only).
    unproven_cuts: BTreeSet<LogId>,
    /// Logs under log-sync, which the executor never cuts on its own.
    keep_tails: BTreeSet<LogId>,
    /// The bugs planted in the executor ([`Executor::plant`]).
    #[cfg(feature = "planted-bugs")]
    bugs: crate::planted::PlantedBugs,
    /// How many bytes a log scan reads at a time.
    scan_chunk: usize,
    /// Writes nothing: opening a log cuts nothing, and every mutation is refused.
    read_only: bool,
    /// The least size of the journal reserve ([`JOURNAL_RESERVE_FILE`]).
    reserve_min: u64,
}

/// How many bytes opening a log reads at a time (a window holds at most this plus one
/// whole frame).
pub const SCAN_CHUNK: usize = 8 << 20;

/// Bytes of a file from `start` on, as opening a log reads them.
#[derive(Debug)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    /// The bytes `[from, to)`, which the window holds.
    fn at(&self, from: u64, to: u64) -> &[u8] {
        &self.bytes[(from - self.start) as usize..(to - self.start) as usize]
    }

    /// The window's bytes up to file position `to`.
    fn upto(&self, to: u64) -> &[u8] {
        &self.bytes[..(to - self.start) as usize]
    }
}

impl<F: FileSystem> Executor<F> {
    /// An executor over `fs`, with nothing open.
    pub fn new(fs: F) -> Executor<F> {
        Executor {
            fs,
            logs: BTreeMap::new(),
            journal_end: None,
            first_offsets: BTreeMap::new(),
            unproven_cuts: BTreeSet::new(),
            keep_tails: BTreeSet::new(),
            #[cfg(feature = "planted-bugs")]
            bugs: crate::planted::PlantedBugs::default(),
            scan_chunk: SCAN_CHUNK,
            read_only: false,
            reserve_min: JOURNAL_RESERVE_MIN,
        }
    }

    /// Sets the least size of the journal reserve (default [`JOURNAL_RESERVE_MIN`]).
    pub fn set_reserve_min(&mut self, bytes: u64) {
        self.reserve_min = bytes;
    }

    /// Makes this executor write nothing, for a broker started with
    /// [`crate::Config::read_only`]: logs are opened without cutting what was never
    /// acknowledged (it is not served either), and every mutating operation fails with
    /// [`StorageError::PermissionDenied`].
    pub fn set_read_only(&mut self, read_only: bool) {
        self.read_only = read_only;
    }

    /// Sets how many bytes opening a log reads at a time (tests use small chunks to
    /// exercise the chunk boundaries).
    pub fn set_scan_chunk(&mut self, bytes: usize) {
        self.scan_chunk = bytes.max(1);
    }

    /// Switches on the planted bugs that live in the executor (`SkipDirSync`,
    /// `ForgetJournalEnd`, `LogSyncReportsJournaledCut`). Test support, not part of the API.
    #[cfg(feature = "planted-bugs")]
    #[doc(hidden)]
    pub fn plant(&mut self, bugs: &crate::planted::PlantedBugs) {
        self.bugs = bugs.clone();
    }

    /// Fsyncs the directory after an entry was created or renamed (unless the planted
    /// bug skips it).
    fn sync_new_entry(&mut self, after: &str) -> Result<(), StorageError> {
        if planted!(self, SkipDirSync) {
            return Ok(());
        }
        self.sync_dir(after)
    }

    /// Fsyncs the directory; a failure is reported as [`StorageError::DirSyncFailed`]
    /// (`after` says what changed the directory), on which the core halts: the entry's
    /// durability is then unknown and no later fsync may be trusted to have fixed it.
    fn sync_dir(&mut self, after: &str) -> Result<(), StorageError> {
        self.fs.sync_dir().map_err(|e| StorageError::DirSyncFailed(format!("after {after}: {e}")))
    }

    /// The file system.
    pub fn fs(&self) -> &F {
        &self.fs
    }

    /// The file system, mutably (tests inject damage through it).
    pub fn fs_mut(&mut self) -> &mut F {
        &mut self.fs
    }

    /// Gives the file system back.
    pub fn into_fs(self) -> F {
        self.fs
    }

    /// Carries out one operation and returns its result.
    pub fn execute(&mut self, op: &StorageOp) -> OpResult {
        let reads = matches!(
            op,
            StorageOp::ReadJournal | StorageOp::ListLogs | StorageOp::OpenLog { .. } | StorageOp::Read { .. }
        );
        if self.read_only && !reads {
            let target = op.log().map_or_else(|| JOURNAL_FILE.to_string(), |l| l.file_name());
            return Err(StorageError::PermissionDenied(format!(
                "{target}: a write refused: the data was opened read-only"
            )));
        }
        match op {
            StorageOp::ReadJournal => self.read_journal(),
            StorageOp::AppendJournal { epoch, records } => self.with_reserve(|ex| ex.append_journal(*epoch, records)),
            StorageOp::SyncJournal => self.fs.sync_file(JOURNAL_FILE).map(|()| OpOutput::Done),
            StorageOp::ReplaceJournal { contents, keep_old } => {
                let done = self.replace_journal(contents, *keep_old)?;
                self.keep_reserve();
                Ok(done)
            }
            StorageOp::ListLogs => self.list_logs(),
            StorageOp::CreateLog { log, first_offset, keep_whole_tail } => {
                self.first_offsets.insert(*log, *first_offset);
                self.keep_tail_of(*log, *keep_whole_tail);
                self.create_log(*log)
            }
            StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail } => {
                // Always judged afresh against the journal's acknowledged end.
                self.logs.remove(log);
                self.first_offsets.insert(*log, *first_offset);
                self.keep_tail_of(*log, *keep_whole_tail);
                self.open_log(*log, Some(*acked_end), *keep_whole_tail).map(|l| OpOutput::Opened {
                    next_offset: l.next_offset,
                    damaged: logcodec::damaged_ranges(&l.holes),
                    tail_cut: l.tail_cut.clone(),
                })
            }
            StorageOp::Append { log, records } => self.append(*log, records),
            StorageOp::SyncLog { log } => self.fs.sync_file(&log.file_name()).map(|()| OpOutput::Done),
            StorageOp::Read { log, offset, max_records, max_bytes } => {
                self.read(*log, *offset, *max_records, *max_bytes)
            }
            StorageOp::RemoveLog { log } => self.remove_log(*log),
        }
    }

    fn read_journal(&mut self) -> OpResult {
        match self.fs.read_all(JOURNAL_FILE) {
            Ok(bytes) => {
                self.journal_end = Some(bytes.len() as u64);
                Ok(OpOutput::Journal(Some(bytes)))
            }
            Err(StorageError::NotFound(_)) => {
                self.journal_end = None;
                Ok(OpOutput::Journal(None))
            }
            Err(e) => Err(e),
        }
    }

    /// Lays out the commit of `records` for the journal's end and writes it there.
    fn append_journal(&mut self, epoch: u64, records: &[JournalRecord]) -> OpResult {
        let at = match self.journal_end {
            Some(end) => end,
            None => self.fs.len(JOURNAL_FILE)?,
        };
        // A failed write may have landed in part (a short write, then ENOSPC or EIO):
        // `at` stays where the retry goes, over those bytes.
        self.journal_end = if planted!(self, ForgetJournalEnd) { None } else { Some(at) };
        let bytes = JournalRecord::encode_commit(records, epoch, at);
        self.fs.write_at(JOURNAL_FILE, at, &bytes)?;
        self.journal_end = Some(at + bytes.len() as u64);
        Ok(OpOutput::Done)
    }

    /// Runs a journal write; if it finds the disk full, releases the journal reserve and
    /// runs it once more. Only whole writes are run again, never a lone sync: a write
    /// rewrites its bytes, so the sync after it has something to make durable. A write
    /// run again must land where the first one did (it may have landed in part).
    fn with_reserve<T>(
        &mut self,
        mut write: impl FnMut(&mut Self) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        match write(self) {
            Err(StorageError::DiskFull(_)) if self.release_reserve() => write(self),
            result => result,
        }
    }

    /// Removes the journal reserve, durably; false if there was none to remove.
    fn release_reserve(&mut self) -> bool {
        match self.fs.remove(JOURNAL_RESERVE_FILE) {
            Ok(()) => self.fs.sync_dir().is_ok(),
            Err(_) => false,
        }
    }

    /// Grows the journal reserve to its target size (at least [`JOURNAL_RESERVE_MIN`] and
    /// twice the journal), all or nothing: where the whole of it does not fit, the reserve
    /// is cut back to what it held, so that it never takes the last free bytes without
    /// holding what the journal needs. A failure is harmless: the reserve is taken again
    /// after the next journal rewrite or log removal.
    fn keep_reserve(&mut self) {
        let journal = match self.journal_end {
            Some(len) => len,
            None => self.fs.len(JOURNAL_FILE).unwrap_or(0),
        };
        let target = self.reserve_min.max(journal.saturating_mul(2));
        let have = match self.fs.len(JOURNAL_RESERVE_FILE) {
            Ok(len) => len,
            Err(StorageError::NotFound(_)) => 0,
            Err(_) => return,
        };
        if have >= target {
            return;
        }
        let grown = (|| {
            self.fs.create(JOURNAL_RESERVE_FILE)?;
            self.fs.allocate(JOURNAL_RESERVE_FILE, target)?;
            self.fs.sync_file(JOURNAL_RESERVE_FILE)?;
            self.fs.sync_dir()
        })();
        if grown.is_err() {
            let _ = self.fs.truncate(JOURNAL_RESERVE_FILE, have).and_then(|()| self.fs.sync_file(JOURNAL_RESERVE_FILE));
        }
    }

    /// Writes `contents` as the new journal: through [`JOURNAL_TMP_FILE`], fsynced, then
    /// renamed over the journal, and the directory fsynced. With `keep_old`, the old
    /// journal is first copied to a backup. Each step that writes is run once more after
    /// releasing the reserve if it finds the disk full; a step that succeeded is never run
    /// again (a second backup of the same journal would push out an older one).
    fn replace_journal(&mut self, contents: &[u8], keep_old: bool) -> OpResult {
        self.journal_end = None;
        let backup = if keep_old { self.with_reserve(Self::back_up_journal)? } else { None };
        self.with_reserve(|ex| ex.write_journal_tmp(contents))?;
        self.fs.rename(JOURNAL_TMP_FILE, JOURNAL_FILE)?;
        self.sync_new_entry(&format!("renaming {JOURNAL_TMP_FILE} over {JOURNAL_FILE}"))?;
        self.journal_end = Some(contents.len() as u64);
        Ok(backup.map_or(OpOutput::Done, OpOutput::BackedUp))
    }

    /// Writes `contents` to [`JOURNAL_TMP_FILE`] from its start, and fsyncs it.
    fn write_journal_tmp(&mut self, contents: &[u8]) -> Result<(), StorageError> {
        self.fs.create(JOURNAL_TMP_FILE)?;
        self.fs.truncate(JOURNAL_TMP_FILE, 0)?;
        self.fs.write_at(JOURNAL_TMP_FILE, 0, contents)?;
        self.fs.sync_file(JOURNAL_TMP_FILE)
    }

    /// Copies the current journal to `journal.torn.N`, durably, numbered one past the
    /// highest copy, then removes the oldest copies beyond [`MAX_JOURNAL_BACKUPS`].
    ///
    /// The copy is written to [`JOURNAL_TMP_FILE`] and renamed only once it is whole and
    /// fsynced, so that a copy cut short (a full disk, a crash) never takes a backup's
    /// name, counts toward the copies kept or pushes out a good one.
    ///
    /// The removals are best effort: a copy that cannot be removed stays (the next
    /// backup tries again), and they need no directory fsync of their own (the journal
    /// rename that follows syncs the directory; a copy that comes back after a crash is
    /// only a spare copy).
    /// The copy's name, or `None` if there was no journal to copy.
    fn back_up_journal(&mut self) -> Result<Option<String>, StorageError> {
        let old = match self.fs.read_all(JOURNAL_FILE) {
            Ok(old) => old,
            Err(StorageError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut copies: Vec<u64> = self
            .fs
            .list()?
            .iter()
            .filter_map(|name| name.strip_prefix(JOURNAL_BACKUP_PREFIX))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .filter_map(|n| n.parse::<u64>().ok())
            .collect();
        copies.sort_unstable();
        let n = copies.last().map_or(0, |&last| last.saturating_add(1));
        let name = format!("{JOURNAL_BACKUP_PREFIX}{n}");
        self.write_journal_tmp(&old)?;
        self.fs.rename(JOURNAL_TMP_FILE, &name)?;
        self.sync_dir(&format!("renaming {JOURNAL_TMP_FILE} to {name}"))?;
        copies.push(n);
        let excess = copies.len().saturating_sub(MAX_JOURNAL_BACKUPS);
        for oldest in &copies[..excess] {
            let _ = self.fs.remove(&format!("{JOURNAL_BACKUP_PREFIX}{oldest}"));
        }
        Ok(Some(name))
    }

    fn list_logs(&mut self) -> OpResult {
        let mut logs: Vec<LogId> = self.fs.list()?.iter().filter_map(|n| LogId::parse_file_name(n)).collect();
        logs.sort();
        Ok(OpOutput::Logs(logs))
    }

    fn create_log(&mut self, log: LogId) -> OpResult {
        let name = log.file_name();
        self.logs.remove(&log);
        self.fs.create(&name)?;
        let header = logcodec::encode_log_header(log);
        if self.fs.len(&name)? < LOG_HEADER_LEN as u64 {
            self.fs.truncate(&name, 0)?;
        } else if self.fs.read_at(&name, 0, LOG_HEADER_LEN)? != header {
            let detail = "an existing file under this log's name has another header".to_string();
            return Err(StorageError::Corrupt {
                file: name,
                position: 0,
                record_offset: None,
                record_end: None,
                detail,
            });
        }
        // Always write the header, even over an identical one: after a failed fsync the
        // cached header may never reach the disk, and only a new write lets the next
        // fsync make it durable.
        self.fs.write_at(&name, 0, &header)?;
        self.fs.sync_file(&name)?;
        self.sync_new_entry(&format!("creating {name}"))?;
        Ok(OpOutput::Done)
    }

    /// Opens `log` (or returns its cached state): validates it and durably cuts what was
    /// never acknowledged (see [`logcodec::open_log`]; `acked` is the journal's
    /// acknowledged end, unknown when a read or append reopens a log it forgot).
    /// Notes whether `log` runs under log-sync ([`StorageOp::OpenLog`]'s `keep_whole_tail`).
    fn keep_tail_of(&mut self, log: LogId, keep: bool) {
        if keep {
            self.keep_tails.insert(log);
        } else {
            self.keep_tails.remove(&log);
        }
    }

    /// Opens `log` if it is not open: against `acked` for a [`StorageOp::OpenLog`], or
    /// with `acked` unknown after a failed append left its tail unknown. A log under
    /// log-sync is never cut then: what follows its last whole frame stays for the next
    /// start to find and report.
    fn open_log(&mut self, log: LogId, acked: Option<u64>, keep_tail: bool) -> Result<&OpenLog, StorageError> {
        let keep_tail = keep_tail || self.keep_tails.contains(&log);
        if !self.logs.contains_key(&log) {
            let name = log.file_name();
            let file_len = self.fs.len(&name)?;
            let first = self.first_offsets.get(&log).copied().unwrap_or(0);
            let fresh = || logcodec::LogImage { needs_header: true, next_offset: first, ..Default::default() };
            // Nothing acknowledged: every byte of the file would be cut, and its header
            // may be anything (its creation may have failed at the fsync, or a crash may
            // have kept the directory entry and not the bytes). There is nothing to read,
            // and nothing to call corrupt: the log starts afresh. Keeping the tail, its
            // frames are kept if the header is whole, and reported cut if it is not.
            let mut img = if acked == Some(first) && !keep_tail {
                fresh()
            } else if acked == Some(first) && file_len > 0 && !self.header_intact(log, &name, file_len)? {
                let why = format!("byte 0: the header is damaged or cut short ({file_len} bytes in the file)");
                logcodec::LogImage { tail_cut: Some((0, why)), ..fresh() }
            } else if file_len < LOG_HEADER_LEN as u64 {
                logcodec::open_log(log, &self.fs.read_all(&name)?, first, acked)?
            } else if keep_tail && planted!(self, LogSyncReportsJournaledCut) {
                let mut img = self.scan_log(log, &name, file_len, first, acked, false)?;
                let why = "past the journal's end".to_string();
                img.tail_cut = (img.valid_len < file_len).then_some((img.valid_len, why));
                img
            } else {
                self.scan_log(log, &name, file_len, first, acked, keep_tail)?
            };
            // With nothing acknowledged, the header may never have become durable: its
            // creation may have failed at the fsync, leaving it in the page cache only,
            // where a restarted process reads it back. Only writing it again lets an
            // fsync make it durable, so it is rewritten before anything is appended (one
            // write and fsync per start for each log without acknowledged records).
            let unproven_header = acked == Some(first);
            if self.read_only {
                img.tail_cut = None; // nothing is cut
            }
            let tail_cut = img.tail_cut.take().map(|(position, detail)| crate::effect::TailCut {
                position,
                bytes: file_len.saturating_sub(position),
                detail,
            });
            let len = if self.read_only {
                img.valid_len // what follows is neither cut nor served
            } else if keep_tail {
                self.make_kept_durable(log, &name, &img, acked, unproven_header)?
            } else if img.needs_header || unproven_header {
                self.fs.truncate(&name, 0)?;
                self.fs.write_at(&name, 0, &logcodec::encode_log_header(log))?;
                self.fs.sync_file(&name)?;
                self.unproven_cuts.remove(&log);
                LOG_HEADER_LEN as u64
            } else {
                // A cut whose fsync failed is in the page cache only: the file looks cut,
                // and only a new truncate lets an fsync make the cut durable.
                if img.valid_len < file_len || self.unproven_cuts.contains(&log) {
                    self.unproven_cuts.insert(log);
                    self.fs.truncate(&name, img.valid_len)?;
                    self.fs.sync_file(&name)?;
                    self.unproven_cuts.remove(&log);
                }
                img.valid_len
            };
            let state = OpenLog { len, next_offset: img.next_offset, index: img.index, holes: img.holes, tail_cut };
            self.logs.insert(log, state);
        }
        self.logs.get(&log).ok_or_else(|| StorageError::Io(format!("{log} vanished from the open-log table")))
    }

    /// Makes what opening with `keep_whole_tail` kept durable, and returns where the
    /// next append goes. Nothing is truncated: the bytes after the last frame kept stay
    /// until appends overwrite them, so a crash before the core reports them leaves
    /// them to be found and reported again. Frames kept past the acknowledged end may be
    /// in the page cache only (a failed fsync drops data from the durable future and a
    /// later one does not bring it back), so they are written again and synced; so is a
    /// header no acknowledged record proves.
    fn make_kept_durable(
        &mut self,
        log: LogId,
        name: &str,
        img: &logcodec::LogImage,
        acked: Option<u64>,
        unproven_header: bool,
    ) -> Result<u64, StorageError> {
        let header = img.needs_header || unproven_header;
        if header {
            self.fs.write_at(name, 0, &logcodec::encode_log_header(log))?;
        }
        let len = if img.index.is_empty() { LOG_HEADER_LEN as u64 } else { img.valid_len };
        let kept_from = acked.and_then(|a| img.index.iter().find(|e| e.offset >= a)).map(|e| e.position);
        if let Some(from) = kept_from {
            self.rewrite(name, from, len)?;
        }
        if header || kept_from.is_some() {
            self.fs.sync_file(name)?;
        }
        Ok(len)
    }

    /// Writes the file's bytes `[from, to)` again where they are, a scan chunk at a time,
    /// so that the next fsync makes them durable.
    fn rewrite(&mut self, name: &str, from: u64, to: u64) -> Result<(), StorageError> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(self.scan_chunk as u64) as usize;
            let bytes = self.fs.read_at(name, at, n)?;
            if bytes.len() != n {
                return Err(StorageError::Io(format!("{name} shrank while it was being opened")));
            }
            self.fs.write_at(name, at, &bytes)?;
            at += n as u64;
        }
        Ok(())
    }

    /// Whether the file begins with `log`'s header, whole.
    fn header_intact(&mut self, log: LogId, name: &str, file_len: u64) -> Result<bool, StorageError> {
        if file_len < LOG_HEADER_LEN as u64 {
            return Ok(false);
        }
        Ok(logcodec::check_header(log, &self.fs.read_at(name, 0, LOG_HEADER_LEN)?).is_ok())
    }

    /// Validates a log of `file_len` bytes in bounded memory, by the rules of
    /// [`logcodec::open_log`] (whose image it returns): it reads a window at a time, and
    /// at damage searches the following bytes for the next valid frame with
    /// [`logcodec::may_start_batch`] first, so a damaged multi-gigabyte log opens in
    /// memory of a window plus one frame, and in time linear in its size.
    fn scan_log(
        &mut self,
        log: LogId,
        name: &str,
        file_len: u64,
        first: u64,
        acked: Option<u64>,
        keep_tail: bool,
    ) -> Result<logcodec::LogImage, StorageError> {
        logcodec::check_header(log, &self.fs.read_at(name, 0, LOG_HEADER_LEN)?)?;
        let mut opener = logcodec::LogOpener::new(log, LOG_HEADER_LEN as u64, first, acked);
        if keep_tail {
            opener = opener.keep_whole_tail();
        }
        let mut win = Window { start: 0, bytes: Vec::new() };
        let mut pos = LOG_HEADER_LEN as u64;
        while pos < file_len {
            // The frame's header, then as much as it announces (or the rest of the file).
            let head_end = (pos + FRAME_HEADER_LEN as u64).min(file_len);
            self.cover(name, &mut win, pos, head_end, file_len)?;
            let end = match win.at(pos, head_end) {
                h if h.len() == FRAME_HEADER_LEN => {
                    let len = u64::from(u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
                    let whole = head_end + len;
                    if len > logcodec::MAX_LOG_FRAME as u64 {
                        head_end
                    } else {
                        whole.min(file_len)
                    }
                }
                _ => file_len,
            };
            self.cover(name, &mut win, pos, end, file_len)?;
            let found = logcodec::batch_frame_at(log, win.upto(end), (pos - win.start) as usize);
            match found {
                Ok(frame) => {
                    let frame_end = pos + (FRAME_HEADER_LEN + frame.payload.len()) as u64;
                    if !opener.frame(pos, frame.payload)? {
                        return Ok(opener.finish(file_len, None));
                    }
                    pos = frame_end;
                }
                Err(detail) if opener.damage_ends_log() => return Ok(opener.finish(file_len, Some((pos, detail)))),
                Err(detail) => match self.next_frame(log, name, &mut win, pos + 1, file_len)? {
                    Some(q) => {
                        opener.damage(pos, detail);
                        pos = q;
                    }
                    None => return Ok(opener.finish(file_len, Some((pos, detail)))),
                },
            }
        }
        Ok(opener.finish(file_len, None))
    }

    /// The position of the first valid frame at or after `from`, if any, searched a
    /// window at a time.
    fn next_frame(
        &mut self,
        log: LogId,
        name: &str,
        win: &mut Window,
        from: u64,
        file_len: u64,
    ) -> Result<Option<u64>, StorageError> {
        let step = self.scan_chunk as u64;
        let mut q0 = from;
        while q0 < file_len {
            let last = (q0 + step).min(file_len);
            // Candidates in [q0, last), each with room for a whole frame after it.
            let end = (last + (FRAME_HEADER_LEN + logcodec::MAX_LOG_FRAME) as u64).min(file_len);
            self.cover(name, win, q0, end, file_len)?;
            let buf = win.upto(end);
            // Built at the first candidate that passes the cheap tests: each one then
            // costs a checksum of a few hundred bytes, whatever length it announces.
            let mut prefixes = None;
            for q in q0..last {
                let rel = (q - win.start) as usize;
                if logcodec::may_start_batch(buf, rel)
                    && logcodec::batch_checksum_matches(
                        log,
                        prefixes.get_or_insert_with(|| Prefixes::new(buf)),
                        buf,
                        rel,
                    )
                    && logcodec::batch_frame_ok(log, buf, rel)
                {
                    return Ok(Some(q));
                }
            }
            q0 = last;
        }
        Ok(None)
    }

    /// Makes `win` hold the file's bytes `[from, to)`, reading at least a scan chunk.
    fn cover(&mut self, name: &str, win: &mut Window, from: u64, to: u64, file_len: u64) -> Result<(), StorageError> {
        if win.start <= from && to <= win.start + win.bytes.len() as u64 {
            return Ok(());
        }
        let want = (to - from).max(self.scan_chunk as u64).min(file_len - from);
        win.bytes = self.fs.read_at(name, from, want as usize)?;
        win.start = from;
        if (win.bytes.len() as u64) < to - from {
            return Err(StorageError::Io(format!("{name} shrank while it was being opened")));
        }
        Ok(())
    }

    fn append(&mut self, log: LogId, records: &[crate::effect::AppendRecord]) -> OpResult {
        let (at, next) = {
            let l = self.open_log(log, None, false)?;
            (l.len, l.next_offset)
        };
        let dense = records.iter().enumerate().all(|(i, r)| r.offset == next + i as u64);
        if !dense {
            let first = records.first().map_or(next, |r| r.offset);
            return Err(StorageError::Io(format!("append to {log} at offset {first}, but its next offset is {next}")));
        }
        let size = logcodec::batch_bytes(records.iter().map(|r| &r.record));
        if size > logcodec::MAX_LOG_FRAME as u64 {
            // Readers refuse such a frame: writing it would lose the records after their ack.
            let detail = format!("a batch of {size} bytes exceeds the log frame limit of {}", logcodec::MAX_LOG_FRAME);
            return Err(StorageError::Io(format!("append to {log} refused: {detail}")));
        }
        let bytes = logcodec::encode_records(log, records);
        // Until the write succeeds the tail is unknown: forget the log so it is reopened.
        let mut state = self.logs.remove(&log).ok_or_else(|| StorageError::Io(format!("{log} is not open")))?;
        self.fs.write_at(&log.file_name(), at, &bytes)?;
        let entry = IndexEntry { offset: next, count: records.len() as u32, position: at, len: bytes.len() as u32 };
        if !records.is_empty() {
            state.index.push(entry);
        }
        state.len = at + bytes.len() as u64;
        state.next_offset = next + records.len() as u64;
        self.logs.insert(log, state);
        Ok(OpOutput::Done)
    }

    fn read(&mut self, log: LogId, offset: u64, max_records: u32, max_bytes: u64) -> OpResult {
        let l = self.open_log(log, None, false)?;
        if let Some(h) = l.holes.iter().find(|h| h.from <= offset && offset < h.to) {
            return Err(StorageError::Corrupt {
                file: log.file_name(),
                position: h.position,
                record_offset: Some(offset),
                record_end: Some(h.to),
                detail: h.detail.clone(),
            });
        }
        // The batches holding `offset..offset + max_records`, while they are contiguous.
        let start = l.index.partition_point(|e| e.end() <= offset);
        let want_end = offset.saturating_add(u64::from(max_records));
        // Frames take at least the bytes of their records: stop reading once the frames
        // read hold more than the byte bound (the first one always goes).
        let mut run: Vec<IndexEntry> = Vec::new();
        let mut frame_bytes = 0u64;
        for e in &l.index[start..] {
            let contiguous = run.last().map_or(e.offset <= offset, |prev| prev.end() == e.offset);
            if !contiguous || e.offset >= want_end || (!run.is_empty() && frame_bytes >= max_bytes) {
                break;
            }
            frame_bytes += u64::from(e.len);
            run.push(*e);
        }
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return Ok(OpOutput::Records(Vec::<StoredRecord>::new()));
        };
        let span = (last.position + u64::from(last.len) - first.position) as usize;
        let position = first.position;
        // The records' values share this one buffer.
        let data = bytes::Bytes::from(self.fs.read_at(&log.file_name(), position, span)?);
        let mut records =
            logcodec::decode_records(log, &data, position, offset, max_records as usize).map_err(|e| {
                match e {
                    // The index knows the offsets of the frame that failed: all of them are lost.
                    StorageError::Corrupt { file, position, record_offset, detail, .. } => StorageError::Corrupt {
                        record_end: run.iter().find(|e| e.position == position).map(IndexEntry::end),
                        file,
                        position,
                        record_offset,
                        detail,
                    },
                    e => e,
                }
            })?;
        let mut bytes = 0u64;
        let within = records
            .iter()
            .position(|r| {
                bytes += (r.key.as_ref().map_or(0, Vec::len) + r.value.len()) as u64;
                bytes > max_bytes
            })
            .map_or(records.len(), |i| i.max(1));
        records.truncate(within);
        Ok(OpOutput::Records(records))
    }

    fn remove_log(&mut self, log: LogId) -> OpResult {
        self.logs.remove(&log);
        self.first_offsets.remove(&log);
        self.unproven_cuts.remove(&log);
        self.keep_tails.remove(&log);
        let name = log.file_name();
        match self.fs.remove(&name) {
            Ok(()) | Err(StorageError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        self.sync_dir(&format!("removing {name}"))?;
        // Space may have come back: hold some for the journal again.
        self.keep_reserve();
        Ok(OpOutput::Done)
    }
}
