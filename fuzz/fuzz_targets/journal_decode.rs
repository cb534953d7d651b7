//! cargo-fuzz target `journal_decode`: see `broker_testkit::fuzzing::fuzz_journal_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_testkit::fuzzing::fuzz_journal_decode(data));
