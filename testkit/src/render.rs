//! Readable renderings of effects, storage operations, journal records and replies
//! (journal appends decoded into their record kinds), for snapshots and failure
//! messages; and readers of what a `MemFs` holds.

use broker_core::{
    decode_journal, AppendRecord, BrokerError, Effect, JournalRecord, LogId, MemFs, Reply, StorageOp, StoredRecord,
    TopicMeta, JOURNAL_FILE,
};
use std::fmt::Write as _;

/// Every log file in the file system, parsed back to its id.
pub fn log_files(fs: &MemFs) -> Vec<LogId> {
    fs.names().iter().filter_map(|n| LogId::parse_file_name(n)).collect()
}

/// The records of the journal file (which must decode cleanly, with no torn tail).
#[track_caller]
pub fn journal_records(fs: &MemFs) -> Vec<JournalRecord> {
    let bytes = fs.file(JOURNAL_FILE).expect("a journal file exists");
    let d = decode_journal(bytes).expect("the journal decodes");
    assert!(d.torn_tail.is_none(), "the journal has a torn tail: {:?}", d.torn_tail);
    d.records.into_iter().map(|(_, r)| r).collect()
}

/// The journal file rendered one record a line.
pub fn journal_text(fs: &MemFs) -> String {
    journal_records(fs).iter().map(record_text).collect::<Vec<_>>().join("\n")
}

fn bytes_text(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

fn meta_text(m: &TopicMeta) -> String {
    format!("{} {:?} x{} grace={}ms", m.id, m.name, m.partitions, m.settings.deletion_grace_ms)
}

/// One journal record, readably.
pub fn record_text(r: &JournalRecord) -> String {
    match r {
        JournalRecord::TopicCreated(m) => format!("TopicCreated({})", meta_text(m)),
        JournalRecord::TopicDeleted { id, remove_after } => format!("TopicDeleted({id} after {remove_after})"),
        JournalRecord::PartitionRemoved { id, partition } => format!("PartitionRemoved({id}/p{partition})"),
        JournalRecord::DeletionCompleted { id } => format!("DeletionCompleted({id})"),
        JournalRecord::Snapshot(s) => {
            let live: Vec<String> = s.live.iter().map(meta_text).collect();
            let deleting: Vec<String> =
                s.deleting.iter().map(|d| format!("{} removed={:?}", meta_text(&d.topic), d.removed)).collect();
            let ends: Vec<String> = s.ends.iter().map(|(log, end)| format!("{log}:{end}")).collect();
            let groups: Vec<String> =
                s.groups.iter().map(|g| format!("{:?} {} [{}]", g.group, g.topic, offsets_text(&g.offsets))).collect();
            let groups = if groups.is_empty() { String::new() } else { format!(" groups=[{}]", groups.join(", ")) };
            format!(
                "Snapshot(next_id={} live=[{}] deleting=[{}] ends=[{}]{groups})",
                s.next_topic_id,
                live.join(", "),
                deleting.join(", "),
                ends.join(", ")
            )
        }
        JournalRecord::LogEnd { log, end } => format!("LogEnd({log} {end})"),
        JournalRecord::OffsetsCommitted { group, topic, offsets } => {
            format!("OffsetsCommitted({group:?} {topic} [{}])", offsets_text(offsets))
        }
        JournalRecord::GroupDeleted { group } => format!("GroupDeleted({group:?})"),
        JournalRecord::ProducerIdAllocated { id } => format!("ProducerIdAllocated({id})"),
        JournalRecord::ProducerAppended { log, batch, records, first_offset } => format!(
            "ProducerAppended({log} producer {} epoch {} seq {}+{records} at {first_offset})",
            batch.producer_id, batch.epoch, batch.first_sequence
        ),
    }
}

fn offsets_text(offsets: &[broker_core::CommittedOffset]) -> String {
    let parts: Vec<String> = offsets
        .iter()
        .map(|o| match o.metadata.as_str() {
            "" => format!("p{}@{}", o.partition, o.offset),
            m => format!("p{}@{} {m:?}", o.partition, o.offset),
        })
        .collect();
    parts.join(", ")
}

fn append_records_text(records: &[AppendRecord]) -> String {
    let parts: Vec<String> = records
        .iter()
        .map(|r| match &r.record.key {
            Some(k) => format!("{}: key={} value={}", r.offset, bytes_text(k), bytes_text(&r.record.value)),
            None => format!("{}: value={}", r.offset, bytes_text(&r.record.value)),
        })
        .collect();
    parts.join(", ")
}

fn stored_text(records: &[StoredRecord]) -> String {
    let parts: Vec<String> = records
        .iter()
        .map(|r| match &r.key {
            Some(k) => format!("{}: key={} value={}", r.offset, bytes_text(k), bytes_text(&r.value)),
            None => format!("{}: value={}", r.offset, bytes_text(&r.value)),
        })
        .collect();
    parts.join(", ")
}

/// A storage operation, readably.
pub fn op_text(op: &StorageOp) -> String {
    match op {
        StorageOp::ReadJournal => "ReadJournal".into(),
        StorageOp::AppendJournal { records, .. } => {
            format!("AppendJournal [{}]", records.iter().map(record_text).collect::<Vec<_>>().join(", "))
        }
        StorageOp::SyncJournal => "SyncJournal".into(),
        StorageOp::ReplaceJournal { contents, keep_old } => match decode_journal(contents) {
            Ok(d) => {
                let recs: Vec<String> = d.records.iter().map(|(_, r)| record_text(r)).collect();
                format!("ReplaceJournal epoch={} keep_old={keep_old} [{}]", d.epoch, recs.join(", "))
            }
            Err(e) => format!("ReplaceJournal <corrupt at {}: {}>", e.offset, e.detail),
        },
        StorageOp::ListLogs => "ListLogs".into(),
        StorageOp::CreateLog { log, first_offset: 0, keep_whole_tail: false } => format!("CreateLog {log}"),
        StorageOp::CreateLog { log, first_offset, keep_whole_tail } => {
            let keep = if *keep_whole_tail { " keeping its whole tail" } else { "" };
            format!("CreateLog {log} from {first_offset}{keep}")
        }
        StorageOp::OpenLog { log, acked_end, first_offset: 0, keep_whole_tail: false } => {
            format!("OpenLog {log} acked {acked_end}")
        }
        StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail } => {
            let keep = if *keep_whole_tail { " keeping its whole tail" } else { "" };
            format!("OpenLog {log} acked {acked_end} from {first_offset}{keep}")
        }
        StorageOp::Append { log, records } => format!("Append {log} [{}]", append_records_text(records)),
        StorageOp::SyncLog { log } => format!("SyncLog {log}"),
        StorageOp::Read { log, offset, max_records, .. } => format!("Read {log} from {offset} max {max_records}"),
        StorageOp::RemoveLog { log } => format!("RemoveLog {log}"),
    }
}

