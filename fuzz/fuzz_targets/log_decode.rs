//! cargo-fuzz target `log_decode`: see `broker_testkit::fuzzing::fuzz_log_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_testkit::fuzzing::fuzz_log_decode(data));
