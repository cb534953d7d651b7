//! The event trace of one run: every input and output, rendered compactly, hashed
//! (FNV-1a 64) so two runs of a seed can be compared bit for bit, and optionally kept.

use crate::model::ValueId;
use crate::workload::Issue;
use broker_core::{
    batch_bytes, BrokerError, Command, CommittedOffset, Effect, JournalRecord, OpOutput, OpResult, Reply, StorageOp,
    Time,
};
use std::fmt::{self, Display, Formatter, Write as _};

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

    /// Records one event. Its detail is formatted straight into the hash, and into a
    /// string only when lines are kept: most runs keep none.
    pub fn record(&mut self, at: Time, kind: &'static str, detail: fmt::Arguments<'_>) {
        self.events += 1;
        let mut h = Fnv(self.hash);
        h.bytes(&at.as_micros().to_le_bytes());
        h.bytes(kind.as_bytes());
        if self.keep {
            let detail = fmt::format(detail);
            h.bytes(detail.as_bytes());
            self.lines.push(TraceLine { at, kind, detail });
        } else {
            let _ = h.write_fmt(detail);
        }
        self.hash = h.0;
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

/// An FNV-1a 64 hash of the bytes written to it, from the given state.
struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

impl fmt::Write for Fnv {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The journal records of an append, rendered.
pub struct JournalRecordsText<'a>(pub &'a [JournalRecord]);

impl Display for JournalRecordsText<'_> {
    fn fmt(&self, out: &mut Formatter<'_>) -> fmt::Result {
        for (i, rec) in self.0.iter().enumerate() {
            if i > 0 {
                out.write_str(", ")?;
            }
            match rec {
                JournalRecord::TopicCreated(m) => write!(out, "TopicCreated {} {:?} x{}", m.id, m.name, m.partitions)?,
                JournalRecord::TopicDeleted { id, remove_after } => {
                    write!(out, "TopicDeleted {id} remove after {remove_after}")?
                }
                JournalRecord::PartitionRemoved { id, partition } => write!(out, "PartitionRemoved {id}/p{partition}")?,
                JournalRecord::DeletionCompleted { id } => write!(out, "DeletionCompleted {id}")?,
                JournalRecord::Snapshot(s) => {
                    write!(out, "Snapshot live={} deleting={} ends={}", s.live.len(), s.deleting.len(), s.ends.len())?
                }
                JournalRecord::LogEnd { log, end } => write!(out, "LogEnd {log} {end}")?,
                JournalRecord::OffsetsCommitted { group, topic, offsets } => {
                    write!(out, "OffsetsCommitted {group:?} {topic}")?;
                    for o in offsets {
                        write!(out, " p{}@{}", o.partition, o.offset)?;
                    }
                }
                JournalRecord::GroupDeleted { group } => write!(out, "GroupDeleted {group:?}")?,
                JournalRecord::ProducerIdAllocated { id } => write!(out, "ProducerIdAllocated {id}")?,
                JournalRecord::ProducerAppended { log, batch, records, first_offset } => write!(
                    out,
                    "ProducerAppended {log} {}/{} seq {}+{records} at {first_offset}",
                    batch.producer_id, batch.epoch, batch.first_sequence
                )?,
            }
        }
        Ok(())
    }
}

/// A storage operation, rendered compactly (byte payloads as length and CRC).
pub struct OpText<'a>(pub &'a StorageOp);

impl Display for OpText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            StorageOp::AppendJournal { records, .. } => write!(f, "AppendJournal [{}]", JournalRecordsText(records)),
            StorageOp::ReplaceJournal { contents, keep_old } => {
                write!(f, "ReplaceJournal len={} crc={:08x} keep_old={keep_old}", contents.len(), crc(contents))
            }
            StorageOp::Append { log, records } => {
                let first = records.first().map_or(0, |r| r.offset);
                let mut c = 0u32;
                for r in records {
                    c = crc32c::crc32c_append(c, &r.record.value);
                }
                write!(f, "Append {log} offsets {first}+{} crc={c:08x}", records.len())
            }
            StorageOp::CreateLog { log, first_offset, keep_whole_tail } => {
                write!(f, "CreateLog {log} from {first_offset}")?;
                if *keep_whole_tail {
                    write!(f, " keep-tail")?;
                }
                Ok(())
            }
            StorageOp::OpenLog { log, acked_end, first_offset, keep_whole_tail } => {
                write!(f, "OpenLog {log} acked {acked_end} from {first_offset}")?;
                if *keep_whole_tail {
                    write!(f, " keep-tail")?;
                }
                Ok(())
            }
            StorageOp::SyncLog { log } => write!(f, "SyncLog {log}"),
            StorageOp::RemoveLog { log } => write!(f, "RemoveLog {log}"),
            StorageOp::Read { log, offset, max_records, max_bytes } => {
                write!(f, "Read {log} from {offset} max {max_records} records {max_bytes} bytes")
            }
            StorageOp::ReadJournal => f.write_str("ReadJournal"),
            StorageOp::SyncJournal => f.write_str("SyncJournal"),
            StorageOp::ListLogs => f.write_str("ListLogs"),
        }
    }
}

