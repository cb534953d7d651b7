//! cargo-fuzz target `journal_decode`: see `broker_core::fuzzing::fuzz_journal_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_core::fuzzing::fuzz_journal_decode(data));
