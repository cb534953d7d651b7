//! Runs the `kafka_connection` cargo-fuzz target body over its checked-in corpus
//! (`fuzz/corpus/kafka_connection/` at the repository root), so that
//! `cargo test --all-features` exercises it without nightly or cargo-fuzz. Crashes found
//! by fuzzing are added to the corpus once fixed, named `crash-*`.

use broker_kafka::fuzzing::fuzz_kafka_connection;
use broker_testkit::fuzzing::run_corpus;

#[test]
fn kafka_connection_passes_its_corpus() {
    run_corpus("kafka_connection", fuzz_kafka_connection, 3);
}
