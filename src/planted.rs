//! Bugs planted on purpose: each one breaks an invariant that one of the simulator's
//! checkers guards, to prove that the checker can fail.
//!
//! Test support, unstable and hidden from the docs. This module, [`crate::Config::bugs`]
//! and [`crate::Executor::plant`] exist only in a build with the `planted-bugs` feature,
//! and so does every check of a planted bug: a product build has none of them (each check
//! is the crate's `planted!` macro, `false` without the feature).

use std::fmt;

/// One planted bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// Reply `DeleteAccepted` before the tombstone is durable.
    AckDeleteBeforeTombstoneDurable,
    /// Remove logs without waiting for in-flight reads to finish.
    RemoveBeforeReadsFinish,
    /// On recovery, forget pending deletions instead of resuming them.
    SkipResumeDeletions,
    /// Key storage by topic name instead of incarnation id.
    KeyStorageByName,
    /// On recovery, treat deleting topics as live again.
    ReloadClearsDeleting,
    /// Skip the directory fsync after creating a log or renaming the journal.
    SkipDirSync,
    /// Reply `Produced` before the log sync completes.
    AckProduceBeforeSync,
    /// Reply `DeleteAccepted` as soon as the tombstone is durable, while produces and
    /// fetches of the incarnation are still in flight (they are answered after it).
    AckDeleteBeforeIoDrains,
    /// A fetch of a name with no live incarnation reads the newest incarnation being deleted.
    FetchServesDeletedIncarnation,
    /// On recovery, open logs but leave every high watermark at zero (it catches up
    /// only when the partition is next written).
    RecoveryForgetsHighWatermark,
    /// A fetch at the high watermark (nothing to read) is never answered.
    LoseFetchAtHighWatermark,
    /// A delete of a name with no live incarnation answers not-found even while an
    /// incarnation of it is being deleted.
    DeleteIgnoresPendingDeletion,
    /// A create refuses a name only if a created topic has it, not one still being created.
    CreateChecksOnlyVisibleNames,
    /// On recovery, a live topic that shares its name with a pending deletion is
    /// deleted too.
    RecoveryDeletesRecreatedName,
    /// Log removals are bounded by one more than the configured concurrency.
    RemovalConcurrencyOffByOne,
    /// A failed log fsync is retried, and its success acknowledges the writes, instead
    /// of halting (after a failed fsync the dirty data is gone; a retry cannot bring it back).
    RetryFailedFsync,
    /// A produce whose write completes after its topic's deletion began is acknowledged
    /// once its end is journaled (after the tombstone), instead of answered not-found.
    AckProduceOfDeletedTopic,
    /// The operator hears that a deletion finished as soon as its tombstone is durable,
    /// while its logs are still on disk.
    FinishedAtTombstone,
    /// A produce that names its partition is placed by its keys (or round-robin) instead.
    NamedPartitionIgnored,
    /// After a failed journal append (a short write, then a full disk), the retry that
    /// follows the release of the journal reserve appends at the file's end, after the
    /// part of the failed commit that landed, instead of over it.
    ForgetJournalEnd,
    /// A topic's offsets begin at 0 whatever was deleted before it, so a re-created name
    /// hands out positions its deleted incarnation had acknowledged.
    OffsetsIgnoreFloor,
    /// Under durability log-sync, opening a log cuts every frame after the journal's
    /// end, as the journaled durability does, though they may have been acknowledged.
    LogSyncCutsSyncedTail,
    /// Under durability log-sync, a tail cut at opening is not reported.
    TailCutUnreported,
    /// Executor: opening a log with `keep_whole_tail` sets aside everything after the
    /// journal's end, as the journaled durability does, and reports it as a tail cut.
    LogSyncReportsJournaledCut,
    /// Cluster: a node answers every command from the catalog it holds, without a
    /// fence: list and describe, creates and deletes validated, produces and fetches
    /// without the fences before and after their data.
    ClusterSkipFence,
    /// Cluster: a node writes and acknowledges a produce to a topic its catalog shows
    /// live without fencing before or after (trusting what it folded before it was cut
    /// off from the store).
    ClusterProduceUnverified,
    /// Cluster: the reconciler deletes the segments of every incarnation its catalog
    /// does not show live, instead of only those it knows removed.
    ClusterReconcileUnknownIds,
    /// Cluster: a node that finished a removal appends `Removed` without validating it
    /// again, so two nodes that both finished one both complete it.
    ClusterDoubleCompletion,
    /// Cluster: a journal append that finds its seq taken counts as written (as if it
    /// had overwritten the other node's entry).
    ClusterUnconditionalAppend,
    /// Cluster: a node never reads the journal's tail on its own, only when a command
    /// needs a fence.
    ClusterNoTailing,
    /// Cluster: a node told to stop its work on timers (`Node::stop_background`) goes on
    /// reading the journal's tail and reconciling.
    ClusterBackgroundNeverStops,
    /// Cluster: a produce whose object exists, and whose second fence finds its topic
    /// deleted, answers not-found, though the object may have landed before the
    /// tombstone and been read.
    ClusterProduceNotFoundAfterWrite,
    /// Cluster: a fetch whose listing finds its offset past the partition's end answers
    /// out of range at once, without the second fence (the listing may have met a
    /// removal under way, below acknowledged offsets).
    ClusterUnfencedOutOfRange,
    /// Cluster: a delete of a name that has an incarnation being deleted is acknowledged
    /// as that one's, even while a newer incarnation of the name is live.
    ClusterDeleteAcksDeleting,
    /// Cluster: a create or delete whose journal append is under way at its deadline is
    /// answered unavailable ("nothing was written") instead of with an unknown outcome.
    ClusterUnavailableAppend,
    /// Cluster: a describe answers with the partition ends the node has learned by its
    /// own produces and fetches, without reading each partition's last segment.
    ClusterDescribeCached,
    /// Cluster: a produce that rode in another's segment (group commit) is given the
    /// segment's base as its first offset, not where its records begin in it.
    ClusterRiderAtLeaderBase,
    /// A read that finds damage reports it as reaching the high watermark, whatever
    /// extent the runtime gave: a reader that skips it skips readable records.
    CorruptExtentToHighWatermark,
    /// Committed offsets are keyed by topic name: a topic deleted and created again
    /// hands its groups' positions on to the new incarnation.
    GroupOffsetsKeyedByName,
    /// Recovery forgets idempotent producers' states: a batch retried after a restart is
    /// appended a second time.
    ProducerStateNotRecovered,
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 40] = [
        Bug::AckDeleteBeforeTombstoneDurable,
        Bug::RemoveBeforeReadsFinish,
        Bug::SkipResumeDeletions,
        Bug::KeyStorageByName,
        Bug::ReloadClearsDeleting,
        Bug::SkipDirSync,
        Bug::AckProduceBeforeSync,
        Bug::AckDeleteBeforeIoDrains,
        Bug::FetchServesDeletedIncarnation,
        Bug::RecoveryForgetsHighWatermark,
        Bug::LoseFetchAtHighWatermark,
        Bug::DeleteIgnoresPendingDeletion,
        Bug::CreateChecksOnlyVisibleNames,
        Bug::RecoveryDeletesRecreatedName,
        Bug::RemovalConcurrencyOffByOne,
        Bug::RetryFailedFsync,
        Bug::AckProduceOfDeletedTopic,
        Bug::FinishedAtTombstone,
        Bug::NamedPartitionIgnored,
        Bug::ForgetJournalEnd,
        Bug::OffsetsIgnoreFloor,
        Bug::LogSyncCutsSyncedTail,
        Bug::TailCutUnreported,
        Bug::LogSyncReportsJournaledCut,
        Bug::ClusterSkipFence,
        Bug::ClusterProduceUnverified,
        Bug::ClusterReconcileUnknownIds,
        Bug::ClusterDoubleCompletion,
        Bug::ClusterUnconditionalAppend,
        Bug::ClusterNoTailing,
        Bug::ClusterBackgroundNeverStops,
        Bug::ClusterProduceNotFoundAfterWrite,
        Bug::ClusterUnfencedOutOfRange,
        Bug::ClusterDeleteAcksDeleting,
        Bug::ClusterUnavailableAppend,
        Bug::ClusterDescribeCached,
        Bug::ClusterRiderAtLeaderBase,
        Bug::CorruptExtentToHighWatermark,
        Bug::GroupOffsetsKeyedByName,
        Bug::ProducerStateNotRecovered,
    ];

    /// The bug's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Bug::AckDeleteBeforeTombstoneDurable => "ack-delete-before-tombstone-durable",
            Bug::RemoveBeforeReadsFinish => "remove-before-reads-finish",
            Bug::SkipResumeDeletions => "skip-resume-deletions",
            Bug::KeyStorageByName => "key-storage-by-name",
            Bug::ReloadClearsDeleting => "reload-clears-deleting",
            Bug::SkipDirSync => "skip-dir-sync",
            Bug::AckProduceBeforeSync => "ack-produce-before-sync",
            Bug::AckDeleteBeforeIoDrains => "ack-delete-before-io-drains",
            Bug::FetchServesDeletedIncarnation => "fetch-serves-deleted-incarnation",
            Bug::RecoveryForgetsHighWatermark => "recovery-forgets-high-watermark",
            Bug::LoseFetchAtHighWatermark => "lose-fetch-at-high-watermark",
            Bug::DeleteIgnoresPendingDeletion => "delete-ignores-pending-deletion",
            Bug::CreateChecksOnlyVisibleNames => "create-checks-only-visible-names",
            Bug::RecoveryDeletesRecreatedName => "recovery-deletes-recreated-name",
            Bug::RemovalConcurrencyOffByOne => "removal-concurrency-off-by-one",
            Bug::RetryFailedFsync => "retry-failed-fsync",
            Bug::AckProduceOfDeletedTopic => "ack-produce-of-deleted-topic",
            Bug::FinishedAtTombstone => "finished-at-tombstone",
            Bug::NamedPartitionIgnored => "named-partition-ignored",
            Bug::ForgetJournalEnd => "forget-journal-end",
            Bug::OffsetsIgnoreFloor => "offsets-ignore-floor",
            Bug::ClusterSkipFence => "cluster-skip-fence",
            Bug::ClusterProduceUnverified => "cluster-produce-unverified",
            Bug::ClusterReconcileUnknownIds => "cluster-reconcile-unknown-ids",
            Bug::ClusterDoubleCompletion => "cluster-double-completion",
            Bug::ClusterUnconditionalAppend => "cluster-unconditional-append",
            Bug::ClusterNoTailing => "cluster-no-tailing",
            Bug::ClusterBackgroundNeverStops => "cluster-background-never-stops",
            Bug::ClusterProduceNotFoundAfterWrite => "cluster-produce-not-found-after-write",
            Bug::ClusterUnfencedOutOfRange => "cluster-unfenced-out-of-range",
            Bug::ClusterDeleteAcksDeleting => "cluster-delete-acks-deleting",
            Bug::ClusterUnavailableAppend => "cluster-unavailable-append",
            Bug::ClusterDescribeCached => "cluster-describe-cached",
            Bug::ClusterRiderAtLeaderBase => "cluster-rider-at-leader-base",
            Bug::LogSyncCutsSyncedTail => "log-sync-cuts-synced-tail",
            Bug::TailCutUnreported => "tail-cut-unreported",
            Bug::LogSyncReportsJournaledCut => "log-sync-reports-journaled-cut",
            Bug::CorruptExtentToHighWatermark => "corrupt-extent-to-high-watermark",
            Bug::GroupOffsetsKeyedByName => "group-offsets-keyed-by-name",
            Bug::ProducerStateNotRecovered => "producer-state-not-recovered",
        }
    }

    /// Looks a bug up by its command-line name.
    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for Bug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of bugs switched on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlantedBugs {
    on: Vec<Bug>,
}

impl PlantedBugs {
    /// Exactly one bug on.
    pub fn only(bug: Bug) -> PlantedBugs {
        PlantedBugs { on: vec![bug] }
    }

    /// Whether `bug` is on.
    pub fn has(&self, bug: Bug) -> bool {
        self.on.contains(&bug)
    }
}
