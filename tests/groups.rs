//! Consumer groups' committed offsets in the core: kept under a topic's incarnation,
//! checked against it, durable before they are answered, and gone with the incarnation.

use broker_core::{
    BrokerError, Command, CommittedOffset, Config, MemFs, Reply, StorageOp, SyncDriver, TopicId, MAX_GROUP_BYTES,
};
use broker_testkit::*;

fn at(partition: u32, offset: u64) -> CommittedOffset {
    CommittedOffset { partition, offset, metadata: String::new() }
}

fn commit(group: &str, topic: &str, offsets: Vec<CommittedOffset>) -> Command {
    Command::CommitOffsets { group: group.into(), topic: topic.into(), incarnation: None, offsets }
}

fn read(group: &str, topic: &str) -> Command {
    Command::FetchOffsets { group: group.into(), topic: topic.into() }
}

fn committed(reply: Result<Reply, BrokerError>) -> TopicId {
    match reply {
        Ok(Reply::OffsetsCommitted { topic }) => topic,
        other => panic!("expected OffsetsCommitted, got {other:?}"),
    }
}

fn offsets(reply: Result<Reply, BrokerError>) -> (TopicId, Vec<(u32, u64)>) {
    match reply {
        Ok(Reply::Offsets { topic, offsets }) => (topic, offsets.iter().map(|o| (o.partition, o.offset)).collect()),
        other => panic!("expected Offsets, got {other:?}"),
    }
}

fn groups(reply: Result<Reply, BrokerError>) -> Vec<String> {
    match reply {
        Ok(Reply::Groups(g)) => g,
        other => panic!("expected Groups, got {other:?}"),
    }
}

/// A broker with topic `orders` of two partitions holding `n` records in each.
fn orders(n: usize) -> SyncDriver<MemFs> {
    let mut d = SyncDriver::start(Config::default(), MemFs::new());
    created(d.request(create("orders", 2)));
    for p in 0..2 {
        for i in 0..n {
            let r = Command::Produce {
                topic: "orders".into(),
                partition: Some(p),
                records: vec![rec(None, &i.to_string())],
            };
            produced(d.request(r));
        }
    }
    d
}

#[test]
fn a_commit_reads_back_replacing_only_the_partitions_it_names() {
    let mut d = orders(5);
    let id = committed(d.request(commit("g", "orders", vec![at(0, 3), at(1, 5)])));
    committed(d.request(commit("g", "orders", vec![at(0, 4)])));
    assert_eq!(offsets(d.request(read("g", "orders"))), (id, vec![(0, 4), (1, 5)]));
    assert_eq!(offsets(d.request(read("other", "orders"))), (id, vec![]), "groups are apart");
    let meta = CommittedOffset { partition: 1, offset: 2, metadata: "consumer-7".into() };
    committed(d.request(commit("g", "orders", vec![meta.clone()])));
    match d.request(read("g", "orders")) {
        Ok(Reply::Offsets { offsets, .. }) => assert_eq!(offsets[1], meta, "metadata comes back as given"),
        other => panic!("{other:?}"),
    }
    assert_eq!(groups(d.request(Command::ListGroups)), vec!["g".to_string()]);
}

#[test]
fn a_recreated_topic_starts_every_group_afresh() {
    let mut d = orders(5);
    let old = committed(d.request(commit("g", "orders", vec![at(0, 5), at(1, 2)])));
    d.request(delete("orders")).unwrap();
    // The deleted incarnation's positions are gone with it, and so is the group that
    // held nothing else.
    assert_eq!(groups(d.request(Command::ListGroups)), Vec::<String>::new());
    let new = created(d.request(create("orders", 2)));
    assert_ne!(old, new);
    assert_eq!(offsets(d.request(read("g", "orders"))), (new, vec![]));
    // A reader still inside the deleted incarnation cannot commit its position to the
    // new one: the offset lies below the new log start (the old one's end, 5, is the
    // new one's start, and a reader there reads the new one from its beginning)...
    let refused = d.request(commit("g", "orders", vec![at(0, 3)]));
    assert!(matches!(refused, Err(BrokerError::OffsetBeforeStart { offset: 3, log_start: 5 })), "{refused:?}");
    // ...and a commit naming the incarnation it read is refused whatever its offset.
    let stale = Command::CommitOffsets {
        group: "g".into(),
        topic: "orders".into(),
        incarnation: Some(old),
        offsets: vec![at(0, 5)],
    };
    let refused = d.request(stale);
    assert!(matches!(refused, Err(BrokerError::StaleIncarnation { .. })), "{refused:?}");
    assert_eq!(offsets(d.request(read("g", "orders"))), (new, vec![]), "refusals changed nothing");
    // The new incarnation's own positions are kept.
    produced(d.request(Command::Produce { topic: "orders".into(), partition: Some(0), records: vec![rec(None, "x")] }));
    let named = Command::CommitOffsets {
        group: "g".into(),
        topic: "orders".into(),
        incarnation: Some(new),
        offsets: vec![at(0, 6)],
    };
    committed(d.request(named));
    assert_eq!(offsets(d.request(read("g", "orders"))), (new, vec![(0, 6)]));
}