/// A storage result, rendered compactly.
pub struct ResultText<'a>(pub &'a OpResult);

impl Display for ResultText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(OpOutput::Done) => f.write_str("ok"),
            Ok(OpOutput::Journal(None)) => f.write_str("no journal"),
            Ok(OpOutput::Journal(Some(b))) => write!(f, "journal len={} crc={:08x}", b.len(), crc(b)),
            Ok(OpOutput::Logs(logs)) => write!(f, "{} logs", logs.len()),
            Ok(OpOutput::BackedUp(file)) => write!(f, "ok, old journal kept as {file}"),
            Ok(OpOutput::Opened { next_offset, damaged, tail_cut }) => {
                write!(f, "opened next={next_offset} damaged={}", damaged.len())?;
                match tail_cut {
                    Some(cut) => write!(f, " cut={}@{}", cut.bytes, cut.position),
                    None => Ok(()),
                }
            }
            Ok(OpOutput::Records(rs)) => {
                let mut c = 0u32;
                for r in rs {
                    c = crc32c::crc32c_append(c, &r.value);
                }
                write!(f, "{} records crc={c:08x}", rs.len())
            }
            Err(e) => write!(f, "error: {e}"),
        }
    }
}

/// The checksum a trace line gives records: the CRC32C of each record's key (`-` for
/// none) followed by its value's own CRC32C (4 bytes, little-endian). It names their
/// bytes without printing them, and without reading a value again where its checksum is
/// known (a produce may carry megabytes). A fetch of the records a produce carried shows
/// the produce's.
fn records_crc<'a>(records: impl IntoIterator<Item = (Option<&'a [u8]>, u32)>) -> u32 {
    records.into_iter().fold(0, |c, (key, value_crc)| {
        let c = crc32c::crc32c_append(c, key.unwrap_or(b"-"));
        crc32c::crc32c_append(c, &value_crc.to_le_bytes())
    })
}

/// A client command, rendered; produced records as their count, size and checksum.
pub struct CommandText<'a>(pub &'a Command);

impl Display for CommandText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        command(f, self.0, &[])
    }
}

/// A command as the workload issued it, rendered as [`CommandText`] renders it; the ids
/// of its values spare checksumming long values again.
pub struct IssueText<'a>(pub &'a Issue);

impl Display for IssueText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        command(f, &self.0.command, &self.0.values)
    }
}

/// Renders `cmd`, whose produced values have the ids `values` (or none known).
fn command(f: &mut Formatter<'_>, cmd: &Command, values: &[ValueId]) -> fmt::Result {
    match cmd {
        Command::Produce { topic, partition, records } => {
            let c = if values.len() == records.len() {
                records_crc(records.iter().zip(values).map(|(r, id)| (r.key.as_deref(), id.len_and_crc().1)))
            } else {
                records_crc(records.iter().map(|r| (r.key.as_deref(), crc(&r.value))))
            };
            write!(f, "Produce {topic:?}")?;
            if let Some(p) = partition {
                write!(f, " to partition {p}")?;
            }
            write!(f, " {} records, {} bytes, crc={c:08x}", records.len(), batch_bytes(records))
        }
        Command::ProduceIdempotent { topic, partition, producer, records } => {
            let c = if values.len() == records.len() {
                records_crc(records.iter().zip(values).map(|(r, id)| (r.key.as_deref(), id.len_and_crc().1)))
            } else {
                records_crc(records.iter().map(|r| (r.key.as_deref(), crc(&r.value))))
            };
            write!(
                f,
                "ProduceIdempotent {topic:?} to partition {partition} producer {}/{} seq {} {} records, {} bytes, \
                 crc={c:08x}",
                producer.producer_id,
                producer.epoch,
                producer.first_sequence,
                records.len(),
                batch_bytes(records)
            )
        }
        Command::CommitOffsets { group, topic, incarnation, offsets } => {
            write!(f, "CommitOffsets {} {topic:?}", GroupText(group))?;
            if let Some(id) = incarnation {
                write!(f, " of {id}")?;
            }
            positions(f, offsets)
        }
        Command::FetchOffsets { group, topic } => write!(f, "FetchOffsets {} {topic:?}", GroupText(group)),
        Command::DeleteGroup { group } => write!(f, "DeleteGroup {}", GroupText(group)),
        other => write!(f, "{other:?}"),
    }
}

/// A group id, rendered: a long one as its length.
struct GroupText<'a>(&'a str);

