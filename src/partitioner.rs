//! Kafka-compatible partitioning: keyed records by murmur2, keyless ones round-robin.

/// Kafka's murmur2 hash of `data`, exactly as its Java clients compute it
/// (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit value.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition Kafka's default partitioner picks for a keyed record.
///
/// `partitions` must be at least 1; the broker validates partition counts on create.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    (to_positive(murmur2(key)) as u32) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors from Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka_test_vectors() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            assert_eq!(murmur2(data), *expected, "murmur2({:?})", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(-1), 0x7fff_ffff);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
    }

    #[test]
    fn keyed_partition_is_positive_hash_modulo_count() {
        // -973932308 & 0x7fffffff = 1173551340; 1173551340 % 7 = 1173551340 - 7*167650191 = 3
        assert_eq!(partition_for_key(b"21", 7), 3);
        for n in 1..50u32 {
            assert!(partition_for_key(b"foobar", n) < n);
        }
    }
}
