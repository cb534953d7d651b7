//! **group-offsets**: consumer groups' committed offsets follow their incarnation and
//! survive crashes.
//!
//! The broker applies a commit or a group deletion when it admits it, in the order
//! requests arrive ([`crate::model::groups`]). So a read of `group`'s positions in topic
//! `name`, answered with incarnation `X`, shows for each partition:
//!
//! - the position of the last commit to (`group`, `X`) acknowledged among the requests
//!   issued before the read, unless a deletion of the group was acknowledged after it;
//! - or the position of a commit to (`group`, `name`) issued after that (and after
//!   `X`'s create) whose outcome the clients do not know (in flight, or cut off by a
//!   crash or halt) and that named no other incarnation;
//! - or nothing, if no acknowledged commit is left (none, or a deletion of the group
//!   after the last), or a deletion of the group issued after it has an unknown outcome.
//!
//! A partition no commit to the name ever sent a position for is absent, and so is
//! every position of an earlier incarnation: an incarnation created again starts with
//! none. An acknowledged commit survives every crash, since every read after it, in
//! any later life of the broker, must show it. A list of groups shows, by name and
//! once each, every group holding a position for certain (an acknowledged commit to
//! an incarnation no delete may have hit, no deletion of the group since that may have
//! happened) and only groups that may hold one (a commit after the group's last
//! acknowledged deletion, either of unknown outcome or acknowledged under an
//! incarnation whose deletion was not acknowledged before the list was asked for).
//! A group deletion is answered done or not-found by the same rules.
//!
//! Commits are held to the broker's limits: one acknowledged names each partition of
//! the incarnation it was kept under at most once, under the incarnation it named (if
//! it named one), at an offset no later than every record the clients sent so far and
//! above every position an earlier incarnation of the name gave, with metadata within
//! the limit, for a group of 1 to 249 bytes. Every refusal is the typed error that
//! the commit earns, with figures that agree with it and with what the clients were
//! told before: a commit past the high watermark is refused as out of range, with a
//! high watermark no lower than what was acknowledged in the partition, and a refused
//! commit changes nothing (a later read never shows it).

use crate::model::groups::{GroupWrite, Outcome, WriteKind};
use crate::model::{Model, Seen};
use crate::violation::{Checker, Flags};
use broker_core::{check_group, BrokerError, Command, CommittedOffset, LogId, Reply, RequestId, TopicId};
use std::collections::{BTreeMap, BTreeSet};

/// What a commit's judge needs from the moment it was issued.
#[derive(Debug)]
struct CommitIssued {
    /// Records every produce issued before it sent.
    records_sent: u64,
    /// The incarnation its name certainly led to, if the model knows one.
    live: Option<TopicId>,
    /// Per partition of `live` the commit names: one past the last offset acknowledged.
    acked_end: BTreeMap<u32, u64>,
    /// The first offset acknowledged in `live`, in any partition.
    first_acked: Option<u64>,
}

/// The checker: what it noted of each commit in flight.
#[derive(Debug, Default)]
pub(super) struct GroupOffsets {
    /// The longest metadata the broker keeps ([`broker_core::Config::max_offset_metadata_bytes`]).
    max_metadata: usize,
    commits: BTreeMap<RequestId, CommitIssued>,
}

impl GroupOffsets {
    pub(super) fn new(max_metadata: usize) -> GroupOffsets {
        GroupOffsets { max_metadata, commits: BTreeMap::new() }
    }

    pub(super) fn issued(&mut self, model: &Model, request: RequestId, command: &Command) {
        let Command::CommitOffsets { topic, offsets, .. } = command else { return };
        let live = model.definitely_live(topic);
        let mut acked_end = BTreeMap::new();
        let mut first_acked = None;
        if let Some(id) = live {
            for o in offsets {
                let range = (id, o.partition, 0)..=(id, o.partition, u64::MAX);
                if let Some(((_, _, last), _)) = model.records.acked.range(range).next_back() {
                    acked_end.insert(o.partition, last + 1);
                }
            }
            let all = (id, 0, 0)..=(id, u32::MAX, u64::MAX);
            first_acked = model.records.acked.range(all).map(|((_, _, o), _)| *o).min();
        }
        let records_sent = model.groups.records_sent();
        self.commits.insert(request, CommitIssued { records_sent, live, acked_end, first_acked });
    }

