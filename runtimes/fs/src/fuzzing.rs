//! Fuzz-target bodies of broker-fs (feature `fuzzing`; not part of the product). The
//! cargo-fuzz targets in `fuzz/` wrap them, and `tests/fuzz_corpus.rs` runs each over
//! its checked-in corpus under `cargo test --all-features`.
//!
//! | cargo-fuzz target | body |
//! |---|---|
//! | `json_lines` | [`fuzz_json_lines`] |

use crate::request_lines::{read_line, ReadLine};
use crate::serve::{command_from_json, parse_line, reply_json, Parsed};
use broker_core::{Config, MemFs, SyncDriver};
use serde_json::Value;

/// Target `json_lines`: arbitrary bytes as the standard input of `serve`.
///
/// The first byte sets the longest line taken (16 to 4,096 bytes, so that lines past it
/// are common); the rest is read as `serve` reads it, line by line. Every line must be
/// answered: a line past the limit is skipped whole; a line that is not a request
/// parses to an error whose reply is valid JSON; a command's own serde form reads back
/// as the same command; and a broker over the in-memory disk answers every command,
/// whatever it asks, with a reply that renders as a JSON line.
pub fn fuzz_json_lines(data: &[u8]) {
    let Some((&first, mut input)) = data.split_first() else { return };
    let limit = 16 + usize::from(first) * 16;
    // Small limits, so that a command's work stays small whatever it asks.
    let config = Config { max_partitions: 4, max_batch_records: 64, ..Config::default() };
    let mut broker = SyncDriver::start(config, MemFs::new());
    loop {
        let before = input.len();
        match read_line(&mut input, limit).expect("reading from memory cannot fail") {
            ReadLine::End => {
                assert_eq!(before, 0, "input left unread at its end");
                return;
            }
            ReadLine::TooLong { bytes } => {
                assert!(bytes > limit as u64, "a line of {bytes} bytes is within the limit of {limit}");
            }
            ReadLine::Line(line) => {
                assert!(line.len() <= limit && !line.contains(&b'\n'), "a line past the limit, or with a newline");
                let text = std::str::from_utf8(&line).ok().map(str::to_owned);
                match parse_line(line) {
                    Parsed::Blank => assert!(text.is_some_and(|t| t.trim().is_empty()), "a line taken for blank"),
                    Parsed::Invalid(id, message) => {
                        assert!(!message.is_empty(), "an error without a message");
                        renders(&serde_json::json!({ "id": id, "error": message, "kind": null }));
                    }
                    Parsed::Status(id) => renders(&serde_json::json!({ "id": id, "status": {} })),
                    Parsed::Command(id, command) => {
                        let form = serde_json::to_string(&command).expect("a command serializes");
                        assert_eq!(command_from_json(&form).as_ref(), Ok(&command), "{form}");
                        let reply = broker.request(command);
                        renders(&reply_json(id, &reply));
                    }
                }
            }
        }
        assert!(input.len() < before, "a read took nothing from the input");
    }
}

/// A reply must be one line of JSON that reads back as itself.
fn renders(reply: &Value) {
    let line = reply.to_string();
    assert!(!line.contains('\n'), "a reply of several lines: {line}");
    let back: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("a reply that is not JSON ({e}): {line}"));
    assert_eq!(&back, reply);
}
