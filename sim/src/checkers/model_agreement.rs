//! **model-agreement**: every reply agrees with the reference model
//! ([`crate::model::Model`]), that is with what clients were told before:
//!
//! - a reply answers a request that was issued and not answered yet, with a reply of the
//!   command's kind;
//! - a create never answers with an id an earlier reply revealed, and a delete accepted
//!   for a known id names that id's topic;
//! - a produce is acknowledged with one position per record, all in the partition the
//!   produce named if it named one, else a keyed record in the partition murmur2 gives its
//!   key; no position is acknowledged twice, and none is at or below a position an
//!   earlier incarnation of the name acknowledged or served (a reader still there must
//!   be told it is out of range, not be served the new incarnation from the middle);
//! - a fetch returns a dense run of offsets from the one asked for, and every record it
//!   shows where the model holds none was produced by some client;
//! - a list or describe shows a known incarnation with the name and partition count it
//!   was created with;
//! - a request is never answered not-found while its name has an incarnation whose
//!   creation was acknowledged before the request was issued, with no delete of the
//!   name issued since its create was (creates excepted).
//!
//! The checker reads each part of a reply as the model folds it in ([`Seen`]).

use crate::model::{label, Model, Seen};
use crate::violation::{Checker, Flags};
use broker_core::{partition_for_key, BrokerError, Command, Reply};

/// Judges one part of a reply, against the model as folded up to it.
pub(super) fn saw(flags: &mut Flags, model: &Model, seen: &Seen<'_>) {
    match seen {
        Seen::UnknownRequest(request) => {
            flags.flag(Checker::ModelAgreement, format!("reply to unknown request {}", request.0));
        }
        Seen::Reply { command, issued_at, reply, .. } => replied(flags, model, command, *issued_at, reply),
        Seen::Produced { at: (topic, partition, offset), record, named } => {
            if let Some((old, last)) = model.last_position_before(*topic).filter(|(_, last)| offset <= last) {
                let detail = format!(
                    "{topic}/p{partition}@{offset} is at or below {last}, a position of {old}, an earlier incarnation \
                     of its name"
                );
                flags.flag(Checker::ModelAgreement, detail);
            }
            match named {
                Some(named) if partition != named => {
                    let detail =
                        format!("a produce to partition {named} of {topic} landed a record in partition {partition}");
                    flags.flag(Checker::ModelAgreement, detail);
                }
                Some(_) => {}
                None => {
                    let (Some((_, n)), Some(key)) = (model.topics.get(topic), &record.key) else { return };
                    let want = partition_for_key(key, *n);
                    if *partition != want {
                        let detail =
                            format!("keyed record went to partition {partition} of {topic}, murmur2 says {want}");
                        flags.flag(Checker::ModelAgreement, detail);
                    }
                }
            }
        }
        Seen::AckedAgain { at: (topic, partition, offset), before, record } => {
            let detail = format!(
                "offset {topic}/p{partition}@{offset} acknowledged twice (first {}, then {})",
                label(&before.value),
                label(&record.value)
            );
            flags.flag(Checker::ModelAgreement, detail);
        }
        Seen::Fetched { at, from, index, record } => {
            let (topic, partition, offset) = *at;
            if offset != from + index {
                let detail = format!("fetch of {topic}/p{partition} from {from} returned offset {offset}");
                flags.flag(Checker::ModelAgreement, detail);
            }
            if !model.holds(at) && model.home_of(&record.value).is_none() && model.produced_to(&record.value).is_none()
            {
                let detail =
                    format!("{topic}/p{partition}@{offset} holds {}, which no client produced", label(&record.value));
                flags.flag(Checker::ModelAgreement, detail);
            }
        }
        Seen::Visible { id, name, partitions } => match model.topics.get(id) {
            Some((n, p)) if !model.deleted.contains(id) && (n != name || p != partitions) => {
                let detail = format!("{id} shows as {name}/{partitions}, created as {n}/{p}");
                flags.flag(Checker::ModelAgreement, detail);
            }
            _ => {}
        },
    }
}

/// Judges a whole reply, before any of it is folded in.
fn replied(
    flags: &mut Flags,
    model: &Model,
    cmd: &Command,
    issued_at: broker_core::Time,
    reply: &Result<Reply, BrokerError>,
) {
    match (reply, cmd) {
        (Err(BrokerError::Halted(_)), _) => {}
        (Ok(Reply::Created { topic }), Command::CreateTopic { name, .. }) => {
            if model.topics.contains_key(topic) {
                flags.flag(Checker::ModelAgreement, format!("create of {name} reused id {topic}"));
            }
        }
        (Ok(Reply::DeleteAccepted { topic }), Command::DeleteTopic { name }) => {
            if let Some((known, _)) = model.topics.get(topic).filter(|(known, _)| known != name) {
                let detail = format!("delete of {name} accepted for {topic}, which is {known}");
                flags.flag(Checker::ModelAgreement, detail);
            }
        }
        (Ok(Reply::Produced { positions, .. }), Command::Produce { records, .. })
        | (Ok(Reply::Produced { positions, .. }), Command::ProduceIdempotent { records, .. }) => {
            if positions.len() != records.len() {
                let detail = format!("produce of {} records acknowledged {} positions", records.len(), positions.len());
                flags.flag(Checker::ModelAgreement, detail);
            }
        }
        (Ok(Reply::Fetched { .. }), Command::Fetch { .. })
        | (Ok(Reply::Topics(_)), Command::ListTopics)
        | (Ok(Reply::Described(_)), Command::DescribeTopic { .. })
        | (Ok(Reply::OffsetsCommitted { .. }), Command::CommitOffsets { .. })
        | (Ok(Reply::Offsets { .. }), Command::FetchOffsets { .. })
        | (Ok(Reply::Groups(_)), Command::ListGroups)
        | (Ok(Reply::GroupDeleted), Command::DeleteGroup { .. })
        | (Ok(Reply::ProducerInitialized { .. }), Command::InitProducer) => {}
        (Err(BrokerError::TopicNotFound { name }), _) => {
            let Some((id, acked_at)) = model.definitely_live_since(name) else { return };
            if acked_at <= issued_at && !matches!(cmd, Command::CreateTopic { .. }) {
                let detail = format!(
                    "{name} ({id}) is live since {acked_at}, but a request issued at {issued_at} got not-found"
                );
                flags.flag(Checker::ModelAgreement, detail);
            }
        }
        (Err(_), _) => {}
        (Ok(other), cmd) => {
            let detail = format!("reply {other:?} does not answer {cmd:?}");
            flags.flag(Checker::ModelAgreement, detail);
        }
    }
}
