//! CRC32C of values put together from their parts' checksums, so that the workload's
//! values (a unique label, then padding up to megabytes) are not checksummed byte by
//! byte each time the model, a checker or the trace names one.
//!
//! A CRC32C is linear: the checksum of `A ‖ B` is the checksum of `A` carried past
//! `len(B)` zero bytes (a fixed 32×32 matrix over GF(2), [`Shift`]) xor the checksum of
//! `B` (zlib's `crc32_combine`). The crate's `crc32c_combine` rebuilds that matrix at
//! every call; here the matrix of a length is built once and kept, as a batch's values
//! share their length and their padding.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// Carrying a CRC32C past a fixed number of appended bytes: `crc(A ‖ B)` is
/// `Shift::of(len(B)).apply(crc(A)) ^ crc(B)`.
#[derive(Clone, Copy, Debug)]
pub struct Shift {
    /// Column `i` is the image of bit `i`.
    columns: [u32; 32],
}

impl Shift {
    /// The identity: past no bytes.
    fn identity() -> Shift {
        let mut columns = [0u32; 32];
        for (i, c) in columns.iter_mut().enumerate() {
            *c = 1 << i;
        }
        Shift { columns }
    }

    /// Past `len` bytes.
    pub fn of(len: usize) -> Shift {
        // One zero bit: the reflected polynomial for bit 0, a shift for the others.
        let mut bit = [0u32; 32];
        bit[0] = 0x82F6_3B78;
        for (i, c) in bit.iter_mut().enumerate().skip(1) {
            *c = 1 << (i - 1);
        }
        let mut power = Shift { columns: bit };
        for _ in 0..3 {
            power = power.then(power); // 2, 4, then 8 bits: one byte
        }
        let mut result = Shift::identity();
        let mut left = len;
        while left > 0 {
            if left & 1 == 1 {
                result = result.then(power);
            }
            left >>= 1;
            if left > 0 {
                power = power.then(power);
            }
        }
        result
    }

    /// `crc` carried past this shift's bytes.
    pub fn apply(&self, crc: u32) -> u32 {
        let mut out = 0;
        let mut bits = crc;
        let mut i = 0;
        while bits != 0 {
            if bits & 1 == 1 {
                out ^= self.columns[i];
            }
            bits >>= 1;
            i += 1;
        }
        out
    }

    /// This shift, then `next`.
    fn then(self, next: Shift) -> Shift {
        let mut columns = [0u32; 32];
        for (c, mine) in columns.iter_mut().zip(self.columns) {
            *c = next.apply(mine);
        }
        Shift { columns }
    }
}

thread_local! {
    /// Shifts by length. Bounded: cleared when it grows past `SHIFTS_KEPT`.
    static SHIFTS: RefCell<BTreeMap<usize, Shift>> = const { RefCell::new(BTreeMap::new()) };
}

const SHIFTS_KEPT: usize = 4096;

/// Below this length a value is checksummed directly: building a shift costs about as
/// much as checksumming some tens of kilobytes.
pub const DIRECT_BELOW: usize = 16 << 10;

/// The shift past `len` bytes, kept for the next value of that length.
pub fn shift(len: usize) -> Shift {
    SHIFTS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some(s) = kept.get(&len) {
            return *s;
        }
        if kept.len() >= SHIFTS_KEPT {
            kept.clear();
        }
        *kept.entry(len).or_insert_with(|| Shift::of(len))
    })
}

/// `crc32c_append(crc, B)` for a `B` whose own checksum and length are known.
pub fn append_known(crc: u32, b_crc: u32, b_len: usize) -> u32 {
    if b_len == 0 {
        return crc;
    }
    shift(b_len).apply(crc) ^ b_crc
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
            assert_eq!(Shift::of(b_len).apply(crc32c::crc32c(&a)) ^ crc32c::crc32c(&b), want);
            assert_eq!(crc32c::crc32c_combine(crc32c::crc32c(&a), crc32c::crc32c(&b), b_len), want);
            // Appending to a running checksum, as the trace does.
            let start = crc32c::crc32c(b"x");
            assert_eq!(
                append_known(crc32c::crc32c_append(start, &a), crc32c::crc32c(&b), b_len),
                crc32c::crc32c_append(start, &whole)
            );
        }
    }

    #[test]
    fn a_kept_shift_is_the_one_built_afresh() {
        for len in [1usize, 2, 3, 1000, 16 << 10, (1 << 20) + 7] {
            let c = crc32c::crc32c(&bytes(len as u64, 64));
            assert_eq!(shift(len).apply(c), Shift::of(len).apply(c));
            assert_eq!(shift(len).apply(c), Shift::of(len).apply(c), "the second time, from the cache");
        }
    }
}
