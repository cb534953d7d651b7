//! Every checker can fail: each planted bug is caught within a few hundred seeds, and
//! its failing seed replays to the same violation.
#![cfg(feature = "planted-bugs")]

use broker_core::planted::Bug;
use broker_sim::runner::{run, RunOptions};
use broker_sim::Checker;

const MAX_SEEDS: u64 = 400;

/// How many seeds `bug` may take: a record acknowledged after a failed fsync is lost
/// only if power fails before the run ends, which few seeds bring about (the first at
/// 471); an over-wide extent of damage shows only where rot strikes a batch that intact
/// batches follow, found by the read-back at the end (7 seeds in 5,000, the first at 2,120).
fn max_seeds(bug: Bug) -> u64 {
    match bug {
        Bug::RetryFailedFsync => 1_000,
        Bug::CorruptExtentToHighWatermark => 2_500,
        _ => MAX_SEEDS,
    }
}

/// How seed `seed` runs with `bug`: a bug of the cluster node on a cluster of 2 to 5
/// nodes, any other on one broker over the simulated disk, with durability log-sync
/// for the bugs of that mode.
fn options(bug: Bug, seed: u64) -> RunOptions {
    let nodes = if bug.name().starts_with("cluster-") { 2 + seed as u32 % 4 } else { 0 };
    let log_sync = matches!(bug, Bug::LogSyncCutsSyncedTail | Bug::TailCutUnreported | Bug::LogSyncReportsJournaledCut);
    RunOptions { seed, bug: Some(bug), nodes: Some(nodes), log_sync, ..RunOptions::default() }
}

/// Runs seeds until one breaks an invariant; returns that seed and its checkers.
fn first_failure(bug: Bug) -> Option<(u64, Vec<Checker>)> {
    (0..max_seeds(bug)).find_map(|seed| {
        let r = run(&options(bug, seed));
        (!r.violations.is_empty()).then(|| (seed, r.violations.iter().map(|v| v.checker).collect()))
    })
}

fn caught_by(bug: Bug, expected: &[Checker]) {
    let Some((seed, checkers)) = first_failure(bug) else {
        panic!("planted bug {bug} went unnoticed for {} seeds", max_seeds(bug));
    };
    assert!(
        checkers.iter().any(|c| expected.contains(c)),
        "{bug}: seed {seed} was caught by {checkers:?}, expected one of {expected:?}"
    );
    let again = run(&options(bug, seed));
    assert_eq!(again.violations.iter().map(|v| v.checker).collect::<Vec<_>>(), checkers, "replay differs");
}

/// Runs seeds until `checker` fires (whatever else fires too); replays that seed.
fn fired_by(bug: Bug, checker: Checker) {
    let found = (0..max_seeds(bug)).find_map(|seed| {
        let r = run(&options(bug, seed));
        r.violations.iter().find(|v| v.checker == checker).map(|v| (seed, v.clone(), r.trace_hash))
    });
    let Some((seed, v, hash)) = found else {
        panic!("planted bug {bug} never made {checker} fire in {} seeds", max_seeds(bug));
    };
    let again = run(&options(bug, seed));
    assert!(again.violations.contains(&v), "{bug}: replay of seed {seed} differs");
    assert_eq!(again.trace_hash, hash, "{bug}: replay of seed {seed} hashes differently");
}

#[test]
fn ack_delete_before_tombstone_durable_is_caught() {
    caught_by(Bug::AckDeleteBeforeTombstoneDurable, &[Checker::NoResurrection]);
}

#[test]
fn remove_before_reads_finish_is_caught() {
    // Removal also ignores a log creation backing off after a failure: the deletion
    // completes under it, and the create is never answered (a later delete of the name
    // is told not-found while that create is still in flight, seed 20). A deletion
    // completed under a read is acknowledged before the read is answered, from the
    // deleted incarnation.
    caught_by(
        Bug::RemoveBeforeReadsFinish,
        &[
            Checker::NoPrematureRemoval,
            Checker::EveryRequestAnswered,
            Checker::FetchIncarnation,
            Checker::DeleteNotFound,
        ],
    );
}

#[test]
fn skip_resume_deletions_is_caught() {
    caught_by(Bug::SkipResumeDeletions, &[Checker::Liveness, Checker::NoOrphans]);
    fired_by(Bug::SkipResumeDeletions, Checker::Liveness);
    fired_by(Bug::SkipResumeDeletions, Checker::NoOrphans);
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
    fired_by(Bug::ReloadClearsDeleting, Checker::NoResurrection);
}

#[test]
fn skip_dir_sync_is_caught() {
    caught_by(Bug::SkipDirSync, &[Checker::Durability, Checker::NoOrphans, Checker::NoResurrection]);
}

