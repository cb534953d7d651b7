//! cargo-fuzz target `log_decode`: see `broker_core::fuzzing::fuzz_log_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_core::fuzzing::fuzz_log_decode(data));
