//! Rule F, the fence: a round of listing the journal after the node's position and
//! folding what it finds, until a listing finds nothing new; every command waits for
//! one.

use super::*;

impl Node {
    pub(super) fn begin_round(&mut self) {
        self.fence.rounds += 1;
        self.fence.round = Some(Round { number: self.fence.rounds, reads: BTreeMap::new(), search: None });
        self.list_journal();
    }

    pub(super) fn list_journal(&mut self) {
        self.list_journal_after(None);
    }

    /// Lists `j/` past the position, and past `key` (where a page that brought nothing
    /// new ended: keys outside the layout, or entries folded meanwhile).
    pub(super) fn list_journal_after(&mut self, key: Option<String>) {
        let position = self.catalog.position();
        let after = (position > 0).then(|| journal_key(position)).max(key);
        let op = StoreOp::List { prefix: JOURNAL_PREFIX.into(), after, limit: self.options.list_limit.max(1) };
        self.issue(op, Purpose::FenceList);
    }

    pub(super) fn listed(&mut self, page: Page) {
        if self.fence.round.as_ref().is_none_or(|r| r.search.is_some()) {
            return;
        }
        let position = self.catalog.position();
        // Only ours are listed under `j/`: anything else is skipped. Entries at or below
        // the position were folded while the listing was in flight (this node's own
        // append).
        let seqs: Vec<u64> = page.keys.iter().filter_map(|k| parse_journal_key(k)).filter(|s| *s > position).collect();
        if seqs.is_empty() {
            // Nothing new on this page (entries folded meanwhile, keys outside the layout,
            // or no keys at all): the round ends only at the listing's last page.
            return if page.more { self.list_journal_after(page.next()) } else { self.end_round() };
        }
        if seqs.iter().zip(position + 1..).any(|(seq, expected)| *seq != expected) {
            let next = position.saturating_add(1);
            let covered = page.after.as_ref().is_none_or(|after| *after <= journal_key(position));
            if !covered {
                // The walk passed the next entry's key on an earlier page that did not
                // hold it (keys outside the layout led it there): that entry may have
                // landed since, behind the walk. It is read: found, it is folded and the
                // walk starts again from it; missing, it was compacted.
                if let Some(round) = self.fence.round.as_mut() {
                    round.reads.insert(next, None);
                }
                return self.issue(StoreOp::Get { key: journal_key(next) }, Purpose::FenceGet(next));
            }
            // A gap on a page that began at the position: the entries after it were
            // compacted (rule C).
            return self.search_snapshots(true);
        }
        for seq in seqs {
            if let Some(round) = self.fence.round.as_mut() {
                round.reads.insert(seq, None);
            }
            self.issue(StoreOp::Get { key: journal_key(seq) }, Purpose::FenceGet(seq));
        }
    }

    pub(super) fn read_entry(&mut self, seq: u64, bytes: &[u8]) {
        let entry = match entry::decode(seq, bytes) {
            Ok(entry) => entry,
            Err(e) => return self.break_down(format!("journal entry {seq} is corrupt: {e}")),
        };
        // Only an entry the round waits for (not one folded meanwhile by this node's
        // own append, nor one read before the round looked for snapshots).
        let Some(round) = self.fence.round.as_mut().filter(|r| r.search.is_none()) else { return };
        let Some(read) = round.reads.get_mut(&seq) else { return };
        *read = Some(entry);
        self.advance_round();
    }

    /// Once every entry listed is read, checks that no snapshot past the position
    /// exists before folding them; once all are folded, lists again, until a listing
    /// finds nothing. Entries folded meanwhile by another path (this node's own append)
    /// are dropped from the round.
    pub(super) fn advance_round(&mut self) {
        let position = self.catalog.position();
        let Some(round) = self.fence.round.as_mut().filter(|r| r.search.is_none()) else { return };
        round.reads.retain(|seq, _| *seq > position);
        if round.reads.is_empty() {
            self.list_journal();
        } else if round.reads.values().all(Option::is_some) {
            self.search_snapshots(false);
        }
    }

    pub(super) fn fold(&mut self, entry: &Entry) {
        // A contradicting entry is ignored alike on every node (see `Catalog::fold`).
        if self.catalog.fold(entry) != Folded::Applied {
            return;
        }
        match &entry.kind {
            EntryKind::Delete { topic, .. } => {
                let grace = self
                    .catalog
                    .deleting()
                    .find(|(id, _)| id == topic)
                    .map_or(0, |(_, t)| t.settings.deletion_grace_ms);
                self.removal.due.insert(*topic, self.now.plus_millis(grace));
            }
            EntryKind::Removed { topic } => {
                self.removal.due.remove(topic);
                self.data.objects.remove(topic);
                self.data.cursors.remove(topic);
                if self.removal.in_flight.is_some_and(|(t, _)| t == *topic) {
                    self.removal.in_flight = None;
                }
            }
            EntryKind::Create { .. } => {}
        }
    }

    pub(super) fn end_round(&mut self) {
        let Some(round) = self.fence.round.take() else { return };
        self.maybe_compact();
        self.append.behind = false;
        let (served, later): (Vec<_>, Vec<_>) =
            self.fence.waiting.drain(..).partition(|(_, _, tag)| *tag < round.number);
        self.fence.waiting = later;
        for (request, after, _) in served {
            match after {
                After::Command(command) => self.fenced(request, command),
                After::Produced => self.produced(request),
                After::Fetched(reply) => self.fetched(request, reply),
            }
        }
        self.start_lanes();
        if !self.fence.waiting.is_empty() {
            self.begin_round();
        }
        self.pump_appends();
    }

    /// A command whose fence has completed.
    pub(super) fn fenced(&mut self, request: RequestId, command: Command) {
        match command {
            Command::ListTopics => {
                let topics = self
                    .catalog
                    .live_topics()
                    .map(|(n, id, t)| describe(n, id, t, self.known_ends(id, t.partitions)))
                    .collect();
                self.reply(request, Ok(Reply::Topics(topics)));
            }
            Command::DescribeTopic { name } => match self.catalog.live(&name) {
                Some((id, t)) => {
                    let shown = describe(&name, id, t, self.known_ends(id, t.partitions));
                    if planted!(self.options.config, ClusterDescribeCached) {
                        return self.reply(request, Ok(Reply::Described(shown)));
                    }
                    self.describe_ends(request, name, shown);
                }
                None => self.reply(request, Err(BrokerError::TopicNotFound { name })),
            },
            Command::Produce { topic, partition, records } => self.produce(request, topic, partition, records),
            Command::Fetch { topic, partition, offset, max_records, max_bytes } => {
                self.fetch(request, topic, partition, offset, max_records, max_bytes);
            }
            command => self.append.queue.push_back(Appendable::Client(request, command)),
        }
    }
}
