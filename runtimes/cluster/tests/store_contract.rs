//! Every store adapter against the shared-store kit, the one the simulated store
//! passes (`sim/tests/store_conformance.rs`): that is how we know the simulator's store
//! stands for the real ones. Racing creates run together, from several threads (the
//! directory store), tasks (object_store's) or connections (PostgreSQL), as several
//! nodes issue them. The S3 and PostgreSQL tests need servers (`.ci/run` starts them).

use broker_cluster::store::dir::DirStore;
use broker_cluster::store::objects::Objects;
use broker_cluster::store::postgres::PgStore;
use broker_cluster::store::split::Split;
use broker_conformance::{check_store, StoreSubject};
use broker_core::cluster::store::{StoreOp, StoreResult};
use std::path::PathBuf;
use std::sync::Arc;

/// Fresh directories under one temporary directory, removed at the end.
struct Dirs {
    root: PathBuf,
    made: u32,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl StoreSubject for Dirs {
    type Store = DirStore;

    fn fresh(&mut self) -> DirStore {
        self.made += 1;
        DirStore::open(self.root.join(format!("store-{}", self.made))).expect("a fresh directory store")
    }

    fn run(&mut self, store: &mut DirStore, op: StoreOp) -> StoreResult {
        store.apply(&op)
    }

    fn race(&mut self, store: &mut DirStore, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        let barrier = std::sync::Barrier::new(ops.len());
        std::thread::scope(|s| {
            let threads: Vec<_> = ops
                .into_iter()
                .map(|op| {
                    let (store, barrier) = (store.clone(), &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        store.apply(&op)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().expect("a racing create panicked")).collect()
        })
    }
}

#[test]
fn the_directory_store_conforms() {
    let root = std::env::temp_dir().join(format!("broker-cluster-contract-{}", std::process::id()));
    let mut dirs = Dirs { root, made: 0 };
    check_store(&mut dirs).assert_conforms();
}

/// Stores of object_store's kind, each on a runtime of the test's.
struct ObjectStores {
    make: fn() -> Objects,
    runtime: tokio::runtime::Runtime,
}

impl StoreSubject for ObjectStores {
    type Store = Objects;

    fn fresh(&mut self) -> Objects {
        (self.make)()
    }

    fn run(&mut self, store: &mut Objects, op: StoreOp) -> StoreResult {
        self.runtime.block_on(store.apply(op))
    }

    fn race(&mut self, store: &mut Objects, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        race_tasks(&self.runtime, store, ops)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

#[test]
fn the_in_memory_object_store_conforms() {
    check_store(&mut ObjectStores { make: Objects::in_memory, runtime: runtime() }).assert_conforms();
}

/// The S3 server named by `BROKER_S3_ENDPOINT` (with `BROKER_S3_BUCKET`, default
/// `broker-test`, already made, and credentials in the `AWS_*` variables), each fresh
/// store a new prefix of the bucket; `.ci/run` starts one (moto's server). Without it
/// the test prints one `skipped:` line, unless `BROKER_REQUIRE_SERVERS=1` (as in CI).
fn s3_server() -> Option<(String, String)> {
    match std::env::var("BROKER_S3_ENDPOINT") {
        Ok(endpoint) => {
            let bucket = std::env::var("BROKER_S3_BUCKET").unwrap_or_else(|_| "broker-test".into());
            Some((endpoint, bucket))
        }
        Err(_) if std::env::var("BROKER_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("BROKER_REQUIRE_SERVERS=1 but BROKER_S3_ENDPOINT names no S3 server")
        }
        Err(_) => {
            println!("skipped: no S3 server (set BROKER_S3_ENDPOINT, as .ci/run does with moto's)");
            None
        }
    }
}

#[test]
fn the_s3_store_conforms() {
    let Some((endpoint, bucket)) = s3_server() else { return };
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = std::process::id();
    let make = move || {
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Objects::s3(&bucket, &format!("contract-{run}-{n}"), Some(&endpoint)).expect("an S3 store")
    };
    let mut subject = S3Stores { make: Box::new(make), runtime: runtime() };
    check_store(&mut subject).assert_conforms();
}

/// Like [`ObjectStores`], from a closure.
struct S3Stores {
    make: Box<dyn FnMut() -> Objects>,
    runtime: tokio::runtime::Runtime,
}

impl StoreSubject for S3Stores {
    type Store = Objects;

    fn fresh(&mut self) -> Objects {
        (self.make)()
    }

    fn run(&mut self, store: &mut Objects, op: StoreOp) -> StoreResult {
        self.runtime.block_on(store.apply(op))
    }

    fn race(&mut self, store: &mut Objects, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        race_tasks(&self.runtime, store, ops)
    }
}

/// Runs `ops` on `store` as tasks issued together.
fn race_tasks(runtime: &tokio::runtime::Runtime, store: &Objects, ops: Vec<StoreOp>) -> Vec<StoreResult> {
    runtime.block_on(futures::future::join_all(ops.into_iter().map(|op| {
        let store = store.clone();
        async move { tokio::spawn(async move { store.apply(op).await }).await.expect("a racing create panicked") }
    })))
}

/// The PostgreSQL database named by `BROKER_POSTGRES_URL`, each fresh store a table of
/// its own; `.ci/run` starts one (`.ci/postgres-server`). Without it the test prints one
/// `skipped:` line, unless `BROKER_REQUIRE_SERVERS=1` (as in CI).
fn postgres_server() -> Option<String> {
    match std::env::var("BROKER_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("BROKER_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("BROKER_REQUIRE_SERVERS=1 but BROKER_POSTGRES_URL names no PostgreSQL database")
        }
        Err(_) => {
            println!("skipped: no PostgreSQL (set BROKER_POSTGRES_URL, as .ci/run does with .ci/postgres-server)");
            None
        }
    }
}

/// Stores of the PostgreSQL adapter, each on the test's runtime.
struct PgStores {
    url: String,
    made: u32,
    runtime: tokio::runtime::Runtime,
}

impl StoreSubject for PgStores {
    type Store = PgStore;

    fn fresh(&mut self) -> PgStore {
        self.made += 1;
        let sep = if self.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}table=contract_{}_{}", self.url, std::process::id(), self.made);
        PgStore::new(&url).expect("a PostgreSQL store")
    }

    fn run(&mut self, store: &mut PgStore, op: StoreOp) -> StoreResult {
        self.runtime.block_on(store.apply(op))
    }

    fn race(&mut self, store: &mut PgStore, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        // Each racer on a connection of its own, as the nodes are.
        let stores: Vec<PgStore> = ops.iter().map(|_| store.reconnected()).collect();
        self.runtime.block_on(futures::future::join_all(ops.into_iter().zip(stores).map(|(op, store)| async move {
            tokio::spawn(async move { store.apply(op).await }).await.expect("a racing create panicked")
        })))
    }
}

#[test]
fn the_postgres_store_conforms() {
    let Some(url) = postgres_server() else { return };
    check_store(&mut PgStores { url, made: 0, runtime: runtime() }).assert_conforms();
}

/// Split stores (metadata in one, data in another), each on the test's runtime.
struct SplitStores {
    make: Box<dyn FnMut() -> Split>,
    runtime: tokio::runtime::Runtime,
}

impl StoreSubject for SplitStores {
    type Store = Split;

    fn fresh(&mut self) -> Split {
        (self.make)()
    }

    fn run(&mut self, store: &mut Split, op: StoreOp) -> StoreResult {
        self.runtime.block_on(store.apply(op))
    }

    fn race(&mut self, store: &mut Split, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        self.runtime.block_on(futures::future::join_all(ops.into_iter().map(|op| {
            let store = store.clone();
            async move { tokio::spawn(async move { store.apply(op).await }).await.expect("a racing create panicked") }
        })))
    }
}

#[test]
fn a_directory_for_metadata_and_memory_for_data_conform() {
    let root = std::env::temp_dir().join(format!("broker-cluster-split-{}", std::process::id()));
    let cleanup = Dirs { root: root.clone(), made: 0 };
    let mut made = 0;
    let make = move || {
        made += 1;
        let meta = DirStore::open(root.join(format!("store-{made}"))).expect("a directory store");
        Split::new(Arc::new(meta), Arc::new(Objects::in_memory()))
    };
    check_store(&mut SplitStores { make: Box::new(make), runtime: runtime() }).assert_conforms();
    drop(cleanup);
}

#[test]
fn postgres_for_metadata_and_s3_for_data_conform() {
    let Some(url) = postgres_server() else { return };
    let Some((endpoint, bucket)) = s3_server() else { return };
    let (run, mut made) = (std::process::id(), 0);
    let make = move || {
        made += 1;
        let sep = if url.contains('?') { '&' } else { '?' };
        let meta = PgStore::new(&format!("{url}{sep}table=split_{run}_{made}")).expect("a PostgreSQL store");
        let data = Objects::s3(&bucket, &format!("split-{run}-{made}"), Some(&endpoint)).expect("an S3 store");
        Split::new(Arc::new(meta), Arc::new(data))
    };
    check_store(&mut SplitStores { make: Box::new(make), runtime: runtime() }).assert_conforms();
}
