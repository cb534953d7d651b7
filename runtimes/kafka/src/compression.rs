//! The records of a compressed v2 record batch, decompressed within a bound: gzip, snappy,
//! lz4 and zstd, the codecs a batch's attribute bits 0-2 name.
//!
//! Each codec is the field's own well-kept crate, read through a loop that refuses the
//! first output past the caller's limit ([`DecompressError::TooLarge`]), so a small batch
//! that would decompress to gigabytes never takes more than the limit, plus at most one
//! codec block (and zstd's window, see [`ZSTD_WINDOW_LOG_MAX`]). What is not whole, valid
//! data of its codec with nothing after it is [`DecompressError::Corrupt`].
//!
//! What each codec checks for itself differs: gzip has a CRC32 of its output, lz4 and
//! zstd frames carry checksums only when their writer asked for them (Kafka's clients
//! leave them off), and snappy has none. A damaged stream of a codec without a checksum
//! can decode to other bytes; the batch's own checks (its CRC, taken over the compressed
//! bytes, and every record's lengths and the record count) are what catch that. So are
//! streams cut exactly where a codec may end: after a snappy-java block, or between two
//! gzip members, lz4 frames or zstd frames.

use std::fmt;
use std::io::{ErrorKind, Read};

/// A Kafka compression codec, as a batch's attribute bits 0-2 name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// 1: a gzip stream (RFC 1952); concatenated members are read one after another.
    Gzip,
    /// 2: snappy, with snappy-java's framing (Java clients, kafka-python) or as one raw
    /// block (librdkafka).
    Snappy,
    /// 3: LZ4 frames (the standard frame format, block checksums and content checksum
    /// checked when the frame has them).
    Lz4,
    /// 4: zstd frames.
    Zstd,
}

impl Codec {
    /// The codec of attribute bits `bits` (1..=4), None for 0 (none) or 5..=7 (no such codec).
    pub fn from_bits(bits: i16) -> Option<Codec> {
        match bits {
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// Its name as Kafka's `compression.type` spells it ("gzip", ...).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// Why compressed bytes were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// The bytes are not valid data of the codec (bad header, checksum, truncated, trailing garbage): the caller answers CORRUPT_MESSAGE.
    Corrupt(String),
    /// They decompress to more than `limit` bytes: refused before more is produced (a decompression bomb never allocates past the limit).
    TooLarge {
        /// The most decompressed bytes the caller allowed.
        limit: usize,
    },
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompressError::Corrupt(why) => write!(f, "corrupt compressed records: {why}"),
            DecompressError::TooLarge { limit } => {
                write!(f, "compressed records that decompress to more than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for DecompressError {}

/// The 8 bytes that open snappy-java's framing: `\x82SNAPPY\0`. A raw snappy block cannot
/// begin so and be valid: its length would be 10,626 bytes, more than the few bytes that
/// follow could make.
const XERIAL_MAGIC: [u8; 8] = *b"\x82SNAPPY\x00";
/// snappy-java's header: the magic, then its version and the oldest compatible version
/// (u32 big-endian each), which are not checked, as librdkafka does not.
const XERIAL_HEADER: usize = 16;
/// The magic number of an LZ4 frame (little-endian on the wire).
const LZ4_MAGIC: u32 = 0x184D_2204;
/// The largest zstd window accepted, as a power of two: 2^27 = 128 MiB, libzstd's own
/// default. A frame's header names its window (up to 2^31 bytes), and the decoder
/// allocates it on reading the header, before any output; the limit bounds what is
/// written there, so a hostile header costs address space, not memory, and only up to
/// here. It is not lower because Kafka lets a producer choose `compression.zstd.level` up
/// to 22, whose window is 2^27 when the encoder does not know the size of its input (a
/// streaming Java producer), and such a batch must be read.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;
/// How much decompressed output is taken from a decoder at a time.
const CHUNK: usize = 64 * 1024;

/// Decompresses `data` with `codec`, never holding more than `limit` decompressed bytes (plus at most one codec block).
pub fn decompress(codec: Codec, data: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    if data.is_empty() {
        return Err(corrupt(codec, "no bytes"));
    }
    let mut out = Vec::new();
    match codec {
        Codec::Gzip => read_into(codec, flate2::bufread::MultiGzDecoder::new(data), &mut out, limit)?,
        Codec::Snappy => snappy(data, &mut out, limit)?,
        Codec::Lz4 => lz4(data, &mut out, limit)?,
        Codec::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| corrupt(codec, e))?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(|e| corrupt(codec, e))?;
            read_into(codec, decoder, &mut out, limit)?;
        }
    }
    Ok(out)
}

/// A [`DecompressError::Corrupt`] that names the codec.
fn corrupt(codec: Codec, why: impl fmt::Display) -> DecompressError {
    DecompressError::Corrupt(format!("{}: {why}", codec.name()))
}

/// Appends to `out` all that `reader` decodes, up to its end, which is where the codec
/// checks its trailer, checksums and that nothing follows: refused at the first chunk
/// that takes `out` past `limit` (as `Read::take(limit + 1)` would), so at most `limit`
/// bytes are ever held.
fn read_into(codec: Codec, mut reader: impl Read, out: &mut Vec<u8>, limit: usize) -> Result<(), DecompressError> {
    let mut chunk = vec![0u8; CHUNK];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                let got = chunk.get(..n).ok_or_else(|| corrupt(codec, "the decoder overran its buffer"))?;
                reserve_within(out, got.len(), limit)?;
                out.extend_from_slice(got);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(codec, e)),
        }
    }
}

