#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Whether planted bug `$bug` (a `planted::Bug` variant) is switched on in `$on`, which
/// has a `bugs` field (`Config`, the executor): `planted!(self.config, SkipDirSync)`.
#[cfg(feature = "planted-bugs")]
macro_rules! planted {
    ($on:expr, $bug:ident) => {
        $on.bugs.has($crate::planted::Bug::$bug)
    };
}

/// Without the `planted-bugs` feature no bug is ever planted: `false`, and `$on` is not
/// looked at.
#[cfg(not(feature = "planted-bugs"))]
macro_rules! planted {
    ($on:expr, $bug:ident) => {
        $crate::no_planted_bug(stringify!($bug))
    };
}

/// `false`, whatever the bug: a call rather than the literal, so that checks of two
/// different bugs do not read as one operand repeated (`planted!(c, A) || planted!(c, B)`).
#[cfg(not(feature = "planted-bugs"))]
#[inline]
const fn no_planted_bug(_bug: &str) -> bool {
    false
}

pub mod broker;
mod bytes;
pub mod cluster;
pub mod command;
mod config;
pub mod driver;
pub mod effect;
pub mod error;
pub mod executor;
pub mod frame;
pub mod fs;
pub mod ids;
pub mod journal;
pub mod logcodec;
pub mod memfs;
pub mod name;
pub mod notice;
pub mod partitioner;
pub(crate) mod placement;
#[cfg(feature = "planted-bugs")]
#[doc(hidden)]
pub mod planted;
pub mod time;

pub use broker::{Broker, DamagedRecords, DeletionStatus, Phase, COMPLETED_KEPT};
pub use command::{Command, ProduceRecord, RecordPosition, Reply, StoredRecord, TopicDescription, TopicSettings};
pub use config::Config;
pub use driver::SyncDriver;
pub use effect::{AppendRecord, DamagedRange, Effect, OpOutput, OpResult, StorageOp};
pub use error::{BrokerError, HaltReason, StorageError};
pub use executor::Executor;
pub use fs::FileSystem;
pub use ids::{LogId, OpId, RequestId, TopicId};
pub use memfs::MemFs;
pub use notice::{Notice, Operation};
pub use time::Time;
