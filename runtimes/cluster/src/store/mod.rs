//! The shared stores a node runs over, chosen by URL, each an adapter of the store
//! contract (`broker_core::cluster::store`) that keeps the contract's listing rules
//! itself (byte order, pages, continuation from a page's last key).
//!
//! - `file:///path` ([`dir::DirStore`]): a directory, which several node processes on
//!   one machine share; every create and delete is fsynced.
//! - `s3://bucket[/prefix]` ([`objects::Objects`] over `object_store`'s S3 client): S3,
//!   or a server that speaks its API, creates made exclusive by `If-None-Match: *`.
//! - `postgres://user@host:port/db[?table=name]` ([`postgres::PgStore`]): one table of
//!   keys and bytes; the primary key makes creates exclusive.
//! - Metadata in one store and data in another ([`split::Split`]): the journal and
//!   snapshots in, say, PostgreSQL, the segments in S3.
//! - `memory://` ([`objects::Objects`] over `object_store`'s in-memory store): for
//!   tests; gone when the process ends, so it is never shared.

pub mod adapter;
pub mod dir;
pub mod objects;
pub mod postgres;
pub mod split;

pub use adapter::{Pending, Store};
use std::sync::Arc;

/// The URL schemes a store can be named by, as an error lists them.
pub const SCHEMES: &str = "file:///path (a directory shared by the nodes of one machine), \
     s3://bucket[/prefix] (S3, or a server that speaks its API: --s3-endpoint), \
     postgres://user@host:port/db[?table=name] (one table of keys and bytes), memory:// (for tests)";

/// How to reach a store, beside its URL.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    /// The endpoint of an `s3://` store, if not AWS's own (`http://` allowed).
    pub s3_endpoint: Option<String>,
}

/// A store URL that names no store this runtime has.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The scheme is none of [`SCHEMES`].
    #[error("{url:?} names no supported store; supported: {SCHEMES}")]
    Unsupported {
        /// The URL as given.
        url: String,
    },
    /// The store could not be opened.
    #[error("cannot open the store {url:?}: {why}")]
    Open {
        /// The URL as given.
        url: String,
        /// Why not.
        why: String,
    },
}

/// Opens the store `url` names.
pub fn open(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, UrlError> {
    let cannot = |why: String| UrlError::Open { url: url.into(), why };
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(cannot("a file URL names an absolute path: file:///path (three slashes)".into()));
        }
        Ok(Arc::new(dir::DirStore::open(path).map_err(|e| cannot(e.to_string()))?))
    } else if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(cannot("an S3 URL names its bucket: s3://bucket[/prefix]".into()));
        }
        let prefix = prefix.trim_end_matches('/');
        Ok(Arc::new(objects::Objects::s3(bucket, prefix, options.s3_endpoint.as_deref()).map_err(cannot)?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgStore::new(url).map_err(cannot)?))
    } else if url == "memory://" || url == "memory:" {
        Ok(Arc::new(objects::Objects::in_memory()))
    } else {
        Err(UrlError::Unsupported { url: url.into() })
    }
}

/// Opens the metadata store `meta` and the data store `data` as one ([`split::Split`]).
pub fn open_split(meta: &str, data: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, UrlError> {
    Ok(Arc::new(split::Split::new(open(meta, options)?, open(data, options)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_that_name_no_store_are_refused_with_the_supported_list() {
        for url in ["s4://bucket", "/tmp/x", "", "FILE:///tmp", "postgres:/x"] {
            let err = open(url, &StoreOptions::default()).err().unwrap().to_string();
            assert!(err.contains("names no supported store") && err.contains("file:///path"), "{err}");
        }
        let err = open("file://relative/dir", &StoreOptions::default()).err().unwrap().to_string();
        assert!(err.contains("three slashes"), "{err}");
        let err = open("s3:///prefix", &StoreOptions::default()).err().unwrap().to_string();
        assert!(err.contains("names its bucket"), "{err}");
    }
}