    /// The process died: its requests will not be answered.
    pub(super) fn process_died(&mut self) {
        self.commits.clear();
    }

    /// Judges a reply, against the model as it was before the reply.
    pub(super) fn saw(&mut self, flags: &mut Flags, model: &Model, seen: &Seen<'_>, rotted: &dyn Fn(LogId) -> bool) {
        let Seen::Reply { request, command, reply, .. } = seen else { return };
        let issued = self.commits.remove(request);
        if !command.is_group_offsets() {
            return;
        }
        if let Err(BrokerError::Halted(_) | BrokerError::Unavailable(_)) = reply {
            return;
        }
        let group = match command {
            Command::CommitOffsets { group, .. }
            | Command::FetchOffsets { group, .. }
            | Command::DeleteGroup { group } => Some(group),
            _ => None,
        };
        if let Some(group) = group {
            let invalid = check_group(group).is_err();
            let refused_so = matches!(reply, Err(BrokerError::InvalidGroup { .. }));
            if invalid != refused_so {
                let detail = match invalid {
                    true => format!("req{} for group {}, not a valid id, got {}", request.0, shown(group), text(reply)),
                    false => format!(
                        "req{} for group {} was refused as an invalid id: {}",
                        request.0,
                        shown(group),
                        text(reply)
                    ),
                };
                flags.flag(Checker::GroupOffsets, detail);
                return;
            }
            if invalid {
                return;
            }
        }
        let mut judge = Judge { flags, model, request: *request, rotted };
        match (command, reply) {
            (
                Command::CommitOffsets { group, topic, incarnation, offsets },
                Ok(Reply::OffsetsCommitted { topic: id }),
            ) => {
                judge.committed(group, topic, *incarnation, offsets, *id, issued.as_ref(), self.max_metadata);
            }
            (Command::CommitOffsets { topic, incarnation, offsets, .. }, Err(e)) => {
                judge.commit_refused(topic, *incarnation, offsets, e, issued.as_ref(), self.max_metadata);
            }
            (Command::FetchOffsets { group, topic }, Ok(Reply::Offsets { topic: id, offsets })) => {
                judge.read(group, topic, *id, offsets);
            }
            (Command::ListGroups, Ok(Reply::Groups(groups))) => judge.listed(groups),
            (Command::DeleteGroup { group }, Ok(Reply::GroupDeleted)) => {
                if !judge.may_hold(group) {
                    let detail = format!("req{} deleted group {group:?}, which held no position", request.0);
                    flags.flag(Checker::GroupOffsets, detail);
                }
            }
            (Command::DeleteGroup { group }, Err(BrokerError::GroupNotFound { group: named })) => {
                if let Some(why) = judge.must_hold(group) {
                    let detail = format!("req{} found no group {named:?}, but it holds {why}", request.0);
                    flags.flag(Checker::GroupOffsets, detail);
                }
            }
            // Not-found for a topic is model-agreement's to judge; a reply of another kind too.
            (Command::FetchOffsets { .. }, Err(BrokerError::TopicNotFound { .. })) | (_, Ok(_)) => {}
            (_, Err(e)) => {
                let detail = format!("req{} ({}) refused with {e:?}", request.0, kind(command));
                flags.flag(Checker::GroupOffsets, detail);
            }
        }
    }
}

/// One reply's judgement.
struct Judge<'a, 'f> {
    flags: &'a mut Flags<'f>,
    model: &'a Model,
    request: RequestId,
    /// Whether injected bit rot struck a log (it may then have lost records).
    rotted: &'a dyn Fn(LogId) -> bool,
}

