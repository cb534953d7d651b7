//! The real file-system runtime for broker-core: the core on a real disk.
//!
//! - [`realfs::RealFs`]: the core's `FileSystem` trait over `std::fs`, with real
//!   fsyncs of files and of the directory, atomic rename and typed errors.
//! - [`driver::Driver`]: owns a broker, a locked data directory, a pool of storage
//!   workers and the real clock; executes effects, delivers completions, lets time
//!   pass at the broker's deadlines, and keeps background deletion running.
//! - [`patience`]: the driver's retry policy: how long its waits go on while storage
//!   keeps failing, and what they report meanwhile.
//! - [`report`]: the errors and notices the driver and the data directory report.
//! - [`datadir`]: the data directory: creating and locking it, and telling the
//!   broker's files from anything else in it.
//! - [`broker_loop`]: the loop of `broker-fs serve`, which runs the broker for its two
//!   peers: the JSON-lines requests of standard input and the Kafka listener.
//! - [`serve`]: the JSON-lines protocol of `broker-fs serve`, its lines read within the
//!   bounds of [`request_lines`], with keys and values as
//!   [`jsonbytes`] writes and reads them.
//!
//! The storage executor (the fsync discipline) and the journal and log codecs come
//! from the core, and the Kafka listener of `serve --kafka` from `broker-kafka`; this
//! crate adds the real file system, the driver loop, the CLI and the JSON-lines
//! protocol. See the README for a session with the CLI.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod broker_loop;
pub mod datadir;
pub mod driver;
pub mod durability_file;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod jsonbytes;
pub mod patience;
mod pool;
pub mod realfs;
pub mod report;
pub mod request_lines;
pub mod serve;

pub use datadir::LOCK_FILE;
pub use driver::{Driver, DriverEvent, DriverOptions, Mailbox};
pub use patience::RetryPolicy;
pub use realfs::RealFs;
pub use report::{DriverError, Notice};
