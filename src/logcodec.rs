//! The partition log format for byte-oriented runtimes.
//!
//! File layout: a header (`BRKL`, format version, topic id, partition, CRC32C) and
//! then one frame (see [`crate::frame`]) per append: a *batch* of records with dense
//! offsets, salted with the log id so a batch of one log or incarnation never
//! validates in another. Payload: base offset, record count, then each record's
//! optional key and value. One append is one frame, so a torn append is always a torn
//! tail, never damage followed by valid records (which would read as corruption).

use crate::bytes::{Reader, Writer};
use crate::command::{ProduceRecord, StoredRecord};
use crate::crc_range::Prefixes;
use crate::effect::AppendRecord;
use crate::error::StorageError;
use crate::frame::{encode_frame, frame_at, scan_valid, FRAME_HEADER_LEN};
use crate::ids::LogId;
use bytes::Bytes;

/// The on-disk format version of logs.
pub const LOG_FORMAT_VERSION: u16 = 1;
const MAGIC: &[u8; 4] = b"BRKL";
/// Bytes in a log header.
pub const LOG_HEADER_LEN: usize = 22;
/// The largest frame payload a log accepts, in bytes: one batch as [`batch_bytes`] counts it.
pub const MAX_LOG_FRAME: usize = 16 << 20;
const KIND_BATCH: u8 = 2;
/// The fewest bytes one record takes in a batch: its key flag and value length.
const MIN_RECORD_BYTES: u64 = 1 + 4;

/// The frame salt of a log: mixes the incarnation and the partition.
fn salt(log: LogId) -> u64 {
    log.topic.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(log.partition) ^ 0x4c4f_4753
}

/// The header every log file starts with.
pub fn encode_log_header(log: LogId) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.extend_from_slice(MAGIC);
    w.u16(LOG_FORMAT_VERSION);
    w.u64(log.topic.0);
    w.u32(log.partition);
    let crc = crc32c::crc32c(&w.buf);
    w.u32(crc);
    w.buf
}

/// The exact payload size of a batch of `records`: base offset and count, then per
/// record a key flag, the key with its length if any, and the value with its length. A
/// batch is storable only if this is at most [`MAX_LOG_FRAME`].
pub fn batch_bytes<'a>(records: impl IntoIterator<Item = &'a ProduceRecord>) -> u64 {
    12 + records
        .into_iter()
        .map(|r| 1 + r.key.as_ref().map_or(0, |k| 4 + k.len() as u64) + 4 + r.value.len() as u64)
        .sum::<u64>()
}

/// Frames `records` (dense offsets) as one batch for appending to `log`. The caller
/// keeps [`batch_bytes`] within [`MAX_LOG_FRAME`], or readers would refuse the frame.
pub fn encode_records(log: LogId, records: &[AppendRecord]) -> Vec<u8> {
    // Allocated once, at its exact size.
    let size = batch_bytes(records.iter().map(|r| &r.record)) as usize;
    let mut w = Writer { buf: Vec::with_capacity(size) };
    w.u64(records.first().map_or(0, |r| r.offset));
    w.u32(records.len() as u32);
    for r in records {
        w.opt_bytes(r.record.key.as_deref());
        w.bytes(&r.record.value);
    }
    debug_assert_eq!(w.buf.len(), size, "the batch's size was computed exactly");
    let mut out = Vec::with_capacity(w.buf.len() + FRAME_HEADER_LEN);
    encode_frame(&mut out, salt(log), KIND_BATCH, &w.buf);
    out
}

/// Whether a checksum-valid frame is a well-formed batch (checked without copying).
fn well_formed(kind: u8, payload: &[u8]) -> bool {
    if kind != KIND_BATCH {
        return false;
    }
    let mut r = Reader::new(payload, 0);
    let walk = (|| {
        let first = r.u64()?;
        let count = r.u32()?;
        if count == 0 || first.checked_add(u64::from(count)).is_none() {
            return Err(r.malformed("bad batch span".into()));
        }
        for _ in 0..count {
            match r.u8()? {
                0 => {}
                1 => r.skip_bytes()?,
                flag => return Err(r.malformed(format!("option flag {flag}"))),
            }
            r.skip_bytes()?;
        }
        r.finish()
    })();
    walk.is_ok()
}