impl Judge<'_, '_> {
    fn flag(&mut self, detail: String) {
        self.flags.flag(Checker::GroupOffsets, format!("req{} {detail}", self.request.0));
    }

    /// An acknowledged commit: within every limit.
    #[allow(clippy::too_many_arguments)]
    fn committed(
        &mut self,
        group: &str,
        topic: &str,
        incarnation: Option<TopicId>,
        offsets: &[CommittedOffset],
        id: TopicId,
        issued: Option<&CommitIssued>,
        max_metadata: usize,
    ) {
        let what = format!("commit of group {group:?} to {topic} kept under {id}");
        if offsets.is_empty() {
            self.flag(format!("{what} named no partition"));
        }
        let mut seen = BTreeSet::new();
        if let Some(twice) = offsets.iter().find(|o| !seen.insert(o.partition)) {
            self.flag(format!("{what} named partition {} twice", twice.partition));
        }
        if let Some(o) = offsets.iter().find(|o| o.metadata.len() > max_metadata) {
            let len = o.metadata.len();
            self.flag(format!("{what} kept {len} bytes of metadata in p{}, over {max_metadata}", o.partition));
        }
        if let Some(named) = incarnation.filter(|named| *named != id) {
            self.flag(format!("{what} though it named {named}"));
        }
        if let Some((name, partitions)) = self.model.topics.get(&id) {
            if name != topic {
                self.flag(format!("{what}, an incarnation of {name}"));
            }
            if let Some(o) = offsets.iter().find(|o| o.partition >= *partitions) {
                self.flag(format!("{what} kept p{}, which its {partitions} partitions lack", o.partition));
            }
        }
        if self.model.groups.deleted_before(id, self.request) {
            self.flag(format!("{what}, whose deletion was acknowledged before the commit was sent"));
        }
        let Some(issued) = issued else { return };
        if let Some(live) = issued.live.filter(|live| *live != id) {
            self.flag(format!("{what} while {live} was the live incarnation of {topic}"));
        }
        if let Some(o) = offsets.iter().find(|o| o.offset > issued.records_sent) {
            let sent = issued.records_sent;
            let detail = format!(
                "{what} kept p{}@{}, past every high watermark: the clients had sent {sent} records in all",
                o.partition, o.offset
            );
            self.flag(detail);
        }
        if let Some((old, last)) = self.model.last_position_before(id) {
            if let Some(o) = offsets.iter().find(|o| o.offset <= last) {
                let detail = format!(
                    "{what} kept p{}@{}, below the log start: {old}, an earlier incarnation of the name, gave {last}",
                    o.partition, o.offset
                );
                self.flag(detail);
            }
        }
    }

