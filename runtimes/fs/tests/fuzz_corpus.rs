//! Runs broker-fs's cargo-fuzz target bodies over their checked-in corpora
//! (`fuzz/corpus/<target>/` at the repository root), so that `cargo test --all-features`
//! exercises them without nightly or cargo-fuzz. Crashes found by fuzzing are added to
//! the corpus once fixed, named `crash-*`; `seed-*` files are written by hand.

use broker_fs::fuzzing::fuzz_json_lines;
use broker_testkit::fuzzing::run_corpus;

#[test]
fn json_lines_passes_its_corpus() {
    run_corpus("json_lines", fuzz_json_lines, 3);
}
