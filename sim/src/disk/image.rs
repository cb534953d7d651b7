//! A file's bytes on the simulated disk, shared copy-on-write in fixed-size chunks.
//!
//! Every file has a durable and a live image, and the disk often makes one equal to the
//! other: a crash restarts every live image from its durable one, and cloning the disk
//! (a snapshot) copies both. With the bytes held in chunks behind reference counts,
//! such a copy shares every chunk and costs one pointer per chunk; a later write
//! copies only the chunks it touches, and only while they are still shared.
//!
//! An image behaves exactly as a `Vec<u8>` holding the same bytes would: writes past
//! the end grow it with zeros, and equality, hashing by the disk and `Debug` output
//! look at the bytes alone, never at how they are chunked or shared.

use std::fmt;
use std::sync::Arc;

/// How many bytes a chunk holds. Small enough that the first write to a shared chunk
/// copies little, large enough that a file of a few megabytes has few chunks to share.
pub const CHUNK: usize = 64 << 10;

/// The bytes of one file image. See the [module docs](self).
///
/// Invariant: every chunk but the last holds exactly [`CHUNK`] bytes, the last holds
/// `1..=CHUNK`, and an empty image has no chunk; so byte `i` is byte `i % CHUNK` of
/// chunk `i / CHUNK`. Chunks are `Arc` (not `Rc`) so that a disk can move to the thread
/// that runs its seed.
#[derive(Clone, Default)]
pub struct Image {
    chunks: Vec<Arc<Vec<u8>>>,
    len: u64,
}

impl Image {
    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Writes `data` at `offset`, growing the image with zeros up to `offset` if it is
    /// shorter, then with `data` itself (so an empty write past the end still grows
    /// it, as `Vec::resize` then `copy_from_slice` would).
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if offset > self.len {
            self.set_len(offset);
        }
        let inside = (self.len - offset).min(data.len() as u64) as usize;
        let mut at = offset as usize;
        let mut rest = &data[..inside];
        while !rest.is_empty() {
            let (i, o) = (at / CHUNK, at % CHUNK);
            let n = (CHUNK - o).min(rest.len());
            Arc::make_mut(&mut self.chunks[i])[o..o + n].copy_from_slice(&rest[..n]);
            at += n;
            rest = &rest[n..];
        }
        self.append(&data[inside..]);
    }

    /// Appends `data`: into the last chunk while it has room, then in new chunks.
    fn append(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let mut rest = data;
        if let Some(last) = self.chunks.last_mut() {
            if last.len() < CHUNK {
                let n = (CHUNK - last.len()).min(rest.len());
                with_room(last, n).extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
        }
        for piece in rest.chunks(CHUNK) {
            self.chunks.push(Arc::new(piece.to_vec()));
        }
        self.len += data.len() as u64;
    }

    /// Cuts the image to `len` bytes, or grows it to `len` with zeros. Cutting a shared
    /// chunk copies only the part that stays.
    pub fn set_len(&mut self, len: u64) {
        let new = len as usize;
        let old = self.len as usize;
        if new < old {
            let keep = new.div_ceil(CHUNK);
            self.chunks.truncate(keep);
            if let Some(last) = self.chunks.last_mut() {
                let tail = new - (keep - 1) * CHUNK;
                if last.len() > tail {
                    match Arc::get_mut(last) {
                        Some(v) => v.truncate(tail),
                        None => *last = Arc::new(last[..tail].to_vec()),
                    }
                }
            }
        } else if new > old {
            // Fill the last chunk, then add chunks of zeros.
            if let Some(last) = self.chunks.last_mut() {
                let have = last.len();
                if have < CHUNK {
                    let n = (CHUNK - have).min(new - old);
                    with_room(last, n).resize(have + n, 0);
                }
            }
            let mut have = self.chunks.len() * CHUNK;
            while have < new {
                let n = (new - have).min(CHUNK);
                self.chunks.push(Arc::new(vec![0; n]));
                have += n;
            }
        }
        self.len = len;
    }

    /// The bytes of `offset..offset + len`, fewer (possibly none) where the range runs
    /// past the end of the image.
    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let start = offset.min(self.len) as usize;
        let end = offset.saturating_add(len as u64).min(self.len) as usize;
        let mut out = Vec::with_capacity(end - start);
        let mut at = start;
        while at < end {
            let (i, o) = (at / CHUNK, at % CHUNK);
            let n = (CHUNK - o).min(end - at);
            out.extend_from_slice(&self.chunks[i][o..o + n]);
            at += n;
        }
        out
    }

    /// Every byte, in one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len as usize)
    }

    /// The bytes in order, as the slices the chunks hold (none for an empty image).
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks.iter().map(|c| c.as_slice())
    }
}