    /// A refused commit: the error it earns, with figures that agree with it.
    fn commit_refused(
        &mut self,
        topic: &str,
        incarnation: Option<TopicId>,
        offsets: &[CommittedOffset],
        e: &BrokerError,
        issued: Option<&CommitIssued>,
        max_metadata: usize,
    ) {
        let live = issued.and_then(|i| i.live);
        let wrong = match e {
            BrokerError::TopicNotFound { .. } => None, // model-agreement's
            BrokerError::StaleIncarnation { name, given, live: now } => {
                if name != topic || incarnation != Some(TopicId(*given)) || given == now {
                    Some(format!("names {incarnation:?} of {topic}"))
                } else if live.is_some_and(|l| l.0 == *given || l.0 != *now) {
                    Some(format!("was sent while {live:?} was live"))
                } else {
                    None
                }
            }
            BrokerError::InvalidRequest(_) => {
                let mut seen = BTreeSet::new();
                let twice = offsets.iter().any(|o| !seen.insert(o.partition));
                (!offsets.is_empty() && !twice).then(|| "names each partition once".to_string())
            }
            BrokerError::PartitionNotFound { name, partition, partitions } => {
                let known = live.and_then(|l| self.model.topics.get(&l)).map(|(_, p)| *p);
                if name != topic || partition < partitions || !offsets.iter().any(|o| o.partition == *partition) {
                    Some(format!("names partitions {:?}", offsets.iter().map(|o| o.partition).collect::<Vec<_>>()))
                } else if known.is_some_and(|k| k != *partitions) {
                    Some(format!("was sent while {live:?}, of {known:?} partitions, was live"))
                } else {
                    None
                }
            }
            BrokerError::OffsetBeforeStart { offset, log_start } => {
                let first = issued.and_then(|i| i.first_acked);
                if offset >= log_start || !offsets.iter().any(|o| o.offset == *offset) {
                    Some(format!("sent {}", positions(offsets)))
                } else {
                    first
                        .filter(|first| first < log_start)
                        .map(|first| format!("was sent when {live:?} held an acknowledged record at {first}"))
                }
            }
            BrokerError::OffsetOutOfRange { offset, high_watermark } => {
                let ends = issued.map(|i| &i.acked_end);
                let rotted = |p: u32| live.is_some_and(|topic| (self.rotted)(LogId { topic, partition: p }));
                let end = |p: u32| if rotted(p) { 0 } else { ends.and_then(|e| e.get(&p)).copied().unwrap_or(0) };
                let at = offsets.iter().filter(|o| o.offset == *offset);
                if offset <= high_watermark || at.clone().next().is_none() {
                    Some(format!("sent {}", positions(offsets)))
                } else if at.clone().all(|o| end(o.partition) > *high_watermark) {
                    let o = at.clone().next().map_or(0, |o| o.partition);
                    Some(format!("was sent when {live:?}/p{o} had acknowledged records up to {}", end(o)))
                } else {
                    None
                }
            }
            BrokerError::OffsetMetadataTooLarge { len, max } => {
                (len <= max || *max != max_metadata || !offsets.iter().any(|o| o.metadata.len() == *len))
                    .then(|| format!("sent metadata of {:?} bytes", lengths(offsets)))
            }
            BrokerError::CommittedOffsetsFull { bytes, max } => (bytes <= max).then(String::new),
            _ => Some("is a commit".to_string()),
        };
        if let Some(why) = wrong {
            self.flag(format!("commit to {topic} refused with {e:?}, but it {why}"));
        }
    }

    /// A read of `group`'s positions in `topic`, answered from incarnation `id`.
    fn read(&mut self, group: &str, topic: &str, id: TopicId, got: &[CommittedOffset]) {
        let what = format!("read of group {group:?} in {topic} ({id})");
        if let Some((name, _)) = self.model.topics.get(&id).filter(|(name, _)| name != topic) {
            self.flag(format!("{what} answered from an incarnation of {name}"));
        }
        if self.model.groups.deleted_before(id, self.request) {
            self.flag(format!("{what} answered from an incarnation whose deletion was acknowledged before"));
        }
        if got.windows(2).any(|w| w[0].partition >= w[1].partition) {
            self.flag(format!("{what} is not by ascending partition: {}", positions(got)));
        }
        let writes: Vec<(RequestId, &GroupWrite)> = self.model.groups.before(group, self.request).collect();
        let created = self.model.created_by(id);
        let mut partitions: BTreeSet<u32> = got.iter().map(|o| o.partition).collect();
        for (_, w) in &writes {
            if let WriteKind::Commit { topic: t, offsets, .. } = &w.kind {
                if t == topic {
                    partitions.extend(offsets.iter().map(|o| o.partition));
                }
            }
        }
        for p in partitions {
            let allowed = Allowed::of(&writes, topic, id, p, created);
            let shown = got.iter().find(|o| o.partition == p);
            match shown {
                Some(o) if !allowed.values.iter().any(|(_, v)| *v == o) => {
                    let elsewhere = writes.iter().find_map(|(r, w)| match w.outcome {
                        Outcome::Acked(Some(other)) if other != id && w.position(topic, p) == Some(o) => {
                            Some((r, other))
                        }
                        _ => None,
                    });
                    let whose = match elsewhere {
                        Some((r, other)) => format!("req{} committed to {other}, another incarnation of the name", r.0),
                        None => "no commit to this incarnation sent".to_string(),
                    };
                    let detail = format!(
                        "{what} shows p{p}@{} (metadata {} bytes), which {whose}; {}",
                        o.offset,
                        o.metadata.len(),
                        allowed.describe()
                    );
                    self.flag(detail);
                }
                None if !allowed.absent => {
                    self.flag(format!("{what} shows nothing for p{p}, but {}", allowed.describe()));
                }
                _ => {}
            }
        }
    }

