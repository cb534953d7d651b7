//! Produce on a real disk: records per second and MiB/s through the real runtime, one
//! produce at a time to one partition (each acknowledged only after its log's fsync),
//! at batch sizes 1, 16 and 256, against a raw loop that writes the same bytes and
//! fsyncs after each batch, on the same directory: the physical limit of that disk.
//!
//! ```sh
//! cargo bench -p broker-fs --bench produce
//! BROKER_FS_BENCH_SECS=10 cargo bench -p broker-fs --bench produce
//! ```
//!
//! Records carry no key and a 100-byte value. The raw loop appends, to a file in the
//! data directory, exactly the bytes the executor appends for each batch (the framed,
//! checksummed batch from `broker_core::encode_records`), with `write` then `fdatasync`
//! (`File::sync_data`, what the runtime calls) per batch, through one open descriptor.
//! Broker and raw loop take turns in short slices (`BROKER_FS_BENCH_SLICES`, default
//! 16, sharing `BROKER_FS_BENCH_SECS` seconds per side, default 4), so that both see the
//! same load on a shared disk; each rate is the total over its slices. MiB/s counts
//! record values (100 bytes each), the same for both sides.

mod common;

use broker_core::effect::AppendRecord;
use broker_core::{encode_records, Command, LogId, ProduceRecord, Reply, TopicSettings};
use broker_fs::{Driver, DriverOptions};
use common::setting;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const VALUE: usize = 100;

fn records(batch: usize) -> Vec<ProduceRecord> {
    (0..batch).map(|_| ProduceRecord { key: None, value: vec![0x61; VALUE].into() }).collect()
}

/// Produces batches of `batch` records through the broker for `slice`; records sent.
fn broker_slice(d: &mut Driver, batch: usize, slice: Duration) -> usize {
    let start = Instant::now();
    let mut produced = 0;
    while start.elapsed() < slice {
        let reply = d
            .request(Command::Produce { topic: "p".into(), partition: None, records: records(batch) })
            .expect("produce");
        let Reply::Produced { positions, .. } = reply else { panic!("{reply:?}") };
        produced += positions.len();
    }
    produced
}

/// The raw loop: one open file, appended to and fsynced per batch.
struct Raw {
    file: std::fs::File,
    log: LogId,
    offset: u64,
}

impl Raw {
    fn open(path: &Path) -> Raw {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("open raw file");
        Raw { file, log: LogId { topic: broker_core::TopicId(u64::MAX), partition: 0 }, offset: 0 }
    }

    /// Writes and fsyncs the executor's bytes for batches of `batch` records for
    /// `slice`; records written.
    fn slice(&mut self, batch: usize, slice: Duration) -> usize {
        let start = Instant::now();
        let mut written = 0;
        while start.elapsed() < slice {
            // Built per batch, as the broker's records are.
            let records: Vec<AppendRecord> = records(batch)
                .into_iter()
                .enumerate()
                .map(|(i, record)| AppendRecord { offset: self.offset + i as u64, record })
                .collect();
            let bytes = encode_records(self.log, &records);
            self.file.write_all(&bytes).expect("write");
            self.file.sync_data().expect("fdatasync");
            self.offset += batch as u64;
            written += batch;
        }
        written
    }
}

fn main() {
    let secs: f64 = setting("BROKER_FS_BENCH_SECS", 4.0, 0.2);
    let slices: u32 = setting("BROKER_FS_BENCH_SLICES", 16, 2).max(1);
    let slice = Duration::from_secs_f64(secs / f64::from(slices));
    let root = common::bench_root("produce");
    println!(
        "produce to one partition, one request at a time, fsync per batch; {secs:.1} s per side in {slices} \
         alternating slices; data in {}",
        root.display()
    );
    println!(
        "{:>6}  {:>14} {:>10}  {:>14} {:>10}  {:>12} {:>14}",
        "batch", "broker rec/s", "MiB/s", "raw rec/s", "MiB/s", "broker/raw", "raw fsyncs/s"
    );
    for batch in [1usize, 16, 256] {
        let dir = root.join(format!("batch-{batch}"));
        let mut d: Driver = Driver::open(&dir, DriverOptions::default()).expect("open");
        let settings = TopicSettings::default();
        d.request(Command::CreateTopic { name: "p".into(), partitions: 1, settings }).expect("create");
        let raw_path = dir.join("raw.bin");
        let mut raw = Raw::open(&raw_path);
        common::settle();
        // Broker and raw loop take turns, so both see the same load on a shared disk.
        let (mut broker_n, mut broker_t, mut raw_n, mut raw_t) = (0, Duration::ZERO, 0, Duration::ZERO);
        for _ in 0..slices {
            let t = Instant::now();
            broker_n += broker_slice(&mut d, batch, slice);
            broker_t += t.elapsed();
            let t = Instant::now();
            raw_n += raw.slice(batch, slice);
            raw_t += t.elapsed();
        }
        drop((d, raw));
        let _ = std::fs::remove_dir_all(&dir);
        let b = broker_n as f64 / broker_t.as_secs_f64();
        let r = raw_n as f64 / raw_t.as_secs_f64();
        let mib = |rate: f64| rate * VALUE as f64 / (1 << 20) as f64;
        println!(
            "{:>6}  {:>14.0} {:>10.2}  {:>14.0} {:>10.2}  {:>11.0}% {:>14.0}",
            batch,
            b,
            mib(b),
            r,
            mib(r),
            100.0 * b / r,
            r / batch as f64
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
