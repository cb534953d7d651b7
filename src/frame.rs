//! The frame shared by the journal and the logs: `len:u32 kind:u8 crc:u32 payload`.
//!
//! The CRC32C covers a per-file salt, the length, the kind and the payload, so a frame
//! copied from another file (an older journal epoch, another log) never validates.
//! The length is trusted only if it fits in what is left of the file.

use crate::crc_range::Prefixes;

/// Bytes before a frame's payload.
pub const FRAME_HEADER_LEN: usize = 9;

/// Appends one frame to `out`.
pub fn encode_frame(out: &mut Vec<u8>, salt: u64, kind: u8, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&frame_crc(salt, len, kind, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Fills in the header of the frame `frame` holds: [`FRAME_HEADER_LEN`] bytes to
/// overwrite, then the payload, already in place. The bytes are those of
/// [`encode_frame`] of that payload.
pub(crate) fn seal_frame(frame: &mut [u8], salt: u64, kind: u8) {
    let (head, payload) = frame.split_at_mut(FRAME_HEADER_LEN);
    let len = payload.len() as u32;
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4] = kind;
    head[5..].copy_from_slice(&frame_crc(salt, len, kind, payload).to_le_bytes());
}

fn frame_crc(salt: u64, len: u32, kind: u8, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(head_crc(salt, len, kind), payload)
}

/// The checksum of what a frame's checksum covers before its payload.
fn head_crc(salt: u64, len: u32, kind: u8) -> u32 {
    let mut head = [0u8; 13];
    head[..8].copy_from_slice(&salt.to_le_bytes());
    head[8..12].copy_from_slice(&len.to_le_bytes());
    head[12] = kind;
    crc32c::crc32c(&head)
}

/// One valid frame found in a file image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Byte position of the frame's header in the file.
    pub position: u64,
    /// The kind byte: a journal record kind, or the log batch kind.
    pub kind: u8,
    /// The payload (the header's `len` bytes after it), its checksum verified.
    pub payload: &'a [u8],
}

impl Frame<'_> {
    /// The byte position just after this frame.
    pub fn end(&self) -> u64 {
        self.position + (FRAME_HEADER_LEN + self.payload.len()) as u64
    }
}

/// A byte range that holds no valid frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRange {
    /// First bad byte.
    pub start: u64,
    /// One past the last bad byte: the next valid frame, or the end of the file.
    pub end: u64,
    /// Why the frame at `start` is invalid.
    pub detail: String,
}

/// Everything a scan found, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan<'a> {
    /// Valid frames.
    pub frames: Vec<Frame<'a>>,
    /// Bad ranges followed by a valid frame: corruption, not a torn write.
    pub corrupt: Vec<BadRange>,
    /// A bad range that runs to the end of the file with nothing valid after it.
    pub torn_tail: Option<BadRange>,
}

/// Decides whether a checksum-valid frame's kind and payload are well formed.
pub type Validate<'v> = &'v dyn Fn(u8, &[u8]) -> bool;

/// Parses the frame at `pos` (which `valid` must also accept), or says why there is none.
pub fn frame_at<'a>(
    data: &'a [u8],
    pos: usize,
    salt: u64,
    max_payload: usize,
    valid: Validate<'_>,
) -> Result<Frame<'a>, String> {
    check(data, pos, salt, max_payload, valid).map_err(|why| why.to_string())
}

/// The valid frame at `pos`, if there is one: [`frame_at`] without the reason when there
/// is none. A search for the next valid frame past damage asks at every byte, and
/// builds no message for each.
pub fn valid_frame_at<'a>(
    data: &'a [u8],
    pos: usize,
    salt: u64,
    max_payload: usize,
    valid: Validate<'_>,
) -> Option<Frame<'a>> {
    check(data, pos, salt, max_payload, valid).ok()
}