    /// A list of the groups.
    fn listed(&mut self, listed: &[String]) {
        if listed.windows(2).any(|w| w[0] >= w[1]) {
            self.flag(format!("list of groups is not by name, once each: {:?}", short(listed)));
        }
        for group in listed {
            if check_group(group).is_err() || !self.may_hold(group) {
                self.flag(format!("list of groups shows {}, which holds no position", shown(group)));
            }
        }
        let model = self.model;
        for group in model.groups.groups() {
            if listed.iter().any(|g| g == group) {
                continue;
            }
            if let Some(why) = self.must_hold(group) {
                self.flag(format!("list of groups leaves out {}, which holds {why}", shown(group)));
            }
        }
    }

    /// Whether `group` may hold a position when this request is admitted.
    fn may_hold(&self, group: &str) -> bool {
        for (_, w) in self.model.groups.before(group, self.request) {
            match (&w.kind, w.outcome) {
                (WriteKind::Delete, Outcome::Acked(_)) => return false,
                (WriteKind::Commit { offsets, .. }, outcome) if outcome.maybe() && !offsets.is_empty() => return true,
                (WriteKind::Commit { .. }, Outcome::Acked(Some(id)))
                    if !self.model.groups.deleted_before(id, self.request) =>
                {
                    return true;
                }
                _ => {}
            }
        }
        false
    }

    /// What `group` holds for certain when this request is admitted, if it holds a
    /// position for certain.
    fn must_hold(&self, group: &str) -> Option<String> {
        for (r, w) in self.model.groups.before(group, self.request) {
            match (&w.kind, w.outcome) {
                (WriteKind::Delete, outcome) if outcome != Outcome::Refused => return None,
                (WriteKind::Commit { topic, .. }, Outcome::Acked(Some(id)))
                    if !self.model.may_be_deleted(id) && !self.model.delete_issued_after(topic, r) =>
                {
                    return Some(format!("the positions req{} committed to {topic} ({id}), live", r.0));
                }
                _ => {}
            }
        }
        None
    }
}

/// What a read may show for one partition.
struct Allowed<'a> {
    /// Positions it may show, with the request that sent each.
    values: Vec<(RequestId, &'a CommittedOffset)>,
    /// Whether it may show none.
    absent: bool,
    /// The last acknowledged write that decides it, if any: a commit or a deletion.
    last: Option<(RequestId, bool)>,
}

