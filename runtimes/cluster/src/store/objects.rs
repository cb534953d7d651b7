//! A shared store through `object_store`, the object-storage clients of the field:
//! its in-memory store for `memory://`.
//!
//! `object_store` lists by path segments and leaves the order of a listing to the
//! store, so the adapter keeps the contract's rules itself: it lists the deepest
//! directory the prefix names whole, keeps the keys that begin with the prefix (a
//! prefix of bytes), sorts what it gathered, and gives a page of at most the limit,
//! saying more follow when it left keys out.

use super::adapter::{Pending, Store};
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use std::sync::Arc;

/// A store behind `object_store`.
#[derive(Clone, Debug)]
pub struct Objects {
    inner: Arc<dyn ObjectStore>,
}

impl Objects {
    /// An empty store in memory.
    pub fn in_memory() -> Objects {
        Objects { inner: Arc::new(object_store::memory::InMemory::new()) }
    }

    /// Carries out `op`.
    pub async fn apply(&self, op: StoreOp) -> StoreResult {
        match op {
            StoreOp::Create { key, bytes } => {
                let path = path(&key)?;
                let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
                match self.inner.put_opts(&path, PutPayload::from_bytes(bytes), options).await {
                    Ok(_) => Ok(StoreOutput::Created),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(StoreOutput::Exists),
                    // The request may have reached the store and landed.
                    Err(e) => Err(StoreError::Unknown(format!("creating {key:?}: {e}"))),
                }
            }
            StoreOp::Get { key } => {
                let path = path(&key)?;
                let read = async { self.inner.get(&path).await?.bytes().await };
                match read.await {
                    Ok(bytes) => Ok(StoreOutput::Found(bytes)),
                    Err(object_store::Error::NotFound { .. }) => Ok(StoreOutput::Missing),
                    Err(e) => Err(StoreError::Failed(format!("reading {key:?}: {e}"))),
                }
            }
            StoreOp::List { prefix, after, limit } => self.list(&prefix, after.as_deref(), limit).await,
            StoreOp::Delete { key } => {
                let path = path(&key)?;
                match self.inner.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(StoreOutput::Deleted),
                    Err(e) => Err(StoreError::Unknown(format!("deleting {key:?}: {e}"))),
                }
            }
        }
    }

    async fn list(&self, prefix: &str, after: Option<&str>, limit: u32) -> StoreResult {
        let dir = match prefix.rfind('/') {
            Some(i) => Some(path(&prefix[..i])?),
            None => None,
        };
        let listing = match after {
            Some(a) => self.inner.list_with_offset(dir.as_ref(), &Path::from(a)),
            None => self.inner.list(dir.as_ref()),
        };
        let metas: Vec<_> =
            listing.try_collect().await.map_err(|e| StoreError::Failed(format!("listing {prefix:?}: {e}")))?;
        let mut keys: Vec<String> = metas
            .into_iter()
            .map(|m| m.location.to_string())
            .filter(|k| k.starts_with(prefix) && after.is_none_or(|a| k.as_str() > a))
            .collect();
        keys.sort_unstable();
        let more = keys.len() > limit as usize;
        keys.truncate(limit as usize);
        Ok(StoreOutput::Listed { keys, more })
    }
}

impl Store for Objects {
    fn run(&self, op: StoreOp) -> Pending {
        let store = self.clone();
        Box::pin(async move { store.apply(op).await })
    }
}

/// The object path of `key`, which must be one already (no empty segment, no `.` or
/// `..`): keys are never re-encoded, so a listed key reads back as itself.
fn path(key: &str) -> Result<Path, StoreError> {
    Path::parse(key).map_err(|e| StoreError::Failed(format!("{key:?} is not an object path: {e}")))
}
