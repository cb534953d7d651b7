//! The shared stores a node runs over, chosen by URL, each an adapter of the store
//! contract (`broker_core::cluster::store`) that keeps the contract's listing rules
//! itself (byte order, pages, continuation from a page's last key).
//!
//! - `file:///path` ([`dir::DirStore`]): a directory, which several node processes on
//!   one machine share; every create and delete is fsynced.
//! - `memory://` ([`objects::Objects`] over `object_store`'s in-memory store): for
//!   tests; gone when the process ends, so it is never shared.

pub mod adapter;
pub mod dir;
pub mod objects;

pub use adapter::{Pending, Store};
use std::sync::Arc;

/// The URL schemes a store can be named by, as an error lists them.
pub const SCHEMES: &str = "file:///path (a directory shared by the nodes of one machine), memory:// (for tests)";

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
pub fn open(url: &str) -> Result<Arc<dyn Store>, UrlError> {
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            let why = "a file URL names an absolute path: file:///path (three slashes)".to_string();
            return Err(UrlError::Open { url: url.into(), why });
        }
        let store = dir::DirStore::open(path).map_err(|e| UrlError::Open { url: url.into(), why: e.to_string() })?;
        Ok(Arc::new(store))
    } else if url == "memory://" || url == "memory:" {
        Ok(Arc::new(objects::Objects::in_memory()))
    } else {
        Err(UrlError::Unsupported { url: url.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_that_name_no_store_are_refused_with_the_supported_list() {
        for url in ["s4://bucket", "/tmp/x", "", "FILE:///tmp", "postgres:/x"] {
            let err = open(url).err().unwrap().to_string();
            assert!(err.contains("names no supported store") && err.contains("file:///path"), "{err}");
        }
        let err = open("file://relative/dir").err().unwrap().to_string();
        assert!(err.contains("three slashes"), "{err}");
    }
}
