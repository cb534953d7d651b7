//! The real file-system runtime for broker-core.
