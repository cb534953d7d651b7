//! Topic name validation: no name can ever escape a data directory.

use crate::error::BrokerError;

/// The longest topic name accepted, as in Kafka.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Whether two different names collide: they differ only in `.` against `_` (`a.b` and
/// `a_b`), which Kafka refuses because both become the same metric name.
pub fn collide(a: &str, b: &str) -> bool {
    let same = |x: u8, y: u8| x == y || matches!((x, y), (b'.', b'_') | (b'_', b'.'));
    a != b && a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| same(x, y))
}

/// Refuses `name` if it collides with one of the `live` names: a different name that
/// differs only in `.` against `_`, as Kafka refuses it. Only names with a `.` or `_` can
/// collide, so only those look through `live`.
pub fn check_collision<'a>(name: &str, mut live: impl Iterator<Item = &'a str>) -> Result<(), BrokerError> {
    if !name.contains(['.', '_']) {
        return Ok(());
    }
    match live.find(|other| collide(name, other)) {
        None => Ok(()),
        Some(other) => Err(BrokerError::InvalidTopicName {
            name: name.chars().take(64).collect(),
            reason: format!(
                "collides with the topic {:?}: names that differ only in `.` and `_` collide (as in Kafka)",
                other.chars().take(64).collect::<String>()
            ),
        }),
    }
}

/// Checks a topic name: 1..=249 characters of `[A-Za-z0-9._-]`, and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), BrokerError> {
    let reason = if name.is_empty() {
        Some("is empty")
    } else if name.len() > MAX_TOPIC_NAME_LEN {
        Some("is longer than 249 characters")
    } else if name == "." || name == ".." {
        Some("is `.` or `..`")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        Some("may only contain ASCII letters, digits, `.`, `_` and `-`")
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => {
            Err(BrokerError::InvalidTopicName { name: name.chars().take(64).collect(), reason: reason.to_string() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_differ_only_in_dot_and_underscore_collide() {
        assert!(collide("a.b", "a_b"));
        assert!(collide("x_y.z", "x.y_z"));
        assert!(collide("..", "__"));
        assert!(!collide("a.b", "a.b"), "a name does not collide with itself");
        assert!(!collide("a.b", "a-b"));
        assert!(!collide("a.b", "a_bc"));
        assert!(!collide("ab", "a_b"));
    }

    #[test]
    fn a_colliding_name_is_refused_naming_the_topic_it_collides_with() {
        let live = ["orders", "a_b", "z"];
        assert_eq!(check_collision("a-b", live.into_iter()), Ok(()));
        assert_eq!(check_collision("orders", live.into_iter()), Ok(()), "the same name is not a collision");
        match check_collision("a.b", live.into_iter()) {
            Err(BrokerError::InvalidTopicName { name, reason }) => {
                assert_eq!(name, "a.b");
                assert!(reason.contains("\"a_b\""), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
