//! Bugs planted on purpose (feature `planted-bugs`): each one breaks an invariant that
//! one of the simulator's checkers guards, to prove that the checker can fail.

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
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 7] = [
        Bug::AckDeleteBeforeTombstoneDurable,
        Bug::RemoveBeforeReadsFinish,
        Bug::SkipResumeDeletions,
        Bug::KeyStorageByName,
        Bug::ReloadClearsDeleting,
        Bug::SkipDirSync,
        Bug::AckProduceBeforeSync,
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