/// Why no valid frame starts at a position; rendered as [`frame_at`] reports it.
enum Invalid {
    Short { rest: usize },
    TooLong { len: u32, max: usize },
    PastEnd { len: u32 },
    Checksum,
    Malformed,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Short { rest } => write!(f, "{rest} bytes left, less than a frame header"),
            Invalid::TooLong { len, max } => write!(f, "length {len} exceeds the limit {max}"),
            Invalid::PastEnd { len } => write!(f, "length {len} runs past the end of the file"),
            Invalid::Checksum => f.write_str("checksum mismatch"),
            Invalid::Malformed => f.write_str("checksum matches but the payload is malformed"),
        }
    }
}

fn check<'a>(
    data: &'a [u8],
    pos: usize,
    salt: u64,
    max_payload: usize,
    valid: Validate<'_>,
) -> Result<Frame<'a>, Invalid> {
    let rest = data.len() - pos;
    if rest < FRAME_HEADER_LEN {
        return Err(Invalid::Short { rest });
    }
    let h = &data[pos..pos + FRAME_HEADER_LEN];
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let kind = h[4];
    let crc = u32::from_le_bytes([h[5], h[6], h[7], h[8]]);
    let len_usize = len as usize;
    if len_usize > max_payload {
        return Err(Invalid::TooLong { len, max: max_payload });
    }
    if len_usize > rest - FRAME_HEADER_LEN {
        return Err(Invalid::PastEnd { len });
    }
    let payload = &data[pos + FRAME_HEADER_LEN..pos + FRAME_HEADER_LEN + len_usize];
    if frame_crc(salt, len, kind, payload) != crc {
        return Err(Invalid::Checksum);
    }
    if !valid(kind, payload) {
        return Err(Invalid::Malformed);
    }
    Ok(Frame { position: pos as u64, kind, payload })
}

/// Whether a frame at `pos` would pass its length and checksum tests, the checksum
/// taken from `prefixes` (over `data`): a search tests every byte this way, at a cost
/// that does not grow with the length the candidate announces, and checks only a match
/// in full ([`valid_frame_at`]).
pub fn checksum_matches(prefixes: &Prefixes<'_>, data: &[u8], pos: usize, salt: u64, max_payload: usize) -> bool {
    let Some(h) = data.get(pos..pos + FRAME_HEADER_LEN) else { return false };
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let (kind, crc) = (h[4], u32::from_le_bytes([h[5], h[6], h[7], h[8]]));
    let start = pos + FRAME_HEADER_LEN;
    if len as usize > max_payload || len as usize > data.len() - start {
        return false;
    }
    prefixes.append(head_crc(salt, len, kind), start, start + len as usize) == crc
}

/// Scans `data[start..]` for frames. At an invalid frame it searches the rest of the
/// image for the next valid one: if there is one, the bad range is corruption; if
/// not, it is a torn tail.
pub fn scan(data: &[u8], start: usize, salt: u64, max_payload: usize) -> Scan<'_> {
    scan_valid(data, start, salt, max_payload, &|_, _| true)
}