/// A batch's base offset and record count, without decoding its records.
fn batch_span(payload: &[u8]) -> Option<(u64, u32)> {
    let mut r = Reader::new(payload, 0);
    Some((r.u64().ok()?, r.u32().ok()?))
}

/// Decodes a batch's records. Their values are slices of `payload`'s buffer, not copies.
fn decode_batch(payload: &Bytes, base: u64) -> Result<Vec<StoredRecord>, String> {
    let mut r = Reader::new(payload, base);
    let recs = (|| {
        let first = r.u64()?;
        let count = r.u32()?;
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        for i in 0..u64::from(count) {
            let Some(offset) = first.checked_add(i) else {
                return Err(r.malformed("offsets run past the end of the range".into()));
            };
            let key = r.opt_bytes()?;
            let value = payload.slice(r.bytes_span()?);
            out.push(StoredRecord { offset, key, value });
        }
        r.finish()?;
        Ok::<_, crate::error::DecodeError>(out)
    })();
    recs.map_err(|e| format!("undecodable batch: {e}"))
}

/// Where one batch sits in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The offset of the batch's first record.
    pub offset: u64,
    /// How many records the batch holds.
    pub count: u32,
    /// Byte position of its frame.
    pub position: u64,
    /// Frame length including its header.
    pub len: u32,
}

impl IndexEntry {
    /// One past the batch's last offset.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.count))
    }
}

/// A range of offsets whose records are corrupt: reads of them report corruption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hole {
    /// First lost offset.
    pub from: u64,
    /// One past the last lost offset.
    pub to: u64,
    /// Byte position of the damage.
    pub position: u64,
    /// What the scan found.
    pub detail: String,
}

/// The offsets the holes of an opened log take, as [`crate::effect::OpOutput::Opened`]
/// reports them (holes that skipped no offset are left out).
pub fn damaged_ranges(holes: &[Hole]) -> Vec<crate::effect::DamagedRange> {
    holes
        .iter()
        .filter(|h| h.from < h.to)
        .map(|h| crate::effect::DamagedRange {
            from: h.from,
            to: h.to,
            detail: format!("{} (byte {})", h.detail, h.position),
        })
        .collect()
}

/// A log file as opened: the index of its records and what the scan found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogImage {
    /// Valid batches, ascending by offset.
    pub index: Vec<IndexEntry>,
    /// Corrupt ranges followed by valid records.
    pub holes: Vec<Hole>,
    /// The length the file must be cut to (after its last whole record).
    pub valid_len: u64,
    /// Whether the header itself is missing or cut short (the file must be re-initialised).
    pub needs_header: bool,
    /// The next offset to append.
    pub next_offset: u64,
    /// With `LogOpener::keep_whole_tail`, where the bytes after the last whole frame
    /// kept begin and what they are, if the file holds any: records acknowledged past
    /// the acknowledged end may have been among them. (Below the acknowledged end they
    /// are a hole as well.)
    pub tail_cut: Option<(u64, String)>,
}

fn corrupt(log: LogId, position: u64, record_offset: Option<u64>, detail: String) -> StorageError {
    StorageError::Corrupt { file: log.file_name(), position, record_offset, record_end: None, detail }
}

/// Checks the header a log file starts with (`header` holds at least its bytes).
pub fn check_header(log: LogId, header: &[u8]) -> Result<(), StorageError> {
    let data = header.get(..LOG_HEADER_LEN).ok_or_else(|| corrupt(log, 0, None, "short header".into()))?;
    if data == &encode_log_header(log)[..] {
        return Ok(());
    }
    let detail = if data[..4] != MAGIC[..] {
        "bad magic: not a broker-core log".to_string()
    } else if crc32c::crc32c(&data[..LOG_HEADER_LEN - 4])
        != u32::from_le_bytes([data[18], data[19], data[20], data[21]])
    {
        "header checksum mismatch".to_string()
    } else {
        "header names another log or format version".to_string()
    };
    Err(corrupt(log, 0, None, detail))
}

