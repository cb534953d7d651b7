//! Effect traces of create, produce, fetch and delete (and of a recovery that resumes a
//! deletion), as insta snapshots of a readable rendering: one line per effect, journal
//! appends decoded into their record kinds. Each test also asserts the ordering the
//! design requires, so a snapshot accepted by mistake cannot hide a wrong order.
//!
//! To re-record after an intended change: `INSTA_UPDATE=always cargo test --test
//! snapshots`, then read every changed `.snap` file before committing it.

use broker_core::{Config, MemFs, SyncDriver};
use broker_testkit::*;

fn driver() -> SyncDriver<MemFs> {
    SyncDriver::start(Config::default(), MemFs::new())
}

/// Traces `f` on the driver and renders the effects it caused.
fn traced(d: &mut SyncDriver<MemFs>, f: impl FnOnce(&mut SyncDriver<MemFs>)) -> String {
    d.record_trace();
    d.take_trace();
    f(d);
    render(&d.take_trace())
}

/// The index of the only line containing `needle`.
#[track_caller]
fn line_of(text: &str, needle: &str) -> usize {
    let hits: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i).collect();
    assert_eq!(hits.len(), 1, "expected exactly one line with {needle:?} in:\n{text}");
    hits[0]
}

/// Indexes of every line containing `needle`.
fn lines_of(text: &str, needle: &str) -> Vec<usize> {
    text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i).collect()
}

#[test]
fn create_trace() {
    let mut d = driver();
    let text = traced(&mut d, |d| {
        created(d.request(create("orders", 2)));
    });
    // Intent durable, then logs, then the reply.
    let intent = line_of(&text, "AppendJournal [TopicCreated(t0 \"orders\" x2");
    let sync = line_of(&text, "SyncJournal");
    let logs = lines_of(&text, "CreateLog t0/");
    let reply = line_of(&text, "Ok(Created t0)");
    assert_eq!(logs.len(), 2);
    assert!(intent < sync && logs.iter().all(|&l| sync < l && l < reply), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn produce_trace() {
    let mut d = driver();
    created(d.request(create("orders", 2)));
    let text = traced(&mut d, |d| {
        produced(d.request(produce_keyed("orders", &[("customer-7", "paid"), ("customer-8", "shipped")])));
        produced(d.request(produce("orders", &["a", "b", "c"])));
    });
    // Kafka's default partitioner placed the keyed records.
    assert_eq!(broker_core::partition_for_key(b"customer-7", 2), 1);
    assert_eq!(broker_core::partition_for_key(b"customer-8", 2), 0);
    line_of(&text, "Append t0/p1 [0: key=\"customer-7\"");
    // Each partition write is appended, then synced, then acknowledged.
    let first_reply = lines_of(&text, "Ok(Produced")[0];
    for sync in lines_of(&text, "SyncLog").into_iter().filter(|&s| s < first_reply) {
        assert!(lines_of(&text, "Append t0/").iter().any(|&a| a < sync), "{text}");
    }
    assert!(!lines_of(&text, "SyncLog").is_empty() && lines_of(&text, "SyncLog")[0] < first_reply, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn fetch_trace() {
    let mut d = driver();
    created(d.request(create("orders", 1)));
    produced(d.request(produce("orders", &["a", "b", "c"])));
    let text = traced(&mut d, |d| {
        fetched(d.request(fetch("orders", 0, 1, 10)));
        fetched(d.request(fetch("orders", 0, 3, 10))); // at the high watermark: no read
        assert!(d.request(fetch("orders", 0, 4, 10)).is_err());
    });
    assert_eq!(lines_of(&text, "Read t0/p0").len(), 1, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn delete_trace() {
    let mut d = driver();
    created(d.request(create("orders", 2)));
    produced(d.request(produce("orders", &["a", "b"])));
    let text = traced(&mut d, |d| {
        d.request(delete("orders")).unwrap();
        d.settle(100);
    });
    let tombstone = line_of(&text, "AppendJournal [TopicDeleted(t0 after 0.000000s)]");
    let sync = lines_of(&text, "SyncJournal")[0];
    let accepted = line_of(&text, "Ok(DeleteAccepted t0)");
    let removes = lines_of(&text, "RemoveLog t0/");
    let completed = line_of(&text, "DeletionCompleted(t0)");
    assert_eq!(removes.len(), 2, "{text}");
    assert!(tombstone < sync && sync < accepted, "{text}");
    assert!(removes.iter().all(|&r| accepted < r && r < completed), "{text}");
    let last_storage = text.lines().collect::<Vec<_>>().iter().rposition(|l| l.starts_with("storage")).unwrap();
    assert_eq!(last_storage, completed + 1, "the DeletionCompleted sync is the last storage effect:\n{text}");
    assert!(text.lines().nth(last_storage).unwrap().ends_with("SyncJournal"));
    insta::assert_snapshot!(text);
}

#[test]
fn delete_with_grace_trace() {
    let mut d = driver();
    created(d.request(create_grace("orders", 1, 10)));
    let mut text = traced(&mut d, |d| {
        d.request(delete("orders")).unwrap();
    });
    let deadline = d.broker().poll_timeout().expect("the grace delay is a timer");
    text += &format!("time passes to {deadline}\n");
    text += &traced(&mut d, |d| d.settle(100));
    let accepted = line_of(&text, "Ok(DeleteAccepted t0)");
    let timer = line_of(&text, "time passes to 0.010000s");
    let remove = line_of(&text, "RemoveLog t0/p0");
    assert!(accepted < timer && timer < remove, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn recovery_resuming_a_deletion_trace() {
    // Crash once the tombstone is durable, inside the grace delay, with one live topic.
    let mut d = driver();
    created(d.request(create("kept", 1)));
    produced(d.request(produce("kept", &["x", "y"])));
    created(d.request(create_grace("doomed", 2, 50)));
    d.request(delete("doomed")).unwrap();
    let epoch = d.broker().journal_epoch();
    let disk = d.crash();
    let mut h = Hand::new(Config::default(), disk);
    h.run();
    let mut text = render(&h.trace);
    let mark = h.trace.len();
    let deadline = h.broker.poll_timeout().expect("the rest of the grace delay is a timer");
    text += &format!("time passes to {deadline}\n");
    h.settle(100);
    assert_eq!(h.broker.journal_epoch(), epoch + 1, "recovery rewrites the journal once, as a snapshot");
    text += &render(&h.trace[mark..]);
    let open = line_of(&text, "OpenLog t0/p0");
    let timer = line_of(&text, "time passes to 0.050000s");
    let removes = lines_of(&text, "RemoveLog t1/");
    assert_eq!(removes.len(), 2, "{text}");
    assert!(open < timer && removes.iter().all(|&r| timer < r), "{text}");
    assert!(lines_of(&text, "RemoveLog t0/").is_empty(), "{text}");
    line_of(&text, "DeletionCompleted(t1)");
    insta::assert_snapshot!(text);
}

#[test]
fn first_start_trace() {
    // An empty data directory: read (nothing), list, then write the first journal.
    let h = Hand::start(Config::default(), MemFs::new());
    let text = render(&h.trace);
    let replace =
        line_of(&text, "ReplaceJournal epoch=1 keep_old=false [Snapshot(next_id=0 live=[] deleting=[] ends=[])]");
    assert!(line_of(&text, "ReadJournal") < replace, "{text}");
    assert_eq!(h.broker.phase(), broker_core::Phase::Serving);
    assert_eq!(h.broker.journal_epoch(), 1);
    insta::assert_snapshot!(text);
}
