//! A shared store through `object_store`, the object-storage clients of the field: S3
//! (or a server that speaks its API) for `s3://bucket/prefix`, with the conditional
//! create `If-None-Match: *`, and its in-memory store for `memory://`.
//!
//! `object_store` lists by path segments, so the adapter keeps the contract's rules
//! itself: it lists the deepest directory the prefix names whole, from past `after`,
//! keeps the keys that begin with the prefix (a prefix of bytes), and stops one key past
//! the page, saying more follow when it found that key. Both stores list in key order
//! (S3 by its API, the in-memory store by its map), which the store checks hold them to.

use super::adapter::{Pending, Store};
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path;
use object_store::prefix::PrefixStore;
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

    /// The keys under `prefix` (none if empty) of S3 bucket `bucket`, reached at
    /// `endpoint` if given (a server that speaks S3's API; `http://` is allowed then),
    /// with the credentials and region of the environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, ...).
    pub fn s3(bucket: &str, prefix: &str, endpoint: Option<&str>) -> Result<Objects, String> {
        let mut builder =
            AmazonS3Builder::from_env().with_bucket_name(bucket).with_conditional_put(S3ConditionalPut::ETagMatch);
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        let s3 = builder.build().map_err(|e| e.to_string())?;
        let inner: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::new(s3)
        } else {
            let root = path(prefix).map_err(|e| e.to_string())?;
            Arc::new(PrefixStore::new(s3, root))
        };
        Ok(Objects { inner })
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
        // Past `after` where it is a path (else from the start, and filtered below).
        let listing = match after.map(Path::parse) {
            Some(Ok(a)) => self.inner.list_with_offset(dir.as_ref(), &a),
            _ => self.inner.list(dir.as_ref()),
        };
        let want = limit as usize + 1;
        let mut keys: Vec<String> = listing
            .map_ok(|m| m.location.to_string())
            .try_filter(|k| {
                let keep = k.starts_with(prefix) && after.is_none_or(|a| k.as_str() > a);
                std::future::ready(keep)
            })
            .take(want)
            .try_collect()
            .await
            .map_err(|e| StoreError::Failed(format!("listing {prefix:?}: {e}")))?;
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
