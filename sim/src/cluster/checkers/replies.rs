//! Every answered call of a cluster run's history, judged once the run is over by each
//! checker its reply concerns, in request order: first whether a failed produce left
//! records ([`failed_writes_no_effect`]), then the reply itself. An incarnation a reply
//! shows must be the journal's ([`one_live_incarnation`]) before it is judged live
//! ([`linearizable_lifecycle`]), and only then are its offsets, records and high
//! watermarks judged ([`acked_offsets_served`], [`fetch_incarnation`]).

use super::judged::Judged;
use super::linearizable_lifecycle::{self, Acked};
use super::{acked_offsets_served, failed_writes_no_effect, fetch_incarnation, one_live_incarnation};
use crate::cluster::history::History;
use crate::cluster::store::SimStore;
use crate::violation::Violation;
use broker_core::{BrokerError, Command, Reply, TopicDescription, TopicId};

/// Judges every answered call; reports in request order, then the entries that only
/// calls answered unavailable could have written.
pub fn judge(out: &mut Vec<Violation>, history: &History, store: &SimStore) {
    let acked = linearizable_lifecycle::acked(history);
    let written = failed_writes_no_effect::failed_records_written(history, store);
    for (request, call) in &history.calls {
        let Some((_, reply)) = &call.answer else { continue };
        let Some(mut j) = Judged::new(store, *request, call, out) else { continue };
        let written = written.get(request).map_or(&[][..], Vec::as_slice);
        failed_writes_no_effect::failed_but_written(&mut j, reply, written);
        judge_reply(&mut j, reply, &acked);
    }
    failed_writes_no_effect::unavailable_entries_landed(out, history, store);
}

fn judge_reply(j: &mut Judged, reply: &Result<Reply, BrokerError>, acked: &Acked) {
    match (&*j.call.command, reply) {
        (_, Err(BrokerError::TopicNotFound { name })) => linearizable_lifecycle::absent(j, name),
        (
            Command::Produce { topic: name, partition: Some(asked), .. }
            | Command::Fetch { topic: name, partition: asked, .. },
            Err(BrokerError::PartitionNotFound { partition, partitions, .. }),
        ) => linearizable_lifecycle::partition_not_found(j, name, *asked, *partition, *partitions),
        (
            Command::Fetch { topic: name, partition, offset, .. },
            Err(BrokerError::OffsetOutOfRange { offset: o, high_watermark }),
        ) => {
            linearizable_lifecycle::out_of_range_as_asked(j, *o, *offset);
            if acked_offsets_served::out_of_range_past_watermark(j, *offset, *high_watermark) {
                linearizable_lifecycle::out_of_range(j, name, *partition, *offset, *high_watermark, acked);
            }
        }
        (Command::CreateTopic { name, .. }, Ok(Reply::Created { topic })) => {
            if let Some(life) = one_live_incarnation::created(j, *topic, name) {
                linearizable_lifecycle::created(j, *topic, life);
            }
        }
        (Command::CreateTopic { name, .. }, Err(BrokerError::TopicAlreadyExists { .. })) => {
            linearizable_lifecycle::exists(j, name)
        }
        (Command::DeleteTopic { name }, Ok(Reply::DeleteAccepted { topic })) => {
            linearizable_lifecycle::delete_accepted(j, name, *topic)
        }
        (Command::DescribeTopic { name }, Ok(Reply::Described(t))) => {
            if !shows(j, t.id, name) {
                return;
            }
            watermarks(j, t);
            for (p, hw) in (0..).zip(&t.high_watermarks) {
                linearizable_lifecycle::describe_sees_acked(j, t.id, p, *hw, acked);
            }
        }
        (Command::ListTopics, Ok(Reply::Topics(topics))) => {
            for t in topics {
                if shows(j, t.id, &t.name) {
                    watermarks(j, t);
                }
            }
            linearizable_lifecycle::lists_all(j, topics);
        }
        (Command::Produce { topic: name, .. }, Ok(Reply::Produced { topic, positions })) => {
            if !shows(j, *topic, name) {
                return;
            }
            let call = j.call;
            acked_offsets_served::produced(j, *topic, positions, &call.values);
        }
        (
            Command::Fetch { topic: name, partition, offset, .. },
            Ok(Reply::Fetched { topic, records, high_watermark }),
        ) => {
            if !shows(j, *topic, name) {
                return;
            }
            let hw = *high_watermark;
            for (expected, r) in (*offset..).zip(records) {
                if !acked_offsets_served::served_in_order(j, expected, r.offset, hw) {
                    return;
                }
                fetch_incarnation::written_there(j, *topic, *partition, r);
            }
            acked_offsets_served::fetched_watermark(j, *topic, *partition, *offset, !records.is_empty(), hw);
            linearizable_lifecycle::fetch_sees_acked(j, *topic, *partition, hw, acked);
        }
        _ => {}
    }
}

/// A reply shows `topic` as an incarnation of `name`: it must be the journal's, and
/// live during the call. Returns whether it is both (then the rest is judged).
fn shows(j: &mut Judged, topic: TopicId, name: &str) -> bool {
    let Some(life) = one_live_incarnation::shown(j, topic, name) else { return false };
    linearizable_lifecycle::shown_live(j, topic, life)
}

/// The partitions and high watermarks a describe or list shows of `t`, an incarnation
/// it was judged to show.
fn watermarks(j: &mut Judged, t: &TopicDescription) {
    let Some(life) = j.life(t.id, &t.name) else { return };
    if linearizable_lifecycle::partitions_as_created(j, t, life) {
        acked_offsets_served::watermarks(j, t, life);
    }
}
