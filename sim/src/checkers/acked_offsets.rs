//! **acked-offsets-served**: during the run, not only at its end, an acknowledged
//! offset is served. A fetch admitted after a produce was acknowledged sees a high
//! watermark above every offset that produce was given; it is never told that such an
//! offset is out of range, never gets no records or a storage failure for it, and never
//! gets other bytes than were acknowledged there. Only injected bit rot excuses a
//! log: its records may be reported corrupt, and it may fail to open.
//!
//! A fetch names a topic, not an incarnation: errors (which name none) are judged only
//! when the model knows which incarnation the name led to when the fetch was issued.

use super::request::Request;
use crate::model::{label, Model};
use crate::violation::{Checker, Flags};
use broker_core::{BrokerError, Command, LogId, Reply, RequestId, TopicId};
use std::collections::BTreeMap;

/// What a fetch knew when it was issued.
#[derive(Debug, Clone, Copy)]
struct FetchIssued {
    /// Produce acknowledgements seen before it was issued.
    acks_before: u64,
    /// The incarnation its name certainly led to, if the model knows it.
    incarnation: Option<TopicId>,
}

#[derive(Debug, Default)]
pub(super) struct AckedOffsets {
    /// Produce acknowledgements so far.
    acks: u64,
    /// Per partition of an incarnation: after each acknowledgement (by its number), the
    /// highest offset acknowledged so far.
    highest: BTreeMap<(TopicId, u32), Vec<(u64, u64)>>,
    fetches: BTreeMap<RequestId, FetchIssued>,
}

impl AckedOffsets {
    pub(super) fn issued(&mut self, model: &Model, request: RequestId, command: &Command) {
        if let Command::Fetch { topic, .. } = command {
            let issued = FetchIssued { acks_before: self.acks, incarnation: model.definitely_live(topic) };
            self.fetches.insert(request, issued);
        }
    }

    pub(super) fn cut_off<'a>(&mut self, requests: impl Iterator<Item = &'a RequestId>) {
        for r in requests {
            self.fetches.remove(r);
        }
    }

    /// The highest offset of `topic`/`partition` acknowledged among the first `acks`
    /// acknowledgements.
    fn highest_before(&self, topic: TopicId, partition: u32, acks: u64) -> Option<u64> {
        let h = self.highest.get(&(topic, partition))?;
        let i = h.partition_point(|(n, _)| *n <= acks);
        i.checked_sub(1).map(|i| h[i].1)
    }

    pub(super) fn replied(
        &mut self,
        flags: &mut Flags,
        model: &Model,
        request: RequestId,
        req: &Request,
        reply: &Result<Reply, BrokerError>,
        rotted: &dyn Fn(LogId) -> bool,
    ) {
        if let Ok(Reply::Produced { topic, positions }) = reply {
            self.acks += 1;
            for p in positions {
                let h = self.highest.entry((*topic, p.partition)).or_default();
                let top = h.last().map_or(p.offset, |(_, o)| (*o).max(p.offset));
                match h.last_mut() {
                    Some(last) if last.0 == self.acks => last.1 = top,
                    _ => h.push((self.acks, top)),
                }
            }
            return;
        }
        let Command::Fetch { topic: name, partition, offset, .. } = &*req.command else { return };
        let Some(issued) = self.fetches.remove(&request) else { return };
        let (partition, offset) = (*partition, *offset);
        let what = format!("a fetch of {name}/p{partition} from {offset} issued at {}", req.at);
        match reply {
            Ok(Reply::Fetched { topic, records, high_watermark }) => {
                let log = LogId { topic: *topic, partition };
                if rotted(log) {
                    return;
                }
                if let Some(top) = self.highest_before(*topic, partition, issued.acks_before) {
                    if top >= *high_watermark {
                        let detail = format!(
                            "{what} got high watermark {high_watermark}, but offset {top} of {log} was acknowledged \
                             before it was issued"
                        );
                        flags.flag(Checker::AckedOffsetsServed, detail);
                    }
                }
                if records.is_empty() && offset < *high_watermark {
                    flags.flag(Checker::AckedOffsetsServed, format!("{what} got no records below {high_watermark}"));
                }
                for r in records {
                    let Some(want) = model.records.acked.get(&(*topic, partition, r.offset)) else { continue };
                    if want.key != r.key || want.value != r.value {
                        let detail = format!(
                            "{what} read {} at {log}@{}, acknowledged {}",
                            label(&r.value),
                            r.offset,
                            label(&want.value)
                        );
                        flags.flag(Checker::AckedOffsetsServed, detail);
                    }
                }
            }
            Err(e) => {
                let Some(topic) = issued.incarnation else { return };
                let log = LogId { topic, partition };
                if rotted(log) {
                    return;
                }
                let Some(top) = self.highest_before(topic, partition, issued.acks_before) else { return };
                // An offset acknowledged before the fetch was issued (at or below `top`,
                // and acknowledged: a crash may leave unacknowledged offsets in between
                // unreadable, which breaks no promise).
                let acked = |o: u64| o <= top && model.records.acked.contains_key(&(topic, partition, o));
                let bad = match e {
                    BrokerError::OffsetOutOfRange { high_watermark, .. } => *high_watermark <= top,
                    BrokerError::CorruptRecord { offset: at, .. } => acked(*at),
                    // A read that came back empty or ragged, or a log that failed to open.
                    BrokerError::Storage(why) => {
                        acked(offset)
                            && (why.contains("not a dense run")
                                || why.contains("other than records")
                                || why.contains("unavailable"))
                    }
                    _ => false,
                };
                if bad {
                    let detail =
                        format!("{what}, while {log} had offset {top} acknowledged before it was issued, got {e}");
                    flags.flag(Checker::AckedOffsetsServed, detail);
                }
            }
            Ok(_) => {}
        }
    }
}
