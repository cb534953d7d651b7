//! Every store adapter against the shared-store kit, the one the simulated store
//! passes (`sim/tests/store_conformance.rs`): that is how we know the simulator's store
//! stands for the real ones. Racing creates run together, as tasks (the directory
//! store's on I/O threads of their own; PostgreSQL's each on a connection of its own),
//! as several nodes issue them. The S3 and PostgreSQL tests need servers (`.ci/run` starts them).

mod common;

use broker_cluster::store::dir::DirStore;
use broker_cluster::store::objects::Objects;
use broker_cluster::store::postgres::PgStore;
use broker_cluster::store::split::Split;
use broker_cluster::store::Store;
use broker_conformance::{check_store, StoreSubject};
use broker_core::cluster::store::{StoreOp, StoreResult};
use common::{server, TempDir};
use std::path::PathBuf;
use std::sync::Arc;

/// Fresh directory stores under `root`.
fn dir_stores(root: PathBuf) -> impl FnMut() -> DirStore {
    let mut made = 0;
    move || {
        made += 1;
        DirStore::open(root.join(format!("store-{made}"))).expect("a fresh directory store")
    }
}

#[test]
fn the_directory_store_conforms() {
    // Racing creates run on the store's I/O threads, several at once.
    let root = TempDir::named("broker-cluster-contract");
    check_store(&mut Stores::new(dir_stores(root.0.clone()))).assert_conforms();
}

/// Stores made by a closure, each operation run on the test's runtime; racing
/// operations are tasks issued together, each on the store `racer` gives (the same
/// store, or the same table over a connection of its own).
struct Stores<S> {
    make: Box<dyn FnMut() -> S>,
    racer: fn(&S) -> S,
    runtime: tokio::runtime::Runtime,
}

impl<S: Store + Clone> Stores<S> {
    fn new(make: impl FnMut() -> S + 'static) -> Stores<S> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        Stores { make: Box::new(make), racer: S::clone, runtime }
    }
}

impl<S: Store + Clone> StoreSubject for Stores<S> {
    type Store = S;

    fn fresh(&mut self) -> S {
        (self.make)()
    }

    fn run(&mut self, store: &mut S, op: StoreOp) -> StoreResult {
        self.runtime.block_on(store.run(op))
    }

    fn race(&mut self, store: &mut S, ops: Vec<StoreOp>) -> Vec<StoreResult> {
        let racers: Vec<S> = ops.iter().map(|_| (self.racer)(store)).collect();
        self.runtime.block_on(futures::future::join_all(
            ops.into_iter()
                .zip(racers)
                .map(|(op, s)| async move { tokio::spawn(s.run(op)).await.expect("a racing create panicked") }),
        ))
    }
}

#[test]
fn the_in_memory_object_store_conforms() {
    check_store(&mut Stores::new(Objects::in_memory)).assert_conforms();
}

/// Fresh S3 stores, each a new prefix of the bucket `BROKER_S3_BUCKET` (default
/// `broker-test`, already made) at `BROKER_S3_ENDPOINT`, with the credentials of the
/// `AWS_*` variables; `.ci/run` starts moto's server.
fn s3_stores(tag: &'static str) -> Option<impl FnMut() -> Objects> {
    let endpoint = server("BROKER_S3_ENDPOINT", "S3 server")?;
    let bucket = std::env::var("BROKER_S3_BUCKET").unwrap_or_else(|_| "broker-test".into());
    let mut made = 0;
    Some(move || {
        made += 1;
        let prefix = format!("{tag}-{}-{made}", std::process::id());
        Objects::s3(&bucket, &prefix, Some(&endpoint)).expect("an S3 store")
    })
}

/// Fresh PostgreSQL stores, each a table of its own in the database of
/// `BROKER_POSTGRES_URL`; `.ci/run` starts one (`.ci/postgres-server`).
fn pg_stores(tag: &'static str) -> Option<impl FnMut() -> PgStore> {
    let url = server("BROKER_POSTGRES_URL", "PostgreSQL database")?;
    let mut made = 0;
    Some(move || {
        made += 1;
        let sep = if url.contains('?') { '&' } else { '?' };
        PgStore::new(&format!("{url}{sep}table={tag}_{}_{made}", std::process::id())).expect("a PostgreSQL store")
    })
}

#[test]
fn the_s3_store_conforms() {
    let Some(make) = s3_stores("contract") else { return };
    check_store(&mut Stores::new(make)).assert_conforms();
}

#[test]
fn the_postgres_store_conforms() {
    let Some(make) = pg_stores("contract") else { return };
    // Each racer on a connection of its own, as the nodes are.
    let mut stores = Stores::new(make);
    stores.racer = PgStore::reconnected;
    check_store(&mut stores).assert_conforms();
}

#[test]
fn a_directory_for_metadata_and_memory_for_data_conform() {
    let root = TempDir::named("broker-cluster-split");
    let mut meta = dir_stores(root.0.clone());
    let make = move || Split::new(Arc::new(meta()), Arc::new(Objects::in_memory()));
    check_store(&mut Stores::new(make)).assert_conforms();
}

#[test]
fn postgres_for_metadata_and_s3_for_data_conform() {
    let Some(mut meta) = pg_stores("split") else { return };
    let Some(mut data) = s3_stores("split") else { return };
    let make = move || Split::new(Arc::new(meta()), Arc::new(data()));
    check_store(&mut Stores::new(make)).assert_conforms();
}
