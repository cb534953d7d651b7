//! Target `kafka_batches`: arbitrary bytes as a producer's record batches, as the
//! compressed records of one batch, and as a codec's stream; checked by
//! [`crate::batches`], decompressed by [`crate::compression`], kept and served as
//! [`crate::stored`] does.

use crate::batches::{accept, first_record_at_least, Accepted, Bounds, BATCH_HEADER, CRC_FROM, LOG_OVERHEAD};
use crate::compression::{decompress, Codec, DecompressError};
use crate::stored::{core_records, kept, serve_batch, Kept};
use bytes::Bytes;

/// The most a decompression may produce here: small, so that runs stay fast.
const LIMIT: usize = 1 << 20;

/// Target `kafka_batches`. Byte 0 chooses what the rest is: with bits 0-2 at 0 to 3, a
/// produce's records (one or more v2 batches) as a client sends them; at 4 to 7, the
/// compressed records of one batch (the codec is `bits - 3`, the record count the next
/// two bytes, big-endian), put behind a header whose CRC holds, so that the codecs and
/// the record checks behind them are reached at once. Bit 3 set also decompresses the
/// bytes after byte 0 with each codec. Bit 7 set refuses zstd, as before produce v7.
///
/// Checks: nothing panics; a decompression never yields more than its limit; what is
/// accepted is the input, batch after batch, with the record counts their headers give,
/// and the same every time (but for a max timestamp set to the records' one, with its
/// CRC); kept in the core it reads back as those batches followed by
/// continuations that point back to them; served, each batch is its bytes with only the
/// base offset and the leader epoch changed, and the time index reads its first record;
/// the time index reads any bytes without a panic.
pub fn fuzz_kafka_batches(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 0x08 != 0 {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            match decompress(codec, rest, LIMIT) {
                Ok(out) => assert!(out.len() <= LIMIT, "{codec:?} gave {} bytes past its limit", out.len()),
                Err(DecompressError::TooLarge { limit }) => assert_eq!(limit, LIMIT),
                Err(DecompressError::Corrupt(_)) => {}
            }
        }
    }
    // Stored bytes as the time index reads them: anything, never a panic.
    let _ = first_record_at_least(rest, i64::MIN);
    let input = match mode & 0x07 {
        bits @ 4..=7 => behind_a_header(rest, i16::from(bits - 3)),
        _ => Bytes::copy_from_slice(rest),
    };
    let bounds = Bounds { batch_bytes: 1 << 20, records: 1 << 12, zstd: mode & 0x80 == 0 };
    let Ok(accepted) = accept(&input, bounds) else { return };
    assert_eq!(accept(&input, bounds).as_ref(), Ok(&accepted), "accepting is a function of the bytes");
    check_accepted(&input, &accepted);
}

