//! The storage executor's write path under partial failures, over the simulated disk:
//! a write that a full disk cuts short, an fsync that fails after a cut, a reserve that
//! does not fit, a journal rewrite that meets a full disk half way. Each test is a
//! failure a user met on Linux; each fails on the executor as it was before its fix.

use broker_core::executor::{JOURNAL_BACKUP_PREFIX, JOURNAL_RESERVE_FILE, JOURNAL_TMP_FILE};
use broker_core::{
    decode_journal, encode_compacted, AppendRecord, Config, Executor, FileSystem, JournalRecord, LogId, OpOutput,
    Phase, ProduceRecord, Reply, Snapshot, StorageError, StorageOp, SyncDriver, Time, TopicId, JOURNAL_FILE,
};
use broker_sim::disk::{CrashMode, DiskFaults, SimDisk, BLOCK_SIZE};
use broker_testkit::commands::{create, created, delete, fetch, fetched, produce};

const LOG: LogId = LogId { topic: TopicId(1), partition: 0 };

fn records(from: u64, n: u64, fill: u8, size: usize) -> Vec<AppendRecord> {
    (from..from + n)
        .map(|offset| AppendRecord { offset, record: ProduceRecord { key: None, value: vec![fill; size].into() } })
        .collect()
}

fn capacity(bytes: u64) -> DiskFaults {
    DiskFaults { capacity: bytes, ..DiskFaults::none() }
}

/// What bricked a user's data directory on a full tmpfs: the disk fills up while the
/// broker runs (its own logs, or anything else), and a delete's tombstone append meets
/// it after a prefix (the journal's last block has room for part of the commit). The
/// executor releases the reserve and runs the append again; it appended after the
/// prefix, leaving a commit in the middle of the journal with both copies damaged, and
/// every later start refused the journal. Returns the broker started after the delete,
/// and how many writes the full disk cut short.
fn delete_on_a_disk_filled_while_running(config: &Config) -> (SyncDriver<SimDisk>, u64) {
    let mut d = SyncDriver::start(config.clone(), SimDisk::with_faults(1, capacity(4 << 20)));
    created(d.request(create("doomed", 1)));
    assert!(matches!(d.request(produce("doomed", &["x"])), Ok(Reply::Produced { .. })));
    let disk = d.fs_mut();
    disk.create("filler").unwrap();
    let block = vec![7u8; BLOCK_SIZE as usize];
    let mut at = 0;
    while disk.write_at("filler", at, &block).is_ok() {
        at += BLOCK_SIZE;
    }
    assert!(matches!(d.request(delete("doomed")), Ok(Reply::DeleteAccepted { .. })), "{:?}", d.halted());
    d.settle(100);
    let short = d.fs().counters().short_writes;
    (SyncDriver::start(config.clone(), d.crash()), short)
}

#[test]
fn a_full_disk_during_a_tombstone_append_leaves_a_journal_that_starts() {
    let (mut d, short_writes) = delete_on_a_disk_filled_while_running(&Config::default());
    assert!(short_writes >= 1, "the tombstone's append was cut short");
    assert_eq!(d.phase(), Phase::Serving, "{:?}", d.halted());
    assert!(d.broker().pending_deletions().is_empty());
    assert!(d.fs().live_file(JOURNAL_RESERVE_FILE).is_some(), "taken again after the removal");
    // The directory is usable: a topic is created, written and read back.
    created(d.request(create("after", 1)));
    assert!(matches!(d.request(produce("after", &["y"])), Ok(Reply::Produced { .. })));
    // Its offsets begin past the deleted topic's record at 0.
    let (recs, _) = fetched(d.request(fetch("after", 0, 1, 10)));
    assert_eq!(recs.len(), 1);
}

