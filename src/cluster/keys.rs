//! Where things live in the shared store. Decimal sequence numbers and offsets are
//! zero-padded to 20 digits (every `u64`) and ids to 16 hex digits, so byte order is
//! numeric order and a listing walks them in sequence.
//!
//! - `j/{seq}`: journal entry `seq`, from 1;
//! - `s/{seq}`: a snapshot of the catalog as of entry `seq`;
//! - `d/{topic}/{partition}/{base}`: a segment, records `[base, base + n)` of one
//!   partition of one incarnation.
//!
//! Any other key is foreign: never read, never deleted.

use crate::ids::TopicId;

/// The prefix of every journal entry.
pub const JOURNAL_PREFIX: &str = "j/";
/// The prefix of every snapshot.
pub const SNAPSHOT_PREFIX: &str = "s/";
/// The prefix of every segment.
pub const DATA_PREFIX: &str = "d/";

/// The key of journal entry `seq`.
pub fn journal_key(seq: u64) -> String {
    format!("{JOURNAL_PREFIX}{seq:020}")
}

/// The key of the snapshot as of entry `seq`.
pub fn snapshot_key(seq: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{seq:020}")
}

/// The prefix of every segment of `topic`.
pub fn topic_prefix(topic: TopicId) -> String {
    format!("{DATA_PREFIX}{:016x}/", topic.0)
}

/// The prefix of every segment of one partition.
pub fn partition_prefix(topic: TopicId, partition: u32) -> String {
    format!("{}{partition:08x}/", topic_prefix(topic))
}

/// The key of the segment of `topic`/`partition` whose first offset is `base`.
pub fn segment_key(topic: TopicId, partition: u32, base: u64) -> String {
    format!("{}{base:020}", partition_prefix(topic, partition))
}

/// A 20-digit decimal, exactly as the keys write it.
fn decimal(s: &str) -> Option<u64> {
    (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// A lowercase hex number of exactly `digits` digits.
fn hex(s: &str, digits: usize) -> Option<u64> {
    let ok = s.len() == digits && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| u64::from_str_radix(s, 16).ok()).flatten()
}

/// The seq of a journal key; `None` for any other key.
pub fn parse_journal_key(key: &str) -> Option<u64> {
    decimal(key.strip_prefix(JOURNAL_PREFIX)?)
}

/// The seq of a snapshot key; `None` for any other key.
pub fn parse_snapshot_key(key: &str) -> Option<u64> {
    decimal(key.strip_prefix(SNAPSHOT_PREFIX)?)
}

/// Incarnation, partition and base offset of a segment key; `None` for any other key.
pub fn parse_segment_key(key: &str) -> Option<(TopicId, u32, u64)> {
    let mut parts = key.strip_prefix(DATA_PREFIX)?.split('/');
    let topic = hex(parts.next()?, 16)?;
    let partition = u32::try_from(hex(parts.next()?, 8)?).ok()?;
    let base = decimal(parts.next()?)?;
    parts.next().is_none().then_some((TopicId(topic), partition, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_back_and_sort_in_number_order() {
        for seq in [1, 9, 10, 12_345, u64::MAX] {
            assert_eq!(parse_journal_key(&journal_key(seq)), Some(seq));
            assert_eq!(parse_snapshot_key(&snapshot_key(seq)), Some(seq));
            assert_eq!(parse_journal_key(&snapshot_key(seq)), None);
        }
        assert!(journal_key(9) < journal_key(10) && journal_key(10) < journal_key(u64::MAX));
        for (t, p, b) in [(0, 0, 0), (7, 3, 99), (u64::MAX, u32::MAX, u64::MAX)] {
            let key = segment_key(TopicId(t), p, b);
            assert_eq!(parse_segment_key(&key), Some((TopicId(t), p, b)));
            assert!(key.starts_with(&partition_prefix(TopicId(t), p)));
            assert!(key.starts_with(&topic_prefix(TopicId(t))));
        }
        assert!(segment_key(TopicId(1), 0, 9) < segment_key(TopicId(1), 0, 10));
    }

    #[test]
    fn foreign_keys_are_not_ours() {
        for key in [
            "",
            "j/",
            "j/1",
            "j/0000000000000000000x",
            "j/000000000000000000001",
            "J/00000000000000000001",
            "d/0000000000000001/00000000",
            "d/0000000000000001/00000000/00000000000000000001/x",
            "d/000000000000000G/00000000/00000000000000000001",
            "d/0000000000000001/0000000A/00000000000000000001",
            "other/thing",
        ] {
            assert_eq!(parse_journal_key(key), None, "{key}");
            assert_eq!(parse_segment_key(key), None, "{key}");
        }
    }
}
