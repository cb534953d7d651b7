//! Produce on a real disk: records per second through the real runtime, one produce at
//! a time to one partition, under each durability (journaled: acknowledged after the
//! log's fsync and then the journal's; log-sync: after the log's fsync alone), at batch
//! sizes 1, 16 and 256, against a raw loop that writes the same bytes and
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
//! The two brokers and the raw loop take turns in short slices (`BROKER_FS_BENCH_SLICES`,
//! default 16, sharing `BROKER_FS_BENCH_SECS` seconds per side, default 4), so that all
//! see the same load on a shared disk; each rate is the total over its slices. MiB/s
//! counts record values (100 bytes each).

mod common;

use broker_core::effect::AppendRecord;
use broker_core::{encode_records, Command, Durability, LogId, ProduceRecord, Reply, TopicSettings};
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
        "{:>6}  {:>13} {:>13} {:>13} {:>9}  {:>10} {:>10}  {:>13}",
        "batch", "journaled/s", "log-sync/s", "raw rec/s", "raw MiB/s", "journ/raw", "lsync/raw", "raw fsyncs/s"
    );
    for batch in [1usize, 16, 256] {
        let dir = root.join(format!("batch-{batch}"));
        // One directory per durability, the raw file beside them; all three take turns,
        // so all see the same load on a shared disk.
        let open = |name: &str, durability: Durability| {
            let options = DriverOptions { durability: Some(durability), ..DriverOptions::default() };
            let mut d: Driver = Driver::open(dir.join(name), options).expect("open");
            let settings = TopicSettings::default();
            d.request(Command::CreateTopic { name: "p".into(), partitions: 1, settings }).expect("create");
            d
        };
        let mut brokers = [open("journaled", Durability::Journaled), open("log-sync", Durability::LOG_SYNC)];
        let mut raw = Raw::open(&dir.join("raw.bin"));
        common::settle();
        let mut counts = [(0usize, Duration::ZERO); 3];
        for _ in 0..slices {
            for (i, d) in brokers.iter_mut().enumerate() {
                let t = Instant::now();
                counts[i].0 += broker_slice(d, batch, slice);
                counts[i].1 += t.elapsed();
            }
            let t = Instant::now();
            counts[2].0 += raw.slice(batch, slice);
            counts[2].1 += t.elapsed();
        }
        drop((brokers, raw));
        let _ = std::fs::remove_dir_all(&dir);
        let [j, l, r] = counts.map(|(n, t)| n as f64 / t.as_secs_f64());
        let mib = |rate: f64| rate * VALUE as f64 / (1 << 20) as f64;
        println!(
            "{:>6}  {:>13.0} {:>13.0} {:>13.0} {:>9.2}  {:>9.0}% {:>9.0}%  {:>13.0}",
            batch,
            j,
            l,
            r,
            mib(r),
            100.0 * j / r,
            100.0 * l / r,
            r / batch as f64
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
