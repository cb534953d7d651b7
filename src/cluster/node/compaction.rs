//! Rule C, snapshots and compaction: a node far enough past the newest snapshot writes
//! one and deletes the entries and snapshots below it; a round that meets a gap loads
//! the newest snapshot, and reads and appends are checked against snapshots listed
//! after them.

use super::*;

impl Node {
    //
    // Compaction deletes `j/{k}` for `k < S` once `s/{S}` exists, and deletes a snapshot
    // only once a newer one exists: so whenever an entry is gone, a snapshot past it
    // exists from then on. Deleting makes a key free again, and a create that was
    // delayed (another node's, or this node's own late one) may then write a different
    // entry under a compacted seq. Hence two checks, each a listing of `s/` issued after
    // the reads it vouches for: a round folds what it read only if no snapshot past its
    // position exists (else it loads the newest), and an append is taken as done only if
    // no snapshot past its seq exists (else a snapshot judges it by the writers it
    // records).

    /// Lists `s/` past the position: with `required`, because the journal is compacted
    /// past it; otherwise to check the round's reads before folding them.
    pub(super) fn search_snapshots(&mut self, required: bool) {
        let from = self.catalog.position();
        let Some(round) = self.fence.round.as_mut() else { return };
        if required {
            // Reads in flight are ignored from now on; the snapshot replaces them.
            round.reads.clear();
        }
        round.search = Some(Search { from, newest: None, required });
        self.list_snapshots(snapshot_key(from));
    }

    pub(super) fn list_snapshots(&mut self, after: String) {
        let op =
            StoreOp::List { prefix: SNAPSHOT_PREFIX.into(), after: Some(after), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::FenceSnapshots);
    }

    /// A listed entry is gone: compacted since it was listed.
    pub(super) fn entry_gone(&mut self, seq: u64) {
        let waited = self.fence.round.as_ref().is_some_and(|r| r.search.is_none() && r.reads.get(&seq) == Some(&None));
        if waited {
            self.search_snapshots(true);
        }
    }

    /// The snapshot just read was deleted by a newer compaction: look again.
    pub(super) fn search_again(&mut self) {
        let Some(required) = self.fence.round.as_ref().and_then(|r| r.search.as_ref()).map(|s| s.required) else {
            return;
        };
        self.search_snapshots(required);
    }

    pub(super) fn snapshots_listed(&mut self, page: Page) {
        let Some(search) = self.fence.round.as_mut().and_then(|r| r.search.as_mut()) else { return };
        let from = search.from;
        if let Some(seq) = page.keys.iter().filter_map(|k| parse_snapshot_key(k)).filter(|s| *s > from).max() {
            search.newest = Some(search.newest.map_or(seq, |n| n.max(seq)));
        }
        let (newest, required) = (search.newest, search.required);
        if let (true, Some(next)) = (page.more, page.next()) {
            return self.list_snapshots(next);
        }
        match newest {
            // Newer than what this node folded meanwhile (its own appends): load it.
            Some(seq) if seq > self.catalog.position() => {
                self.issue(StoreOp::Get { key: snapshot_key(seq) }, Purpose::FenceSnapshot(seq));
            }
            None if required => self.break_down(format!(
                "the journal is missing entries after {from}, and no snapshot past it exists: something other than \
                 compaction deleted them"
            )),
            // No snapshot past the reads: none of them was compacted and written again.
            _ => self.fold_reads(),
        }
    }

    pub(super) fn snapshot_read(&mut self, seq: u64, bytes: &[u8]) {
        if self.fence.round.as_ref().is_none_or(|r| r.search.is_none()) {
            return;
        }
        match snapshot::decode(seq, bytes) {
            Ok(catalog) => {
                if catalog.position() > self.catalog.position() {
                    self.load_snapshot(catalog);
                }
                self.fold_reads();
            }
            Err(e) => self.break_down(format!("snapshot {seq} is corrupt: {e}")),
        }
    }

