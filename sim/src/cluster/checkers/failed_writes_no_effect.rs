//! **failed-writes-no-effect**: a command answered with a definite failure had no
//! effect. No record of a produce answered with any error but an unknown outcome is in
//! a segment the store held (judged by value id, label, length and CRC32C, as the
//! history keeps them: the seeded workload makes every value unique, and a value two
//! produces carry is not judged); and no create or delete
//! entry landed that only calls answered unavailable could have written.

use super::judged::Judged;
use crate::cluster::history::{Call, History};
use crate::cluster::store::SimStore;
use crate::model::{ByValueId, ValueId};
use crate::violation::{Checker, Violation};
use broker_core::{BrokerError, Command, Reply, RequestId, Time, TopicId};
use std::collections::BTreeMap;

/// Where records of failed produces are: for each such produce, (incarnation,
/// partition, offset) of each.
pub type Written = BTreeMap<RequestId, Vec<(TopicId, u32, u64)>>;

/// Whether a reply is a definite failure: an error that says the command did nothing
/// (every error but an unknown outcome).
fn definite_failure(reply: &Result<Reply, BrokerError>) -> bool {
    matches!(reply, Err(e) if !matches!(e, BrokerError::OutcomeUnknown(_)))
}

/// For each produce answered with a definite failure, the records of it that a segment
/// the store held (before its incarnation's tombstone) shows, with where. Only values
/// that no other produce carries are judged.
pub fn failed_records_written(history: &History, store: &SimStore) -> Written {
    // The values of definitely failed produces, each with its produce and how many
    // produces carry it: counted for these values alone, as failures are few.
    let mut candidates: ByValueId<&ValueId, (RequestId, u32)> = ByValueId::default();
    for (request, call) in &history.calls {
        let (Command::Produce { .. }, Some((_, reply))) = (&*call.command, &call.answer) else { continue };
        if definite_failure(reply) {
            candidates.extend(call.values.iter().map(|id| (id, (*request, 0))));
        }
    }
    if !candidates.is_empty() {
        for id in history.calls.values().flat_map(|call| call.values.iter()) {
            if let Some((_, carried)) = candidates.get_mut(id) {
                *carried += 1;
            }
        }
    }
    candidates.retain(|_, (_, carried)| *carried == 1);
    let mut written: Written = BTreeMap::new();
    if candidates.is_empty() {
        return written;
    }
    for (&(topic, partition), segments) in &store.segments {
        for (base, values) in segments {
            for (offset, value) in (*base..).zip(values) {
                if let Some((request, _)) = candidates.get(&ValueId::of(value)) {
                    written.entry(*request).or_default().push((topic, partition, offset));
                }
            }
        }
    }
    written
}

/// The call, answered `reply`, had these of its records written (see
/// [`failed_records_written`]): none may be.
pub fn failed_but_written(j: &mut Judged, reply: &Result<Reply, BrokerError>, written: &[(TopicId, u32, u64)]) {
    let Some(&(topic, partition, offset)) = written.first() else { return };
    let more =
        if written.len() > 1 { format!(" (and {} more of its records)", written.len() - 1) } else { String::new() };
    let err = match reply {
        Err(e) => e.to_string(),
        Ok(_) => String::new(),
    };
    j.flag(
        Checker::FailedWritesNoEffect,
        format!("failed ({err}), but its record is at {topic}/{partition}@{offset}{more}"),
    );
}

/// A create's or delete's journal entry that landed although every call that could
/// have written it was answered unavailable ("nothing was written"). The calls that
/// could have written an entry: those of its command (the name and partition count of
/// a create, the name of a delete) invoked before it landed and not answered otherwise
/// for sure (unanswered, an unknown outcome, unavailable, or acknowledged as that very
/// incarnation). Any other answer is one that wrote no entry, or another one.
pub fn unavailable_entries_landed(out: &mut Vec<Violation>, history: &History, store: &SimStore) {
    for (id, life) in &store.lives {
        let landings = [(life.created, true), (life.deleted.unwrap_or(Time::ZERO), false)];
        for (landed, create) in landings.into_iter().filter(|(_, create)| *create || life.deleted.is_some()) {
            let writers: Vec<(&RequestId, &Call)> = history
                .calls
                .iter()
                .filter(|(_, c)| c.invoked <= landed)
                .filter(|(_, c)| match &*c.command {
                    Command::CreateTopic { name, partitions, .. } => {
                        create && *name == life.name && *partitions == life.partitions
                    }
                    Command::DeleteTopic { name } => !create && *name == life.name,
                    _ => false,
                })
                .filter(|(_, c)| match c.answer.as_ref().map(|(_, r)| r) {
                    None | Some(Err(BrokerError::OutcomeUnknown(_) | BrokerError::Unavailable(_))) => true,
                    Some(Ok(Reply::Created { topic } | Reply::DeleteAccepted { topic })) => topic == id,
                    Some(_) => false,
                })
                .collect();
            let unavailable = |c: &Call| matches!(c.answer, Some((_, Err(BrokerError::Unavailable(_)))));
            if writers.is_empty() || !writers.iter().all(|(_, c)| unavailable(c)) {
                continue;
            }
            let (request, call) = writers[0];
            let Some(mut j) = Judged::new(store, *request, call, out) else { continue };
            let others: Vec<String> = writers[1..].iter().map(|(r, _)| format!("req{}", r.0)).collect();
            let entry = if create { format!("the create of {id}") } else { format!("the tombstone of {id}") };
            let or =
                if others.is_empty() { String::new() } else { format!(" (or {}, unavailable too)", others.join(", ")) };
            j.flag(
                Checker::FailedWritesNoEffect,
                format!("answered unavailable, nothing written, but {entry}, which only it{or} could write, landed at {landed}"),
            );
        }
    }
}
