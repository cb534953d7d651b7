//! Runs the cargo-fuzz targets `sim_seed` and `cluster_seed` over their checked-in
//! corpora (`fuzz/corpus/<target>/`), so `cargo test` exercises them without nightly.

use broker_sim::fuzzing::{cluster_params_from_bytes, fuzz_cluster_seed, fuzz_sim_seed, params_from_bytes};
use broker_testkit::fuzzing::run_corpus;

#[test]
fn sim_seed_passes_its_corpus() {
    run_corpus("sim_seed", fuzz_sim_seed, 4);
}

#[test]
fn cluster_seed_passes_its_corpus() {
    run_corpus("cluster_seed", fuzz_cluster_seed, 4);
}

#[test]
fn the_bytes_choose_the_cluster() {
    let (seed, params, calm) = cluster_params_from_bytes(&[9, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 10, 0, 0, 0]);
    assert_eq!((seed, calm.nodes, params.clients, params.commands), (9, 5, 2, 20));
    assert!(!calm.has_faults(), "no flags, no faults: {calm:?}");
    let mut faulty = vec![9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0b111, 0, 0];
    faulty.extend([255; 20]);
    let (_, _, c) = cluster_params_from_bytes(&faulty);
    assert_eq!((c.nodes, c.error, c.short_pages), (2, 0.05, 0.5));
    assert!(c.foreign_keys && c.crash_every_us > 0 && c.cut_every_us > 0 && c.clock_drift_ppm > 0);
    assert!(cluster_params_from_bytes(&[]).1.commands >= 10, "an empty input still runs");
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