impl Display for GroupText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0.len() {
            0..=32 => write!(f, "{:?}", self.0),
            n => write!(f, "({n}-byte group)"),
        }
    }
}

/// Committed positions, rendered: each partition and offset, its metadata as length and checksum.
fn positions(f: &mut Formatter<'_>, offsets: &[CommittedOffset]) -> fmt::Result {
    if offsets.is_empty() {
        return f.write_str(" (none)");
    }
    for o in offsets {
        write!(f, " p{}@{}", o.partition, o.offset)?;
        if !o.metadata.is_empty() {
            write!(f, "+{}B:{:08x}", o.metadata.len(), crc(o.metadata.as_bytes()))?;
        }
    }
    Ok(())
}

/// A reply, rendered; fetched records as their offsets and checksum.
pub struct ReplyText<'a>(pub &'a Result<Reply, BrokerError>);

impl Display for ReplyText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(Reply::Fetched { topic, records, high_watermark }) => {
                let c = records_crc(records.iter().map(|r| (r.key.as_deref(), crc(&r.value))));
                let first = records.first().map_or(0, |r| r.offset);
                write!(f, "Ok(Fetched {topic} {} records from {first} crc={c:08x} hw {high_watermark})", records.len())
            }
            Ok(Reply::Offsets { topic, offsets }) => {
                write!(f, "Ok(Offsets {topic}")?;
                positions(f, offsets)?;
                f.write_str(")")
            }
            other => write!(f, "{other:?}"),
        }
    }
}

/// An effect, rendered (storage operations as [`OpText`]).
pub struct EffectText<'a>(pub &'a Effect);

impl Display for EffectText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Effect::Storage { id, op } => write!(f, "#{} {}", id.0, OpText(op)),
            Effect::Reply { request, reply } => write!(f, "req{} {}", request.0, ReplyText(reply)),
            Effect::Notice(notice) => write!(f, "notice: {notice}"),
            Effect::Halt(reason) => write!(f, "HALT {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_core::Bytes;

    /// FNV-1a 64 of `bytes`, written out here as the algorithm's definition.
    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
    }

    #[test]
    fn the_hash_is_fnv_of_time_kind_and_detail_in_order_kept_or_not() {
        let mut kept = Trace::new(true);
        let mut plain = Trace::new(false);
        let mut stream = Vec::new();
        for (i, kind) in ["command", "effect", "timeout"].into_iter().enumerate() {
            let at = Time::from_millis(i as u64).plus_micros(7);
            kept.record(at, kind, format_args!("req{i} {}", "x".repeat(i)));
            plain.record(at, kind, format_args!("req{i} {}", "x".repeat(i)));
            stream.extend_from_slice(&at.as_micros().to_le_bytes());
            stream.extend_from_slice(kind.as_bytes());
            stream.extend_from_slice(format!("req{i} {}", "x".repeat(i)).as_bytes());
        }
        assert_eq!(plain.hash(), fnv(&stream));
        assert_eq!(kept.hash(), plain.hash());
        assert_eq!(plain.events(), 3);
        let lines = kept.into_lines();
        assert_eq!(lines[2].detail, "req2 xx");
        assert!(plain.into_lines().is_empty());
    }

    #[test]
    fn a_produce_shows_the_checksum_of_its_fetch_with_or_without_value_ids() {
        let records = vec![
            broker_core::ProduceRecord { key: Some(b"k1".to_vec()), value: Bytes::from_static(b"v1-abc") },
            broker_core::ProduceRecord { key: None, value: Bytes::from(vec![b'.'; 20_000]) },
        ];
        let produce = Command::Produce { topic: "t".into(), partition: None, records: records.clone() };
        let with_ids = IssueText(&Issue::new(produce.clone())).to_string();
        assert_eq!(with_ids, CommandText(&produce).to_string());
        let fetched = records
            .into_iter()
            .zip(7..)
            .map(|(r, offset)| broker_core::StoredRecord { offset, key: r.key, value: r.value })
            .collect();
        let reply = Ok(Reply::Fetched { topic: broker_core::TopicId(1), records: fetched, high_watermark: 9 });
        let crc_of = |line: &str| line.split("crc=").nth(1).map(|c| c[..8].to_string());
        assert_eq!(crc_of(&ReplyText(&reply).to_string()), crc_of(&with_ids));
        // And it changes with any value's bytes.
        let other = Command::Produce {
            topic: "t".into(),
            partition: None,
            records: vec![
                broker_core::ProduceRecord { key: Some(b"k1".to_vec()), value: Bytes::from_static(b"v1-abd") },
                broker_core::ProduceRecord { key: None, value: Bytes::from(vec![b'.'; 20_000]) },
            ],
        };
        assert_ne!(crc_of(&CommandText(&other).to_string()), crc_of(&with_ids));
    }
}