#[test]
fn ack_produce_before_sync_is_caught() {
    caught_by(Bug::AckProduceBeforeSync, &[Checker::Durability, Checker::ModelAgreement, Checker::AckedOffsetsServed]);
}

#[test]
fn ack_delete_before_io_drains_is_caught() {
    // Its produces are answered not-found once their topic's deletion began, but a
    // fetch still comes back after the delete's acknowledgement.
    fired_by(Bug::AckDeleteBeforeIoDrains, Checker::FetchIncarnation);
}

#[test]
fn ack_produce_of_deleted_topic_is_caught() {
    fired_by(Bug::AckProduceOfDeletedTopic, Checker::NoAckAfterDelete);
}

#[test]
fn fetch_serves_deleted_incarnation_is_caught() {
    fired_by(Bug::FetchServesDeletedIncarnation, Checker::FetchIncarnation);
}

#[test]
fn recovery_forgets_high_watermark_is_caught() {
    fired_by(Bug::RecoveryForgetsHighWatermark, Checker::AckedOffsetsServed);
}

#[test]
fn lose_fetch_at_high_watermark_is_caught() {
    fired_by(Bug::LoseFetchAtHighWatermark, Checker::EveryRequestAnswered);
}

#[test]
fn delete_ignores_pending_deletion_is_caught() {
    fired_by(Bug::DeleteIgnoresPendingDeletion, Checker::DeleteNotFound);
}

#[test]
fn create_checks_only_visible_names_is_caught() {
    fired_by(Bug::CreateChecksOnlyVisibleNames, Checker::CreateOfLiveName);
}

#[test]
fn finished_at_tombstone_is_caught() {
    caught_by(Bug::FinishedAtTombstone, &[Checker::TruthfulNotices]);
    fired_by(Bug::FinishedAtTombstone, Checker::TruthfulNotices);
}

/// The journal append retried at the file's end after a full disk cut it short: the
/// journal's middle holds a commit with both copies damaged, which the crash-point
/// check finds corrupt, and every start refuses (liveness). Found once the simulated
/// disk wrote what fits before failing, as Linux does.
#[test]
fn forget_journal_end_is_caught() {
    caught_by(Bug::ForgetJournalEnd, &[Checker::NoOrphans, Checker::Liveness]);
}

/// A re-created name that hands out its deleted incarnation's positions: a reader still
/// at one would be served the new incarnation from the middle.
#[test]
fn offsets_ignore_floor_is_caught() {
    fired_by(Bug::OffsetsIgnoreFloor, Checker::ModelAgreement);
}

/// Under log-sync, records synced past the journal's end cut at a start as if never
/// acknowledged: an acknowledged offset is served no more, or given again.
#[test]
fn log_sync_cuts_synced_tail_is_caught() {
    caught_by(Bug::LogSyncCutsSyncedTail, &[Checker::AckedOffsetsServed, Checker::ModelAgreement, Checker::Durability]);
}

/// Under log-sync, rot in records past the journal's end cut without a word: their
/// offsets are given again though clients were told of them.
#[test]
fn tail_cut_unreported_is_caught() {
    caught_by(Bug::TailCutUnreported, &[Checker::ModelAgreement, Checker::AckedOffsetsServed, Checker::Durability]);
}

/// Under log-sync, a start that sets aside every record past the journal's end and
/// says so: the report is true, the loss is not allowed (nothing rotted).
#[test]
fn log_sync_reports_journaled_cut_is_caught() {
    fired_by(Bug::LogSyncReportsJournaledCut, Checker::Durability);
}

#[test]
fn named_partition_ignored_is_caught() {
    fired_by(Bug::NamedPartitionIgnored, Checker::ModelAgreement);
}

#[test]
fn removal_concurrency_off_by_one_is_caught() {
    fired_by(Bug::RemovalConcurrencyOffByOne, Checker::RemovalConcurrency);
}

/// A failed fsync dropped the dirty data; acknowledging after a retried sync loses
/// acknowledged records at the next crash (the offset may even be handed out again).
/// The next start reports the lost records as corruption of a disk that never rotted:
/// truthful-notices catches that even when a delete issued since excuses the loss from
/// durability (seed 95).
#[test]
fn retry_failed_fsync_is_caught() {
    caught_by(
        Bug::RetryFailedFsync,
        &[Checker::Durability, Checker::AckedOffsetsServed, Checker::ModelAgreement, Checker::TruthfulNotices],
    );
    fired_by(Bug::RetryFailedFsync, Checker::Durability);
}