/// The planted bug restores the old retry: the same session bricks the directory, so
/// the test above can fail.
#[cfg(feature = "planted-bugs")]
#[test]
fn the_old_retry_after_a_short_journal_write_bricks_the_journal() {
    use broker_core::planted::{Bug, PlantedBugs};
    let config = Config { bugs: PlantedBugs::only(Bug::ForgetJournalEnd), ..Config::default() };
    let (d, _) = delete_on_a_disk_filled_while_running(&config);
    assert_ne!(d.phase(), Phase::Serving);
    let why = format!("{:?}", d.halted());
    assert!(why.contains("both copies of a commit are damaged"), "{why}");
}

/// An executor over a simulated disk whose log holds two acknowledged records and an
/// unacknowledged, durable tail of three frames (its `LogEnd` never reached the
/// journal), after a crash.
fn log_with_an_unacknowledged_tail() -> Executor<SimDisk> {
    let mut ex = Executor::new(SimDisk::new(7));
    ex.execute(&StorageOp::CreateLog { log: LOG, first_offset: 0, keep_whole_tail: false }).unwrap();
    ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 0, first_offset: 0, keep_whole_tail: false }).unwrap();
    ex.execute(&StorageOp::Append { log: LOG, records: records(0, 2, 1, 10) }).unwrap();
    ex.execute(&StorageOp::SyncLog { log: LOG }).unwrap();
    ex.execute(&StorageOp::Append { log: LOG, records: records(2, 1, 0xEE, 3000) }).unwrap();
    ex.execute(&StorageOp::Append { log: LOG, records: records(3, 1, 0xEE, 10) }).unwrap();
    ex.execute(&StorageOp::Append { log: LOG, records: records(4, 1, 0xEE, 10) }).unwrap();
    ex.execute(&StorageOp::SyncLog { log: LOG }).unwrap();
    let mut disk = ex.into_fs();
    disk.crash_with(CrashMode::DropAll);
    Executor::new(disk)
}

fn crash(ex: Executor<SimDisk>) -> Executor<SimDisk> {
    let mut disk = ex.into_fs();
    disk.crash_with(CrashMode::DropAll);
    Executor::new(disk)
}

fn read_values(ex: &mut Executor<SimDisk>) -> Result<Vec<(u64, u8)>, StorageError> {
    match ex.execute(&StorageOp::Read { log: LOG, offset: 0, max_records: 20, max_bytes: 1 << 20 })? {
        OpOutput::Records(rs) => Ok(rs.iter().map(|r| (r.offset, r.value[0])).collect()),
        other => panic!("{other:?}"),
    }
}

/// Opening the log cuts the tail; the fsync after the cut fails and drops it (the cut
/// stays in the page cache only). The retried open found the file already cut and
/// answered `Opened` without making the cut durable; new records then went after a cut
/// that never happened, and after a crash the old frames came back behind them: the
/// next open failed ("offset 3 where 4 was expected") and no record of the log could
/// be read.
#[test]
fn a_retried_open_makes_a_cut_durable_whose_fsync_failed() {
    let mut ex = log_with_an_unacknowledged_tail();
    ex.fs_mut().set_faults(DiskFaults { fsync_failure: 1.0, ..DiskFaults::none() });
    assert!(
        ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 2, first_offset: 0, keep_whole_tail: false }).is_err(),
        "the cut's fsync fails"
    );
    ex.fs_mut().set_faults(DiskFaults::none());
    let reopened = ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 2, first_offset: 0, keep_whole_tail: false });
    assert_eq!(reopened, Ok(OpOutput::Opened { next_offset: 2, damaged: vec![], tail_cut: None }));
    let name = LOG.file_name();
    assert!(ex.fs().durable_file(&name) == ex.fs().live_file(&name), "the cut is durable");
    // Two new records, acknowledged (the journal would say 4), then a crash.
    ex.execute(&StorageOp::Append { log: LOG, records: records(2, 2, 2, 10) }).unwrap();
    ex.execute(&StorageOp::SyncLog { log: LOG }).unwrap();
    let mut ex = crash(ex);
    assert_eq!(
        ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 4, first_offset: 0, keep_whole_tail: false }),
        Ok(OpOutput::Opened { next_offset: 4, damaged: vec![], tail_cut: None })
    );
    assert_eq!(read_values(&mut ex), Ok(vec![(0, 1), (1, 1), (2, 2), (3, 2)]));
}