/// Makes room in `out` for `more` bytes, or refuses them if that would pass `limit`. The
/// capacity doubles as a vector's would, but never past `limit`.
fn reserve_within(out: &mut Vec<u8>, more: usize, limit: usize) -> Result<(), DecompressError> {
    let needed = out.len().checked_add(more).filter(|&n| n <= limit).ok_or(DecompressError::TooLarge { limit })?;
    if needed > out.capacity() {
        let target = out.capacity().saturating_mul(2).max(needed).min(limit);
        out.reserve_exact(target - out.len());
    }
    Ok(())
}

/// Snappy as Kafka's clients send it: snappy-java's framing when `data` opens with its
/// magic (blocks of `[u32 BE length][raw block]`, the Java clients' and kafka-python's
/// form), else one raw block (librdkafka's form). Each block's declared length is
/// checked against the limit before its output is allocated.
fn snappy(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), DecompressError> {
    if !data.starts_with(&XERIAL_MAGIC) {
        return snappy_block(data, out, limit);
    }
    let mut rest = data.get(XERIAL_HEADER..).ok_or_else(|| corrupt(Codec::Snappy, "truncated snappy-java header"))?;
    while !rest.is_empty() {
        let (len, after) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt(Codec::Snappy, "truncated snappy-java block length"))?;
        let len = usize::try_from(u32::from_be_bytes(*len)).unwrap_or(usize::MAX);
        let (block, after) = after.split_at_checked(len).ok_or_else(|| {
            corrupt(Codec::Snappy, format!("a snappy-java block of {len} bytes with {} left", after.len()))
        })?;
        snappy_block(block, out, limit)?;
        rest = after;
    }
    Ok(())
}

/// Appends one raw snappy block to `out`: its declared length first, refused past `limit`
/// before anything is allocated; then the block, which must make exactly that many bytes.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), DecompressError> {
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt(Codec::Snappy, e))?;
    reserve_within(out, len, limit)?;
    let start = out.len();
    out.resize(start + len, 0);
    let made = snap::raw::Decoder::new().decompress(block, &mut out[start..]).map_err(|e| corrupt(Codec::Snappy, e))?;
    if made != len {
        return Err(corrupt(Codec::Snappy, format!("a block made {made} bytes of the {len} it declared")));
    }
    Ok(())
}

/// LZ4 frames one after another, each decoded by lz4_flex on its own: its reader stops
/// at the end of the first frame, ignoring what follows, and takes a frame cut just
/// before a block's length for a clean end, so the frames are first found (and their
/// wholeness checked) by [`lz4_frames`].
fn lz4(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), DecompressError> {
    for frame in lz4_frames(data).map_err(|why| corrupt(Codec::Lz4, why))? {
        let mut rest = frame;
        read_into(Codec::Lz4, lz4_flex::frame::FrameDecoder::new(&mut rest), out, limit)?;
        if !rest.is_empty() {
            return Err(corrupt(Codec::Lz4, format!("{} bytes of a frame left unread", rest.len())));
        }
    }
    Ok(())
}