/// A reply, readably.
pub fn reply_text(reply: &Result<Reply, BrokerError>) -> String {
    match reply {
        Ok(Reply::Created { topic }) => format!("Ok(Created {topic})"),
        Ok(Reply::DeleteAccepted { topic }) => format!("Ok(DeleteAccepted {topic})"),
        Ok(Reply::Produced { topic, positions }) => {
            let p: Vec<String> = positions.iter().map(|p| format!("p{}@{}", p.partition, p.offset)).collect();
            format!("Ok(Produced {topic} [{}])", p.join(", "))
        }
        Ok(Reply::Fetched { topic, records, high_watermark }) => {
            format!("Ok(Fetched {topic} hw={high_watermark} [{}])", stored_text(records))
        }
        Ok(Reply::Topics(ts)) => {
            let t: Vec<String> =
                ts.iter().map(|t| format!("{:?}={} hw={:?}", t.name, t.id, t.high_watermarks)).collect();
            format!("Ok(Topics [{}])", t.join(", "))
        }
        Ok(Reply::Described(t)) => {
            format!("Ok(Described {:?}={} x{} hw={:?})", t.name, t.id, t.partitions, t.high_watermarks)
        }
        Ok(Reply::OffsetsCommitted { topic }) => format!("Ok(OffsetsCommitted {topic})"),
        Ok(Reply::Offsets { topic, offsets }) => format!("Ok(Offsets {topic} [{}])", offsets_text(offsets)),
        Ok(Reply::Groups(groups)) => format!("Ok(Groups {groups:?})"),
        Ok(Reply::GroupDeleted) => "Ok(GroupDeleted)".into(),
        Ok(Reply::ProducerInitialized { producer_id, epoch }) => {
            format!("Ok(ProducerInitialized {producer_id}/{epoch})")
        }
        Err(e) => format!("Err({e:?})"),
    }
}

/// Renders effects one a line.
pub fn render(effects: &[Effect]) -> String {
    let mut out = String::new();
    for e in effects {
        let line = match e {
            Effect::Storage { id, op } => format!("storage #{} {}", id.0, op_text(op)),
            Effect::Reply { request, reply } => format!("reply req#{} {}", request.0, reply_text(reply)),
            Effect::Notice(notice) => format!("notice {notice}"),
            Effect::Halt(reason) => format!("halt {reason:?}"),
        };
        let _ = writeln!(out, "{line}");
    }
    out
}
