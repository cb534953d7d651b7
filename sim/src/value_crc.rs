//! CRC32C of values put together from their parts' checksums, so that the workload's
//! values (a unique label, then padding up to megabytes) are not checksummed byte by
//! byte each time the model, a checker or the trace names one. The algebra is the
//! core's ([`broker_core::crc32c_carry`]).

use broker_core::crc32c_carry as carry;

/// Below this length a value is checksummed directly: carrying a checksum past a length
/// costs about as much as checksumming some kilobytes.
pub const DIRECT_BELOW: usize = 16 << 10;

/// `crc32c_append(crc, B)` for a `B` whose own checksum and length are known.
pub fn append_known(crc: u32, b_crc: u32, b_len: usize) -> u32 {
    carry(crc, b_len as u64) ^ b_crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes of `len`, varied by `seed`.
    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_checksum_put_together_from_parts_is_the_checksum_of_the_whole() {
        for (i, (a_len, b_len)) in
            [(0, 0), (0, 1), (1, 0), (5, 3), (7, 100), (100, 4096), (13, 70_001), (3, 1 << 20)].into_iter().enumerate()
        {
            let (a, b) = (bytes(i as u64, a_len), bytes(i as u64 + 100, b_len));
            let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
            let want = crc32c::crc32c(&whole);
            assert_eq!(append_known(crc32c::crc32c(&a), crc32c::crc32c(&b), b_len), want, "{a_len} + {b_len}");
            // Appending to a running checksum, as the trace does.
            let start = crc32c::crc32c(b"x");
            assert_eq!(
                append_known(crc32c::crc32c_append(start, &a), crc32c::crc32c(&b), b_len),
                crc32c::crc32c_append(start, &whole)
            );
        }
    }
}
