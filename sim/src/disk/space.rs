//! Where the simulated disk's space goes, as Linux file systems allocate it (tmpfs
//! pages, ext4 blocks): a write allocates the blocks it touches, in order, and when the
//! disk has none left it stops there, having written the bytes before the first block
//! it could not get; growing a file with `truncate` allocates nothing (a hole, read as
//! zeros); cutting a file frees its blocks past the new end.

/// The unit of space: a file takes whole blocks. 4 KiB, a page of tmpfs and a block of
/// ext4 and XFS as made by default.
pub const BLOCK_SIZE: u64 = 4096;

/// The allocated blocks of one file: sorted, disjoint, non-adjacent ranges of block
/// numbers, `lo..hi`. A file written from its start to its end is one range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blocks {
    ranges: Vec<(u64, u64)>,
}

impl Blocks {
    /// Every block of a file `len` bytes long (what a crash leaves: the file system
    /// check that follows a crash is not modelled block by block).
    pub fn dense(len: u64) -> Blocks {
        let n = len.div_ceil(BLOCK_SIZE);
        Blocks { ranges: if n == 0 { Vec::new() } else { vec![(0, n)] } }
    }

    /// How many blocks are allocated.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|(lo, hi)| hi - lo).sum()
    }

    /// The blocks of `lo..hi` not allocated, in order, as ranges.
    pub fn gaps(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = lo;
        for &(a, b) in &self.ranges {
            if b <= at {
                continue;
            }
            if a >= hi {
                break;
            }
            if a > at {
                out.push((at, a.min(hi)));
            }
            at = at.max(b);
            if at >= hi {
                break;
            }
        }
        if at < hi {
            out.push((at, hi));
        }
        out
    }

    /// Allocates the blocks `lo..hi`.
    pub fn insert(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let (mut lo, mut hi) = (lo, hi);
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(a, b) in &self.ranges {
            if b < lo || a > hi {
                kept.push((a, b));
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        let at = kept.partition_point(|&(a, _)| a < lo);
        kept.insert(at, (lo, hi));
        self.ranges = kept;
    }

    /// Frees every block from `from` on.
    pub fn cut(&mut self, from: u64) {
        self.ranges.retain(|&(a, _)| a < from);
        if let Some(last) = self.ranges.last_mut() {
            last.1 = last.1.min(from);
        }
    }
}

/// The blocks a byte range `offset..end` touches.
pub fn block_span(offset: u64, end: u64) -> (u64, u64) {
    (offset / BLOCK_SIZE, end.div_ceil(BLOCK_SIZE))
}

/// How far a write of bytes `offset..end` to a file with `blocks` gets with `free`
/// blocks left: the end of what it writes (`end` if it all fits; `offset` if nothing
/// does), and the ranges of blocks it allocates on the way.
pub fn plan_write(blocks: &Blocks, offset: u64, end: u64, free: u64) -> (u64, Vec<(u64, u64)>) {
    if offset >= end {
        return (end, Vec::new());
    }
    let (lo, hi) = block_span(offset, end);
    let mut left = free;
    let mut taken = Vec::new();
    for (a, b) in blocks.gaps(lo, hi) {
        let n = (b - a).min(left);
        if n > 0 {
            taken.push((a, a + n));
            left -= n;
        }
        if n < b - a {
            // The write stops at the first block it could not allocate.
            return (((a + n) * BLOCK_SIZE).clamp(offset, end), taken);
        }
    }
    (end, taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = BLOCK_SIZE;

    #[test]
    fn ranges_merge_and_cut() {
        let mut b = Blocks::default();
        b.insert(4, 6);
        b.insert(0, 2);
        b.insert(2, 4);
        assert_eq!(b, Blocks::dense(6 * B));
        b.insert(10, 12);
        assert_eq!(b.count(), 8);
        assert_eq!(b.gaps(0, 14), vec![(6, 10), (12, 14)]);
        assert_eq!(b.gaps(7, 11), vec![(7, 10)]);
        assert_eq!(b.gaps(1, 5), vec![]);
        b.cut(11);
        assert_eq!(b.count(), 7);
        b.cut(3);
        assert_eq!(b, Blocks::dense(3 * B));
        assert_eq!(Blocks::dense(B + 1).count(), 2);
        assert_eq!(Blocks::dense(0).count(), 0);
    }

    #[test]
    fn a_write_that_does_not_fit_stops_at_the_first_block_it_cannot_get() {
        // A file of 8269 bytes holds 3 blocks; appending 4044 bytes with no block free
        // fills its third block (4019 bytes) and stops there, as tmpfs does.
        let file = Blocks::dense(8269);
        assert_eq!(plan_write(&file, 8269, 8269 + 4044, 0), (3 * B, vec![]));
        assert_eq!(plan_write(&file, 8269, 8269 + 4044, 1), (8269 + 4044, vec![(3, 4)]));
        // A write inside allocated blocks needs none.
        assert_eq!(plan_write(&file, 0, 8269, 0), (8269, vec![]));
        // Nothing fits: nothing is written.
        assert_eq!(plan_write(&Blocks::default(), 100, 200, 0), (100, vec![]));
        // Over a hole: the blocks before it are written, the hole's first one stops it.
        let mut holed = Blocks::dense(2 * B);
        holed.insert(3, 4);
        assert_eq!(plan_write(&holed, 0, 4 * B, 0), (2 * B, vec![]));
        assert_eq!(plan_write(&holed, 0, 5 * B, 1), (4 * B, vec![(2, 3)]));
    }
}
