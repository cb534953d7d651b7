//! Topic name validation: no name can ever escape a data directory.

use crate::error::BrokerError;

/// The longest topic name accepted, as in Kafka.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

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
