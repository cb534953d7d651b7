//! Deterministic simulator for broker-core.
