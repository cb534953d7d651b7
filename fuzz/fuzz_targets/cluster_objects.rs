//! cargo-fuzz target `cluster_objects`: see `broker_testkit::fuzzing::fuzz_cluster_objects`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_testkit::fuzzing::fuzz_cluster_objects(data));
