//! The CRC32C of any range of a buffer, in time that does not grow with the range, from
//! checksums of the buffer's prefixes.
//!
//! A search for the next valid frame past damage tests a candidate at every byte, and
//! each announces its own length: checksumming each one directly costs the sum of the
//! lengths announced, which bytes a client chose (values made of frame headers) can
//! make the square of the region searched. With the prefixes' checksums every candidate
//! costs a few hundred bytes of checksum and one carry of a CRC past its length.
//!
//! The algebra (as zlib's `crc32_combine`): a CRC32C is linear over GF(2), so
//! `crc(A ‖ B) = carry(crc(A), len(B)) ^ crc(B)`, where carrying past `n` bytes
//! multiplies by `x^(8n)` modulo the polynomial. Hence `crc(B) = crc(A ‖ B) ^
//! carry(crc(A), len(B))`: the checksum of a range from those of two prefixes.

/// The CRC32C polynomial, bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// `a * b` modulo the polynomial, both bit-reflected (the top bit is `x^0`).
const fn multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = 0;
    while bit < 32 {
        if a & (1 << (31 - bit)) != 0 {
            product ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        bit += 1;
    }
    product
}

/// `x^(2^k)` modulo the polynomial, for `k` in `0..64`.
const POWERS: [u32; 64] = {
    let mut table = [0u32; 64];
    table[0] = 1 << 30; // x^1
    let mut k = 1;
    while k < 64 {
        table[k] = multiply(table[k - 1], table[k - 1]);
        k += 1;
    }
    table
};

/// `crc` carried past `len` bytes: `crc(A ‖ B) = carry(crc(A), len(B)) ^ crc(B)`.
pub fn carry(crc: u32, len: u64) -> u32 {
    // x^(8 len) = the product of x^(2^(k+3)) over the bits k of len.
    let mut power = 1 << 31; // x^0
    let mut left = len;
    let mut k = 3;
    while left != 0 && k < POWERS.len() {
        if left & 1 != 0 {
            power = multiply(POWERS[k], power);
        }
        left >>= 1;
        k += 1;
    }
    multiply(power, crc)
}

/// Bytes between two kept prefix checksums.
const STEP: usize = 256;

/// A buffer with the checksums of its prefixes every [`STEP`] bytes (4 bytes kept per
/// 256: built in one pass over the buffer).
pub struct Prefixes<'a> {
    data: &'a [u8],
    /// `kept[i]` is the CRC32C of `data[..i * STEP]`.
    kept: Vec<u32>,
}

impl<'a> Prefixes<'a> {
    /// Checksums `data`'s prefixes.
    pub fn new(data: &'a [u8]) -> Prefixes<'a> {
        let mut kept = Vec::with_capacity(data.len() / STEP + 1);
        let mut crc = 0;
        kept.push(crc);
        for chunk in data.chunks_exact(STEP) {
            crc = crc32c::crc32c_append(crc, chunk);
            kept.push(crc);
        }
        Prefixes { data, kept }
    }

    /// The CRC32C of `data[..end]`.
    fn prefix(&self, end: usize) -> u32 {
        let i = end / STEP;
        crc32c::crc32c_append(self.kept[i], &self.data[i * STEP..end])
    }

    /// The CRC32C of `data[start..end]` (`start <= end <= data.len()`), as
    /// `crc32c::crc32c_append(seed, &data[start..end])` would give it with `seed` 0.
    pub fn crc(&self, start: usize, end: usize) -> u32 {
        self.prefix(end) ^ carry(self.prefix(start), (end - start) as u64)
    }

    /// `crc32c::crc32c_append(seed, &data[start..end])`.
    pub fn append(&self, seed: u32, start: usize, end: usize) -> u32 {
        carry(seed, (end - start) as u64) ^ self.crc(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of `len`, varied and deterministic.
    fn bytes(len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect()
    }

    #[test]
    fn carrying_agrees_with_checksumming_the_bytes() {
        let data = bytes(5_000);
        for split in [0, 1, 7, 255, 256, 257, 1_000, 4_999, 5_000] {
            let (a, b) = data.split_at(split);
            let whole = crc32c::crc32c(&data);
            assert_eq!(carry(crc32c::crc32c(a), b.len() as u64) ^ crc32c::crc32c(b), whole, "split {split}");
        }
        assert_eq!(carry(0, 1 << 40), 0);
        assert_eq!(carry(0xDEAD_BEEF, 0), 0xDEAD_BEEF);
    }

    #[test]
    fn every_range_checksums_as_its_bytes() {
        let data = bytes(1_300);
        let p = Prefixes::new(&data);
        for start in (0..=data.len()).step_by(37).chain([255, 256, 512, 1_299, 1_300]) {
            for end in (start..=data.len()).step_by(53).chain([start, data.len()]) {
                assert_eq!(p.crc(start, end), crc32c::crc32c(&data[start..end]), "{start}..{end}");
                let seeded = crc32c::crc32c_append(0x1234_5678, &data[start..end]);
                assert_eq!(p.append(0x1234_5678, start, end), seeded, "{start}..{end}");
            }
        }
    }
}