    /// Takes `catalog`, a snapshot past the position, as the catalog, and brings the rest
    /// of the node in line as folding its entries would have: a removal is scheduled for
    /// every incarnation being deleted (its grace delay counted from now, as from
    /// folding its tombstone), and what is known of removed ones is forgotten.
    pub(super) fn load_snapshot(&mut self, catalog: Catalog) {
        self.compaction.snapshot_at = self.compaction.snapshot_at.max(catalog.position());
        self.catalog = catalog;
        let deleting: Vec<(TopicId, u64)> =
            self.catalog.deleting().map(|(id, t)| (id, t.settings.deletion_grace_ms)).collect();
        self.removal.due.retain(|id, _| deleting.iter().any(|(d, _)| d == id));
        for (id, grace) in deleting {
            self.removal.due.entry(id).or_insert(self.now.plus_millis(grace));
        }
        let catalog = &self.catalog;
        self.data.objects.retain(|t, _| !catalog.is_removed(*t));
        self.data.cursors.retain(|t, _| !catalog.is_removed(*t));
        if self.removal.in_flight.is_some_and(|(t, _)| catalog.is_removed(t)) {
            self.removal.in_flight = None;
        }
    }

    /// Ends the round's search: folds, in seq order, the reads past the position (all
    /// read after any snapshot they could be older than), then lists again.
    pub(super) fn fold_reads(&mut self) {
        let Some(round) = self.fence.round.as_mut() else { return };
        round.search = None;
        let mut reads = std::mem::take(&mut round.reads);
        // After entry u64::MAX (a snapshot as of it), there is no next entry to fold.
        while let Some(next) = self.catalog.position().checked_add(1) {
            reads.retain(|seq, _| *seq >= next);
            match reads.remove(&next) {
                Some(Some(entry)) => self.fold(&entry),
                _ => break,
            }
        }
        self.list_journal();
    }

    /// The append's key was read as holding this entry (`ours`) or another's. Unless a
    /// snapshot past its seq exists, the key was never compacted, so that entry is the
    /// journal's; else the snapshot judges.
    pub(super) fn verify_append(&mut self, ours: bool) {
        let Some(a) = self.append.current.as_mut() else { return };
        a.found_ours = Some(ours);
        let seq = a.seq;
        self.list_append_snapshots(seq, None);
    }

    pub(super) fn list_append_snapshots(&mut self, seq: u64, after: Option<String>) {
        let after = after.unwrap_or_else(|| snapshot_key(seq));
        let op =
            StoreOp::List { prefix: SNAPSHOT_PREFIX.into(), after: Some(after), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::AppendSnapshots(seq));
    }

    pub(super) fn append_snapshots_listed(&mut self, seq: u64, page: Page) {
        let Some(ours) = self.append.current.as_ref().filter(|a| a.seq == seq).and_then(|a| a.found_ours) else {
            return;
        };
        // The oldest past the seq: the likeliest to still hold the incarnation it names.
        if let Some(at) = page.keys.iter().filter_map(|k| parse_snapshot_key(k)).find(|s| *s > seq) {
            return self.issue(StoreOp::Get { key: snapshot_key(at) }, Purpose::AppendSnapshot(seq, at));
        }
        if page.more {
            return self.list_append_snapshots(seq, page.next());
        }
        if ours {
            self.appended();
        } else {
            self.append_lost();
        }
    }

    /// A snapshot past the append's seq says whose entry holds it, by the writers it
    /// records for the incarnation the entry creates or deletes.
    pub(super) fn judge_append(&mut self, seq: u64, at: u64, bytes: &[u8]) {
        let Some(a) = self.append.current.as_ref().filter(|a| a.seq == seq && a.found_ours.is_some()) else { return };
        let catalog = match snapshot::decode(at, bytes) {
            Ok(catalog) => catalog,
            Err(e) => return self.break_down(format!("snapshot {at} is corrupt: {e}")),
        };
        let writer = a.entry.writer;
        let verdict = match &a.entry.kind {
            EntryKind::Create { .. } => match catalog.incarnation(TopicId(seq)) {
                Some(t) if t.created_by == writer => Verdict::Ours,
                Some(_) => Verdict::Lost,
                None => Verdict::Unknown,
            },
            EntryKind::Delete { topic, .. } => match catalog.incarnation(*topic) {
                Some(t) if t.deleted_at == Some(seq) && t.deleted_by == Some(writer) => Verdict::Ours,
                Some(_) => Verdict::Lost,
                None => Verdict::Unknown,
            },
            // Validated again, a completion already in the journal appends nothing.
            EntryKind::Removed { .. } => Verdict::Lost,
        };
        match verdict {
            Verdict::Ours => self.appended(),
            Verdict::Lost => self.append_lost(),
            Verdict::Unknown => {
                let Some(a) = self.append.current.take() else { return };
                if let Appendable::Client(request, _) = a.from {
                    let why = format!(
                        "journal entry {seq} was compacted before this node could read whose it is, and the \
                         incarnation it names is removed"
                    );
                    self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
                }
                // Catch up before appending again.
                self.append.behind = true;
                if self.fence.round.is_none() {
                    self.begin_round();
                }
            }
        }
    }

