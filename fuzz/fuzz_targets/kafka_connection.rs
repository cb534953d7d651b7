//! cargo-fuzz target `kafka_connection`: see `broker_kafka::fuzzing::fuzz_kafka_connection`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_kafka::fuzzing::fuzz_kafka_connection(data));
