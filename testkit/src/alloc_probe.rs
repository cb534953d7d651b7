//! The largest single allocation a piece of code asks for, as far as the binary's global
//! allocator reports it.
//!
//! This crate forbids `unsafe`, so it cannot be the allocator itself: a binary that
//! wants allocations measured installs a `#[global_allocator]` that calls [`record`]
//! with the size of every allocation and reallocation before serving it (broker-core's
//! `tests/fuzz_corpus.rs` does). In a binary without one (a cargo-fuzz target, where
//! libFuzzer's `-malloc_limit_mb` plays this part), [`largest_allocation`] measures
//! nothing and says so.
//!
//! Measurements are per thread, so tests running in parallel do not see each other's
//! allocations.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first [`record`]: some allocator reports to this module.
static REPORTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The largest allocation since this thread began measuring; `None` when it is not.
    /// A `const` initialiser and no destructor: touching it never allocates.
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Notes an allocation of `size` bytes on the calling thread. Called by a reporting
/// global allocator before it allocates; allocates nothing and never panics.
pub fn record(size: usize) {
    if !REPORTING.load(Ordering::Relaxed) {
        REPORTING.store(true, Ordering::Relaxed);
    }
    // `try_with`: during thread teardown the slot may be gone; nothing is measured then.
    let _ = LARGEST.try_with(|largest| {
        if let Some(seen) = largest.get() {
            largest.set(Some(seen.max(size)));
        }
    });
}

/// Runs `f` and returns its result with the largest single allocation it made on this
/// thread, in bytes (0 if it made none), or `None` when no allocator reports to
/// [`record`]. Nested measurements are not supported: the inner one ends the outer.
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, Option<usize>) {
    LARGEST.with(|largest| largest.set(Some(0)));
    let out = f();
    let seen = LARGEST.with(|largest| largest.replace(None));
    (out, seen.filter(|_| REPORTING.load(Ordering::Relaxed)))
}
