//! **failed-writes-no-effect**: a command answered with a definite failure had no
//! effect. No record of a produce answered with any error but an unknown outcome is in
//! a segment the store held (judged by value: the seeded workload makes every value
//! unique, and a value two produces carry is not judged); and no create or delete
//! entry landed that only calls answered unavailable could have written.

use super::judged::Judged;
use crate::cluster::history::{Call, History};
use crate::cluster::store::SimStore;
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

/// A value as a map key: bytes compared whole, except that the same bytes in memory
/// (a command's value met again in the history, or kept by a retry) are equal at once.
/// The refused batches past the limits hold megabytes of values, each met again.
#[derive(Clone, Copy)]
struct Value<'a>(&'a [u8]);

impl Ord for Value<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if std::ptr::eq(self.0, other.0) {
            std::cmp::Ordering::Equal
        } else {
            self.0.cmp(other.0)
        }
    }
}

impl PartialOrd for Value<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Value<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Value<'_> {}

/// For each produce answered with a definite failure, the records of it that a segment
/// the store held (before its incarnation's tombstone) shows, with where. Only values
/// that no other produce carries are judged.
pub fn failed_records_written(history: &History, store: &SimStore) -> Written {
    // The values of definitely failed produces, each with its produce and how many
    // produces carry it: counted for these values alone, as failures are few.
    let mut candidates: BTreeMap<Value<'_>, (RequestId, u32)> = BTreeMap::new();
    for (request, call) in &history.calls {
        let (Command::Produce { records, .. }, Some((_, reply))) = (&*call.command, &call.answer) else { continue };
        if definite_failure(reply) {
            candidates.extend(records.iter().map(|r| (Value(&r.value[..]), (*request, 0))));
        }
    }
    if !candidates.is_empty() {
        for call in history.calls.values() {
            if let Command::Produce { records, .. } = &*call.command {
                for r in records {
                    if let Some((_, carried)) = candidates.get_mut(&Value(&r.value[..])) {
                        *carried += 1;
                    }
                }
            }
        }
    }
    let failed: BTreeMap<Value<'_>, RequestId> = candidates
        .into_iter()
        .filter(|(_, (_, carried))| *carried == 1)
        .map(|(v, (request, _))| (v, request))
        .collect();
    let mut written: Written = BTreeMap::new();
    if failed.is_empty() {
        return written;
    }
    for (&(topic, partition), segments) in &store.segments {
        for (base, values) in segments {
            for (offset, value) in (*base..).zip(values) {
                if let Some(request) = failed.get(&Value(&value[..])) {
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