/// Chunk `c`, unshared, with capacity for `n` more bytes (which must fit in a chunk):
/// capacity grows as a vector's does, by doubling, but never past [`CHUNK`], and a
/// shared chunk is copied once, straight into a vector of that capacity.
fn with_room(c: &mut Arc<Vec<u8>>, n: usize) -> &mut Vec<u8> {
    let need = c.len() + n;
    if Arc::get_mut(c).is_none() {
        let mut v = Vec::with_capacity(need.max(c.capacity()).min(CHUNK));
        v.extend_from_slice(c);
        *c = Arc::new(v);
    }
    // Unshared now: no copy.
    let v = Arc::make_mut(c);
    if v.capacity() < need {
        let want = (v.capacity() * 2).min(CHUNK).max(need);
        v.reserve_exact(want - v.len());
    }
    v
}

impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        // Chunk boundaries depend on the length alone, so equal images chunk alike.
        self.len == other.len
            && self.chunks.iter().zip(&other.chunks).all(|(a, b)| Arc::ptr_eq(a, b) || a.as_slice() == b.as_slice())
    }
}

impl Eq for Image {}

impl From<&[u8]> for Image {
    fn from(bytes: &[u8]) -> Image {
        let mut img = Image::default();
        img.write(0, bytes);
        img
    }
}

