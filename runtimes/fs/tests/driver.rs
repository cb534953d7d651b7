//! The driver as a library: requests, restarts, the lock, halts, background deletion.

mod common;

use broker_core::{Command, ProduceRecord, Reply, TopicSettings};
use broker_fs::{Driver, DriverError, DriverOptions};
use common::{log_files, TempDir};

fn create(name: &str, partitions: u32) -> Command {
    Command::CreateTopic { name: name.into(), partitions, settings: TopicSettings::default() }
}

fn produce(name: &str, values: &[&str]) -> Command {
    let records = values.iter().map(|v| ProduceRecord { key: None, value: v.as_bytes().to_vec().into() }).collect();
    Command::Produce { topic: name.into(), partition: None, records }
}

#[test]
fn records_survive_a_restart_and_deletion_finishes_in_the_background() {
    let tmp = TempDir::new("driver");
    let dir = tmp.path();
    {
        let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
        d.request(create("a", 8)).unwrap();
        d.request(create("b", 2)).unwrap();
        // Several produces in flight at once, on several workers.
        let ids: Vec<_> = (0..20).map(|i| d.submit(produce("a", &[&format!("v{i}")]))).collect();
        let mut acked = 0;
        while acked < ids.len() {
            match d.next_event(None) {
                Some(broker_fs::DriverEvent::Reply { reply: Ok(Reply::Produced { .. }), .. }) => acked += 1,
                other => panic!("{other:?}"),
            }
        }
        d.request(Command::DeleteTopic { name: "a".into() }).unwrap();
        // Dropped at once: removal was cut off, and resumes on the next start.
    }
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
    assert!(d.wait_quiescent(None).unwrap());
    assert_eq!(log_files(dir), vec![(1, 0), (1, 1)]);
    let Reply::Topics(t) = d.request(Command::ListTopics).unwrap() else { panic!() };
    assert_eq!(t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["b"]);
}