/// Validates a whole log image: header, frames, dense offsets. With `acked` (the
/// acknowledged end the journal holds), records below it are never cut: damage among
/// them, or their absence, becomes a hole; everything from it on is cut. Without it, a
/// bad frame at the end is taken for a torn tail and cut, and bad frames followed by
/// valid ones become holes.
/// The log's records begin at offset `first`.
pub fn open_log(log: LogId, data: &[u8], first: u64, acked: Option<u64>) -> Result<LogImage, StorageError> {
    if data.len() < LOG_HEADER_LEN {
        // The header never became durable, or the file lost it.
        let mut img = LogImage { needs_header: true, next_offset: first, ..LogImage::default() };
        if let Some(a) = acked.filter(|a| *a > first) {
            let detail = format!("the file ends at byte {}, before its header", data.len());
            img.holes.push(Hole { from: first, to: a, position: 0, detail });
            img.next_offset = a;
        }
        return Ok(img);
    }
    check_header(log, data)?;
    open_log_from(log, &data[LOG_HEADER_LEN..], LOG_HEADER_LEN as u64, first, acked)
}

/// Validates the part of a log that starts at file position `base` (after the header,
/// or after frames already accepted), whose next offset is `next_offset`: the same rules
/// as [`open_log`], with positions in the result relative to the file.
pub fn open_log_from(
    log: LogId,
    rest: &[u8],
    base: u64,
    next_offset: u64,
    acked: Option<u64>,
) -> Result<LogImage, StorageError> {
    judge(LogOpener::new(log, base, next_offset, acked), rest, base)
}

/// Runs the frames and damage of `rest` (the file from position `base` on) through
/// `opener`.
fn judge(mut opener: LogOpener, rest: &[u8], base: u64) -> Result<LogImage, StorageError> {
    let s = scan_valid(rest, 0, salt(opener.log), MAX_LOG_FRAME, &well_formed);
    let mut corrupt_iter = s.corrupt.iter().peekable();
    for f in &s.frames {
        // A corrupt range always ends at the next valid frame: at most one precedes it.
        if let Some(bad) = corrupt_iter.next_if(|b| b.start < f.position) {
            opener.damage(base + bad.start, bad.detail.clone());
        }
        if !opener.frame(base + f.position, f.payload)? {
            break;
        }
    }
    let torn = s.torn_tail.map(|t| (base + t.start, t.detail));
    Ok(opener.finish(base + rest.len() as u64, torn))
}

/// Judges a log's valid frames and damaged ranges in file order, by the rules of
/// [`open_log`], so that a caller can stream a file of any size through it (the
/// executor does, a window at a time) and get the same image as the whole-file codec.
#[derive(Debug)]
pub struct LogOpener {
    log: LogId,
    acked: Option<u64>,
    img: LogImage,
    /// Damage seen since the last accepted frame: where it starts, and why.
    damage: Option<(u64, String)>,
    /// The first frame never acknowledged, and the damage right before it, if any.
    unacked_frame: Option<(u64, Option<u64>)>,
    /// Whether frames after the acknowledged end that continue its offsets are kept.
    keep_tail: bool,
    /// Why the frames after the acknowledged end stopped being kept.
    stop: Option<String>,
}

impl LogOpener {
    /// Starts judging at file position `base`, with `next_offset` the next offset due.
    pub fn new(log: LogId, base: u64, next_offset: u64, acked: Option<u64>) -> LogOpener {
        let img = LogImage { valid_len: base, next_offset, ..LogImage::default() };
        LogOpener { log, acked, img, damage: None, unacked_frame: None, keep_tail: false, stop: None }
    }

    /// Keeps the frames after the acknowledged end that follow it whole, with no damage
    /// between them and offsets continuing from it ([`crate::StorageOp::OpenLog`]'s
    /// `keep_whole_tail`); the image says why the rest is cut.
    pub fn keep_whole_tail(mut self) -> LogOpener {
        self.keep_tail = true;
        self
    }

