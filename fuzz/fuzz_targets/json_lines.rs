//! cargo-fuzz target `json_lines`: see `broker_fs::fuzzing::fuzz_json_lines`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_fs::fuzzing::fuzz_json_lines(data));
