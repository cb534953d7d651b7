//! The shared store's contract: four operations, as S3 with conditional writes,
//! `object_store` and a PostgreSQL table all give them.
//!
//! Every object is created once and never overwritten, so nothing here depends on how a
//! store orders or caches overwrites. What the protocol needs of a store:
//!
//! - `Create` succeeds for exactly one of any number of concurrent writers of a key;
//! - a `Get` or `List` issued after a `Create` or `Delete` completed sees its effect
//!   (strong read-after-write and list-after-write consistency);
//! - a `List` returns keys in byte order, a page at a time: a page may hold fewer keys
//!   than asked, even none, and still not be the last (S3 returns at most 1,000 keys a
//!   page and may return fewer), so whether more follow is said by the page, never
//!   inferred from its length;
//! - a failed operation (`StoreError::Failed`) did nothing; a store that cannot say so
//!   of an error (S3's 5xx after a write that may have landed, a PostgreSQL connection
//!   lost at commit) reports it as `StoreError::Unknown`.
//!
//! Keys outside the layout (`super::keys`) may appear under any prefix; readers skip
//! them, and they change no answer.

use crate::Bytes;

/// One operation on the shared store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// Create `key` holding `bytes`, unless it exists.
    Create {
        /// The key.
        key: String,
        /// Its contents: a shared buffer, as object stores' clients take and give them,
        /// so handing an object to a store, or a store keeping it, copies nothing.
        bytes: Bytes,
    },
    /// Read `key`.
    Get {
        /// The key.
        key: String,
    },
    /// The keys that start with `prefix` and sort after `after` (all of them if `None`),
    /// in byte order: a page of at most `limit` of them (perhaps fewer, perhaps none),
    /// and whether more may follow its last key ([`StoreOutput::Listed`]).
    List {
        /// The prefix every key returned starts with.
        prefix: String,
        /// Only keys after this one.
        after: Option<String>,
        /// The most keys returned.
        limit: u32,
    },
    /// Delete `key`; done also if it did not exist.
    Delete {
        /// The key.
        key: String,
    },
}

/// What a store operation that completed gives back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOutput {
    /// `Create`: the key is ours.
    Created,
    /// `Create`: another writer created the key first; nothing was written.
    Exists,
    /// `Get`: the contents.
    Found(Bytes),
    /// `Get`: no such key.
    Missing,
    /// `List`: a page of keys, in order.
    Listed {
        /// The keys, in order.
        keys: Vec<String>,
        /// Whether keys may follow the last one returned (or, with none returned, the
        /// listing's `after`): the next page begins there. `false` only if none did when
        /// the listing ran.
        more: bool,
    },
    /// `Delete`: the key is gone.
    Deleted,
}

/// How a store operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store refused or failed the operation: nothing happened.
    #[error("store operation failed: {0}")]
    Failed(String),
    /// No answer came in time, or an error came that cannot say the operation did
    /// nothing: a write may or may not have happened, now or later.
    #[error("store operation of unknown outcome (it may or may not take effect): {0}")]
    Unknown(String),
}

/// The result of a store operation.
pub type StoreResult = Result<StoreOutput, StoreError>;
