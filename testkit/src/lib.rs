//! Test support for broker-core and its runtimes, kept out of the product crate so that
//! `broker-core`'s API and dependencies are only what a runtime needs.
//!
//! - [`hand`]: the hold-back harness, [`Hand`]: the core's tests, the simulator's
//!   executor tests and the fuzz bodies drive the broker through it.
//! - [`commands`]: command builders and reply unwrappers.
//! - [`mod@render`]: effects, operations and journal records rendered one a line.
//! - [`ledger`]: what clients were told about records, by position: the part the
//!   simulator's model and the fuzz oracle share.
//! - [`hooked`]: a file system that forwards to another except where a test's hook
//!   steps in.
//! - [`faulty_fs`]: a `MemFs` that fails removals, directory syncs or space on purpose.
//! - [`fuzzing`]: the cargo-fuzz target bodies and their oracle (`fuzz/` wraps them;
//!   `tests/fuzz_corpus.rs` of broker-core runs them over the checked-in corpora).
//! - [`alloc_probe`]: the largest single allocation a piece of code makes, where the
//!   binary's allocator reports to it (the `cluster_objects` body's allocation check).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod alloc_probe;
pub mod commands;
pub mod faulty_fs;
pub mod fuzzing;
pub mod hand;
pub mod hooked;
pub mod ledger;
pub mod render;

pub use commands::*;
pub use faulty_fs::*;
pub use hand::*;
pub use render::*;
