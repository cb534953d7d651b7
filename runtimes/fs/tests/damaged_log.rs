//! A damaged multi-gigabyte log opens in bounded memory: 1 GiB of damage (a sparse
//! run of zeros, as a lost extent reads back) between valid frames, and again as a
//! tail, is searched a window at a time.

use broker_core::{
    encode_log_header, encode_records, AppendRecord, Executor, LogId, OpOutput, ProduceRecord, StorageOp, TopicId,
};
use broker_fs::RealFs;
use std::os::unix::fs::FileExt;

const GIB: u64 = 1 << 30;

fn records(from: u64, n: u64) -> Vec<AppendRecord> {
    (from..from + n)
        .map(|offset| AppendRecord { offset, record: ProduceRecord { key: None, value: format!("v{offset}").into() } })
        .collect()
}

/// The peak resident memory of this process so far, in bytes (Linux).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn a_gibibyte_of_damage_opens_in_bounded_memory() {
    let dir = std::env::temp_dir().join(format!("broker-fs-damaged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = LogId { topic: TopicId(7), partition: 0 };
    let path = dir.join(log.file_name());
    let mut bytes = encode_log_header(log);
    bytes.extend(encode_records(log, &records(0, 3)));
    let file = std::fs::File::create(&path).unwrap();
    file.write_all_at(&bytes, 0).unwrap();
    // A gibibyte of zeros (sparse), then the batch of offset 3: damage in the middle.
    let damage_at = bytes.len() as u64;
    let last = encode_records(log, &records(3, 1));
    file.write_all_at(&last, damage_at + GIB).unwrap();
    let before = peak_rss();

    let mut exec = Executor::new(RealFs::new(&dir));
    let opened = exec.execute(&StorageOp::OpenLog { log, acked_end: 4, first_offset: 0, keep_whole_tail: false });
    assert_eq!(opened, Ok(OpOutput::Opened { next_offset: 4, damaged: vec![], tail_cut: None }));
    match exec.execute(&StorageOp::Read { log, offset: 3, max_records: 10, max_bytes: 1 << 20 }) {
        Ok(OpOutput::Records(r)) => assert_eq!((r.len(), r[0].value.to_vec()), (1, b"v3".to_vec())),
        other => panic!("{other:?}"),
    }
    // And as a tail: everything after the acknowledged end is cut, without reading it whole.
    let mut exec = Executor::new(RealFs::new(&dir));
    let opened = exec.execute(&StorageOp::OpenLog { log, acked_end: 3, first_offset: 0, keep_whole_tail: false });
    assert_eq!(opened, Ok(OpOutput::Opened { next_offset: 3, damaged: vec![], tail_cut: None }));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), damage_at, "cut after the last acknowledged batch");

    let grown = peak_rss().saturating_sub(before);
    assert!(grown < 128 << 20, "opening 1 GiB of damage grew the peak memory by {grown} bytes");
    std::fs::remove_dir_all(&dir).unwrap();
}
