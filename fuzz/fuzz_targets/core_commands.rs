//! cargo-fuzz target `core_commands`: see `broker_testkit::fuzzing::fuzz_core_commands`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_testkit::fuzzing::fuzz_core_commands(data));