#[test]
fn a_second_driver_on_the_same_directory_is_refused() {
    let tmp = TempDir::new("driver-lock");
    let _first: Driver = Driver::open(tmp.path(), DriverOptions::default()).unwrap();
    match Driver::<()>::open(tmp.path(), DriverOptions::default()) {
        Err(e @ DriverError::Locked { .. }) => assert!(e.to_string().contains("locked"), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("two drivers hold one directory"),
    }
}

#[test]
fn after_a_halt_every_request_fails_and_nothing_is_retried() {
    let tmp = TempDir::new("driver-halt");
    let dir = tmp.path();
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
    d.request(create("a", 1)).unwrap();
    std::fs::rename(dir.join("journal"), dir.join("journal.saved")).unwrap();
    std::fs::create_dir(dir.join("journal")).unwrap();
    let err = d.request(create("b", 1)).unwrap_err();
    assert!(matches!(err, DriverError::Broker(broker_core::BrokerError::Halted(_))), "{err}");
    assert!(d.halted().is_some());
    // The journal failure is final: no retry, every later request is refused.
    let err = d.request(create("c", 1)).unwrap_err();
    assert!(err.to_string().contains("halted"), "{err}");
    assert!(matches!(d.wait_quiescent(None), Err(DriverError::Halted(_))));
    drop(d);
    std::fs::remove_dir(dir.join("journal")).unwrap();
    std::fs::rename(dir.join("journal.saved"), dir.join("journal")).unwrap();
    // A new driver recovers from what is durable: "b" was never acknowledged.
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
    let Reply::Topics(t) = d.request(Command::ListTopics).unwrap() else { panic!() };
    assert_eq!(t.len(), 1);
    assert!(log_files(dir).iter().all(|(t, _)| *t == 0));
}

/// A symlink planted under the name of the lock, the journal's temporary file or a
/// log is refused with an error naming it, and the file it points to is left as it is.
#[cfg(unix)]
#[test]
fn symlinks_named_like_broker_files_are_refused_and_nothing_outside_is_written() {
    use std::os::unix::fs::symlink;
    let outside = TempDir::new("driver-symlink-outside");
    let target = outside.path().join("precious");
    std::fs::write(&target, b"outside").unwrap();
    let refused = |what: &str, dir: &std::path::Path, name: &str| {
        let options = DriverOptions { recovery_attempts: Some(1), ..Default::default() };
        match Driver::<()>::open(dir, options) {
            Err(e) => {
                let message = e.to_string();
                assert!(message.contains(name) && message.contains("symbolic link"), "{what}: {message}");
            }
            Ok(_) => panic!("{what}: a symlink named {name} was followed"),
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"outside", "{what}: the target is untouched");
    };

    let tmp = TempDir::new("driver-symlink-lock");
    symlink(&target, tmp.path().join("LOCK")).unwrap();
    refused("the lock", tmp.path(), "LOCK");

    // A new directory: its first journal is written to journal.tmp, then renamed.
    let tmp = TempDir::new("driver-symlink-tmp");
    symlink(&target, tmp.path().join("journal.tmp")).unwrap();
    refused("the journal's temporary file", tmp.path(), "journal.tmp");

    // A live topic's log, replaced by a link.
    let tmp = TempDir::new("driver-symlink-log");
    {
        let mut d: Driver = Driver::open(tmp.path(), DriverOptions::default()).unwrap();
        d.request(create("a", 1)).unwrap();
        d.request(produce("a", &["v"])).unwrap();
    }
    let log = tmp.path().join("0000000000000000-00000000.log");
    std::fs::remove_file(&log).unwrap();
    symlink(&target, &log).unwrap();
    refused("a log", tmp.path(), "0000000000000000-00000000.log");
}

/// The durability belongs to the directory: a log-sync directory starts under log-sync
/// whatever a later command asks, so records whose ends the journal never got survive
/// every start, and a switch back to journaled keeps them.
#[test]
fn a_directory_keeps_its_durability_and_switching_back_keeps_every_record() {
    use broker_core::{Durability, Phase};
    use broker_fs::durability_file::{read_durability, DURABILITY_FILE};
    let tmp = TempDir::new("durability");
    let dir = tmp.path();
    let fetch = |d: &mut Driver| {
        let command = Command::Fetch { topic: "t".into(), partition: 0, offset: 0, max_records: 10, max_bytes: None };
        match d.request(command).unwrap() {
            Reply::Fetched { records, .. } => records.len(),
            other => panic!("{other:?}"),
        }
    };
    let long = Durability::LogSync { journal_ends_ms: 3_600_000 };
    {
        let options = DriverOptions { durability: Some(long), ..DriverOptions::default() };
        let mut d: Driver = Driver::open(dir, options).unwrap();
        assert_eq!(d.broker().config().durability, long);
        d.request(create("t", 1)).unwrap();
        for v in ["a", "b", "c"] {
            d.request(produce("t", &[v])).unwrap();
        }
        // Dropped with the three ends unjournaled (the interval is an hour).
    }
    assert_eq!(read_durability(dir).unwrap(), long);
    {
        // A command that asks nothing runs as the directory says.
        let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
        assert_eq!(d.broker().config().durability, long);
        assert_eq!(fetch(&mut d), 3);
        d.request(produce("t", &["d"])).unwrap();
    }
    {
        let options = DriverOptions { durability: Some(Durability::Journaled), ..DriverOptions::default() };
        let mut d: Driver = Driver::open(dir, options).unwrap();
        assert_eq!((d.broker().phase(), d.broker().config().durability), (Phase::Serving, Durability::Journaled));
        assert_eq!(fetch(&mut d), 4);
    }
    assert_eq!(std::fs::read_to_string(dir.join(DURABILITY_FILE)).unwrap(), "journaled\n");
    let mut d: Driver = Driver::open(dir, DriverOptions::default()).unwrap();
    assert_eq!(fetch(&mut d), 4, "a journaled start keeps them: their ends are journaled");
}
