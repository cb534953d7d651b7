//! Runs the `kafka_connection` and `kafka_batches` cargo-fuzz target bodies over their
//! checked-in corpora (`fuzz/corpus/<target>/` at the repository root), so that
//! `cargo test --all-features` exercises it without nightly or cargo-fuzz. Crashes found
//! by fuzzing are added to the corpus once fixed, named `crash-*`.

use broker_kafka::batch_fuzzing::fuzz_kafka_batches;
use broker_kafka::fuzzing::fuzz_kafka_connection;
use broker_testkit::fuzzing::run_corpus;

#[test]
fn kafka_connection_passes_its_corpus() {
    run_corpus("kafka_connection", fuzz_kafka_connection, 3);
}

#[test]
fn kafka_batches_passes_its_corpus() {
    run_corpus("kafka_batches", fuzz_kafka_batches, 10);
}