/// Stale frames that a lost cut left behind the acknowledged records (a restarted
/// process cannot know that an earlier one's cut failed) are the never-acknowledged
/// tail: cut on open, never a reason to refuse the log.
#[test]
fn frames_left_past_the_acknowledged_end_are_cut_not_taken_for_damage() {
    use broker_core::{encode_log_header, encode_records};
    let frames = |rs: &[Vec<AppendRecord>]| -> Vec<u8> {
        let mut out = encode_log_header(LOG);
        rs.iter().for_each(|r| out.extend(encode_records(LOG, r)));
        out
    };
    let old =
        frames(&[records(0, 2, 1, 10), records(2, 1, 0xEE, 3000), records(3, 1, 0xEE, 10), records(4, 1, 0xEE, 10)]);
    let new = frames(&[records(0, 2, 1, 10), records(2, 2, 2, 10)]);
    let mut file = new.clone();
    file.extend_from_slice(&old[new.len()..]);
    let mut fs = broker_core::MemFs::new();
    fs.create(&LOG.file_name()).unwrap();
    fs.write_at(&LOG.file_name(), 0, &file).unwrap();
    let mut ex = Executor::new(fs);
    assert_eq!(
        ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 4, first_offset: 0, keep_whole_tail: false }),
        Ok(OpOutput::Opened { next_offset: 4, damaged: vec![], tail_cut: None })
    );
    assert_eq!(ex.fs().file(&LOG.file_name()).map(<[u8]>::len), Some(new.len()), "the stale frames are cut");
    match ex.execute(&StorageOp::Read { log: LOG, offset: 0, max_records: 20, max_bytes: 1 << 20 }) {
        Ok(OpOutput::Records(rs)) => assert_eq!(
            rs.iter().map(|r| (r.offset, r.value[0])).collect::<Vec<_>>(),
            vec![(0, 1), (1, 1), (2, 2), (3, 2)]
        ),
        other => panic!("{other:?}"),
    }
}

/// The bytes in use on a disk, in whole blocks.
fn used(disk: &SimDisk) -> u64 {
    disk.live_names()
        .iter()
        .map(|n| disk.live_file(n).map_or(0, |f| (f.len() as u64).div_ceil(BLOCK_SIZE)))
        .sum::<u64>()
        * BLOCK_SIZE
}