/// As a `Vec<u8>` of the same bytes prints, so the disk's `Debug` output is unchanged.
impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.slices().flatten()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    const C: u64 = CHUNK as u64;

    fn pattern(len: usize, salt: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) | 1).collect()
    }

    /// The invariant of [`Image`]: full chunks but the last, no empty chunk.
    fn check_shape(img: &Image) {
        let total: usize = img.chunks.iter().map(|c| c.len()).sum();
        assert_eq!(total as u64, img.len);
        assert_eq!(img.chunks.len(), (img.len as usize).div_ceil(CHUNK));
        if let Some((last, full)) = img.chunks.split_last() {
            assert!(full.iter().all(|c| c.len() == CHUNK));
            assert!((1..=CHUNK).contains(&last.len()));
        }
    }

    #[test]
    fn empty_image() {
        let img = Image::default();
        assert_eq!(img.len(), 0);
        assert_eq!(img.to_vec(), Vec::<u8>::new());
        assert_eq!(img.read(5, 10), Vec::<u8>::new());
        assert_eq!(img.slices().count(), 0);
        assert_eq!(format!("{img:?}"), "[]");
    }

    #[test]
    fn write_across_chunk_boundaries_grows_with_zeros() {
        let mut img = Image::default();
        let data = pattern(CHUNK + 100, 3);
        img.write(C - 50, &data);
        check_shape(&img);
        assert_eq!(img.len(), C - 50 + data.len() as u64);
        let mut want = vec![0u8; CHUNK - 50];
        want.extend_from_slice(&data);
        assert_eq!(img.to_vec(), want);
        assert_eq!(img.read(C - 60, 20), want[CHUNK - 60..CHUNK - 40].to_vec());
        assert_eq!(img.read(2 * C - 10, 1000), want[2 * CHUNK - 10..].to_vec());
    }

    #[test]
    fn an_empty_write_past_the_end_grows_the_image() {
        let mut img = Image::from(&b"abc"[..]);
        img.write(10, &[]);
        assert_eq!(img.to_vec(), b"abc\0\0\0\0\0\0\0");
        img.write(2, &[]);
        assert_eq!(img.len(), 10);
    }

    #[test]
    fn truncate_cuts_and_grows_across_chunk_boundaries() {
        let data = pattern(3 * CHUNK + 7, 9);
        let mut img = Image::from(&data[..]);
        for len in [3 * C + 7, 2 * C + 1, 2 * C, 2 * C - 1, C, 1, 0] {
            img.set_len(len);
            check_shape(&img);
            assert_eq!(img.to_vec(), data[..len as usize].to_vec());
        }
        img.write(0, &data[..10]);
        img.set_len(C + 5);
        check_shape(&img);
        let mut want = data[..10].to_vec();
        want.resize(CHUNK + 5, 0);
        assert_eq!(img.to_vec(), want);
    }

    #[test]
    fn bytes_cut_off_come_back_as_zeros() {
        let mut img = Image::from(&pattern(CHUNK + 10, 1)[..]);
        let shared = img.clone();
        img.set_len(C - 5);
        img.set_len(C + 10);
        assert_eq!(img.read(C - 5, 15), vec![0; 15]);
        assert_eq!(shared.to_vec(), pattern(CHUNK + 10, 1), "the clone keeps its bytes");
    }

    #[test]
    fn clones_are_independent_and_share_untouched_chunks() {
        let data = pattern(3 * CHUNK, 5);
        let mut a = Image::from(&data[..]);
        let b = a.clone();
        assert!(a.chunks.iter().zip(&b.chunks).all(|(x, y)| Arc::ptr_eq(x, y)));
        a.write(C + 1, b"xyz");
        assert_eq!(b.to_vec(), data, "the clone keeps its bytes");
        assert_ne!(a, b);
        assert!(Arc::ptr_eq(&a.chunks[0], &b.chunks[0]));
        assert!(!Arc::ptr_eq(&a.chunks[1], &b.chunks[1]));
        assert!(Arc::ptr_eq(&a.chunks[2], &b.chunks[2]));
        let mut d = b.clone();
        d.set_len(C + 10);
        let e = d.clone();
        d.write(C + 10, b"tail");
        assert_eq!(e.to_vec(), data[..CHUNK + 10].to_vec(), "an append to a shared chunk copies it");
        assert_eq!(d.read(C + 8, 10), [&data[CHUNK + 8..CHUNK + 10], b"tail"].concat());
        let mut c = b.clone();
        c.set_len(10);
        c.write(20, b"q");
        assert_eq!(b.to_vec(), data);
        assert_eq!(c.len(), 21);
    }

    #[test]
    fn equality_and_debug_look_at_bytes_only() {
        let data = pattern(CHUNK + 3, 2);
        let a = Image::from(&data[..]);
        let mut b = Image::default();
        b.write(CHUNK as u64, &data[CHUNK..]);
        b.write(0, &data[..CHUNK]);
        assert_eq!(a, b);
        b.write(1, &[data[1] ^ 1]);
        assert_ne!(a, b);
        let small = Image::from(&[1u8, 2, 255][..]);
        assert_eq!(format!("{small:?}"), format!("{:?}", vec![1u8, 2, 255]));
    }

    /// Images and plain vectors, put through the same pseudo-random operations (writes,
    /// cuts and growths near chunk boundaries, clones and reads), hold the same bytes.
    #[test]
    fn matches_a_vec_model() {
        let mut rng = SimRng::new(0x1a9e);
        let mut imgs: Vec<Image> = vec![Image::default(); 3];
        let mut vecs: Vec<Vec<u8>> = vec![Vec::new(); 3];
        // Offsets near chunk boundaries, where the bugs would be.
        fn near(rng: &mut SimRng) -> u64 {
            let base = rng.below(4) * C;
            (base + rng.below(64)).saturating_sub(32)
        }
        for step in 0..3000 {
            let k = rng.below(3) as usize;
            match rng.below(7) {
                0..=2 => {
                    // Near a chunk boundary, or an append at the very end.
                    let offset = if rng.chance(0.5) { near(&mut rng) } else { vecs[k].len() as u64 };
                    let most = if rng.chance(0.2) { 2 * C } else { 100 };
                    let mut data = vec![0u8; rng.below(most) as usize];
                    rng.fill(&mut data);
                    imgs[k].write(offset, &data);
                    let v = &mut vecs[k];
                    let end = offset as usize + data.len();
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[offset as usize..end].copy_from_slice(&data);
                }
                3 => {
                    let len = near(&mut rng);
                    imgs[k].set_len(len);
                    vecs[k].resize(len as usize, 0);
                }
                4 => {
                    let from = rng.below(3) as usize;
                    imgs[k] = imgs[from].clone();
                    vecs[k] = vecs[from].clone();
                }
                5 => {
                    let offset = near(&mut rng);
                    let len = rng.below(C + 64) as usize;
                    let v = &vecs[k];
                    let start = (offset as usize).min(v.len());
                    let end = (start + len).min(v.len());
                    assert_eq!(imgs[k].read(offset, len), v[start..end].to_vec(), "step {step}");
                }
                _ => {
                    let j = rng.below(3) as usize;
                    assert_eq!(imgs[k] == imgs[j], vecs[k] == vecs[j], "step {step}");
                }
            }
            for (img, v) in imgs.iter().zip(&vecs) {
                check_shape(img);
                assert_eq!(img.len(), v.len() as u64, "step {step}");
            }
        }
        for (img, v) in imgs.iter().zip(&vecs) {
            assert_eq!(&img.to_vec(), v);
            assert_eq!(img.slices().flatten().copied().collect::<Vec<u8>>(), *v);
        }
    }
}