/// `rest` after its first two bytes (the record count) as the records of one batch with
/// codec `bits`, behind a header whose length and CRC hold.
fn behind_a_header(rest: &[u8], bits: i16) -> Bytes {
    let (count, records) = match rest {
        [a, b, records @ ..] => (i32::from(u16::from_be_bytes([*a, *b])), records),
        _ => (0, rest),
    };
    let mut batch = Vec::with_capacity(BATCH_HEADER + records.len());
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    batch.extend_from_slice(&0i32.to_be_bytes()); // length, below
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&0u32.to_be_bytes()); // CRC, below
    batch.extend_from_slice(&bits.to_be_bytes()); // attributes: the codec
    batch.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    batch.extend_from_slice(&0i64.to_be_bytes()); // base timestamp
    batch.extend_from_slice(&0i64.to_be_bytes()); // max timestamp
    batch.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    batch.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    batch.extend_from_slice(&count.to_be_bytes());
    batch.extend_from_slice(records);
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_FROM..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// What was accepted of `input` is all of it, kept and served back as it came.
fn check_accepted(input: &Bytes, accepted: &Accepted) {
    // The batches are the input, back to back, but for a max timestamp set to the
    // records' one (and the CRC with it).
    let mut from = 0;
    for batch in &accepted.batches {
        let (given, kept) = (&input[from..from + batch.bytes.len()], &batch.bytes[..]);
        let outside = |b: &[u8]| [&b[..17], &b[21..35], &b[43..]].concat();
        assert_eq!(outside(kept), outside(given), "a batch as it came");
        from += batch.bytes.len();
    }
    assert_eq!(from, input.len(), "the batches are all of the input");
    let records = core_records(accepted.batches.clone());
    let offsets: usize = accepted.batches.iter().map(|b| b.records as usize).sum();
    assert_eq!(records.len(), offsets, "one core record per offset");
    let mut at = 0;
    for batch in &accepted.batches {
        let codec = i16::from_be_bytes([batch.bytes[21], batch.bytes[22]]) & 0b111;
        assert_eq!(kept(None, &records[at].value), Kept::Batch { records: batch.records, codec });
        for back in 1..batch.records {
            let r = &records[at + back as usize];
            assert_eq!(kept(r.key.as_deref(), &r.value), Kept::Continuation { back });
        }
        let mut served = Vec::new();
        serve_batch(&mut served, 1_000 + at as u64, 7, &records[at].value);
        assert_eq!(served[..8], (1_000 + at as i64).to_be_bytes());
        assert_eq!(served[12..16], 7i32.to_be_bytes());
        assert_eq!(served[8..12], batch.bytes[8..12]);
        assert_eq!(served[16..], batch.bytes[16..], "served as it came");
        let first = first_record_at_least(&records[at].value, i64::MIN);
        assert!(matches!(first, Ok(Some((0, _)))), "the time index reads an accepted batch: {first:?}");
        at += batch.records as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed of the compressed mode: the eight records every test vector holds.
    fn seed(codec_bits: u8, file: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/compression/");
        let mut out = vec![(codec_bits + 3) | 0x08, 0, 8];
        out.extend(std::fs::read(format!("{dir}{file}")).unwrap());
        out
    }

    #[test]
    fn the_client_vectors_are_accepted_behind_a_header() {
        for (bits, file) in
            [(1, "librdkafka.gzip"), (2, "kafka-python.snappy"), (3, "librdkafka.lz4"), (4, "kafka-python.zstd")]
        {
            let data = seed(bits, file);
            let input = behind_a_header(&data[1..], i16::from(bits));
            let accepted = accept(&input, Bounds { batch_bytes: 1 << 20, records: 100, zstd: true }).unwrap();
            assert_eq!(accepted.batches[0].records, 8, "{file}");
            fuzz_kafka_batches(&data);
        }
    }

    #[test]
    fn a_wrong_record_count_is_refused_and_short_inputs_are_fine() {
        let mut data = seed(1, "librdkafka.gzip");
        data[2] = 9;
        let input = behind_a_header(&data[1..], 1);
        assert!(accept(&input, Bounds { batch_bytes: 1 << 20, records: 100, zstd: true }).is_err());
        for n in 0..8 {
            fuzz_kafka_batches(&data[..n]);
        }
    }

    /// The corpus's hand-built seeds reach past the checks they are meant to pass.
    #[test]
    fn the_built_seeds_are_what_they_say() {
        let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/kafka_batches/");
        let read = |name: &str| Bytes::from(std::fs::read(format!("{corpus}{name}")).unwrap()).slice(1..);
        let bounds = Bounds { batch_bytes: 1 << 20, records: 100, zstd: true };
        let counts = |name: &str| accept(&read(name), bounds).map(|a| a.batches.iter().map(|b| b.records).collect());
        assert_eq!(counts("plain-batch"), Ok(vec![8]));
        assert_eq!(counts("plain-two-batches"), Ok(vec![8, 8]), "two batches of a producer without idempotence");
        let idempotent = accept(&read("idempotent-batch"), bounds).unwrap();
        assert_eq!(idempotent.producer.map(|p| p.id), Some(7));
        assert!(matches!(accept(&read("transactional-batch"), bounds), Err(crate::batches::BatchError::Refused(_))));
        let zstd = read("zstd-refused-before-v7");
        let old = accept(&behind_a_header(&zstd, 4), Bounds { zstd: false, ..bounds });
        assert!(matches!(old, Err(crate::batches::BatchError::Unsupported(_))));
        assert_eq!(accept(&behind_a_header(&zstd, 4), bounds).map(|a| a.batches[0].records), Ok(8));
    }
}
