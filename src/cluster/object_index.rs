//! What a node knows of one incarnation's topic objects (DESIGN.md, section 10, "one
//! object per topic"): the headers it has read, the newest of them giving every
//! partition's end and the next object's number, so that a fetch finds the object that
//! holds an offset by a binary search over object numbers which reads only the headers
//! the node lacks.
//!
//! The search rests on each partition's end never falling from one object to the next,
//! which [`super::topic_object::encode`] keeps. Headers that break it (a forged store)
//! end a search as [`Locate::Inconsistent`], never in a loop or a wrong record.

use crate::cluster::topic_object::ObjectHeader;
use std::collections::BTreeMap;

/// Where an offset of a partition lies, as far as the headers known tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locate {
    /// No header is known: list the incarnation's objects and read the newest.
    Unknown,
    /// The offset is at or past the partition's end after the newest object known.
    AtOrPastEnd {
        /// That end.
        end: u64,
    },
    /// Object `n` holds the offset, in the part at index `part` of its header.
    In {
        /// The object.
        n: u64,
        /// The index of the partition's part in its header.
        part: usize,
    },
    /// The search goes on once the header of object `n` is known.
    Read(u64),
    /// The headers known contradict each other around object `n`: an end falls, or an
    /// object that must hold the partition's records does not.
    Inconsistent {
        /// The object.
        n: u64,
    },
}

/// The headers one node has read of one incarnation's objects, at most a set number of
/// them: the newest is always kept.
#[derive(Clone, Debug)]
pub struct ObjectIndex {
    headers: BTreeMap<u64, ObjectHeader>,
    most: usize,
}

impl ObjectIndex {
    /// An index that keeps at most `most` headers (at least one: the newest).
    pub fn new(most: usize) -> ObjectIndex {
        ObjectIndex { headers: BTreeMap::new(), most: most.max(1) }
    }

    /// Learns the header of object `n`. Past the limit, the oldest header but the newest
    /// is forgotten (searches for old offsets read again).
    pub fn learn(&mut self, n: u64, header: ObjectHeader) {
        self.headers.insert(n, header);
        while self.headers.len() > self.most {
            self.headers.pop_first();
        }
    }

    /// The header of object `n`, if known.
    pub fn header(&self, n: u64) -> Option<&ObjectHeader> {
        self.headers.get(&n)
    }

    /// The newest object known, with its header.
    pub fn newest(&self) -> Option<(u64, &ObjectHeader)> {
        self.headers.last_key_value().map(|(n, h)| (*n, h))
    }

    /// The number of the object to create next, as far as this node knows: one past the
    /// newest it knows, or 0.
    pub fn next_object(&self) -> u64 {
        self.newest().map_or(0, |(n, _)| n.saturating_add(1))
    }

    /// Every partition's end after the newest object known.
    pub fn ends(&self) -> Option<&[u64]> {
        self.newest().map(|(_, h)| h.ends.as_slice())
    }

