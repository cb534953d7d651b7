//! `fetch NAME --partition P --offset O [--max N]`: acknowledged records of one
//! partition, read-only.

use super::failure::Failure;
use super::output::{bytes_text, emit};
use broker_core::{Command, Reply};
use broker_fs::driver::Driver;
use broker_fs::jsonbytes;
use serde_json::{json, Value};
use std::io::Write;

/// Fetches up to `max` records from `offset` and prints them, one a line.
pub fn run(
    d: &mut Driver,
    name: &str,
    partition: u32,
    offset: u64,
    max: u32,
    json: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let command = Command::Fetch { topic: name.to_string(), partition, offset, max_records: max, max_bytes: None };
    let reply = d.request(command)?;
    let Reply::Fetched { records, high_watermark, .. } = reply else { return Err(Failure::unexpected(&reply)) };
    if !json && records.is_empty() {
        writeln!(out, "no records at offset {offset} (the high watermark is {high_watermark})")?;
    }
    for r in records {
        if json {
            let key = r.key.as_deref().map_or(Value::Null, jsonbytes::to_json);
            let value = jsonbytes::to_json(&r.value);
            emit(out, &json!({ "partition": partition, "offset": r.offset, "key": key, "value": value }))?;
        } else {
            let key = r.key.as_deref().map_or("-".to_string(), bytes_text);
            writeln!(out, "offset {}  key {}  value {}", r.offset, key, bytes_text(&r.value))?;
        }
    }
    Ok(())
}
