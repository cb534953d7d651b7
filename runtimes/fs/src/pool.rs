//! The storage worker pool: several storage operations in flight at once, with the
//! per-target order the runtime contract requires.
//!
//! Why threads, and why this routing:
//!
//! - `std::fs` calls block, and `fsync` has no asynchronous form short of io_uring;
//!   an async runtime would push every call onto a blocking thread pool anyway. Plain
//!   threads with channels are smaller, need no dependency, and are easy to copy into
//!   whatever runtime an embedder already has.
//! - The contract asks that operations on the same target (one log, or the journal)
//!   take effect in issue order, while different targets may run concurrently. Each
//!   worker takes jobs from its own FIFO queue, and every target is routed to exactly
//!   one worker: the journal (and the directory listing) to a dedicated journal
//!   worker, each log to log worker `hash(log) % n`. Issue order per target is then
//!   execution order, with no locks.
//! - The storage executor caches each open log's index and the journal's length, and
//!   each worker's `RealFs` keeps its files open from a write until its fsync.
//!   Because a target always lands on the same worker, each worker owns its own
//!   [`Executor`] and `RealFs`, and no cache or descriptor is ever shared or stale.
//! - The journal worker is separate from the log workers, so a metadata commit (the
//!   acknowledgement of a create or a delete) never queues behind bulk log I/O.

use crate::realfs::RealFs;
use broker_core::{Executor, LogId, OpId, OpResult, StorageError, StorageOp};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

/// One storage operation to carry out.
struct Job {
    id: OpId,
    op: StorageOp,
}

/// A fixed set of storage worker threads.
pub(crate) struct Pool {
    journal: Option<Sender<Job>>,
    logs: Vec<Sender<Job>>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts one journal worker and `log_workers` log workers over `fs`, whose
    /// executors write nothing if `read_only`. Each completion is sent through `done`,
    /// wrapped by `wrap`.
    pub(crate) fn start<E: Send + 'static>(
        fs: &RealFs,
        log_workers: usize,
        read_only: bool,
        done: Sender<E>,
        wrap: fn(OpId, OpResult) -> E,
    ) -> std::io::Result<Pool> {
        let mut pool = Pool { journal: None, logs: Vec::new(), handles: Vec::new() };
        let spawn_worker = |name: String| spawn_worker(name, fs.clone(), read_only, done.clone(), wrap);
        let (tx, handle) = spawn_worker("broker-fs-journal".into())?;
        pool.journal = Some(tx);
        pool.handles.push(handle);
        for i in 0..log_workers.max(1) {
            let (tx, handle) = spawn_worker(format!("broker-fs-log-{i}"))?;
            pool.logs.push(tx);
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Queues `op` on the worker that owns its target.
    pub(crate) fn dispatch(&self, id: OpId, op: StorageOp) {
        let queue = match op.log() {
            Some(log) => self.logs.get(route(log, self.logs.len())),
            None => self.journal.as_ref(),
        };
        if let Some(q) = queue {
            // A worker only stops when the pool is dropped, so the send cannot fail
            // while the driver is alive; if it did, the completion never comes and
            // the broker simply waits, which is safe.
            let _ = q.send(Job { id, op });
        }
    }
}

impl Drop for Pool {
    /// Lets each worker finish the jobs already queued, then joins it.
    fn drop(&mut self) {
        self.journal = None;
        self.logs.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// The log worker that owns `log`: a fixed function of its id, so a log always lands
/// on the same worker, and consecutive partitions of one topic spread over workers.
fn route(log: LogId, workers: usize) -> usize {
    let h = log.topic.0.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(u64::from(log.partition));
    (h % workers.max(1) as u64) as usize
}

fn spawn_worker<E: Send + 'static>(
    name: String,
    fs: RealFs,
    read_only: bool,
    done: Sender<E>,
    wrap: fn(OpId, OpResult) -> E,
) -> std::io::Result<(Sender<Job>, JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel::<Job>();
    let handle = std::thread::Builder::new().name(name).spawn(move || work(fs, read_only, rx, done, wrap))?;
    Ok((tx, handle))
}

fn work<E>(fs: RealFs, read_only: bool, jobs: Receiver<Job>, done: Sender<E>, wrap: fn(OpId, OpResult) -> E) {
    let new_executor = || {
        let mut executor = Executor::new(fs.clone());
        executor.set_read_only(read_only);
        executor
    };
    let mut executor = new_executor();
    for job in jobs {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| executor.execute(&job.op)));
        let result = result.unwrap_or_else(|_| {
            // The executor's caches may be inconsistent after a panic: start afresh
            // (it reopens logs from disk) and report the operation as failed. The file
            // system is kept: its open files carry writes not yet synced, whose
            // write-back errors their next sync must still see.
            let old = std::mem::replace(&mut executor, Executor::new(fs.clone()));
            executor = Executor::new(old.into_fs());
            executor.set_read_only(read_only);
            Err(StorageError::Io(format!("the storage worker panicked while executing {:?}", job.op.log())))
        });
        if done.send(wrap(job.id, result)).is_err() {
            // The driver is gone; the remaining jobs are still carried out (they
            // were issued), their results dropped.
            continue;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::TopicId;

    #[test]
    fn a_log_always_lands_on_the_same_worker_and_partitions_spread() {
        let log = |t, p| LogId { topic: TopicId(t), partition: p };
        for t in 0..20 {
            for p in 0..8 {
                assert_eq!(route(log(t, p), 4), route(log(t, p), 4));
                assert!(route(log(t, p), 4) < 4);
            }
            let used: std::collections::BTreeSet<_> = (0..4).map(|p| route(log(t, p), 4)).collect();
            assert_eq!(used.len(), 4, "4 consecutive partitions use the 4 workers");
        }
    }
}
