//! Seeded random interleavings of commands, store faults and late landings on several nodes.

use super::*;

/// Seeded runs: several nodes, commands on random nodes, store operations completed
/// in random order, some failing and some with unknown outcomes (landed or not).
/// Two seeds in three compact (after 2 or 5 entries), and some of their writes with
/// unknown outcomes land later, after other operations. Every request is answered;
/// the journal never holds an entry its catalog ignores; every Created and
/// DeleteAccepted names a journal entry that says so; every node ends with the same
/// catalog, which the store's newest snapshot and the entries after it fold to; and
/// no describe invoked after a delete's acknowledgement shows the deleted
/// incarnation.
#[test]
fn random_interleavings_and_faults_keep_the_journal_and_the_lifecycle_straight() {
    let seeds: u64 = std::env::var("BROKER_CLUSTER_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let mut compacted = 0;
    for seed in 1..=seeds {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        // Drawn from the seed, not the stream, so seeds without compaction run as
        // they did before compaction was built.
        let compact = [0, 2, 5][(seed % 3) as usize];
        let mut net = Net::compacting(1 + rand(4) as u32, compact);
        let names = ["a", "b"];
        let mut issued: BTreeMap<RequestId, (Command, u64)> = BTreeMap::new();
        let mut answered_at: BTreeMap<RequestId, u64> = BTreeMap::new();
        let mut step = 0u64;
        for _ in 0..60 {
            step += 1;
            if rand(3) == 0 {
                let name = names[rand(2) as usize];
                let command = match rand(7) {
                    0 => create(name),
                    1 => delete(name),
                    2 => describe(name),
                    3 => Command::ListTopics,
                    4 | 5 => {
                        let value = format!("v{step}");
                        produce(name, (rand(3) > 0).then(|| rand(2) as u32), &[value.as_str(), "w"])
                    }
                    _ => fetch(name, rand(2) as u32, rand(3)),
                };
                let node = rand(net.nodes.len() as u64) as usize;
                let r = net.submit(node, command.clone());
                issued.insert(r, (command, step));
            } else if !net.pending.is_empty() {
                let i = rand(net.pending.len() as u64) as usize;
                let op = net.pending.remove(i).unwrap();
                net.pending.push_front(op);
                let fault = rand(20);
                let mut late = std::mem::take(&mut net.late);
                let mut land = false;
                net.step_with(|store, op| match fault {
                    0 => Err(StoreError::Failed("503".into())),
                    1 => {
                        store.apply(op);
                        Err(StoreError::Unknown("timed out after landing".into()))
                    }
                    2 => Err(StoreError::Unknown("timed out before landing".into())),
                    3 if compact > 0 => {
                        if matches!(op, StoreOp::Create { .. } | StoreOp::Delete { .. }) {
                            late.push_back(op.clone());
                        }
                        Err(StoreError::Unknown("timed out, to land later".into()))
                    }
                    4 if compact > 0 => {
                        land = true;
                        Ok(store.apply(op))
                    }
                    _ => Ok(store.apply(op)),
                });
                net.late = late;
                if land {
                    net.land_late();
                }
            } else {
                net.now = net.now.plus_millis(10);
                for node in &mut net.nodes {
                    node.handle_timeout(net.now);
                }
                net.collect();
            }
            for r in net.replies.keys() {
                answered_at.entry(*r).or_insert(step);
            }
        }
        // Faults stop: late writes land, everything drains.
        while !net.late.is_empty() {
            net.land_late();
        }
        for _ in 0..1000 {
            net.run();
            net.now = net.now.plus_millis(10_000);
            for node in &mut net.nodes {
                node.handle_timeout(net.now);
            }
            net.collect();
            if net.pending.is_empty() && net.nodes.iter().all(|n| n.poll_timeout().is_none()) {
                break;
            }
        }
        step += 1;
        for r in net.replies.keys() {
            answered_at.entry(*r).or_insert(step);
        }
        for r in issued.keys() {
            assert!(net.replies.contains_key(r), "seed {seed}: {r:?} ({:?}) never answered", issued[r].0);
        }
        // The journal, folded afresh from every entry ever appended (compaction
        // deleted some), ignores nothing.
        let mut journal = Catalog::default();
        let mut entries = BTreeMap::new();
        let mut folded_at = BTreeMap::new();
        for (seq, bytes) in &net.history {
            assert_eq!(*seq, journal.position() + 1, "seed {seed}: the journal skips a seq");
            let e = entry::decode(*seq, bytes).expect("a valid entry");
            assert_eq!(journal.fold(&e), Folded::Applied, "seed {seed}: entry {seq}");
            entries.insert(*seq, e.kind);
            folded_at.insert(*seq, journal.clone());
        }
        // The store holds the same: every snapshot is that catalog at its seq, and
        // the newest one with the entries after it folds to the whole journal.
        let mut from_store = Catalog::default();
        for key in net.store.keys() {
            let Some(seq) = parse_snapshot_key(key) else { continue };
            let c = snapshot::decode(seq, net.store.get(key).unwrap()).expect("a valid snapshot");
            assert_eq!(Some(&c), folded_at.get(&seq), "seed {seed}: snapshot {seq}");
            from_store = c;
        }
        if from_store.position() > 0 {
            compacted += 1;
        }
        for key in net.store.keys() {
            let Some(seq) = parse_journal_key(key) else { continue };
            if seq > from_store.position() {
                assert_eq!(seq, from_store.position() + 1, "seed {seed}: entry {seq} after a gap");
                assert_eq!(Some(net.store.get(key).unwrap()), net.history.get(&seq).map(Vec::as_slice));
                let e = entry::decode(seq, net.store.get(key).unwrap()).expect("a valid entry");
                from_store.fold(&e);
            }
        }
        assert_eq!(from_store, journal, "seed {seed}: the store's journal");
        for (r, reply) in &net.replies {
            match reply {
                Ok(Reply::Created { topic }) => {
                    assert!(matches!(entries.get(&topic.0), Some(EntryKind::Create { .. })), "seed {seed}: {r:?}");
                }
                Ok(Reply::DeleteAccepted { topic }) => {
                    let tombstone =
                        entries.values().any(|k| matches!(k, EntryKind::Delete { topic: t, .. } if t == topic));
                    assert!(tombstone, "seed {seed}: {r:?} acknowledged a delete of {topic} with no tombstone");
                }
                _ => {}
            }
        }
        // No position is acknowledged twice, and a fetch shows at each position the
        // record acknowledged there (or one produced there whose answer was lost).
        let mut at: BTreeMap<(TopicId, u32, u64), Vec<u8>> = BTreeMap::new();
        for (r, reply) in &net.replies {
            if let (Ok(Reply::Produced { topic, positions }), Command::Produce { records, .. }) = (reply, &issued[r].0)
            {
                for (p, rec) in positions.iter().zip(records) {
                    let old = at.insert((*topic, p.partition, p.offset), rec.value.to_vec());
                    assert!(old.is_none(), "seed {seed}: {topic}/{}@{} acknowledged twice", p.partition, p.offset);
                }
            }
        }
        for (r, reply) in &net.replies {
            if let (Ok(Reply::Fetched { topic, records, high_watermark }), Command::Fetch { partition, .. }) =
                (reply, &issued[r].0)
            {
                for rec in records {
                    assert!(rec.offset < *high_watermark, "seed {seed}: {r:?}");
                    if let Some(v) = at.get(&(*topic, *partition, rec.offset)) {
                        assert_eq!(v, &rec.value, "seed {seed}: {r:?} at {}", rec.offset);
                    }
                }
            }
        }
        // No describe or fetch invoked after a delete's acknowledgement shows the
        // incarnation, and no produce invoked after it is acknowledged to it.
        for (d, reply) in &net.replies {
            let Ok(Reply::DeleteAccepted { topic }) = reply else { continue };
            for (r, (command, invoked)) in &issued {
                if *invoked > answered_at[d] {
                    let shown = match &net.replies[r] {
                        Ok(Reply::Described(t)) => Some(t.id),
                        Ok(Reply::Fetched { topic, .. } | Reply::Produced { topic, .. }) => Some(*topic),
                        _ => None,
                    };
                    assert_ne!(
                        shown,
                        Some(*topic),
                        "seed {seed}: {r:?} ({command:?}) invoked after {d:?} was acknowledged"
                    );
                }
            }
        }
        // At most one completion per incarnation, and every deletion completed.
        let removed: Vec<TopicId> = entries
            .values()
            .filter_map(|k| match k {
                EntryKind::Removed { topic } => Some(*topic),
                _ => None,
            })
            .collect();
        let distinct: BTreeSet<TopicId> = removed.iter().copied().collect();
        assert_eq!(removed.len(), distinct.len(), "seed {seed}: a second Removed: {removed:?}");
        assert_eq!(journal.deleting().count(), 0, "seed {seed}: deletions left unfinished");
        // Once quiet, one reconciliation leaves objects of live incarnations only.
        net.nodes[0] = Node::new(NodeOptions { reconcile_every_ms: 1, boot: 1000, ..net.nodes[0].options.clone() });
        net.submit(0, Command::ListTopics);
        net.run();
        net.advance(10);
        for key in net.store.keys() {
            if let Some(topic) = parse_data_key(key) {
                assert!(journal.live_topics().any(|(_, id, _)| id == topic), "seed {seed}: orphan {key} left");
            }
        }
        // Every node, fenced once more, holds the journal's catalog.
        for node in 0..net.nodes.len() {
            net.submit(node, Command::ListTopics);
        }
        net.run();
        for node in &net.nodes {
            assert_eq!(node.catalog(), &journal, "seed {seed}: broken {:?}", node.healing.broken);
        }
    }
    if seeds >= 30 {
        assert!(compacted > seeds / 10, "only {compacted} of {seeds} runs compacted");
    }
}