/// Splits `data` into whole LZ4 frames, each closed by its end mark (and content
/// checksum, when it has one), with nothing after the last. Only the layout is walked
/// here: the header checksum, version, block sizes, blocks and checksums are lz4_flex's
/// to check.
fn lz4_frames(mut data: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut frames = Vec::new();
    while !data.is_empty() {
        let start = data;
        let magic = u32::from_le_bytes(take(&mut data, "magic number")?);
        if magic != LZ4_MAGIC {
            return Err(format!("not an LZ4 frame (magic number {magic:#010x})"));
        }
        let [flags] = take(&mut data, "frame descriptor")?;
        // BD, the content size (bit 3), the dictionary id (bit 0), the header checksum.
        let descriptor = 1 + 8 * usize::from(flags & 0x08 != 0) + 4 * usize::from(flags & 0x01 != 0) + 1;
        skip(&mut data, descriptor, "frame descriptor")?;
        let block_checksum = 4 * usize::from(flags & 0x10 != 0);
        loop {
            let size = u32::from_le_bytes(take(&mut data, "block length or end mark")?);
            if size == 0 {
                break;
            }
            // The high bit marks an uncompressed block; the rest is the length.
            let len = usize::try_from(size & 0x7FFF_FFFF).unwrap_or(usize::MAX);
            skip(&mut data, len.saturating_add(block_checksum), "block")?;
        }
        if flags & 0x04 != 0 {
            skip(&mut data, 4, "content checksum")?;
        }
        frames.push(&start[..start.len() - data.len()]);
    }
    Ok(frames)
}

/// The next `N` bytes of `data`, which moves past them; `what` names them if they are not there.
fn take<const N: usize>(data: &mut &[u8], what: &str) -> Result<[u8; N], String> {
    let (head, rest) = data.split_first_chunk::<N>().ok_or_else(|| format!("truncated in a frame's {what}"))?;
    *data = rest;
    Ok(*head)
}

