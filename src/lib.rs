#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

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