impl<'a> Allowed<'a> {
    /// For partition `p` of incarnation `id` of `topic`, from the writes to the group
    /// issued before the read, latest first; `created`: the request that created `id`.
    fn of(
        writes: &[(RequestId, &'a GroupWrite)],
        topic: &str,
        id: TopicId,
        p: u32,
        created: Option<RequestId>,
    ) -> Allowed<'a> {
        let mut allowed = Allowed { values: Vec::new(), absent: false, last: None };
        for (r, w) in writes {
            match (&w.kind, w.outcome) {
                (WriteKind::Delete, Outcome::Acked(_)) => {
                    allowed.absent = true;
                    allowed.last = Some((*r, false));
                    return allowed;
                }
                (WriteKind::Delete, outcome) if outcome.maybe() => allowed.absent = true,
                (WriteKind::Commit { incarnation, .. }, outcome) => {
                    let Some(o) = w.position(topic, p) else { continue };
                    match outcome {
                        Outcome::Acked(Some(kept)) if kept == id => {
                            allowed.values.push((*r, o));
                            allowed.last = Some((*r, true));
                            return allowed;
                        }
                        outcome if outcome.maybe() => {
                            let here = incarnation.is_none_or(|named| named == id);
                            if here && created.is_none_or(|c| c < *r) {
                                allowed.values.push((*r, o));
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        allowed.absent = true;
        allowed
    }

    /// What the clients were told, and what a read may show, in words.
    fn describe(&self) -> String {
        let last = match self.last {
            Some((r, true)) => format!("the last acknowledged commit there is req{}", r.0),
            Some((r, false)) => format!("the group's deletion req{} was acknowledged after every commit there", r.0),
            None => "no commit there was acknowledged".to_string(),
        };
        let mut may: Vec<String> = self.values.iter().map(|(r, o)| format!("@{} (req{})", o.offset, r.0)).collect();
        if self.absent {
            may.push("nothing".to_string());
        }
        format!("{last}: it may show {}", may.join(" or "))
    }
}

fn positions(offsets: &[CommittedOffset]) -> String {
    let all: Vec<String> = offsets.iter().map(|o| format!("p{}@{}", o.partition, o.offset)).collect();
    all.join(" ")
}

fn lengths(offsets: &[CommittedOffset]) -> Vec<usize> {
    offsets.iter().map(|o| o.metadata.len()).collect()
}

/// A group id, as a violation shows it: a long one by its length.
fn shown(group: &str) -> String {
    if group.len() > 16 {
        format!("{:?}... ({} bytes)", group.chars().take(8).collect::<String>(), group.len())
    } else {
        format!("{group:?}")
    }
}

fn short(groups: &[String]) -> Vec<String> {
    groups.iter().map(|g| shown(g)).collect()
}

fn kind(command: &Command) -> &'static str {
    match command {
        Command::CommitOffsets { .. } => "a commit",
        Command::FetchOffsets { .. } => "a read of offsets",
        Command::ListGroups => "a list of groups",
        Command::DeleteGroup { .. } => "a group deletion",
        _ => "another command",
    }
}

fn text(reply: &Result<Reply, BrokerError>) -> String {
    crate::trace::ReplyText(reply).to_string()
}

#[cfg(test)]
mod tests {
    use super::super::hand_fed::HandFed;
    use crate::violation::Checker;
    use broker_core::{
        BrokerError, Command, CommittedOffset, ProduceRecord, RecordPosition, Reply, TopicId, TopicSettings,
    };

    /// One client and the checkers, fed by hand.
    struct Run(HandFed);

    impl std::ops::Deref for Run {
        type Target = HandFed;
        fn deref(&self) -> &HandFed {
            &self.0
        }
    }

    impl std::ops::DerefMut for Run {
        fn deref_mut(&mut self) -> &mut HandFed {
            &mut self.0
        }
    }

    impl Run {
        /// A run where topic `t` (incarnation 1, two partitions) holds three records in
        /// partition 0 (offsets 0 to 2).
        fn new() -> Run {
            let mut run = Run(HandFed::new());
            run.create(1);
            let records = (0..3).map(|i| ProduceRecord { key: None, value: format!("v{i}-").into_bytes().into() });
            let produce = Command::Produce { topic: "t".into(), partition: Some(0), records: records.collect() };
            let positions = (0..3).map(|offset| RecordPosition { partition: 0, offset }).collect();
            run.ask(produce, Ok(Reply::Produced { topic: TopicId(1), positions }));
            run
        }

        fn create(&mut self, id: u64) {
            let create = Command::CreateTopic { name: "t".into(), partitions: 2, settings: TopicSettings::default() };
            self.ask(create, Ok(Reply::Created { topic: TopicId(id) }));
        }

        /// What group-offsets flagged since the last call.
        fn flagged(&mut self) -> Vec<String> {
            let all = self.checkers.take_violations().into_iter();
            all.filter(|v| v.checker == Checker::GroupOffsets).map(|v| v.detail).collect()
        }

        /// Asks for `group`'s positions in `t`; answered from `id` with `shown`.
        fn read(&mut self, group: &str, id: u64, shown: &[(u32, u64)]) -> Vec<String> {
            let read = Command::FetchOffsets { group: group.into(), topic: "t".into() };
            self.ask(read, Ok(Reply::Offsets { topic: TopicId(id), offsets: shown.iter().map(at).collect() }));
            self.flagged()
        }
    }

    fn at(&(partition, offset): &(u32, u64)) -> CommittedOffset {
        CommittedOffset { partition, offset, metadata: String::new() }
    }

    fn commit(group: &str, positions: &[(u32, u64)]) -> Command {
        let offsets = positions.iter().map(at).collect();
        Command::CommitOffsets { group: group.into(), topic: "t".into(), incarnation: None, offsets }
    }

    fn committed(id: u64) -> Result<Reply, BrokerError> {
        Ok(Reply::OffsetsCommitted { topic: TopicId(id) })
    }

    #[test]
    fn an_acknowledged_commit_survives_a_crash() {
        let mut run = Run::new();
        run.ask(commit("g", &[(0, 2), (1, 0)]), committed(1));
        run.crash();
        assert_eq!(run.read("g", 1, &[(0, 2), (1, 0)]), Vec::<String>::new());
        let lost = run.read("g", 1, &[(1, 0)]);
        assert!(lost.len() == 1 && lost[0].contains("shows nothing for p0"), "{lost:?}");
        let other = run.read("g", 1, &[(0, 1), (1, 0)]);
        assert!(other.len() == 1 && other[0].contains("p0@1"), "{other:?}");
        assert_eq!(run.read("h", 1, &[]), Vec::<String>::new(), "another group holds nothing");
    }

    #[test]
    fn a_commit_cut_off_may_or_may_not_have_happened() {
        let mut run = Run::new();
        run.ask(commit("g", &[(0, 1)]), committed(1));
        run.send(commit("g", &[(0, 2)]));
        run.crash();
        assert_eq!(run.read("g", 1, &[(0, 1)]), Vec::<String>::new());
        assert_eq!(run.read("g", 1, &[(0, 2)]), Vec::<String>::new());
        assert_eq!(run.read("g", 1, &[(0, 1)]).len(), 0, "its outcome stays unknown");
        assert_eq!(run.read("g", 1, &[(0, 0)]).len(), 1, "no commit sent that position");
        assert_eq!(run.read("g", 1, &[]).len(), 1, "the acknowledged commit holds at least");
        // A later acknowledged commit decides again.
        run.ask(commit("g", &[(0, 0)]), committed(1));
        assert_eq!(run.read("g", 1, &[(0, 2)]).len(), 1);
    }

    #[test]
    fn a_refused_commit_changes_nothing_and_is_refused_with_true_figures() {
        let mut run = Run::new();
        let past = commit("g", &[(0, 9)]);
        run.ask(past.clone(), Err(BrokerError::OffsetOutOfRange { offset: 9, high_watermark: 3 }));
        assert_eq!(run.flagged(), Vec::<String>::new());
        assert_eq!(run.read("g", 1, &[(0, 9)]).len(), 1, "a refused commit shows");
        assert_eq!(run.read("g", 1, &[]), Vec::<String>::new());
        // Three records were acknowledged in p0: its high watermark is at least 3.
        run.ask(past.clone(), Err(BrokerError::OffsetOutOfRange { offset: 9, high_watermark: 2 }));
        assert_eq!(run.flagged().len(), 1);
        // A commit past every record the clients ever sent must not be acknowledged.
        run.ask(past, committed(1));
        let flagged = run.flagged();
        assert!(flagged.len() == 1 && flagged[0].contains("past every high watermark"), "{flagged:?}");
        // Nor one that names a partition twice, or too much metadata (8 bytes here).
        run.ask(commit("g", &[(0, 1), (0, 2)]), committed(1));
        let mut long = commit("g", &[(1, 0)]);
        if let Command::CommitOffsets { offsets, .. } = &mut long {
            offsets[0].metadata = "m".repeat(9);
        }
        run.ask(long.clone(), committed(1));
        assert_eq!(run.flagged().len(), 2);
        run.ask(long, Err(BrokerError::OffsetMetadataTooLarge { len: 9, max: 8 }));
        run.ask(commit("g", &[(0, 1)]), Err(BrokerError::OffsetMetadataTooLarge { len: 0, max: 8 }));
        assert_eq!(run.flagged().len(), 1, "only the commit whose metadata fits is wrongly refused");
    }

    #[test]
    fn a_recreated_topic_starts_with_no_position() {
        let mut run = Run::new();
        run.ask(commit("g", &[(0, 2)]), committed(1));
        run.ask(Command::DeleteTopic { name: "t".into() }, Ok(Reply::DeleteAccepted { topic: TopicId(1) }));
        run.create(2);
        let inherited = run.read("g", 2, &[(0, 2)]);
        assert!(inherited.len() == 1 && inherited[0].contains("another incarnation"), "{inherited:?}");
        assert_eq!(run.read("g", 2, &[]), Vec::<String>::new());
        let list = Command::ListGroups;
        run.ask(list.clone(), Ok(Reply::Groups(vec!["g".into()])));
        assert_eq!(run.flagged().len(), 1, "its only positions went with the deleted incarnation");
        run.ask(list, Ok(Reply::Groups(vec![])));
        assert_eq!(run.flagged(), Vec::<String>::new());
    }

    #[test]
    fn lists_and_deletions_of_groups_agree_with_the_commits() {
        let mut run = Run::new();
        run.ask(commit("g", &[(1, 0)]), committed(1));
        let groups = |names: &[&str]| Ok(Reply::Groups(names.iter().map(|n| n.to_string()).collect()));
        run.ask(Command::ListGroups, groups(&["g"]));
        assert_eq!(run.flagged(), Vec::<String>::new());
        run.ask(Command::ListGroups, groups(&[]));
        run.ask(Command::ListGroups, groups(&["g", "h"]));
        run.ask(Command::ListGroups, groups(&["g", "g"]));
        assert_eq!(run.flagged().len(), 3, "left out, one that holds nothing, listed twice");
        run.ask(Command::DeleteGroup { group: "h".into() }, Ok(Reply::GroupDeleted));
        run.ask(Command::DeleteGroup { group: "g".into() }, Err(BrokerError::GroupNotFound { group: "g".into() }));
        assert_eq!(run.flagged().len(), 2);
        run.ask(Command::DeleteGroup { group: "g".into() }, Ok(Reply::GroupDeleted));
        run.ask(Command::ListGroups, groups(&[]));
        assert_eq!(run.read("g", 1, &[]), Vec::<String>::new());
        assert_eq!(run.read("g", 1, &[(1, 0)]).len(), 1, "the group's deletion was acknowledged");
    }

    #[test]
    fn invalid_group_ids_and_only_they_are_refused_as_invalid() {
        let mut run = Run::new();
        let invalid = |group: &str| Err(BrokerError::InvalidGroup { group: group.into(), reason: "is empty".into() });
        run.ask(commit("", &[(0, 0)]), invalid(""));
        run.ask(commit(&"g".repeat(250), &[(0, 0)]), invalid("g"));
        assert_eq!(run.flagged(), Vec::<String>::new());
        run.ask(commit(&"g".repeat(249), &[(0, 0)]), invalid("g"));
        run.ask(commit("", &[(0, 0)]), committed(1));
        run.ask(Command::DeleteGroup { group: String::new() }, Err(BrokerError::GroupNotFound { group: "".into() }));
        assert_eq!(run.flagged().len(), 3);
    }
}