#[test]
fn acknowledged_commits_survive_a_restart_and_a_compaction() {
    let mut d = orders(3);
    committed(d.request(commit("g", "orders", vec![at(0, 3)])));
    committed(d.request(commit("h", "orders", vec![at(1, 1)])));
    let fs = d.crash();
    let mut d = SyncDriver::start(Config::default(), fs);
    assert_eq!(offsets(d.request(read("g", "orders"))).1, vec![(0, 3)]);
    assert_eq!(offsets(d.request(read("h", "orders"))).1, vec![(1, 1)]);
    // Enough commits to compact the journal more than once: the snapshots carry them.
    let config = Config { compaction_min_records: 10, compaction_ratio: 2, ..Config::default() };
    let mut d = SyncDriver::start(config.clone(), d.crash());
    for i in 0..40u64 {
        committed(d.request(commit("g", "orders", vec![at(0, i % 4)])));
    }
    // Each commit takes about 4 KiB (two copies a block apart): 40 of them uncompacted
    // would take over 160 KiB.
    let journal = d.fs().file("journal").expect("a journal").len();
    assert!(journal < 16 * 4096, "the journal was compacted: {journal} bytes");
    let mut d = SyncDriver::start(config, d.crash());
    assert_eq!(offsets(d.request(read("g", "orders"))).1, vec![(0, 39 % 4)]);
    assert_eq!(offsets(d.request(read("h", "orders"))).1, vec![(1, 1)]);
}

#[test]
fn a_deleted_group_is_forgotten_durably() {
    let mut d = orders(2);
    committed(d.request(commit("g", "orders", vec![at(0, 1)])));
    assert_eq!(d.request(Command::DeleteGroup { group: "g".into() }), Ok(Reply::GroupDeleted));
    let again = d.request(Command::DeleteGroup { group: "g".into() });
    assert!(matches!(again, Err(BrokerError::GroupNotFound { .. })), "{again:?}");
    let mut d = SyncDriver::start(Config::default(), d.crash());
    assert_eq!(offsets(d.request(read("g", "orders"))).1, vec![]);
    assert_eq!(groups(d.request(Command::ListGroups)), Vec::<String>::new());
}

/// Whether an error is the one a case expects.
type Expected = fn(&BrokerError) -> bool;