/// Like [`scan`], but a frame counts as valid only if `valid` also accepts its kind and
/// payload. A checksum is no proof against a crafted frame; requiring a well-formed
/// payload too keeps a forged frame inside damaged bytes from hiding real ones.
pub fn scan_valid<'a>(data: &'a [u8], start: usize, salt: u64, max_payload: usize, valid: Validate<'_>) -> Scan<'a> {
    let mut out = Scan::default();
    let mut pos = start.min(data.len());
    // Built at the first damage, for the search past it.
    let mut prefixes: Option<Prefixes<'_>> = None;
    while pos < data.len() {
        match frame_at(data, pos, salt, max_payload, valid) {
            Ok(frame) => {
                pos = frame.end() as usize;
                out.frames.push(frame);
            }
            Err(detail) => {
                let prefixes = prefixes.get_or_insert_with(|| Prefixes::new(data));
                let next = (pos + 1..data.len()).find(|&q| {
                    checksum_matches(prefixes, data, q, salt, max_payload)
                        && valid_frame_at(data, q, salt, max_payload, valid).is_some()
                });
                let bad = BadRange { start: pos as u64, end: next.unwrap_or(data.len()) as u64, detail };
                match next {
                    Some(q) => {
                        out.corrupt.push(bad);
                        pos = q;
                    }
                    None => {
                        out.torn_tail = Some(bad);
                        break;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_frames(salt: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, p) in [&b"alpha"[..], b"beta", b"gamma"].iter().enumerate() {
            encode_frame(&mut v, salt, i as u8 + 1, p);
        }
        v
    }

    /// The answer without a reason is the full one's, at every position of whole, damaged and cut
    /// images, for every reason a frame is refused.
    #[test]
    fn valid_frame_at_agrees_with_frame_at() {
        let v = three_frames(7);
        let mut images = vec![v.clone(), v[..v.len() - 3].to_vec(), vec![0; 40]];
        for i in [0, 3, 4, 6, 10, 14] {
            let mut d = v.clone();
            d[i] ^= 0x41;
            images.push(d);
        }
        let any: Validate<'_> = &|_, _| true;
        let not_kind_2: Validate<'_> = &|kind, _| kind != 2;
        let checks: [(usize, Validate<'_>); 3] = [(1 << 20, any), (4, not_kind_2), (1 << 20, not_kind_2)];
        for (n, img) in images.iter().enumerate() {
            for pos in 0..img.len() {
                for (max, valid) in checks {
                    let full = frame_at(img, pos, 7, max, valid);
                    assert_eq!(valid_frame_at(img, pos, 7, max, valid), full.ok(), "image {n} at {pos}");
                }
            }
        }
    }

    #[test]
    fn clean_image_scans_whole() {
        let v = three_frames(7);
        let s = scan(&v, 0, 7, 1 << 20);
        assert_eq!(s.frames.len(), 3);
        assert_eq!(s.frames[1].payload, b"beta");
        assert!(s.corrupt.is_empty() && s.torn_tail.is_none());
    }

    #[test]
    fn cut_last_frame_is_a_torn_tail() {
        let v = three_frames(7);
        for cut in 1..(FRAME_HEADER_LEN + 5) {
            let s = scan(&v[..v.len() - cut], 0, 7, 1 << 20);
            assert_eq!(s.frames.len(), 2, "cut {cut}");
            assert!(s.corrupt.is_empty());
            assert_eq!(s.torn_tail.as_ref().map(|t| t.start), Some(s.frames[1].end()));
        }
    }

    #[test]
    fn bad_middle_frame_is_corruption() {
        let mut v = three_frames(7);
        let second = FRAME_HEADER_LEN + 5;
        v[second + FRAME_HEADER_LEN] ^= 0x40; // flip a payload bit of "beta"
        let s = scan(&v, 0, 7, 1 << 20);
        assert_eq!(s.frames.len(), 2);
        assert_eq!(s.corrupt.len(), 1);
        assert_eq!(s.corrupt[0].start, second as u64);
        assert_eq!(s.corrupt[0].detail, "checksum mismatch");
        assert!(s.torn_tail.is_none());
    }

    #[test]
    fn frames_of_another_salt_never_validate() {
        let v = three_frames(7);
        let s = scan(&v, 0, 8, 1 << 20);
        assert!(s.frames.is_empty());
        assert_eq!(s.torn_tail.map(|t| t.start), Some(0));
    }

    #[test]
    fn garbage_length_is_not_trusted() {
        let mut v = three_frames(7);
        v[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let s = scan(&v, 0, 7, 1 << 20);
        assert_eq!(s.frames.len(), 2);
        assert_eq!(s.corrupt[0].detail, format!("length {} exceeds the limit {}", u32::MAX, 1 << 20));
    }
}
