//! **durability**: every record acknowledged to a client, or served to one below the
//! high watermark, stays readable with its offset and bytes for the rest of the run;
//! injected bit rot is the only excuse, and then only for a record reported corrupt by
//! its own offset (or a log reported corrupt whole), never for a silent loss, a short
//! high watermark or another record in its place. An incarnation with acknowledged
//! records vanishes only if a delete of it may have happened (see
//! [`Model::may_be_deleted`]).
//!
//! During the run, the checker reads each part of a reply as the model folds it in
//! ([`Seen`]): a fetched record must be the one acknowledged or first served at its
//! position, a position once served must be acknowledged with the same record, and an
//! acknowledged record is reported corrupt only where rot struck its log. At the end of
//! a run whose broker settled and serves, the runner reads back every partition of
//! every live incarnation.

use super::Flags;
use crate::model::{label, Model, Seen};
use crate::violation::Checker;
use broker_core::{BrokerError, Command, LogId};

/// Judges one part of a reply, against the model as folded up to it. `rotted` tells the
/// logs that suffered injected bit rot.
pub(super) fn saw(flags: &mut Flags, model: &Model, seen: &Seen<'_>, rotted: &dyn Fn(LogId) -> bool) {
    match seen {
        Seen::Reply {
            command: Command::Fetch { .. },
            reply: Err(BrokerError::CorruptRecord { log, offset, .. }),
            ..
        } => {
            let Some(log_id) = LogId::parse_file_name(log) else { return };
            if !rotted(log_id) && model.acked.contains_key(&(log_id.topic, log_id.partition, *offset)) {
                let detail =
                    format!("acknowledged record {log_id}@{offset} reported corrupt without injected corruption");
                flags.flag(Checker::Durability, detail);
            }
        }
        Seen::Produced { at: (topic, partition, offset), record } => {
            if let Some(served) = model.served.get(&(*topic, *partition, *offset)).filter(|s| *s != *record) {
                let detail = format!(
                    "{topic}/p{partition}@{offset} was served as {}, then acknowledged for {}",
                    label(&served.value),
                    label(&record.value)
                );
                flags.flag(Checker::Durability, detail);
            }
        }
        Seen::Fetched { at, record: got, .. } => {
            let (topic, partition, offset) = *at;
            if let Some(want) = model.acked.get(at) {
                if want != *got {
                    let detail = format!(
                        "{topic}/p{partition}@{offset} reads {}, acknowledged {}",
                        label(&got.value),
                        label(&want.value)
                    );
                    flags.flag(Checker::Durability, detail);
                }
            } else if let Some(served) = model.served.get(at) {
                if served != *got {
                    let detail = format!(
                        "{topic}/p{partition}@{offset} was served as {}, later reads {}",
                        label(&served.value),
                        label(&got.value)
                    );
                    flags.flag(Checker::Durability, detail);
                }
            }
        }
        _ => {}
    }
}
