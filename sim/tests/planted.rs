//! Every checker can fail: each planted bug is caught within a few hundred seeds, and
//! its failing seed replays to the same violation.
#![cfg(feature = "planted-bugs")]

use broker_core::planted::Bug;
use broker_sim::runner::{run, RunOptions};
use broker_sim::Checker;

const MAX_SEEDS: u64 = 400;

/// Runs seeds until one breaks an invariant; returns that seed and its checkers.
fn first_failure(bug: Bug) -> Option<(u64, Vec<Checker>)> {
    (0..MAX_SEEDS).find_map(|seed| {
        let r = run(&RunOptions { seed, bug: Some(bug), ..RunOptions::default() });
        (!r.violations.is_empty()).then(|| (seed, r.violations.iter().map(|v| v.checker).collect()))
    })
}

fn caught_by(bug: Bug, expected: &[Checker]) {
    let Some((seed, checkers)) = first_failure(bug) else {
        panic!("planted bug {bug} went unnoticed for {MAX_SEEDS} seeds");
    };
    assert!(
        checkers.iter().any(|c| expected.contains(c)),
        "{bug}: seed {seed} was caught by {checkers:?}, expected one of {expected:?}"
    );
    let again = run(&RunOptions { seed, bug: Some(bug), ..RunOptions::default() });
    assert_eq!(again.violations.iter().map(|v| v.checker).collect::<Vec<_>>(), checkers, "replay differs");
}

#[test]
fn ack_delete_before_tombstone_durable_is_caught() {
    caught_by(Bug::AckDeleteBeforeTombstoneDurable, &[Checker::NoResurrection]);
}

#[test]
fn remove_before_reads_finish_is_caught() {
    caught_by(Bug::RemoveBeforeReadsFinish, &[Checker::NoPrematureRemoval]);
}

#[test]
fn skip_resume_deletions_is_caught() {
    caught_by(Bug::SkipResumeDeletions, &[Checker::Liveness, Checker::NoOrphans]);
}

#[test]
fn key_storage_by_name_is_caught() {
    caught_by(
        Bug::KeyStorageByName,
        &[Checker::NoResurrection, Checker::NoOrphans, Checker::Durability, Checker::NoPrematureRemoval],
    );
}

#[test]
fn reload_clears_deleting_is_caught() {
    caught_by(Bug::ReloadClearsDeleting, &[Checker::NoResurrection]);
}

#[test]
fn skip_dir_sync_is_caught() {
    caught_by(Bug::SkipDirSync, &[Checker::Durability, Checker::NoOrphans, Checker::NoResurrection]);
}

#[test]
fn ack_produce_before_sync_is_caught() {
    caught_by(Bug::AckProduceBeforeSync, &[Checker::Durability, Checker::ModelAgreement]);
}

/// Each checker is the one that catches at least one planted bug: none is decorative.
#[test]
fn every_checker_catches_some_planted_bug() {
    let mut fired = std::collections::BTreeSet::new();
    for bug in Bug::ALL {
        for seed in 0..MAX_SEEDS {
            let r = run(&RunOptions { seed, bug: Some(bug), ..RunOptions::default() });
            fired.extend(r.violations.iter().map(|v| v.checker));
            if fired.len() == Checker::ALL.len() {
                return;
            }
        }
    }
    let missing: Vec<_> = Checker::ALL.iter().filter(|c| !fired.contains(c)).collect();
    panic!("checkers that no planted bug makes fire: {missing:?}");
}
