//! **truthful-notices**: every notice the broker gives an operator is true of the world
//! when it is given.
//!
//! - A finished deletion (`DeletionFinished`) leaves no log of its incarnation in the
//!   directory, and names an incarnation a delete may have hit (one the model knows as
//!   live with no delete issued since its create was never deleted).
//! - A removed stray (`StrayLogRemoved`) is gone from the directory, and is no log of an
//!   incarnation that is live for certain.
//! - Corruption (`Corruption`) is reported only in a log whose file the disk rotted: an
//!   alarm an operator acts on (checking the disk) must not be false.
//! - A cut tail (`TailCut`, durability log-sync) takes records a client was told of
//!   (acknowledged, or served) only from a log whose file the disk rotted: a crash alone
//!   loses nothing synced. This is judged as **durability**; the model then forgets
//!   them.
//!
//! Retries, new journals and journal repairs are not judged: whether the operation
//! really failed, or which copy was bad, is the disk's internal business.

use crate::model::Model;
use crate::violation::{Checker, Flags};
use broker_core::{LogId, Notice};

/// What the checker needs of the disk at the moment of a notice.
pub(super) struct DiskView<'a> {
    /// Every file the directory holds now (the page cache's view).
    pub names: &'a [String],
    /// Whether the disk rotted a sector of this file.
    pub rotted: &'a dyn Fn(&str) -> bool,
}

pub(super) fn notice(flags: &mut Flags, model: &Model, disk: &DiskView<'_>, notice: &Notice) {
    let live_for_certain = |id| model.topics.contains_key(&id) && !model.may_be_deleted(id);
    match notice {
        Notice::DeletionFinished { topic, name } => {
            let left: Vec<&String> = disk
                .names
                .iter()
                .filter(|n| LogId::parse_file_name(n).is_some_and(|log| log.topic == *topic))
                .collect();
            if !left.is_empty() {
                let detail = format!("the deletion of {name:?} ({topic}) is reported finished, but {left:?} remain");
                flags.flag(Checker::TruthfulNotices, detail);
            }
            if live_for_certain(*topic) {
                let detail = format!("the deletion of {name:?} ({topic}) is reported finished, but no delete hit it");
                flags.flag(Checker::TruthfulNotices, detail);
            }
        }
        Notice::StrayLogRemoved { log } => {
            let file = log.file_name();
            if disk.names.contains(&file) {
                flags.flag(Checker::TruthfulNotices, format!("stray {file} is reported removed but is still there"));
            }
            if live_for_certain(log.topic) {
                let detail = format!("{file} of live topic {} is reported a stray and removed", log.topic);
                flags.flag(Checker::TruthfulNotices, detail);
            }
        }
        Notice::Corruption { log, from, to, detail } => {
            if !(disk.rotted)(&log.file_name()) {
                let detail = format!(
                    "corruption of {log} offsets {from}..{to} is reported ({detail}), but its file never rotted"
                );
                flags.flag(Checker::TruthfulNotices, detail);
            }
        }
        Notice::TailCut { log, offset, bytes, detail } => {
            let told = model.told_from(*log, *offset);
            if told > 0 && !(disk.rotted)(&log.file_name()) {
                let detail = format!(
                    "{log} was cut at offset {offset} ({bytes} bytes: {detail}), losing {told} records clients were \
                     told of, but its file never rotted"
                );
                flags.flag(Checker::Durability, detail);
            }
        }
        Notice::NewJournal
        | Notice::TornJournalTail { .. }
        | Notice::JournalCopyRepaired { .. }
        | Notice::Retrying { .. } => {}
    }
}
