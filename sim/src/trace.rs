//! The event trace of one run: every input and output, rendered compactly, hashed
//! (FNV-1a 64) so two runs of a seed can be compared bit for bit, and optionally kept.

use broker_core::{
    batch_bytes, BrokerError, Command, Effect, JournalRecord, OpOutput, OpResult, Reply, StorageOp, Time,
};
use std::fmt::Write as _;

/// One trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceLine {
    /// Simulated time.
    pub at: Time,
    /// What kind of event: `command`, `effect`, `execute`, `complete`, `timeout`, `start`,
    /// `crash`, `restart`, `end-chaos` or `journal-lost`.
    pub kind: &'static str,
    /// Its rendering.
    pub detail: String,
}

impl TraceLine {
    /// The line as one JSON object.
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(self.detail.len() + 48);
        let _ = write!(s, "{{\"t_us\":{},\"kind\":\"{}\",\"detail\":\"", self.at.as_micros(), self.kind);
        for c in self.detail.chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(s, "\\u{:04x}", c as u32);
                }
                c => s.push(c),
            }
        }
        s.push_str("\"}");
        s
    }
}

/// The trace of one run: every event hashed (FNV-1a), its lines kept only if asked.
#[derive(Debug)]
pub struct Trace {
    hash: u64,
    events: u64,
    keep: bool,
    lines: Vec<TraceLine>,
}

impl Trace {
    /// A trace that keeps its lines only if `keep`.
    pub fn new(keep: bool) -> Trace {
        Trace { hash: 0xcbf2_9ce4_8422_2325, events: 0, keep, lines: Vec::new() }
    }

