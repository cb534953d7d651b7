//! Deterministic simulator for broker-core.

pub mod disk;
pub mod rng;
