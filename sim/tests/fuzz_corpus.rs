//! Runs the cargo-fuzz target `sim_seed` over its checked-in corpus
//! (`fuzz/corpus/sim_seed/`), so `cargo test` exercises it without nightly.

use broker_sim::fuzzing::{fuzz_sim_seed, params_from_bytes};
use std::path::Path;

#[test]
fn sim_seed_passes_its_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/sim_seed");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "the corpus has its seeds");
    for f in files {
        let data = std::fs::read(&f).expect("read corpus file");
        fuzz_sim_seed(&data);
    }
}

#[test]
fn the_bytes_choose_the_parameters() {
    let (seed, calm) = params_from_bytes(&[7, 0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 60]);
    assert_eq!(seed, 7);
    assert_eq!((calm.clients, calm.depth, calm.commands), (4, 3, 80));
    let (_, faulty) = params_from_bytes(&[7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 255, 255]);
    assert_eq!((faulty.io_error, faulty.disk_full), (0.05, 0.02));
    assert!(params_from_bytes(&[]).1.commands >= 20, "an empty input still runs");
}