/// After a log removal freed less than the reserve's target, regrowing the reserve with
/// zeros met a full disk after a prefix, ignored the failure, and left the disk with no
/// byte free: the next log append halted the broker. The reserve grows whole or not at
/// all.
#[test]
fn a_reserve_that_does_not_fit_is_not_grown_in_part() {
    let mut ex = Executor::new(SimDisk::new(3));
    ex.set_reserve_min(16 * BLOCK_SIZE);
    let journal = encode_compacted(1, Snapshot::default());
    ex.execute(&StorageOp::ReplaceJournal { contents: journal.clone(), keep_old: false }).unwrap();
    ex.execute(&StorageOp::CreateLog { log: LOG, first_offset: 0, keep_whole_tail: false }).unwrap();
    ex.execute(&StorageOp::OpenLog { log: LOG, acked_end: 0, first_offset: 0, keep_whole_tail: false }).unwrap();
    let other = LogId { topic: TopicId(2), partition: 0 };
    ex.execute(&StorageOp::CreateLog { log: other, first_offset: 0, keep_whole_tail: false }).unwrap();
    ex.execute(&StorageOp::OpenLog { log: other, acked_end: 0, first_offset: 0, keep_whole_tail: false }).unwrap();
    ex.execute(&StorageOp::Append { log: other, records: records(0, 1, 3, 6 * BLOCK_SIZE as usize) }).unwrap();
    ex.execute(&StorageOp::SyncLog { log: other }).unwrap();
    // The disk is full; a journal write releases the reserve, and the space it gave
    // back is taken (by other programs, or by the logs).
    let before = used(ex.fs());
    ex.fs_mut().set_faults(capacity(before));
    let tombstone = JournalRecord::TopicDeleted { id: TopicId(2), remove_after: Time::ZERO };
    ex.execute(&StorageOp::AppendJournal { epoch: 1, records: vec![tombstone.clone()] }).unwrap();
    assert!(ex.fs().live_file(JOURNAL_RESERVE_FILE).is_none(), "released");
    let written = ex.fs().live_file(JOURNAL_FILE).unwrap();
    let commit = JournalRecord::commit_len(std::slice::from_ref(&tombstone), journal.len() as u64);
    assert_eq!(written.len() as u64, journal.len() as u64 + commit, "the whole commit is appended");
    let d = decode_journal(&written).unwrap();
    assert_eq!(d.records.last().map(|(_, r)| r), Some(&tombstone));
    assert!(d.torn_tail.is_none() && d.repaired.is_empty());
    let full = used(ex.fs());
    ex.fs_mut().set_faults(capacity(full));
    // Removing the other log frees 7 blocks, fewer than the reserve's 16.
    ex.execute(&StorageOp::RemoveLog { log: other }).unwrap();
    let reserve = ex.fs().live_file(JOURNAL_RESERVE_FILE).map_or(0, |r| r.len());
    assert_eq!(reserve, 0, "not grown in part");
    assert!(used(ex.fs()) < full, "space is left for the logs");
    assert!(ex.execute(&StorageOp::Append { log: LOG, records: records(0, 1, 4, 100) }).is_ok());
    // With room for the whole of it, it grows again.
    ex.fs_mut().set_faults(capacity(full + 32 * BLOCK_SIZE));
    ex.execute(&StorageOp::RemoveLog { log: other }).unwrap();
    assert_eq!(ex.fs().live_file(JOURNAL_RESERVE_FILE).map(|r| r.len() as u64), Some(16 * BLOCK_SIZE));
}

/// A journal rewrite that keeps the old journal meets the full disk while copying it:
/// the reserve is released and the rewrite runs again. It left a copy cut short under a
/// backup's name (it counts toward the copies kept and can push a good one out), or, if
/// the copy fitted and the new journal did not, a second copy of the same journal.
#[test]
fn a_rewrite_that_meets_a_full_disk_keeps_one_whole_backup() {
    for (room, what) in [(10, "the copy fits, the new journal does not"), (2, "the copy does not fit")] {
        let mut ex = Executor::new(SimDisk::new(5));
        ex.set_reserve_min(32 * BLOCK_SIZE);
        let old = vec![b'J'; 8 * BLOCK_SIZE as usize];
        ex.execute(&StorageOp::ReplaceJournal { contents: old.clone(), keep_old: false }).unwrap();
        let full = used(ex.fs()) + room * BLOCK_SIZE;
        ex.fs_mut().set_faults(capacity(full));
        let new = vec![b'K'; 8 * BLOCK_SIZE as usize];
        let r = ex.execute(&StorageOp::ReplaceJournal { contents: new.clone(), keep_old: true });
        assert_eq!(r, Ok(OpOutput::BackedUp(format!("{JOURNAL_BACKUP_PREFIX}0"))), "{what}");
        let names = ex.fs().live_names();
        let backups: Vec<&String> = names.iter().filter(|n| n.starts_with(JOURNAL_BACKUP_PREFIX)).collect();
        assert_eq!(backups, vec![&format!("{JOURNAL_BACKUP_PREFIX}0")], "{what}: {names:?}");
        assert_eq!(ex.fs().live_file(backups[0]).unwrap(), old, "{what}: the backup is whole");
        assert_eq!(ex.fs().durable_file(backups[0]).unwrap(), old, "{what}: and durable");
        assert_eq!(ex.fs().durable_file(JOURNAL_FILE).unwrap(), new, "{what}");
        assert!(!names.contains(&JOURNAL_TMP_FILE.to_string()), "{what}: {names:?}");
    }
}