    /// Whether damage met now ends the log whatever follows it: every offset the
    /// journal acknowledged is already in a valid frame, so the damage and everything
    /// after it are cut (a valid frame after it was never acknowledged, or does not
    /// continue the offsets whole), and the image is the same as if the damage ran to
    /// the end of the file. A reader can then skip the search for the next valid frame:
    /// a pass over every byte after the damage, in which a torn batch whose values hold
    /// frame headers (a client chooses them) puts a candidate every few bytes.
    pub fn damage_ends_log(&self) -> bool {
        self.acked.is_some_and(|a| self.img.next_offset >= a)
    }

    /// A damaged range begins at file position `start` (it ends at the next valid frame).
    pub fn damage(&mut self, start: u64, detail: String) {
        self.damage.get_or_insert((start, detail));
    }

    /// A checksum-valid, well-formed batch frame at file position `position`. Returns
    /// whether later frames still matter: false once a frame never acknowledged is met
    /// (it and everything after it are cut).
    pub fn frame(&mut self, position: u64, payload: &[u8]) -> Result<bool, StorageError> {
        let (log, img) = (self.log, &mut self.img);
        let at = position + FRAME_HEADER_LEN as u64;
        let end = at + payload.len() as u64;
        let (first, count) = match batch_span(payload) {
            Some((first, count)) if count > 0 && first.checked_add(u64::from(count)).is_some() => (first, count),
            _ => return Err(corrupt(log, position, Some(img.next_offset), "malformed batch header".into())),
        };
        let damage = self.damage.take();
        // Past the acknowledged end, whatever its offsets: a frame after the last
        // acknowledged record was never acknowledged, even one with lower offsets (left
        // by a cut that never became durable).
        // Kept tails are the exception: a whole frame that continues the offsets with
        // nothing damaged before it.
        let continues = self.keep_tail && damage.is_none() && first == img.next_offset;
        if self.acked.is_some_and(|a| first >= a || img.next_offset >= a) && !continues {
            if self.keep_tail {
                let why = match &damage {
                    Some((start, why)) => format!("byte {start}: {why}"),
                    None => format!("byte {position}: a frame of offset {first} where {} was due", img.next_offset),
                };
                self.stop = Some(why);
            }
            self.unacked_frame = Some((position, damage.map(|(start, _)| start)));
            return Ok(false);
        }
        // The frame is well formed (its caller found it with `well_formed`), so it
        // decodes: nothing is decoded here, only the index is built.
        // The records a hole skips each took some of the damaged bytes; below the
        // acknowledged end, the journal vouches that the skipped records existed.
        let fits = |start: u64| first.saturating_sub(img.next_offset) <= (position - start) / MIN_RECORD_BYTES;
        let skipped_fit = damage.as_ref().is_some_and(|(start, _)| fits(*start)) || self.acked.is_some();
        if first < img.next_offset || (first > img.next_offset && !skipped_fit) {
            return Err(corrupt(
                log,
                position,
                Some(img.next_offset),
                format!("offset {first} where {} was expected", img.next_offset),
            ));
        }
        // Damage between frames is a hole even where it skipped no offset (it is kept).
        if damage.is_some() || first > img.next_offset {
            let (start, detail) = damage.unwrap_or((position, "acknowledged records are missing".into()));
            img.holes.push(Hole { from: img.next_offset, to: first, position: start, detail });
        }
        let entry = IndexEntry { offset: first, count, position, len: (end - position) as u32 };
        img.next_offset = entry.end();
        img.valid_len = end;
        img.index.push(entry);
        Ok(true)
    }

    /// The image of a file of `file_end` bytes whose last damage, running to its end
    /// with no valid frame after it, is `torn` (start and why), if any.
    pub fn finish(self, file_end: u64, torn: Option<(u64, String)>) -> LogImage {
        let keep_tail = self.keep_tail;
        let stop = self.stop.clone().or_else(|| torn.as_ref().map(|(p, why)| format!("byte {p}: {why}")));
        let last_whole = self.img.valid_len;
        let mut img = self.finish_inner(file_end, torn);
        if keep_tail && last_whole < file_end {
            let why = stop.unwrap_or_else(|| "bytes after the last whole frame".into());
            img.tail_cut = Some((last_whole, why));
        }
        img
    }