/// Moves `data` past `n` bytes; `what` names them if they are not all there.
fn skip(data: &mut &[u8], n: usize, what: &str) -> Result<(), String> {
    let (_, rest) = data.split_at_checked(n).ok_or_else(|| format!("truncated in a frame's {what}"))?;
    *data = rest;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    /// The records section of one batch of eight records (keys, values, headers), as
    /// kafka-python and librdkafka both encode it uncompressed; every vector below is
    /// these records compressed by a real client.
    const RECORDS: &[u8] = include_bytes!("../tests/data/compression/records");

    /// Real clients' compressed records sections: (file, codec, bytes).
    const VECTORS: &[(&str, Codec, &[u8])] = &[
        ("kafka-python.gzip", Codec::Gzip, include_bytes!("../tests/data/compression/kafka-python.gzip")),
        ("kafka-python.snappy", Codec::Snappy, include_bytes!("../tests/data/compression/kafka-python.snappy")),
        (
            "kafka-python.snappy-blocks",
            Codec::Snappy,
            include_bytes!("../tests/data/compression/kafka-python.snappy-blocks"),
        ),
        ("kafka-python.lz4", Codec::Lz4, include_bytes!("../tests/data/compression/kafka-python.lz4")),
        ("kafka-python.zstd", Codec::Zstd, include_bytes!("../tests/data/compression/kafka-python.zstd")),
        ("librdkafka.gzip", Codec::Gzip, include_bytes!("../tests/data/compression/librdkafka.gzip")),
        ("librdkafka.snappy", Codec::Snappy, include_bytes!("../tests/data/compression/librdkafka.snappy")),
        ("librdkafka.lz4", Codec::Lz4, include_bytes!("../tests/data/compression/librdkafka.lz4")),
        ("librdkafka.zstd", Codec::Zstd, include_bytes!("../tests/data/compression/librdkafka.zstd")),
        ("lz4-checksums", Codec::Lz4, include_bytes!("../tests/data/compression/lz4-checksums")),
    ];

    const MIB: usize = 1 << 20;

    fn vector(name: &str) -> &'static [u8] {
        VECTORS.iter().find(|v| v.0 == name).map(|v| v.2).unwrap()
    }

    /// `len` bytes of text-like data: compressible, but not trivially.
    fn sample(len: usize) -> Vec<u8> {
        let words: [&[u8]; 8] =
            [b"offset ", b"partition ", b"kafka ", b"leader ", b"epoch ", b"42 ", b"\x00\x01", b"zz "];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut out = Vec::with_capacity(len + 16);
        while out.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.extend_from_slice(words[(state % 8) as usize]);
            if state.is_multiple_of(5) {
                out.push(state as u8);
            }
        }
        out.truncate(len);
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn snappy_raw(data: &[u8]) -> Vec<u8> {
        snap::raw::Encoder::new().compress_vec(data).unwrap()
    }

    /// snappy-java's framing, one block per piece of `data` of `block` bytes (its own
    /// default is 32 KiB).
    fn xerial(data: &[u8], block: usize) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&1u32.to_be_bytes());
        out.extend_from_slice(&1u32.to_be_bytes());
        for piece in data.chunks(block) {
            let raw = snappy_raw(piece);
            out.extend_from_slice(&(raw.len() as u32).to_be_bytes());
            out.extend_from_slice(&raw);
        }
        out
    }

    /// An LZ4 frame of 64 KiB independent blocks, as Kafka's clients write them, with or
    /// without the checksums.
    fn lz4(data: &[u8], checksums: bool) -> Vec<u8> {
        let info = lz4_flex::frame::FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max64KB)
            .block_mode(lz4_flex::frame::BlockMode::Independent)
            .block_checksums(checksums)
            .content_checksum(checksums);
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zstd(data: &[u8], checksum: bool) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(checksum).unwrap();
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Every codec's encoder, Kafka's way, with its checks where the codec has them.
    fn encode(codec: Codec, data: &[u8]) -> Vec<u8> {
        match codec {
            Codec::Gzip => gzip(data),
            Codec::Snappy => xerial(data, 32 * 1024),
            Codec::Lz4 => lz4(data, true),
            Codec::Zstd => zstd(data, true),
        }
    }

    const CODECS: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

    fn is_corrupt(r: &Result<Vec<u8>, DecompressError>) -> bool {
        matches!(r, Err(DecompressError::Corrupt(_)))
    }

    #[test]
    fn codec_bits_and_names() {
        assert_eq!(Codec::from_bits(0), None);
        let named: Vec<_> = (1..=4).map(|b| Codec::from_bits(b).map(Codec::name)).collect();
        assert_eq!(named, [Some("gzip"), Some("snappy"), Some("lz4"), Some("zstd")]);
        for bits in [5, 6, 7, 8, -1, i16::MIN, i16::MAX] {
            assert_eq!(Codec::from_bits(bits), None, "bits {bits}");
        }
    }

    #[test]
    fn real_clients_bytes_decompress_to_their_records() {
        for &(name, codec, bytes) in VECTORS {
            assert_eq!(decompress(codec, bytes, MIB).as_deref(), Ok(RECORDS), "{name}");
        }
    }

    #[test]
    fn librdkafka_snappy_is_one_raw_block_and_the_java_clients_framed() {
        // librdkafka (rdkafka_msgset_writer.c, rd_kafka_snappy_compress_slice) writes one
        // raw block: its varint length is the records' length.
        let raw = vector("librdkafka.snappy");
        assert!(!raw.starts_with(&XERIAL_MAGIC));
        assert_eq!(snap::raw::decompress_len(raw).unwrap(), RECORDS.len());
        // kafka-python writes snappy-java's framing, version 1, compatible with 1.
        let framed = vector("kafka-python.snappy");
        assert!(framed.starts_with(&XERIAL_MAGIC));
        assert_eq!(framed[8..16], [0, 0, 0, 1, 0, 0, 0, 1]);
        // With 128-byte blocks, four of them.
        assert_eq!(
            decompress(Codec::Snappy, vector("kafka-python.snappy-blocks"), RECORDS.len()).as_deref(),
            Ok(RECORDS)
        );
    }

    #[test]
    fn a_limit_of_exactly_the_size_is_enough_and_one_byte_less_is_not() {
        for &(name, codec, bytes) in VECTORS {
            assert_eq!(decompress(codec, bytes, RECORDS.len()).as_deref(), Ok(RECORDS), "{name}");
            let less = RECORDS.len() - 1;
            assert_eq!(decompress(codec, bytes, less), Err(DecompressError::TooLarge { limit: less }), "{name}");
            assert_eq!(decompress(codec, bytes, 0), Err(DecompressError::TooLarge { limit: 0 }), "{name}");
        }
    }

    #[test]
    fn round_trips_through_each_crates_encoder() {
        for len in [1, 100, 70_000, 300_000] {
            let data = sample(len);
            let forms: Vec<(&str, Codec, Vec<u8>)> = vec![
                ("gzip", Codec::Gzip, gzip(&data)),
                ("raw snappy", Codec::Snappy, snappy_raw(&data)),
                ("snappy-java, 32 KiB blocks", Codec::Snappy, xerial(&data, 32 * 1024)),
                ("snappy-java, 1000-byte blocks", Codec::Snappy, xerial(&data, 1000)),
                ("lz4", Codec::Lz4, lz4(&data, false)),
                ("lz4 with checksums", Codec::Lz4, lz4(&data, true)),
                ("zstd", Codec::Zstd, zstd(&data, false)),
                ("zstd with checksum", Codec::Zstd, zstd(&data, true)),
            ];
            for (form, codec, bytes) in forms {
                assert_eq!(decompress(codec, &bytes, len), Ok(data.clone()), "{form} of {len} bytes");
                if len > 1 {
                    assert_eq!(decompress(codec, &bytes, len - 1), Err(DecompressError::TooLarge { limit: len - 1 }));
                }
            }
        }
    }

    #[test]
    fn several_members_or_frames_are_read_one_after_another() {
        let (a, b) = (sample(70_000), b"and a second part".to_vec());
        let whole = [a.clone(), b.clone()].concat();
        let forms = [
            (Codec::Gzip, [gzip(&a), gzip(&b)].concat()),
            (Codec::Lz4, [lz4(&a, true), lz4(&b, false)].concat()),
            (Codec::Zstd, [zstd(&a, true), zstd(&b, false)].concat()),
        ];
        for (codec, bytes) in forms {
            assert_eq!(decompress(codec, &bytes, whole.len()), Ok(whole.clone()), "{codec:?}");
        }
    }

    #[test]
    fn nothing_is_corrupt() {
        for codec in CODECS {
            let e = decompress(codec, b"", MIB).unwrap_err();
            assert!(e.to_string().contains(codec.name()), "{e}");
        }
        // A snappy-java header with no block makes no bytes: the batch's record count
        // refuses it.
        assert_eq!(decompress(Codec::Snappy, &vector("kafka-python.snappy")[..16], MIB), Ok(vec![]));
    }

    #[test]
    fn bytes_after_a_whole_stream_are_corrupt() {
        for &(name, codec, bytes) in VECTORS {
            for tail in [&b"\x00"[..], b"garbage", b"\x00\x00\x00\x00", &bytes[..4]] {
                let r = decompress(codec, &[bytes, tail].concat(), MIB);
                assert!(is_corrupt(&r), "{name} + {tail:?}: {r:?}");
                let message = r.unwrap_err().to_string();
                assert!(message.contains(codec.name()), "{message}");
            }
        }
    }

    #[test]
    fn cut_streams_are_corrupt_where_the_codec_can_tell() {
        for &(name, codec, bytes) in VECTORS {
            for len in 0..bytes.len() {
                let r = decompress(codec, &bytes[..len], MIB);
                if name.starts_with("kafka-python.snappy") {
                    // snappy-java's framing cannot tell a stream cut between two blocks
                    // from a shorter one: what it makes is then the records' beginning.
                    match r {
                        Ok(made) => {
                            assert!(made.len() < RECORDS.len() && RECORDS.starts_with(&made), "{name} at {len}")
                        }
                        Err(e) => assert!(matches!(e, DecompressError::Corrupt(_)), "{name} at {len}: {e}"),
                    }
                } else {
                    assert!(is_corrupt(&r), "{name} cut at {len}: {r:?}");
                }
            }
        }
        // lz4_flex alone would take a frame cut before a block's length for its end.
        let data = sample(200_000);
        for checksums in [false, true] {
            let bytes = lz4(&data, checksums);
            for len in 0..bytes.len() {
                let r = decompress(Codec::Lz4, &bytes[..len], MIB);
                assert!(is_corrupt(&r), "lz4 (checksums {checksums}) cut at {len} of {}: {r:?}", bytes.len());
            }
        }
        // Between two members (or frames), a cut stream is a whole shorter one.
        let (first, second) = (gzip(b"first"), gzip(b"second"));
        assert_eq!(decompress(Codec::Gzip, &[first, second][..1].concat(), MIB), Ok(b"first".to_vec()));
    }

    /// Every single-bit flip of `bytes`: the results, and the outputs that were not the
    /// records.
    fn flips(codec: Codec, bytes: &[u8]) -> Vec<(usize, Result<Vec<u8>, DecompressError>)> {
        let mut out = Vec::new();
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.to_vec();
                damaged[at] ^= 1 << bit;
                out.push((at, decompress(codec, &damaged, MIB)));
            }
        }
        out
    }

    #[test]
    fn a_flipped_bit_never_passes_for_other_bytes_where_the_codec_has_a_checksum() {
        // gzip (CRC32 and length), lz4 with block and content checksums, zstd with its
        // checksum: a flipped bit is Corrupt, or lands where the codec reads nothing that
        // matters (gzip's mtime, XFL and OS bytes, a frame's unused bits) and decodes to
        // the records all the same; never to other bytes.
        let checked = [
            ("kafka-python.gzip", Codec::Gzip, vector("kafka-python.gzip").to_vec()),
            ("librdkafka.gzip", Codec::Gzip, vector("librdkafka.gzip").to_vec()),
            ("lz4-checksums", Codec::Lz4, vector("lz4-checksums").to_vec()),
            ("lz4 with checksums", Codec::Lz4, lz4(RECORDS, true)),
            ("zstd with checksum", Codec::Zstd, zstd(RECORDS, true)),
        ];
        for (name, codec, bytes) in checked {
            let results = flips(codec, &bytes);
            let mut same = 0;
            for (at, r) in &results {
                match r {
                    Ok(made) => {
                        assert_eq!(made, RECORDS, "{name}: a flip at {at} decoded to other bytes");
                        same += 1;
                    }
                    Err(e) => assert!(matches!(e, DecompressError::Corrupt(_)), "{name} flip at {at}: {e}"),
                }
            }
            assert!(same * 10 < results.len(), "{name}: {same} of {} flips went unnoticed", results.len());
        }
    }

    #[test]
    fn a_flipped_bit_without_a_checksum_never_panics_nor_passes_the_limit() {
        // snappy has no checksum (snappy-java's framing adds none), and Kafka's clients
        // write lz4 and zstd frames without theirs: a flip may decode to other bytes,
        // which the batch's record-level checks refuse. What holds here: no panic, and
        // never more than the limit.
        for &(name, codec, bytes) in VECTORS {
            let limit = RECORDS.len() + 100;
            for at in 0..bytes.len() {
                let mut damaged = bytes.to_vec();
                damaged[at] ^= 0x10;
                match decompress(codec, &damaged, limit) {
                    Ok(made) => assert!(made.len() <= limit, "{name} at {at}"),
                    Err(DecompressError::TooLarge { limit: l }) => assert_eq!(l, limit),
                    Err(DecompressError::Corrupt(_)) => {}
                }
            }
        }
    }

    /// `bytes` decompressed with a limit of 1 MiB: TooLarge, and quickly.
    fn assert_bomb(what: &str, codec: Codec, bytes: &[u8]) {
        let started = Instant::now();
        assert_eq!(decompress(codec, bytes, MIB), Err(DecompressError::TooLarge { limit: MIB }), "{what}");
        assert!(started.elapsed() < Duration::from_secs(5), "{what} took {:?}", started.elapsed());
    }

    /// 100 MiB of zeros through a streaming encoder, 1 MiB at a time.
    fn zeros_through(mut w: impl Write) {
        let zeros = vec![0u8; MIB];
        for _ in 0..100 {
            w.write_all(&zeros).unwrap();
        }
    }

    #[test]
    fn bombs_stop_at_the_limit() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        zeros_through(&mut gz);
        let gz = gz.finish().unwrap();
        assert!(gz.len() < 200 * 1024, "{}", gz.len());
        assert_bomb("gzip", Codec::Gzip, &gz);

        let info = lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max4MB);
        let mut lz = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        zeros_through(&mut lz);
        let lz = lz.finish().unwrap();
        assert_bomb("lz4", Codec::Lz4, &lz);

        let mut zs = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        zeros_through(&mut zs);
        let zs = zs.finish().unwrap();
        assert!(zs.len() < 10 * 1024, "{}", zs.len());
        assert_bomb("zstd", Codec::Zstd, &zs);

        // snappy: one raw block of 100 MiB, and snappy-java's framing of 100 blocks of
        // 1 MiB each.
        let raw = snappy_raw(&vec![0u8; 100 * MIB]);
        assert_bomb("raw snappy", Codec::Snappy, &raw);
        let block = snappy_raw(&vec![0u8; MIB]);
        let mut framed = xerial(b"", 1);
        for _ in 0..100 {
            framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
            framed.extend_from_slice(&block);
        }
        assert_bomb("snappy-java", Codec::Snappy, &framed);
    }

    #[test]
    fn a_declared_size_is_refused_before_it_is_allocated() {
        // A raw snappy block that says it makes 4 GiB - 1: refused on its header, nothing
        // allocated (else this test would take 4 GiB).
        let mut huge = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        huge.extend_from_slice(&[0u8; 8]);
        assert_eq!(decompress(Codec::Snappy, &huge, MIB), Err(DecompressError::TooLarge { limit: MIB }));
        // The same in snappy-java's framing, after a block that fits.
        let mut framed = xerial(b"fits", 100);
        framed.extend_from_slice(&(huge.len() as u32).to_be_bytes());
        framed.extend_from_slice(&huge);
        assert_eq!(decompress(Codec::Snappy, &framed, MIB), Err(DecompressError::TooLarge { limit: MIB }));
    }

    /// A zstd frame whose window is 2^`log` bytes, of one raw block holding `x`.
    fn zstd_window_frame(log: u8) -> Vec<u8> {
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd];
        frame.push(0x00); // no single segment, no checksum, no content size, no dictionary
        frame.push((log - 10) << 3); // window descriptor: exponent, no mantissa
        frame.extend_from_slice(&[0x09, 0x00, 0x00]); // last block, raw, 1 byte
        frame.push(b'x');
        frame
    }

    #[test]
    fn a_zstd_window_past_the_cap_is_refused() {
        assert_eq!(decompress(Codec::Zstd, &zstd_window_frame(20), MIB), Ok(b"x".to_vec()));
        let most = ZSTD_WINDOW_LOG_MAX as u8;
        assert_eq!(decompress(Codec::Zstd, &zstd_window_frame(most), MIB), Ok(b"x".to_vec()));
        for log in [most + 1, 31] {
            let r = decompress(Codec::Zstd, &zstd_window_frame(log), MIB);
            assert!(is_corrupt(&r), "window 2^{log}: {r:?}");
        }
    }

    #[test]
    fn other_lz4_frames_are_refused() {
        // The legacy format (lz4_flex reads it; Kafka's clients never send it) and a
        // skippable frame.
        let mut legacy = 0x184C_2102u32.to_le_bytes().to_vec();
        legacy.extend_from_slice(&[0, 0, 0, 0]);
        let mut skippable = 0x184D_2A50u32.to_le_bytes().to_vec();
        skippable.extend_from_slice(&[0, 0, 0, 0]);
        for bytes in [legacy, skippable, [lz4(b"x", false), vec![0, 0, 0, 0]].concat()] {
            let r = decompress(Codec::Lz4, &bytes, MIB);
            assert!(is_corrupt(&r), "{bytes:?}: {r:?}");
        }
    }

    #[test]
    fn messages_name_the_codec_and_the_problem() {
        let e = decompress(Codec::Lz4, &vector("librdkafka.lz4")[..20], MIB).unwrap_err();
        assert!(e.to_string().starts_with("corrupt compressed records: lz4: truncated"), "{e}");
        let e = decompress(Codec::Zstd, b"not zstd", MIB).unwrap_err();
        assert!(e.to_string().starts_with("corrupt compressed records: zstd: "), "{e}");
        let e = decompress(Codec::Gzip, vector("librdkafka.gzip"), 10).unwrap_err();
        assert_eq!(e.to_string(), "compressed records that decompress to more than 10 bytes");
    }

    #[test]
    fn every_codec_round_trips_empty_records() {
        for codec in CODECS {
            assert_eq!(decompress(codec, &encode(codec, b""), 0), Ok(vec![]), "{codec:?}");
        }
    }
}
