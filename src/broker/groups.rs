//! Consumer groups' committed offsets: commit, read, list and delete, each answered
//! only once everything it saw or wrote is durable in the journal.
//!
//! A position is kept under the live incarnation of the topic named, and checked
//! against it: a commit naming another incarnation, or an offset below this one's log
//! start (which only a reader of a deleted incarnation can hold) or past its high
//! watermark, is refused. A delete drops the incarnation's positions with its
//! tombstone ([`crate::offsets::CommittedOffsets::drop_topic`]).

use super::{Broker, JournalWaiter};
use crate::command::{CommittedOffset, Reply};
use crate::error::BrokerError;
use crate::ids::{RequestId, TopicId};
use crate::journal::JournalRecord;
use crate::offsets::check_group;
use std::collections::BTreeSet;

impl Broker {
    pub(super) fn commit_offsets(
        &mut self,
        request: RequestId,
        group: String,
        topic: &str,
        incarnation: Option<TopicId>,
        offsets: Vec<CommittedOffset>,
    ) -> Result<Option<Reply>, BrokerError> {
        check_group(&group)?;
        let t = self.visible(topic)?;
        let id = t.meta.id;
        if let Some(given) = incarnation.filter(|given| *given != id) {
            return Err(BrokerError::StaleIncarnation { name: topic.to_string(), given: given.0, live: id.0 });
        }
        if offsets.is_empty() {
            return Err(BrokerError::InvalidRequest("a commit names at least one partition".into()));
        }
        let mut seen = BTreeSet::new();
        for o in &offsets {
            let Some(p) = t.partitions.get(o.partition as usize) else {
                return Err(BrokerError::PartitionNotFound {
                    name: topic.to_string(),
                    partition: o.partition,
                    partitions: t.meta.partitions,
                });
            };
            if !seen.insert(o.partition) {
                return Err(BrokerError::InvalidRequest(format!("partition {} is named twice", o.partition)));
            }
            if o.offset < t.meta.offset_base {
                return Err(BrokerError::OffsetBeforeStart { offset: o.offset, log_start: t.meta.offset_base });
            }
            if o.offset > p.high_watermark {
                return Err(BrokerError::OffsetOutOfRange { offset: o.offset, high_watermark: p.high_watermark });
            }
            let max = self.config.max_offset_metadata_bytes;
            if o.metadata.len() > max {
                return Err(BrokerError::OffsetMetadataTooLarge { len: o.metadata.len(), max });
            }
        }
        let bytes = self.offsets.bytes_after(&group, id, &offsets);
        let max = self.config.max_committed_offsets_bytes;
        if bytes > max {
            return Err(BrokerError::CommittedOffsetsFull { bytes, max });
        }
        self.offsets.commit(&group, id, &offsets);
        self.journal.push(JournalRecord::OffsetsCommitted { group, topic: id, offsets });
        self.answer_when_durable(request, Reply::OffsetsCommitted { topic: id });
        Ok(None)
    }

    pub(super) fn fetch_offsets(
        &mut self,
        request: RequestId,
        group: &str,
        topic: &str,
    ) -> Result<Option<Reply>, BrokerError> {
        check_group(group)?;
        let id = self.visible(topic)?.meta.id;
        let offsets = self.offsets.get(group, id);
        self.answer_when_durable(request, Reply::Offsets { topic: id, offsets });
        Ok(None)
    }

    pub(super) fn list_groups(&mut self, request: RequestId) -> Result<Option<Reply>, BrokerError> {
        let groups = self.offsets.groups();
        self.answer_when_durable(request, Reply::Groups(groups));
        Ok(None)
    }

    pub(super) fn delete_group(&mut self, request: RequestId, group: String) -> Result<Option<Reply>, BrokerError> {
        check_group(&group)?;
        if !self.offsets.delete_group(&group) {
            return Err(BrokerError::GroupNotFound { group });
        }
        self.journal.push(JournalRecord::GroupDeleted { group });
        self.answer_when_durable(request, Reply::GroupDeleted);
        Ok(None)
    }

    /// Forgets the positions of `deleted` as its tombstone is queued; with the planted
    /// bug, keeps them to hand on to the next incarnation of its name instead.
    pub(super) fn drop_offsets_of(&mut self, deleted: TopicId) {
        if !planted!(self.config, GroupOffsetsKeyedByName) {
            self.offsets.drop_topic(deleted);
        }
        self.producers.drop_topic(deleted);
        self.journaled_producers.drop_topic(deleted);
    }

    /// With the planted bug only: hands the positions of the newest earlier incarnation
    /// of `name` on to `created`, as a broker keying them by name would.
    pub(super) fn inherit_offsets(&mut self, name: &str, created: TopicId) {
        if !planted!(self.config, GroupOffsetsKeyedByName) {
            return;
        }
        let older = self.deleting_names.get(name).and_then(|ids| ids.last()).copied();
        if let Some(older) = older {
            for group in self.offsets.groups() {
                let offsets = self.offsets.get(&group, older);
                if !offsets.is_empty() {
                    self.offsets.commit(&group, created, &offsets);
                }
            }
            self.offsets.drop_topic(older);
        }
    }

    /// Answers `request` with `reply` once every journal record queued so far is
    /// durable: a commit once it is, a read once what it read can no longer be lost.
    pub(super) fn answer_when_durable(&mut self, request: RequestId, reply: Reply) {
        if self.journal.all_durable() {
            return self.reply(request, Ok(reply));
        }
        self.held_replies.insert(request, reply);
        self.journal_waiters.push_back((self.journal.last_seq(), JournalWaiter::Held(request)));
    }

    /// The journal holds what a held reply waited for: send it.
    pub(super) fn release_held(&mut self, request: RequestId) {
        if let Some(reply) = self.held_replies.remove(&request) {
            self.reply(request, Ok(reply));
        }
    }
}