#[test]
fn bad_commits_are_refused_and_change_nothing() {
    let mut d = orders(3);
    committed(d.request(commit("g", "orders", vec![at(0, 1)])));
    let long = "g".repeat(MAX_GROUP_BYTES + 1);
    let too_big = CommittedOffset { partition: 0, offset: 2, metadata: "m".repeat(4097) };
    let cases: Vec<(Command, Expected)> = vec![
        (commit("", "orders", vec![at(0, 2)]), |e| matches!(e, BrokerError::InvalidGroup { .. })),
        (commit(&long, "orders", vec![at(0, 2)]), |e| matches!(e, BrokerError::InvalidGroup { .. })),
        (commit("g", "nope", vec![at(0, 2)]), |e| matches!(e, BrokerError::TopicNotFound { .. })),
        (commit("g", "orders", vec![at(2, 0)]), |e| matches!(e, BrokerError::PartitionNotFound { .. })),
        (commit("g", "orders", vec![at(0, 4)]), |e| matches!(e, BrokerError::OffsetOutOfRange { offset: 4, .. })),
        (commit("g", "orders", vec![at(0, 2), at(0, 3)]), |e| matches!(e, BrokerError::InvalidRequest(_))),
        (commit("g", "orders", vec![at(1, 2), at(0, 9)]), |e| matches!(e, BrokerError::OffsetOutOfRange { .. })),
        (commit("g", "orders", vec![]), |e| matches!(e, BrokerError::InvalidRequest(_))),
        (commit("g", "orders", vec![too_big]), |e| matches!(e, BrokerError::OffsetMetadataTooLarge { .. })),
        (read("", "orders"), |e| matches!(e, BrokerError::InvalidGroup { .. })),
        (read("g", "nope"), |e| matches!(e, BrokerError::TopicNotFound { .. })),
    ];
    for (command, expected) in cases {
        let reply = d.request(command.clone());
        assert!(reply.as_ref().is_err_and(expected), "{command:?} got {reply:?}");
    }
    assert_eq!(offsets(d.request(read("g", "orders"))).1, vec![(0, 1)]);
    // At the high watermark is a position (the group read everything).
    committed(d.request(commit("g", "orders", vec![at(0, 3)])));
}

#[test]
fn committed_offsets_are_bounded_in_bytes() {
    let one = broker_core::committed_bytes("g", "");
    let config = Config { max_committed_offsets_bytes: 3 * one, ..Config::default() };
    let mut d = SyncDriver::start(config, MemFs::new());
    created(d.request(create("t", 4)));
    committed(d.request(commit("g", "t", vec![at(0, 0), at(1, 0), at(2, 0)])));
    // Replacing a position takes no more room; a fourth does.
    committed(d.request(commit("g", "t", vec![at(2, 0)])));
    let full = d.request(commit("g", "t", vec![at(3, 0)]));
    assert!(matches!(full, Err(BrokerError::CommittedOffsetsFull { .. })), "{full:?}");
    assert_eq!(d.request(Command::DeleteGroup { group: "g".into() }), Ok(Reply::GroupDeleted));
    committed(d.request(commit("g", "t", vec![at(3, 0)])));
}

#[test]
fn read_only_serves_reads_and_refuses_commits() {
    let mut d = orders(2);
    committed(d.request(commit("g", "orders", vec![at(0, 2)])));
    let mut d = SyncDriver::start(Config { read_only: true, ..Config::default() }, d.crash());
    assert_eq!(offsets(d.request(read("g", "orders"))).1, vec![(0, 2)]);
    let refused = d.request(commit("g", "orders", vec![at(0, 1)]));
    assert!(matches!(refused, Err(BrokerError::ReadOnly(_))), "{refused:?}");
    let refused = d.request(Command::DeleteGroup { group: "g".into() });
    assert!(matches!(refused, Err(BrokerError::ReadOnly(_))), "{refused:?}");
}

#[test]
fn neither_a_commit_nor_a_read_of_it_is_answered_before_the_journal_holds_it() {
    let mut h = Hand::start(Config::default(), MemFs::new());
    created(h.request(create("t", 1)));
    produced(h.request(produce("t", &["a", "b"])));
    let is_journal_write = |op: &StorageOp| matches!(op, StorageOp::AppendJournal { .. } | StorageOp::SyncJournal);
    let c = h.submit(commit("g", "t", vec![at(0, 2)]));
    let r = h.submit(read("g", "t"));
    let l = h.submit(Command::ListGroups);
    h.run_holding(is_journal_write);
    assert!(h.take_reply(c).is_none(), "a commit is answered once durable");
    assert!(h.take_reply(r).is_none(), "a read of a commit not yet durable waits for it");
    assert!(h.take_reply(l).is_none(), "a list of a group not yet durable waits for it");
    // A crash now loses the commit, which no one was told of.
    let mut h = Hand::start(Config::default(), h.crash());
    assert_eq!(offsets(h.request(read("g", "t"))).1, vec![]);
    let c = h.submit(commit("g", "t", vec![at(0, 2)]));
    let r = h.submit(read("g", "t"));
    h.run();
    committed(h.take_reply(c).expect("answered once durable"));
    assert_eq!(offsets(h.take_reply(r).expect("answered")).1, vec![(0, 2)]);
}