    fn finish_inner(self, file_end: u64, torn: Option<(u64, String)>) -> LogImage {
        let mut img = self.img;
        let Some(a) = self.acked else { return img };
        if img.next_offset >= a {
            // Everything after the last acknowledged record was never acknowledged (or,
            // keeping the tail, does not continue it whole): cut.
            return img;
        }
        // Acknowledged records past the last valid frame are damaged or gone. Their bytes
        // stay (up to the first unacknowledged frame) and their offsets are never reused.
        let unacked = self.unacked_frame;
        let (position, detail) = match (unacked, torn) {
            (Some((_, Some(p))), _) => (p, "damaged acknowledged records".to_string()),
            (None, Some((p, why))) => (p, why),
            _ => (img.valid_len, format!("acknowledged records {}..{a} are missing", img.next_offset)),
        };
        img.holes.push(Hole { from: img.next_offset, to: a, position, detail });
        img.next_offset = a;
        img.valid_len = unacked.map_or(file_end, |(p, _)| p);
        img
    }
}

/// Parses the frame at `buf[rel..]` as opening a log does (checksum with the log's salt,
/// then a well-formed batch). `buf` must run to the end of the file, or at least to the
/// end of the frame its header announces, so that "runs past the end" is judged right.
pub fn batch_frame_at(log: LogId, buf: &[u8], rel: usize) -> Result<crate::frame::Frame<'_>, String> {
    crate::frame::frame_at(buf, rel, salt(log), MAX_LOG_FRAME, &well_formed)
}

/// Whether [`batch_frame_at`] finds a batch at `rel`, without the reason when not: a
/// search past damage asks at every byte.
pub fn batch_frame_ok(log: LogId, buf: &[u8], rel: usize) -> bool {
    crate::frame::valid_frame_at(buf, rel, salt(log), MAX_LOG_FRAME, &well_formed).is_some()
}

/// Whether the frame at `buf[rel..]` passes its length and checksum tests as a batch
/// frame of `log`, the checksum taken from `prefixes` (over `buf`): see
/// [`crate::frame::checksum_matches`].
pub(crate) fn batch_checksum_matches(log: LogId, prefixes: &Prefixes<'_>, buf: &[u8], rel: usize) -> bool {
    crate::frame::checksum_matches(prefixes, buf, rel, salt(log), MAX_LOG_FRAME)
}

/// A cheap test, before any checksum, of whether a batch frame could start at
/// `buf[rel..]` (`buf` as for [`batch_frame_at`]): it rejects only what
/// [`batch_frame_at`] would reject too (the wrong kind, a length past the limit or the
/// file, a record count the length cannot hold), so that searching damaged bytes for
/// the next frame costs a few comparisons per byte, not a checksum.
pub fn may_start_batch(buf: &[u8], rel: usize) -> bool {
    const MIN_PAYLOAD: usize = 12 + MIN_RECORD_BYTES as usize;
    let Some(h) = buf.get(rel..rel + FRAME_HEADER_LEN + 12) else { return false };
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    if h[4] != KIND_BATCH || !(MIN_PAYLOAD..=MAX_LOG_FRAME).contains(&len) {
        return false;
    }
    if buf.len() - rel - FRAME_HEADER_LEN < len {
        return false;
    }
    let count = u32::from_le_bytes([h[17], h[18], h[19], h[20]]) as usize;
    count > 0 && count <= (len - 12) / MIN_RECORD_BYTES as usize
}