/// A re-created topic that vanishes with no delete issued after its create is caught,
/// even though a delete of its name was issued before (that delete cannot excuse it).
#[test]
fn recovery_deletes_recreated_name_is_caught_as_vanished() {
    let vanished = (0..MAX_SEEDS).find_map(|seed| {
        let r = run(&options(Bug::RecoveryDeletesRecreatedName, seed));
        r.violations
            .iter()
            .find(|v| v.checker == Checker::Durability && v.detail.contains("vanished without a delete"))
            .map(|v| (seed, v.clone()))
    });
    let Some((seed, v)) = vanished else {
        panic!("recovery-deletes-recreated-name never flagged a vanished topic in {MAX_SEEDS} seeds");
    };
    let again = run(&options(Bug::RecoveryDeletesRecreatedName, seed));
    assert!(again.violations.contains(&v), "replay of seed {seed} differs");
}

/// A node that answers reads and validates appends without a fence shows a deleted
/// topic after its delete was acknowledged.
#[test]
fn cluster_skip_fence_is_caught() {
    fired_by(Bug::ClusterSkipFence, Checker::LinearizableLifecycle);
}

/// A node that acknowledges a produce from the catalog it folded before, without
/// fencing, acknowledges writes to a deleted incarnation.
#[test]
fn cluster_produce_unverified_is_caught() {
    fired_by(Bug::ClusterProduceUnverified, Checker::LinearizableLifecycle);
}

/// A reconciler that deletes whatever its catalog does not show live deletes the
/// segments of a create it has not folded yet: a live incarnation loses records.
#[test]
fn cluster_reconcile_unknown_ids_is_caught() {
    fired_by(Bug::ClusterReconcileUnknownIds, Checker::NoPrematureRemoval);
    fired_by(Bug::ClusterReconcileUnknownIds, Checker::AckedReadableEverywhere);
}

/// Two nodes that both finished one removal both complete it.
#[test]
fn cluster_double_completion_is_caught() {
    fired_by(Bug::ClusterDoubleCompletion, Checker::OneCompletion);
}

/// An append that takes a lost race for a win acknowledges a create the journal does
/// not hold.
#[test]
fn cluster_unconditional_append_is_caught() {
    fired_by(Bug::ClusterUnconditionalAppend, Checker::OneLiveIncarnation);
}

/// A node that reads the journal only when a command needs it never catches up while
/// no client talks to it.
#[test]
fn cluster_no_tailing_is_caught() {
    fired_by(Bug::ClusterNoTailing, Checker::HealsInBound);
}

/// A node that goes on polling once told to stop keeps a settled cluster from ever
/// quiescing, so its final read-back and reconciliation never run.
#[test]
fn cluster_background_never_stops_is_caught() {
    fired_saying(Bug::ClusterBackgroundNeverStops, Checker::Liveness, "never quiesced");
}

/// Runs seeds until `checker` fires with `bug` with a violation that says `what`;
/// replays that seed, and runs it without the bug, which must break nothing.
fn fired_saying(bug: Bug, checker: Checker, what: &str) {
    let found = (0..max_seeds(bug)).find_map(|seed| {
        let r = run(&options(bug, seed));
        r.violations.iter().find(|v| v.checker == checker && v.detail.contains(what)).map(|v| (seed, v.clone()))
    });
    let Some((seed, v)) = found else {
        panic!("planted bug {bug} never made {checker} say {what:?} in {} seeds", max_seeds(bug));
    };
    let again = run(&options(bug, seed));
    assert!(again.violations.contains(&v), "{bug}: replay of seed {seed} differs");
    let without = run(&RunOptions { bug: None, ..options(bug, seed) });
    assert!(without.violations.is_empty(), "seed {seed} breaks invariants without {bug}: {:?}", without.violations);
}

/// A produce whose object exists, and whose second fence finds its topic deleted,
/// answers not-found: the object landed before the tombstone, so the failed produce
/// wrote.
#[test]
fn cluster_produce_not_found_after_write_is_caught() {
    fired_saying(Bug::ClusterProduceNotFoundAfterWrite, Checker::FailedWritesNoEffect, "failed (topic");
}

/// A fetch whose listing met a removal under way answers out of range without a second
/// fence: below offsets acknowledged before it was invoked.
#[test]
fn cluster_unfenced_out_of_range_is_caught() {
    fired_saying(Bug::ClusterUnfencedOutOfRange, Checker::LinearizableLifecycle, "acknowledged before the call");
}

/// A describe that shows the ends its node learned by itself: below offsets another
/// node acknowledged before the call.
#[test]
fn cluster_describe_cached_is_caught() {
    fired_saying(Bug::ClusterDescribeCached, Checker::LinearizableLifecycle, "acknowledged before the call");
}

/// A delete acknowledged as an incarnation being deleted while a newer one of the name
/// is live: no linearization point gives that answer.
#[test]
fn cluster_delete_acks_deleting_is_caught() {
    fired_saying(Bug::ClusterDeleteAcksDeleting, Checker::LinearizableLifecycle, "was live all along");
}