    /// Starts a compaction once the node has folded `compact_after_entries` past the
    /// newest snapshot it knows: the snapshot of its catalog, created at its position.
    pub(super) fn maybe_compact(&mut self) {
        let every = self.options.compact_after_entries;
        let seq = self.catalog.position();
        if every == 0
            || self.compaction.in_flight.is_some()
            || self.healing.broken.is_some()
            || seq < self.compaction.snapshot_at.saturating_add(every)
        {
            return;
        }
        let bytes: Bytes = snapshot::encode(&self.catalog).into();
        self.compaction.in_flight = Some(Compaction {
            seq,
            bytes: Some(bytes.clone()),
            prefix: JOURNAL_PREFIX,
            after: None,
            left: 0,
            last_page: false,
        });
        self.issue(StoreOp::Create { key: snapshot_key(seq), bytes }, Purpose::CompactWrite(seq));
    }

    /// The snapshot existed already: folding is deterministic, so it must be this one.
    pub(super) fn snapshot_checked(&mut self, seq: u64, bytes: &[u8]) {
        let Some(c) = self.compaction.in_flight.as_ref().filter(|c| c.seq == seq) else { return };
        if c.bytes.as_deref() == Some(bytes) {
            self.snapshot_written(seq);
        } else {
            self.compaction.in_flight = None;
            self.break_down(format!("snapshot {seq} in the store is not this node's catalog as of entry {seq}"));
        }
    }

    /// The snapshot exists: delete the entries below it, then older snapshots.
    pub(super) fn snapshot_written(&mut self, seq: u64) {
        let Some(c) = self.compaction.in_flight.as_mut().filter(|c| c.seq == seq) else { return };
        c.bytes = None;
        self.compaction.snapshot_at = self.compaction.snapshot_at.max(seq);
        self.list_compaction();
    }

    pub(super) fn list_compaction(&mut self) {
        let Some(c) = &self.compaction.in_flight else { return };
        let op =
            StoreOp::List { prefix: c.prefix.into(), after: c.after.clone(), limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::CompactList);
    }

    /// Deletes the listed keys below the snapshot; never the snapshot's entry itself, so
    /// the journal's newest entry is never deleted.
    pub(super) fn compaction_listed(&mut self, page: Page) {
        let Some(c) = self.compaction.in_flight.as_mut().filter(|c| c.bytes.is_none()) else { return };
        let parse = if c.prefix == JOURNAL_PREFIX { parse_journal_key } else { parse_snapshot_key };
        let mut doomed = Vec::new();
        c.last_page = !page.more;
        for key in &page.keys {
            match parse(key) {
                Some(seq) if seq < c.seq => doomed.push(key.clone()),
                Some(_) => c.last_page = true,
                None => {}
            }
        }
        c.after = page.next();
        c.left = doomed.len();
        for key in doomed {
            self.issue(StoreOp::Delete { key }, Purpose::CompactDelete);
        }
        self.compaction_page_done();
    }

    pub(super) fn compaction_deleted(&mut self) {
        if let Some(c) = self.compaction.in_flight.as_mut() {
            c.left = c.left.saturating_sub(1);
        }
        self.compaction_page_done();
    }

    /// Once a page's deletes are done: the next page, the next prefix, or the end.
    pub(super) fn compaction_page_done(&mut self) {
        let Some(c) = self.compaction.in_flight.as_mut().filter(|c| c.left == 0) else { return };
        if !c.last_page {
            return self.list_compaction();
        }
        if c.prefix == JOURNAL_PREFIX {
            c.prefix = SNAPSHOT_PREFIX;
            c.after = None;
            c.last_page = false;
            return self.list_compaction();
        }
        self.compaction.in_flight = None;
    }
}
