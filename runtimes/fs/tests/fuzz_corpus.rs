//! Runs broker-fs's cargo-fuzz target bodies over their checked-in corpora
//! (`fuzz/corpus/<target>/` at the repository root), so that `cargo test --all-features`
//! exercises them without nightly or cargo-fuzz. Crashes found by fuzzing are added to
//! the corpus once fixed, named `crash-*`; `seed-*` files are written by hand.

use broker_fs::fuzzing::fuzz_json_lines;
use std::path::{Path, PathBuf};

/// A fuzz target's body.
type Body = fn(&[u8]);

/// Every target with a corpus here, and its body.
const TARGETS: &[(&str, Body)] = &[("json_lines", fuzz_json_lines)];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

#[test]
fn every_target_passes_its_corpus() {
    for (target, body) in TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "corpus {} holds only {} seeds", dir.display(), files.len());
        for file in files {
            let data = std::fs::read(&file).expect("read seed");
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "target {target} fails on {}", file.display());
        }
    }
}
