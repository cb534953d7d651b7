//! Durability log-sync: a produce acknowledged at its log's fsync, the journal told the
//! end later; a start keeps the records the journal never held, and reports what it
//! sets aside after the last whole frame.

use broker_core::{Config, Durability, Effect, JournalRecord, LogId, MemFs, Notice, Reply, StorageOp, SyncDriver};
use broker_testkit::*;

const INTERVAL_MS: u64 = 100;

fn config() -> Config {
    Config { durability: Durability::LogSync { journal_ends_ms: INTERVAL_MS }, ..Config::default() }
}

fn log_ends(fs: &MemFs) -> Vec<(LogId, u64)> {
    journal_records(fs)
        .into_iter()
        .filter_map(|r| match r {
            JournalRecord::LogEnd { log, end } => Some((log, end)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_produce_is_acknowledged_before_the_journal_holds_its_end() {
    let mut d = SyncDriver::start(config(), MemFs::new());
    let id = created(d.request(create("t", 1)));
    d.record_trace();
    assert_eq!(produced(d.request(produce("t", &["a"]))), vec![(0, 0)]);
    let trace = d.take_trace();
    let reply_at = trace.iter().position(|e| matches!(e, Effect::Reply { reply: Ok(Reply::Produced { .. }), .. }));
    let ops: Vec<&StorageOp> = trace
        .iter()
        .filter_map(|e| match e {
            Effect::Storage { op, .. } => Some(op),
            _ => None,
        })
        .collect();
    assert!(reply_at.is_some(), "{trace:?}");
    assert!(
        ops.iter().all(|op| matches!(op, StorageOp::Append { .. } | StorageOp::SyncLog { .. })),
        "one append and one sync before the acknowledgement, no journal: {ops:?}"
    );
    assert!(log_ends(d.fs()).is_empty(), "the journal does not hold the end yet");
    // Within the interval, the journal learns the end, in one commit for every partition.
    d.advance_millis(INTERVAL_MS);
    d.run_until_idle();
    assert_eq!(log_ends(d.fs()), vec![(LogId { topic: id, partition: 0 }, 1)]);
}

#[test]
fn a_restart_keeps_the_records_the_journal_never_held() {
    let mut d = SyncDriver::start(config(), MemFs::new());
    created(d.request(create("t", 1)));
    for v in ["a", "b", "c"] {
        produced(d.request(produce("t", &[v])));
    }
    assert!(log_ends(d.fs()).is_empty());
    let mut d = SyncDriver::start(config(), d.crash());
    d.run_until_idle();
    let (records, hw) = fetched(d.request(fetch("t", 0, 0, 10)));
    assert_eq!((values(&records), hw), (vec!["a".to_string(), "b".into(), "c".into()], 3));
    assert!(d.take_notices().iter().all(|n| !matches!(n, Notice::TailCut { .. })));
    // The next record follows them, and the journal learns the new end.
    assert_eq!(produced(d.request(produce("t", &["d"]))), vec![(0, 3)]);
    d.advance_millis(INTERVAL_MS);
    d.run_until_idle();
    assert_eq!(log_ends(d.fs()).last().map(|(_, end)| *end), Some(4));
}

#[test]
fn damage_past_the_journal_end_is_reported_and_overwritten() {
    let mut d = SyncDriver::start(config(), MemFs::new());
    let id = created(d.request(create("t", 1)));
    produced(d.request(produce("t", &["first"])));
    produced(d.request(produce("t", &["second"])));
    let mut fs = d.crash();
    let log = LogId { topic: id, partition: 0 };
    let file = fs.file_mut(&log.file_name()).expect("the log exists");
    let len = file.len();
    file[len - 2] ^= 0x40; // rot in the last frame, which the journal never vouched for
    let mut d = SyncDriver::start(config(), fs);
    d.run_until_idle();
    let notices = d.take_notices();
    let cut: Vec<_> = notices.iter().filter(|n| matches!(n, Notice::TailCut { .. })).collect();
    assert!(
        matches!(cut.as_slice(), [Notice::TailCut { log: l, offset: 1, bytes, .. }] if *l == log && *bytes > 0),
        "{notices:?}"
    );
    assert!(cut[0].to_string().contains("offset 1"), "{}", cut[0]);
    // The damaged bytes stay until an append overwrites them: a crash before the report
    // reached anyone leaves them to be reported again.
    assert_eq!(d.fs().file(&log.file_name()).map(<[u8]>::len), Some(len));
    let (records, hw) = fetched(d.request(fetch("t", 0, 0, 10)));
    assert_eq!((values(&records), hw), (vec!["first".to_string()], 1));
    assert_eq!(produced(d.request(produce("t", &["third, longer than the second"]))), vec![(0, 1)]);
    let mut d = SyncDriver::start(config(), d.crash());
    d.run_until_idle();
    assert!(d.take_notices().iter().all(|n| !matches!(n, Notice::TailCut { .. })), "overwritten whole");
    let (records, _) = fetched(d.request(fetch("t", 0, 0, 10)));
    assert_eq!(values(&records), vec!["first".to_string(), "third, longer than the second".into()]);
}

#[test]
fn a_delete_journals_the_acknowledged_ends_before_its_tombstone() {
    let mut d = SyncDriver::start(config(), MemFs::new());
    let old = created(d.request(create("t", 2)));
    for _ in 0..3 {
        produced(d.request(produce("t", &["x"])));
    }
    d.request(delete("t")).expect("delete accepted");
    let records = journal_records(d.fs());
    let tombstone = records.iter().position(|r| matches!(r, JournalRecord::TopicDeleted { .. })).unwrap();
    let ends_before: u64 = records[..tombstone]
        .iter()
        .filter_map(|r| match r {
            JournalRecord::LogEnd { log, end } if log.topic == old => Some(*end),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    assert!(ends_before >= 2, "the largest end reaches the tombstone first: {records:?}");
    // So a re-created name begins past every position the old one acknowledged, after a
    // restart too.
    let mut d = SyncDriver::start(config(), d.crash());
    d.run_until_idle();
    let new = created(d.request(create("t", 1)));
    assert_ne!(new, old);
    let first = d.broker().live_topics().into_iter().find(|t| t.id == new).map(|t| t.log_start);
    assert_eq!(first, Some(ends_before));
}

#[test]
fn a_log_unreadable_whole_reports_what_cannot_be_counted() {
    let mut d = SyncDriver::start(config(), MemFs::new());
    let id = created(d.request(create("t", 1)));
    produced(d.request(produce("t", &["a", "b"])));
    d.advance_millis(INTERVAL_MS);
    d.run_until_idle();
    produced(d.request(produce("t", &["c"])));
    let mut fs = d.crash();
    let log = LogId { topic: id, partition: 0 };
    fs.file_mut(&log.file_name()).expect("the log exists")[0] ^= 0xff; // its header
    let mut d = SyncDriver::start(config(), fs);
    d.run_until_idle();
    let notices = d.take_notices();
    // The journal holds the end 2; whether "c" was acknowledged cannot be told.
    let cut = notices.iter().find(|n| matches!(n, Notice::TailCut { offset: 2, bytes: 0, .. }));
    let text = cut.map(ToString::to_string).unwrap_or_default();
    assert!(text.contains("cannot be read") && text.contains("from offset 2 on"), "{notices:?}");
    assert!(notices.iter().any(|n| matches!(n, Notice::Corruption { .. })), "{notices:?}");
}
