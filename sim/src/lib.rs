//! Deterministic simulator for broker-core.

pub mod rng;