    /// Where offset `offset` of `partition` lies: the first object whose end of the
    /// partition passes it holds it.
    pub fn locate(&self, partition: u32, offset: u64) -> Locate {
        let end = |h: &ObjectHeader| h.ends.get(partition as usize).copied().unwrap_or(0);
        let Some((newest, last)) = self.newest() else { return Locate::Unknown };
        if offset >= end(last) {
            return Locate::AtOrPastEnd { end: end(last) };
        }
        // The first known object past the offset, and the last known one at or below it.
        let above = self.headers.iter().find(|(_, h)| end(h) > offset).map_or(newest, |(n, _)| *n);
        let below = self.headers.range(..above).next_back().map(|(n, h)| (*n, end(h)));
        if let Some((n, _)) = self.headers.range(above..).find(|(_, h)| end(h) <= offset) {
            return Locate::Inconsistent { n: *n };
        }
        let first_possible = below.map_or(0, |(n, _)| n + 1);
        if first_possible < above {
            return Locate::Read(first_possible + (above - first_possible) / 2);
        }
        // `above` is the first object whose end passes the offset, and the object before
        // it ends at or below it: its part of the partition holds the offset.
        let header = &self.headers[&above];
        let part = header.parts.iter().position(|p| p.partition == partition);
        match part {
            Some(i) if header.base(&header.parts[i]) <= offset => Locate::In { n: above, part: i },
            _ => Locate::Inconsistent { n: above },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::entry::EntryWriter;
    use crate::cluster::topic_object::Part;

    const WRITER: EntryWriter = EntryWriter { node: 1, boot: 1, nonce: 1 };

    /// The headers of objects holding `counts[n][p]` records of partition `p` (none if
    /// 0), from ends of 0, as a node would write them one after the other.
    fn headers(counts: &[Vec<u32>]) -> Vec<ObjectHeader> {
        let mut ends = vec![0u64; counts[0].len()];
        let mut out = Vec::new();
        for object in counts {
            let mut parts = Vec::new();
            for (p, count) in object.iter().enumerate() {
                if *count > 0 {
                    ends[p] += u64::from(*count);
                    parts.push(Part { partition: p as u32, count: *count, len: 5 * u64::from(*count) });
                }
            }
            out.push(ObjectHeader { writer: WRITER, ends: ends.clone(), parts });
        }
        out
    }

    /// The object holding each offset of each partition, found by searching from the
    /// newest header alone and reading what the search asks for; the reads it took.
    fn search(all: &[ObjectHeader], partition: u32, offset: u64) -> (Locate, usize) {
        let mut index = ObjectIndex::new(1024);
        let newest = all.len() as u64 - 1;
        index.learn(newest, all[newest as usize].clone());
        let mut reads = 0;
        loop {
            match index.locate(partition, offset) {
                Locate::Read(n) => {
                    assert!(index.header(n).is_none(), "object {n} is read again");
                    reads += 1;
                    index.learn(n, all[n as usize].clone());
                }
                found => return (found, reads),
            }
        }
    }

    #[test]
    fn nothing_known_asks_for_a_listing_and_the_next_object_is_the_first() {
        let index = ObjectIndex::new(8);
        assert_eq!(index.locate(0, 0), Locate::Unknown);
        assert_eq!((index.next_object(), index.ends()), (0, None));
    }

    #[test]
    fn every_offset_is_found_in_the_object_that_holds_it_within_log2_reads() {
        // 40 objects over 3 partitions: partition 2 in a few of them only.
        let counts: Vec<Vec<u32>> = (0..40u32).map(|n| vec![1 + n % 3, n % 2, u32::from(n % 9 == 4) * 5]).collect();
        let all = headers(&counts);
        for p in 0..3u32 {
            let mut offset = 0u64;
            for (n, object) in counts.iter().enumerate() {
                for _ in 0..object[p as usize] {
                    let (found, reads) = search(&all, p, offset);
                    let part = all[n].parts.iter().position(|x| x.partition == p).expect("its part");
                    assert_eq!(found, Locate::In { n: n as u64, part }, "partition {p} offset {offset}");
                    assert!(reads <= 6, "partition {p} offset {offset}: {reads} reads for 40 objects");
                    offset += 1;
                }
            }
            let end = all[39].ends[p as usize];
            assert_eq!(search(&all, p, end).0, Locate::AtOrPastEnd { end }, "partition {p}");
            assert_eq!(search(&all, p, end + 7).0, Locate::AtOrPastEnd { end });
        }
    }

    #[test]
    fn the_newest_header_gives_the_ends_and_the_next_object() {
        let all = headers(&[vec![2, 0], vec![1, 3]]);
        let mut index = ObjectIndex::new(8);
        index.learn(1, all[1].clone());
        index.learn(0, all[0].clone());
        assert_eq!((index.next_object(), index.ends()), (2, Some(&[3, 3][..])));
    }

    #[test]
    fn past_its_limit_the_index_forgets_the_oldest_headers_and_keeps_the_newest() {
        let all = headers(&(0..10).map(|_| vec![1]).collect::<Vec<_>>());
        let mut index = ObjectIndex::new(3);
        for n in [9u64, 0, 5, 2, 7] {
            index.learn(n, all[n as usize].clone());
        }
        let known: Vec<u64> = (0..10).filter(|n| index.header(*n).is_some()).collect();
        assert_eq!(known, vec![5, 7, 9]);
        // An old offset is found again by reading.
        assert_eq!(index.locate(0, 0), Locate::Read(2));
    }

    #[test]
    fn headers_that_contradict_each_other_end_the_search_as_inconsistent() {
        let mut all = headers(&[vec![2], vec![2], vec![2], vec![2]]);
        // Object 2 claims an end below object 1's.
        all[2].ends = vec![1];
        let mut index = ObjectIndex::new(8);
        for (n, h) in all.iter().enumerate() {
            index.learn(n as u64, h.clone());
        }
        assert_eq!(index.locate(0, 1), Locate::Inconsistent { n: 2 });
        // An object whose end passes the offset but holds no records of the partition.
        let mut all = headers(&[vec![2, 1], vec![0, 1]]);
        all[1].ends = vec![3, 2];
        let mut index = ObjectIndex::new(8);
        index.learn(0, all[0].clone());
        index.learn(1, all[1].clone());
        assert_eq!(index.locate(0, 2), Locate::Inconsistent { n: 1 });
        // A part that begins past the offset it should hold.
        let mut all = headers(&[vec![2], vec![2]]);
        all[1].ends = vec![9];
        let mut index = ObjectIndex::new(8);
        index.learn(0, all[0].clone());
        index.learn(1, all[1].clone());
        assert_eq!(index.locate(0, 3), Locate::Inconsistent { n: 1 });
        assert_eq!(index.locate(0, 7), Locate::In { n: 1, part: 0 });
    }
}
