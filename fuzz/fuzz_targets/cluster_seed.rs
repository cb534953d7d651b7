//! cargo-fuzz target `cluster_seed`: see `broker_sim::fuzzing::fuzz_cluster_seed`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_sim::fuzzing::fuzz_cluster_seed(data));
