//! cargo-fuzz target `sim_seed`: see `broker_sim::fuzzing::fuzz_sim_seed`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_sim::fuzzing::fuzz_sim_seed(data));
