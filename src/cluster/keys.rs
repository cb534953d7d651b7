//! Where things live in the shared store. Decimal sequence numbers and offsets are
//! zero-padded to 20 digits (every `u64`) and ids to 16 hex digits, so byte order is
//! numeric order and a listing walks them in sequence.
//!
//! - `j/{seq}`: journal entry `seq`, from 1;
//! - `s/{seq}`: a snapshot of the catalog as of entry `seq`;
//! - `d/{topic}/{n}`: topic object `n` of an incarnation, one flush's records of any of
//!   its partitions (`super::topic_object`);
//! - `d/{topic}/{partition}/{base}`: a segment, records `[base, base + n)` of one
//!   partition, the layout before topic objects (no longer written). A partition's 8
//!   hex digits stand where an object key has 20 decimal digits, so neither key parses
//!   as the other.
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
    let mut key = String::with_capacity(JOURNAL_PREFIX.len() + 20);
    key.push_str(JOURNAL_PREFIX);
    push_decimal(&mut key, seq);
    key
}

/// The key of the snapshot as of entry `seq`.
pub fn snapshot_key(seq: u64) -> String {
    let mut key = String::with_capacity(SNAPSHOT_PREFIX.len() + 20);
    key.push_str(SNAPSHOT_PREFIX);
    push_decimal(&mut key, seq);
    key
}

/// The prefix of every segment of `topic`.
pub fn topic_prefix(topic: TopicId) -> String {
    let mut key = String::with_capacity(DATA_PREFIX.len() + 17);
    push_topic_prefix(&mut key, topic);
    key
}

/// The prefix of every segment of one partition.
pub fn partition_prefix(topic: TopicId, partition: u32) -> String {
    let mut key = String::with_capacity(DATA_PREFIX.len() + 26);
    push_partition_prefix(&mut key, topic, partition);
    key
}

/// The key of the segment of `topic`/`partition` whose first offset is `base`.
pub fn segment_key(topic: TopicId, partition: u32, base: u64) -> String {
    let mut key = String::with_capacity(DATA_PREFIX.len() + 46);
    push_partition_prefix(&mut key, topic, partition);
    push_decimal(&mut key, base);
    key
}

/// The key of topic object `n` of `topic`.
pub fn object_key(topic: TopicId, n: u64) -> String {
    let mut key = String::with_capacity(DATA_PREFIX.len() + 37);
    push_topic_prefix(&mut key, topic);
    push_decimal(&mut key, n);
    key
}

fn push_topic_prefix(key: &mut String, topic: TopicId) {
    key.push_str(DATA_PREFIX);
    push_hex(key, topic.0, 16);
    key.push('/');
}

fn push_partition_prefix(key: &mut String, topic: TopicId, partition: u32) {
    push_topic_prefix(key, topic);
    push_hex(key, u64::from(partition), 8);
    key.push('/');
}

/// Appends `n` in 20 decimal digits, zero-padded (as `{n:020}` writes it, without the
/// formatting machinery: the nodes build a key for every store operation).
fn push_decimal(key: &mut String, mut n: u64) {
    let mut digits = [b'0'; 20];
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    key.extend(digits.iter().map(|d| char::from(*d)));
}

/// Appends the low `digits` hex digits of `n`, lowercase and zero-padded.
fn push_hex(key: &mut String, n: u64, digits: u32) {
    for i in (0..digits).rev() {
        let nibble = (n >> (4 * i)) & 0xf;
        key.push(char::from(b"0123456789abcdef"[nibble as usize]));
    }
}

/// A 20-digit decimal, exactly as the keys write it.
fn decimal(s: &str) -> Option<u64> {
    if s.len() != 20 {
        return None;
    }
    s.bytes().try_fold(0u64, |n, b| {
        b.is_ascii_digit().then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0'))).flatten()
    })
}

/// A lowercase hex number of exactly `digits` digits.
fn hex(s: &str, digits: usize) -> Option<u64> {
    if s.len() != digits || digits > 16 {
        return None;
    }
    s.bytes().try_fold(0u64, |n, b| {
        let nibble = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(nibble))
    })
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

/// Incarnation and number of a topic object's key; `None` for any other key.
pub fn parse_object_key(key: &str) -> Option<(TopicId, u64)> {
    let mut parts = key.strip_prefix(DATA_PREFIX)?.split('/');
    let topic = hex(parts.next()?, 16)?;
    let n = decimal(parts.next()?)?;
    parts.next().is_none().then_some((TopicId(topic), n))
}

/// The incarnation a key of the data prefix belongs to, in either layout: a segment's
/// or a topic object's; `None` for any other key.
pub fn parse_data_key(key: &str) -> Option<TopicId> {
    parse_segment_key(key).map(|(t, _, _)| t).or_else(|| parse_object_key(key).map(|(t, _)| t))
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
        for (t, n) in [(0, 0), (7, 99), (u64::MAX, u64::MAX)] {
            let key = object_key(TopicId(t), n);
            assert_eq!(parse_object_key(&key), Some((TopicId(t), n)));
            assert!(key.starts_with(&topic_prefix(TopicId(t))));
            assert_eq!(parse_segment_key(&key), None, "{key} is no segment's");
        }
        assert!(object_key(TopicId(1), 9) < object_key(TopicId(1), 10));
        assert!(object_key(TopicId(1), u64::MAX) < topic_prefix(TopicId(2)));
        for (t, p, b) in [(0, 0, 0), (7, 3, 99), (1, 0x1234_5678, 12_345_678)] {
            assert_eq!(parse_object_key(&segment_key(TopicId(t), p, b)), None, "a segment's key is no object's");
            assert_eq!(parse_data_key(&segment_key(TopicId(t), p, b)), Some(TopicId(t)));
            assert_eq!(parse_data_key(&object_key(TopicId(t), b)), Some(TopicId(t)));
        }
    }

    #[test]
    fn keys_are_written_as_the_format_strings_write_them() {
        for n in [0, 1, 9, 10, 255, 1 << 32, 12_345_678_901_234_567_890, u64::MAX] {
            assert_eq!(journal_key(n), format!("j/{n:020}"));
            assert_eq!(snapshot_key(n), format!("s/{n:020}"));
            let (t, p) = (TopicId(n), n as u32);
            assert_eq!(topic_prefix(t), format!("d/{n:016x}/"));
            assert_eq!(partition_prefix(t, p), format!("d/{n:016x}/{p:08x}/"));
            assert_eq!(segment_key(t, p, n), format!("d/{n:016x}/{p:08x}/{n:020}"));
            assert_eq!(object_key(t, n), format!("d/{n:016x}/{n:020}"));
        }
        assert_eq!(decimal("18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal("18446744073709551616"), None, "past u64");
        assert_eq!(decimal("99999999999999999999"), None);
        assert_eq!(hex("ffffffffffffffff", 16), Some(u64::MAX));
        assert_eq!(hex("FFFFFFFFFFFFFFFF", 16), None, "uppercase is not ours");
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
            assert_eq!(parse_object_key(key), None, "{key}");
            assert_eq!(parse_data_key(key), None, "{key}");
        }
        for key in ["d/0000000000000001/", "d/0000000000000001/0000000000000000001", "d/0000000000000001/1/2"] {
            assert_eq!(parse_object_key(key), None, "{key}");
        }
    }
}
