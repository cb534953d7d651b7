//! What a restarted process finds in the page cache: after a failed log fsync the
//! unsynced records stay readable in the cache but never become durable (ext4 drops
//! them from the durable future), so a broker that restarts without a power loss must
//! not serve them as committed.

use broker_core::{
    BrokerError, Command, Config, FileSystem, ProduceRecord, Reply, StorageError, SyncDriver, TopicSettings,
};
use broker_sim::disk::{DiskFaults, SimDisk};
use broker_testkit::hooked::{Hooked, Hooks};

fn produce(value: &str) -> Command {
    Command::Produce {
        topic: "t".into(),
        partition: None,
        records: vec![ProduceRecord { key: None, value: broker_core::Bytes::copy_from_slice(value.as_bytes()) }],
    }
}

fn fetch_all(d: &mut SyncDriver<SimDisk>) -> Result<(Vec<Vec<u8>>, u64), BrokerError> {
    match d.request(Command::Fetch { topic: "t".into(), partition: 0, offset: 0, max_records: 100, max_bytes: None })? {
        Reply::Fetched { records, high_watermark, .. } => {
            Ok((records.into_iter().map(|r| r.value.to_vec()).collect(), high_watermark))
        }
        other => panic!("{other:?}"),
    }
}

/// Hole: after a failed log fsync and a restart with the page cache intact, the record
/// whose sync failed was served as committed, and a power loss then took it away.
#[test]
fn a_record_whose_fsync_failed_is_never_served_after_a_restart() {
    let mut disk = SimDisk::with_faults(7, DiskFaults { fsync_failure: 1.0, ..DiskFaults::default() });
    disk.set_faults_enabled(false);
    let mut d = SyncDriver::start(Config::default(), disk);
    let create = Command::CreateTopic { name: "t".into(), partitions: 1, settings: TopicSettings::default() };
    assert!(matches!(d.request(create), Ok(Reply::Created { .. })));
    assert!(matches!(d.request(produce("acked")), Ok(Reply::Produced { .. })));
    d.fs_mut().set_faults_enabled(true);
    assert!(matches!(d.request(produce("never-durable")), Err(BrokerError::Halted(_))));
    let mut disk = d.crash(); // the process stops; the machine, and its page cache, stay
    disk.set_faults_enabled(false);

    let mut d = SyncDriver::start(Config::default(), disk);
    let (served, hw) = fetch_all(&mut d).unwrap();
    let mut disk = d.crash();
    disk.crash(); // now a power loss
    let mut d = SyncDriver::start(Config::default(), disk);
    let (after, hw_after) = fetch_all(&mut d).unwrap();
    assert_eq!(
        served, after,
        "what was served before the power loss (hw {hw}) reads the same after it (hw {hw_after})"
    );
    assert_eq!(after, vec![b"acked".to_vec()]);
}

/// A disk whose first fsync of a log fails (with the simulated disk's semantics: the
/// unsynced data is dropped from the durable future, but stays in the page cache).
struct FirstLogSyncFails {
    armed: bool,
}

impl Hooks<SimDisk> for FirstLogSyncFails {
    fn sync_file(&mut self, disk: &mut SimDisk, name: &str) -> Result<(), StorageError> {
        if self.armed && name.ends_with(".log") {
            self.armed = false;
            disk.set_faults_enabled(true);
            let failed = disk.sync_file(name);
            disk.set_faults_enabled(false);
            return failed;
        }
        disk.sync_file(name)
    }
}

/// Hole (campaign seed 3971): a log's creation failed at its fsync, leaving its header
/// in the page cache only; a restart with the cache intact opened the log from the
/// cached header without writing it again, so acknowledged records were appended to a
/// file whose header never became durable, and after a power loss the log was
/// unreadable ("bad magic").
#[test]
fn a_log_whose_creation_failed_gets_a_durable_header_before_records_are_acknowledged() {
    let mut disk = SimDisk::with_faults(5, DiskFaults { fsync_failure: 1.0, ..DiskFaults::default() });
    disk.set_faults_enabled(false);
    let mut d = SyncDriver::start(Config::default(), Hooked { fs: disk, hooks: FirstLogSyncFails { armed: true } });
    let create = Command::CreateTopic { name: "t".into(), partitions: 1, settings: TopicSettings::default() };
    let request = d.submit(create);
    d.run_until_idle();
    assert_eq!(d.take_reply(request), None, "the log's creation failed and waits for its retry");
    let fs = d.crash(); // the process stops; the page cache stays

    let mut d = SyncDriver::start(Config::default(), fs);
    assert!(matches!(d.request(produce("acked")), Ok(Reply::Produced { .. })));
    let mut fs = d.crash();
    fs.fs.crash(); // a power loss

    let mut d = SyncDriver::start(Config::default(), fs);
    assert_eq!(fetch_all_of(&mut d).unwrap().0, vec![b"acked".to_vec()]);
}

fn fetch_all_of<F: FileSystem>(d: &mut SyncDriver<F>) -> Result<(Vec<Vec<u8>>, u64), BrokerError> {
    match d.request(Command::Fetch { topic: "t".into(), partition: 0, offset: 0, max_records: 100, max_bytes: None })? {
        Reply::Fetched { records, high_watermark, .. } => {
            Ok((records.into_iter().map(|r| r.value.to_vec()).collect(), high_watermark))
        }
        other => panic!("{other:?}"),
    }
}