    /// Records one event.
    pub fn record(&mut self, at: Time, kind: &'static str, detail: String) {
        self.events += 1;
        let mut h = self.hash;
        for b in at.as_micros().to_le_bytes().iter().chain(kind.as_bytes()).chain(detail.as_bytes()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.hash = h;
        if self.keep {
            self.lines.push(TraceLine { at, kind, detail });
        }
    }

    /// The hash of everything recorded.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Events recorded.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The recorded lines, in order; empty unless created with `keep`.
    pub fn into_lines(self) -> Vec<TraceLine> {
        self.lines
    }
}

fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Renders the journal records of an append.
pub fn render_journal_records(records: &[JournalRecord]) -> String {
    let mut out = String::new();
    for rec in records {
        if !out.is_empty() {
            out.push_str(", ");
        }
        match rec {
            JournalRecord::TopicCreated(m) => {
                let _ = write!(out, "TopicCreated {} {:?} x{}", m.id, m.name, m.partitions);
            }
            JournalRecord::TopicDeleted { id, remove_after } => {
                let _ = write!(out, "TopicDeleted {id} remove after {remove_after}");
            }
            JournalRecord::PartitionRemoved { id, partition } => {
                let _ = write!(out, "PartitionRemoved {id}/p{partition}");
            }
            JournalRecord::DeletionCompleted { id } => {
                let _ = write!(out, "DeletionCompleted {id}");
            }
            JournalRecord::Snapshot(s) => {
                let _ =
                    write!(out, "Snapshot live={} deleting={} ends={}", s.live.len(), s.deleting.len(), s.ends.len());
            }
            JournalRecord::LogEnd { log, end } => {
                let _ = write!(out, "LogEnd {log} {end}");
            }
        }
    }
    out
}

/// Renders a storage operation compactly (byte payloads as length and CRC).
pub fn render_op(op: &StorageOp) -> String {
    match op {
        StorageOp::AppendJournal { records, .. } => format!("AppendJournal [{}]", render_journal_records(records)),
        StorageOp::ReplaceJournal { contents, keep_old } => {
            format!("ReplaceJournal len={} crc={:08x} keep_old={keep_old}", contents.len(), crc(contents))
        }
        StorageOp::Append { log, records } => {
            let first = records.first().map_or(0, |r| r.offset);
            let mut c = 0u32;
            for r in records {
                c = crc32c::crc32c_append(c, &r.record.value);
            }
            format!("Append {log} offsets {first}+{} crc={c:08x}", records.len())
        }
        StorageOp::CreateLog { log, first_offset } => format!("CreateLog {log} from {first_offset}"),
        StorageOp::OpenLog { log, acked_end, first_offset } => {
            format!("OpenLog {log} acked {acked_end} from {first_offset}")
        }
        StorageOp::SyncLog { log } => format!("SyncLog {log}"),
        StorageOp::RemoveLog { log } => format!("RemoveLog {log}"),
        StorageOp::Read { log, offset, max_records, max_bytes } => {
            format!("Read {log} from {offset} max {max_records} records {max_bytes} bytes")
        }
        StorageOp::ReadJournal => "ReadJournal".into(),
        StorageOp::SyncJournal => "SyncJournal".into(),
        StorageOp::ListLogs => "ListLogs".into(),
    }
}

/// Renders a storage result compactly.
pub fn render_result(r: &OpResult) -> String {
    match r {
        Ok(OpOutput::Done) => "ok".into(),
        Ok(OpOutput::Journal(None)) => "no journal".into(),
        Ok(OpOutput::Journal(Some(b))) => format!("journal len={} crc={:08x}", b.len(), crc(b)),
        Ok(OpOutput::Logs(logs)) => format!("{} logs", logs.len()),
        Ok(OpOutput::BackedUp(file)) => format!("ok, old journal kept as {file}"),
        Ok(OpOutput::Opened { next_offset, damaged }) => format!("opened next={next_offset} damaged={}", damaged.len()),
        Ok(OpOutput::Records(rs)) => {
            let mut c = 0u32;
            for r in rs {
                c = crc32c::crc32c_append(c, &r.value);
            }
            format!("{} records crc={c:08x}", rs.len())
        }
        Err(e) => format!("error: {e}"),
    }
}

/// The CRC32C of records' keys and values, so a trace line covers their bytes without
/// printing them (a produce may carry megabytes).
fn records_crc<'a>(records: impl IntoIterator<Item = (Option<&'a [u8]>, &'a [u8])>) -> u32 {
    records.into_iter().fold(0, |c, (key, value)| {
        let c = crc32c::crc32c_append(c, key.unwrap_or(b"-"));
        crc32c::crc32c_append(c, value)
    })
}

/// Renders a client command, produced records as their count, size and checksum.
pub fn render_command(cmd: &Command) -> String {
    match cmd {
        Command::Produce { topic, partition, records } => {
            let c = records_crc(records.iter().map(|r| (r.key.as_deref(), &r.value[..])));
            let to = partition.map(|p| format!(" to partition {p}")).unwrap_or_default();
            format!("Produce {topic:?}{to} {} records, {} bytes, crc={c:08x}", records.len(), batch_bytes(records))
        }
        other => format!("{other:?}"),
    }
}

/// Renders a reply, fetched records as their offsets and checksum.
pub fn render_reply(reply: &Result<Reply, BrokerError>) -> String {
    match reply {
        Ok(Reply::Fetched { topic, records, high_watermark }) => {
            let c = records_crc(records.iter().map(|r| (r.key.as_deref(), &r.value[..])));
            let first = records.first().map_or(0, |r| r.offset);
            format!("Ok(Fetched {topic} {} records from {first} crc={c:08x} hw {high_watermark})", records.len())
        }
        other => format!("{other:?}"),
    }
}

/// Renders an effect (storage operations via [`render_op`]).
pub fn render_effect(e: &Effect) -> String {
    match e {
        Effect::Storage { id, op } => format!("#{} {}", id.0, render_op(op)),
        Effect::Reply { request, reply } => format!("req{} {}", request.0, render_reply(reply)),
        Effect::Notice(notice) => format!("notice: {notice}"),
        Effect::Halt(reason) => format!("HALT {reason}"),
    }
}