/// Decodes the batches in `data` (read from byte `position` of `log`, starting at a
/// frame) and returns up to `max` records from offset `first` on, their values sharing
/// `data`'s buffer. Records before the first damage are returned; damage before any
/// wanted record is reported as corruption.
///
/// Frames are taken in order and the first invalid one ends the read: nothing after it
/// could be returned, so there is no search past it for the next valid frame (a pass
/// over every byte of the read after the damage).
pub fn decode_records(
    log: LogId,
    data: &Bytes,
    position: u64,
    first: u64,
    max: usize,
) -> Result<Vec<StoredRecord>, StorageError> {
    let mut out: Vec<StoredRecord> = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() && out.len() < max {
        let at = position + pos as u64;
        let f = match frame_at(data, pos, salt(log), MAX_LOG_FRAME, &well_formed) {
            Ok(f) => f,
            Err(detail) if out.is_empty() => return Err(corrupt(log, at, Some(first), detail)),
            Err(_) => break,
        };
        let expect = first + out.len() as u64;
        let start = pos + FRAME_HEADER_LEN;
        let payload = data.slice(start..start + f.payload.len());
        pos = f.end() as usize;
        let batch =
            decode_batch(&payload, at + FRAME_HEADER_LEN as u64).map_err(|d| corrupt(log, at, Some(expect), d))?;
        for rec in batch.into_iter().filter(|r| r.offset >= first) {
            if out.len() >= max {
                break;
            }
            let expect = first + out.len() as u64;
            if rec.offset != expect {
                return Err(corrupt(log, at, Some(expect), format!("found offset {}", rec.offset)));
            }
            out.push(rec);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TopicId;

    const LOG: LogId = LogId { topic: TopicId(3), partition: 1 };

    fn recs(from: u64, n: u64) -> Vec<AppendRecord> {
        (from..from + n)
            .map(|o| AppendRecord {
                offset: o,
                record: ProduceRecord {
                    key: (o % 2 == 0).then(|| vec![o as u8]),
                    value: format!("v{o}").into_bytes().into(),
                },
            })
            .collect()
    }

    /// The records of file `f` read from byte `position` on, from offset `first`, at most `max`.
    fn decode_from(f: &[u8], position: u64, first: u64, max: usize) -> Result<Vec<StoredRecord>, StorageError> {
        decode_records(LOG, &Bytes::copy_from_slice(&f[position as usize..]), position, first, max)
    }

    /// A log with `n` records, one batch per record.
    fn file(n: u64) -> Vec<u8> {
        let mut f = encode_log_header(LOG);
        for o in 0..n {
            f.extend(encode_records(LOG, &recs(o, 1)));
        }
        f
    }

    #[test]
    fn decoded_values_share_the_buffer_read_instead_of_copying_it() {
        let data = Bytes::from(file(3)[LOG_HEADER_LEN..].to_vec());
        let got = decode_records(LOG, &data, LOG_HEADER_LEN as u64, 0, 10).unwrap();
        assert_eq!(got.iter().map(|r| &r.value[..]).collect::<Vec<_>>(), [&b"v0"[..], b"v1", b"v2"]);
        let within = data.as_ptr_range();
        for r in &got {
            assert!(within.contains(&r.value.as_ptr()), "offset {}: its value was copied out of the read", r.offset);
        }
    }

    #[test]
    fn open_indexes_every_record() {
        let f = file(5);
        let img = open_log(LOG, &f, 0, None).unwrap();
        assert_eq!(img.next_offset, 5);
        assert_eq!(img.valid_len, f.len() as u64);
        assert!(img.holes.is_empty());
        let last = img.index[4];
        let got = decode_from(&f, last.position, 4, 10).unwrap();
        assert_eq!(got[0].value, &b"v4"[..]);
        assert_eq!(got[0].key, Some(vec![4]));
    }

    #[test]
    fn torn_tail_is_cut_at_the_last_whole_record() {
        let f = file(5);
        let four = file(4).len();
        let img = open_log(LOG, &f[..f.len() - 3], 0, None).unwrap();
        assert_eq!(img.next_offset, 4);
        assert_eq!(img.valid_len, four as u64);
    }

    #[test]
    fn bit_rot_in_the_middle_becomes_a_hole_not_a_truncation() {
        let mut f = file(5);
        let img = open_log(LOG, &f, 0, None).unwrap();
        let p = img.index[2].position as usize + FRAME_HEADER_LEN + 2;
        f[p] ^= 0x10;
        let img = open_log(LOG, &f, 0, None).unwrap();
        assert_eq!(img.next_offset, 5);
        assert_eq!(img.holes.len(), 1);
        assert_eq!((img.holes[0].from, img.holes[0].to), (2, 3));
        let from1 = decode_from(&f, img.index[1].position, 1, 10).unwrap();
        assert_eq!(from1.len(), 1, "only the record before the damage is served");
        let err = decode_from(&f, img.holes[0].position, 2, 10).unwrap_err();
        assert!(matches!(err, StorageError::Corrupt { record_offset: Some(2), .. }), "{err:?}");
    }

    #[test]
    fn one_append_is_one_batch_and_any_cut_of_it_is_a_torn_tail() {
        let mut f = encode_log_header(LOG);
        f.extend(encode_records(LOG, &recs(0, 3)));
        let whole = f.len();
        f.extend(encode_records(LOG, &recs(3, 4)));
        let img = open_log(LOG, &f, 0, None).unwrap();
        assert_eq!(img.index.len(), 2);
        assert_eq!((img.index[1].offset, img.index[1].count, img.next_offset), (3, 4, 7));
        let got = decode_from(&f, LOG_HEADER_LEN as u64, 2, 3).unwrap();
        assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![2, 3, 4], "reads span batches");
        for cut in 1..(f.len() - whole) {
            let img = open_log(LOG, &f[..f.len() - cut], 0, None).unwrap();
            assert!(img.holes.is_empty(), "cut {cut}");
            assert_eq!((img.next_offset, img.valid_len), (3, whole as u64), "cut {cut}");
        }
        // Zeroing any sector inside the second batch is still a tail, not corruption.
        let mut torn = f.clone();
        torn[whole + 20..whole + 40].fill(0);
        let img = open_log(LOG, &torn, 0, None).unwrap();
        assert!(img.holes.is_empty());
        assert_eq!(img.next_offset, 3);
    }

    #[test]
    fn an_offset_jump_larger_than_the_damage_is_corruption() {
        // A valid batch after damaged bytes may skip only the records those bytes could hold.
        let mut f = file(1);
        f.extend([0xee; 3 * MIN_RECORD_BYTES as usize]);
        let mut far = f.clone();
        f.extend(encode_records(LOG, &recs(4, 1)));
        let img = open_log(LOG, &f, 0, None).unwrap();
        assert_eq!((img.holes[0].from, img.holes[0].to, img.next_offset), (1, 4, 5));
        far.extend(encode_records(LOG, &recs(5, 1)));
        assert!(open_log(LOG, &far, 0, None).unwrap_err().to_string().contains("offset 5 where 1 was expected"));
        let mut max = file(1);
        max.push(0xee);
        let last = AppendRecord { offset: u64::MAX, record: ProduceRecord { key: None, value: vec![].into() } };
        max.extend(encode_records(LOG, &[last]));
        // A batch running past the last offset is malformed: never accepted, no overflow.
        let img = open_log(LOG, &max, 0, None).unwrap();
        assert_eq!((img.next_offset, img.index.len()), (1, 1), "{img:?}");
    }

    #[test]
    fn another_logs_file_is_refused() {
        let f = file(2);
        let other = LogId { topic: TopicId(4), partition: 1 };
        let err = open_log(other, &f, 0, None).unwrap_err();
        assert!(err.to_string().contains("another log"), "{err}");
    }

    #[test]
    fn short_header_needs_rewriting() {
        let f = file(0);
        assert!(open_log(LOG, &f[..5], 0, None).unwrap().needs_header);
        assert!(open_log(LOG, &[], 0, None).unwrap().needs_header);
    }

    #[test]
    fn with_an_acknowledged_end_rot_in_the_last_frame_is_a_hole_never_a_cut() {
        let mut f = file(3);
        let img = open_log(LOG, &f, 0, Some(3)).unwrap();
        let last = img.index[2];
        f[last.position as usize + FRAME_HEADER_LEN + 1] ^= 0x20;
        // Without the journal's word it looks like a torn tail; with it, it is damage.
        assert_eq!(open_log(LOG, &f, 0, None).unwrap().next_offset, 2);
        let img = open_log(LOG, &f, 0, Some(3)).unwrap();
        assert_eq!((img.next_offset, img.valid_len), (3, f.len() as u64), "kept, offsets not reused");
        assert_eq!((img.holes[0].from, img.holes[0].to, img.holes[0].position), (2, 3, last.position));
    }

    #[test]
    fn with_an_acknowledged_end_what_follows_it_is_cut_whole_or_torn() {
        let f = file(4);
        let two = file(2).len() as u64;
        // Whole frames past the end were never acknowledged (say, cached after a failed fsync).
        let img = open_log(LOG, &f, 0, Some(2)).unwrap();
        assert_eq!((img.next_offset, img.valid_len, img.holes.len()), (2, two, 0));
        let img = open_log(LOG, &f[..f.len() - 3], 0, Some(3)).unwrap();
        assert_eq!((img.next_offset, img.valid_len, img.holes.len()), (3, file(3).len() as u64, 0));
    }

    #[test]
    fn acknowledged_records_missing_from_the_file_are_a_hole() {
        let f = file(2);
        let img = open_log(LOG, &f, 0, Some(5)).unwrap();
        assert_eq!(img.next_offset, 5);
        assert_eq!((img.holes[0].from, img.holes[0].to), (2, 5));
        assert!(img.holes[0].detail.contains("missing"), "{}", img.holes[0].detail);
        // Appended after the hole, the next open still finds it (the journal vouches).
        let mut g = f.clone();
        g.extend(encode_records(LOG, &recs(5, 1)));
        let img = open_log(LOG, &g, 0, Some(6)).unwrap();
        assert_eq!((img.next_offset, img.holes[0].from, img.holes[0].to), (6, 2, 5));
        let torn_header = open_log(LOG, &f[..5], 0, Some(2)).unwrap();
        assert!(torn_header.needs_header);
        assert_eq!((torn_header.next_offset, torn_header.holes[0].to), (2, 2));
    }

    /// Opens `f` keeping whole tails (durability log-sync).
    fn open_keeping(f: &[u8], acked: u64) -> LogImage {
        let opener = LogOpener::new(LOG, LOG_HEADER_LEN as u64, 0, Some(acked)).keep_whole_tail();
        judge(opener, &f[LOG_HEADER_LEN..], LOG_HEADER_LEN as u64).unwrap()
    }

    #[test]
    fn keeping_whole_tails_keeps_what_continues_the_acknowledged_end() {
        let f = file(4);
        let img = open_keeping(&f, 2);
        assert_eq!((img.next_offset, img.valid_len, img.tail_cut.clone()), (4, f.len() as u64, None));
        // The journaled durability cuts the same frames.
        assert_eq!(open_log(LOG, &f, 0, Some(2)).unwrap().next_offset, 2);
    }

    #[test]
    fn keeping_whole_tails_stops_at_damage_and_says_where() {
        let mut f = file(4);
        let third = file(3).len();
        f[third - 2] ^= 0x10; // the frame of offset 2, past the acknowledged end
        let img = open_keeping(&f, 1);
        assert_eq!((img.next_offset, img.valid_len), (2, file(2).len() as u64));
        let (at, why) = img.tail_cut.expect("the damaged tail is reported");
        assert_eq!(at, file(2).len() as u64);
        assert!(why.contains("checksum"), "{why}");
        // A frame that does not continue the offsets ends what is kept too.
        let mut g = file(3);
        g.extend(encode_records(LOG, &recs(1, 1)));
        let img = open_keeping(&g, 2);
        assert_eq!(img.next_offset, 3);
        assert!(img.tail_cut.expect("reported").1.contains("offset 1 where 3 was due"));
    }

    #[test]
    fn keeping_whole_tails_reports_damage_below_the_end_that_reaches_past_it() {
        // Rot in the last acknowledged frame, with a frame past the end after it: the
        // hole covers what the journal vouches for, and what follows may have been
        // acknowledged too.
        let mut f = file(3);
        let two = file(2).len();
        f[two - 2] ^= 0x10; // offset 1's frame
        let img = open_keeping(&f, 2);
        assert_eq!((img.next_offset, img.holes.len()), (2, 1));
        assert_eq!(img.tail_cut.map(|(at, _)| at), Some(file(1).len() as u64));
    }
}
