//! `produce NAME [--key KEY] [VALUE...]`: the values given, or one per line of standard
//! input, sent in requests within the broker's limits. What was acknowledged is printed
//! even when a later request fails.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Command, ProduceRecord, RecordPosition, Reply};
use broker_fs::driver::Driver;
use broker_fs::report::DriverError;
use serde_json::json;
use std::io::{BufRead, Write};

/// The most records `produce` sends in one request.
const PRODUCE_CHUNK: usize = 1000;

/// The request that ended a produce.
struct Failed {
    /// Its first record, counted from 1.
    first: usize,
    /// How many records it carried.
    len: usize,
    /// Whether they may have been written (the broker halted, or the wait gave up).
    unknown: bool,
    failure: Failure,
}

/// Produces the records, prints their positions, and on a failure says which records
/// were written, which failed and which were not sent.
pub fn run(
    d: &mut Driver,
    name: &str,
    key: Option<String>,
    values: Vec<String>,
    json: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let values = if values.is_empty() { read_stdin_lines()? } else { values };
    if values.is_empty() {
        return Err(Failure::new("nothing to produce: give values or lines on stdin"));
    }
    let total = values.len();
    let key = key.map(String::into_bytes);
    let records =
        values.into_iter().map(|v| ProduceRecord { key: key.clone(), value: v.into_bytes().into() }).collect();
    let (positions, failed) = send(d, name, records);
    if !json && failed.is_some() {
        writeln!(out, "produced {} of {total} records to {name:?}", positions.len())?;
    } else if !json {
        writeln!(out, "produced {} records to {name:?}", positions.len())?;
    }
    for p in &positions {
        if json {
            emit(out, &json!({ "partition": p.partition, "offset": p.offset }))?;
        } else {
            writeln!(out, "  partition {} offset {}", p.partition, p.offset)?;
        }
    }
    let Some(Failed { first, len, unknown, failure }) = failed else { return Ok(()) };
    out.flush()?;
    let last = first + len - 1;
    let fate = if unknown {
        "their outcome is unknown"
    } else {
        "none of them was written (the error counts records from the first of them)"
    };
    let unsent = if last < total { format!("; records {} to {total} were not sent", last + 1) } else { String::new() };
    eprintln!(
        "note: produced {} of {total} records (positions above); records {first} to {last} failed as one request \
         and {fate}{unsent}",
        positions.len()
    );
    Err(failure)
}

/// Sends `records` in order, a request at a time, until one fails: the positions
/// acknowledged, and the request that failed, if one did.
fn send(d: &mut Driver, name: &str, records: Vec<ProduceRecord>) -> (Vec<RecordPosition>, Option<Failed>) {
    let mut positions = Vec::new();
    for records in produce_chunks(records, d.broker().config().batch_bytes_limit()) {
        let (first, len) = (positions.len() + 1, records.len());
        let (unknown, failure) = match d.request(Command::Produce { topic: name.to_string(), partition: None, records })
        {
            Ok(Reply::Produced { positions: p, .. }) => {
                positions.extend(p);
                continue;
            }
            Ok(reply) => (d.halted().is_some(), Failure::unexpected(&reply)),
            Err(e) => (d.halted().is_some() || matches!(e, DriverError::GaveUp { .. }), Failure::from(e)),
        };
        return (positions, Some(Failed { first, len, unknown, failure }));
    }
    (positions, None)
}

/// Splits `records` into requests of at most [`PRODUCE_CHUNK`] records and at most
/// `max_bytes` as stored, in order. A record too large on its own goes alone, for the
/// broker to refuse with a typed error.
fn produce_chunks(records: Vec<ProduceRecord>, max_bytes: u64) -> Vec<Vec<ProduceRecord>> {
    let mut chunks: Vec<Vec<ProduceRecord>> = Vec::new();
    let mut bytes = 0;
    for record in records {
        let size = broker_core::batch_bytes([&record]);
        match chunks.last_mut() {
            // A batch's fixed header counts once: `size` includes it again.
            Some(chunk) if chunk.len() < PRODUCE_CHUNK && bytes + size - 12 <= max_bytes => {
                bytes += size - 12;
                chunk.push(record);
            }
            _ => {
                bytes = size;
                chunks.push(vec![record]);
            }
        }
    }
    chunks
}

/// The lines of standard input, to its end.
fn read_stdin_lines() -> Result<Vec<String>, Failure> {
    let mut values = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Failure::new(format!("cannot read standard input: {e}")))?;
        values.push(line);
    }
    Ok(values)
}