/// A create or delete answered unavailable ("nothing was written") while its append was
/// under way: the entry lands.
#[test]
fn cluster_unavailable_append_is_caught() {
    fired_saying(Bug::ClusterUnavailableAppend, Checker::FailedWritesNoEffect, "answered unavailable");
}

/// Damage reported as reaching the high watermark: the read-back at the end skips the
/// extent, and finds the extent's last offset readable.
#[test]
fn corrupt_extent_to_high_watermark_is_caught() {
    fired_saying(Bug::CorruptExtentToHighWatermark, Checker::Durability, "were reported damaged");
}

/// Committed offsets kept by topic name: a topic deleted and created again hands its
/// groups' positions on to the new incarnation, where a read of a group shows a
/// position committed to the one before.
#[test]
fn group_offsets_keyed_by_name_is_caught() {
    fired_saying(Bug::GroupOffsetsKeyedByName, Checker::GroupOffsets, "another incarnation of the name");
}

/// Producers' states forgotten at every start: a batch retried after a restart is
/// appended a second time, at other positions than its first send was acknowledged at
/// (the clients retry acknowledged batches after every restart). appended-once alone
/// sees it: the records are distinct values the model holds at both positions.
#[test]
fn producer_state_not_recovered_is_caught() {
    caught_by(Bug::ProducerStateNotRecovered, &[Checker::AppendedOnce]);
    fired_saying(Bug::ProducerStateNotRecovered, Checker::AppendedOnce, "appended again");
}

/// For each checker, a planted bug that makes it fire (the tests above show each).
const WITNESSES: [(Checker, Bug); 22] = [
    (Checker::NoOrphans, Bug::SkipResumeDeletions),
    (Checker::Durability, Bug::RetryFailedFsync),
    (Checker::NoResurrection, Bug::ReloadClearsDeleting),
    (Checker::NoPrematureRemoval, Bug::ClusterReconcileUnknownIds),
    (Checker::Liveness, Bug::SkipResumeDeletions),
    (Checker::ModelAgreement, Bug::NamedPartitionIgnored),
    (Checker::NoAckAfterDelete, Bug::AckProduceOfDeletedTopic),
    (Checker::FetchIncarnation, Bug::FetchServesDeletedIncarnation),
    (Checker::AckedOffsetsServed, Bug::RecoveryForgetsHighWatermark),
    (Checker::EveryRequestAnswered, Bug::LoseFetchAtHighWatermark),
    (Checker::DeleteNotFound, Bug::DeleteIgnoresPendingDeletion),
    (Checker::CreateOfLiveName, Bug::CreateChecksOnlyVisibleNames),
    (Checker::RemovalConcurrency, Bug::RemovalConcurrencyOffByOne),
    (Checker::TruthfulNotices, Bug::FinishedAtTombstone),
    (Checker::GroupOffsets, Bug::GroupOffsetsKeyedByName),
    (Checker::AppendedOnce, Bug::ProducerStateNotRecovered),
    (Checker::LinearizableLifecycle, Bug::ClusterSkipFence),
    (Checker::OneLiveIncarnation, Bug::ClusterUnconditionalAppend),
    (Checker::AckedReadableEverywhere, Bug::ClusterReconcileUnknownIds),
    (Checker::OneCompletion, Bug::ClusterDoubleCompletion),
    (Checker::HealsInBound, Bug::ClusterNoTailing),
    (Checker::FailedWritesNoEffect, Bug::ClusterProduceNotFoundAfterWrite),
];

/// Each checker is the one that catches at least one planted bug: none is decorative.
#[test]
fn every_checker_catches_some_planted_bug() {
    assert!(Checker::ALL.iter().all(|c| WITNESSES.iter().any(|(w, _)| w == c)), "a checker has no witness");
    let mut fired = std::collections::BTreeSet::new();
    // The first failing seed of each bug shows most checkers...
    for bug in Bug::ALL {
        fired.extend(first_failure(bug).map(|(_, checkers)| checkers).unwrap_or_default());
    }
    // ...and each of the others is searched for with the bug known to make it fire.
    for checker in Checker::ALL.into_iter().filter(|c| !fired.contains(c)) {
        let (_, bug) = WITNESSES.iter().find(|(c, _)| *c == checker).expect("every checker has a witness");
        fired_by(*bug, checker);
    }
}

/// A produce that rode in another's segment (group commit) answered with the segment's
/// base as its first offset: the offsets it was given hold another produce's records.
#[test]
fn cluster_rider_at_leader_base_is_caught() {
    caught_by(Bug::ClusterRiderAtLeaderBase, &[Checker::AckedOffsetsServed]);
}
