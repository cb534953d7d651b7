//! Rule A, the append: a create or delete is appended at `position + 1` with a
//! conditional create; one that meets another's entry folds it and runs again, and one
//! whose outcome is unknown reads the key back and knows its own entry by its writer.

use super::*;

impl Node {
    pub(super) fn pump_appends(&mut self) {
        while self.append.current.is_none() && !self.append.behind && self.healing.broken.is_none() {
            let Some(from) = self.append.queue.pop_front() else { return };
            let (request, command) = match &from {
                Appendable::Client(request, command) => (*request, command.clone()),
                Appendable::Removed(topic) => {
                    // Another node's completion may be folded already: then nothing to add.
                    if self.catalog.validate_removed(*topic) || planted!(self.options.config, ClusterDoubleCompletion) {
                        self.append(from.clone(), EntryKind::Removed { topic: *topic });
                    }
                    continue;
                }
            };
            let kind = match &command {
                Command::CreateTopic { name, partitions, settings } => {
                    match self.catalog.validate_create(name, *partitions, settings, &self.options.config) {
                        Ok(()) => EntryKind::Create {
                            name: name.clone(),
                            partitions: *partitions,
                            settings: settings.clone(),
                        },
                        Err(e) => {
                            self.reply(request, Err(e));
                            continue;
                        }
                    }
                }
                Command::DeleteTopic { name } => match self.catalog.validate_delete(name) {
                    Ok(DeleteOf::Live(topic)) => {
                        if planted!(self.options.config, ClusterDeleteAcksDeleting) {
                            let deleting = self.catalog.deleting().filter(|(_, t)| t.name == *name).map(|(id, _)| id);
                            if let Some(old) = deleting.last() {
                                self.reply(request, Ok(Reply::DeleteAccepted { topic: old }));
                                continue;
                            }
                        }
                        EntryKind::Delete { name: name.clone(), topic }
                    }
                    Ok(DeleteOf::AlreadyDeleted(topic)) => {
                        self.reply(request, Ok(Reply::DeleteAccepted { topic }));
                        continue;
                    }
                    Err(e) => {
                        self.reply(request, Err(e));
                        continue;
                    }
                },
                other => {
                    let e = BrokerError::InvalidRequest(format!("{other:?} is not appended to the journal"));
                    self.reply(request, Err(e));
                    continue;
                }
            };
            self.append(from, kind);
        }
    }

    pub(super) fn append(&mut self, from: Appendable, kind: EntryKind) {
        let Some(seq) = self.catalog.position().checked_add(1) else {
            // Only a forged store holds entry u64::MAX (or a snapshot as of it).
            self.append.queue.push_front(from);
            let last = self.catalog.position();
            return self.break_down(format!("the journal holds entry {last}, and no entry can follow it"));
        };
        let writer = EntryWriter { node: self.options.node, boot: self.options.boot, nonce: self.next_nonce };
        self.next_nonce += 1;
        let entry = Entry { writer, kind };
        let op = StoreOp::Create { key: journal_key(seq), bytes: entry::encode(seq, &entry).into() };
        self.append.current = Some(Append { from, seq, entry, found_ours: None });
        self.issue(op, Purpose::Append);
    }

    pub(super) fn check_append(&mut self) {
        if let Some(a) = &self.append.current {
            let key = journal_key(a.seq);
            self.issue(StoreOp::Get { key }, Purpose::AppendCheck);
        }
    }

    pub(super) fn append_checked(&mut self, bytes: &[u8]) {
        let Some(a) = &self.append.current else { return };
        match entry::decode(a.seq, bytes) {
            Ok(found) => {
                let ours = found.writer == a.entry.writer;
                self.verify_append(ours);
            }
            Err(e) => self.break_down(format!("journal entry {} is corrupt: {e}", a.seq)),
        }
    }

    /// Another node's entry holds the append's seq: fold it, then validate again.
    pub(super) fn append_lost(&mut self) {
        if let Some(a) = self.append.current.take() {
            self.append.queue.push_front(a.from);
        }
        self.append.behind = true;
        if self.fence.round.is_none() {
            // No command waits on this round: `rounds` grows, nothing is served.
            self.begin_round();
        }
    }

    pub(super) fn appended(&mut self) {
        let Some(a) = self.append.current.take() else { return };
        // A fence round may have folded it already; otherwise it is the next entry, and a
        // round waiting to read it reads on without it.
        if self.catalog.position() < a.seq {
            self.fold(&a.entry);
            if self.fence.round.as_ref().is_some_and(|r| r.reads.contains_key(&a.seq)) {
                self.advance_round();
            }
        }
        if let Appendable::Client(request, _) = a.from {
            let reply = match a.entry.kind {
                EntryKind::Create { .. } => Reply::Created { topic: TopicId(a.seq) },
                EntryKind::Delete { topic, .. } | EntryKind::Removed { topic } => Reply::DeleteAccepted { topic },
            };
            self.reply(request, Ok(reply));
        }
        self.pump_appends();
    }
}
