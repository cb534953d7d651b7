//! cargo-fuzz target `kafka_batches`: see `broker_kafka::batch_fuzzing::fuzz_kafka_batches`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker_kafka::batch_fuzzing::fuzz_kafka_batches(data));
