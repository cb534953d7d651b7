//! `serve`: JSON-lines requests in, JSON-lines replies out, until end of input.
//!
//! Each input line is one request object:
//!
//! - `{"id": ID, "command": COMMAND}`: a broker command, in the core's own serde form,
//!   for example `{"id": 1, "command": {"CreateTopic": {"name": "orders", "partitions":
//!   3, "settings": {"deletion_grace_ms": 0}}}}`. Keys and values are JSON strings
//!   when they are UTF-8, else `{"base64": "..."}`; an array of numbers (the core's own
//!   form) is accepted too. See [`crate::jsonbytes`].
//! - `{"id": ID, "status": true}`: live topics and pending deletions, at once.
//!
//! `ID` is any JSON value the client likes; it is echoed, never interpreted. Requests
//! run concurrently: replies come in the order they complete, one line each:
//!
//! - `{"id": ID, "ok": REPLY}`, the core's [`Reply`] in its serde form, except that
//!   fetched keys and values are strings or `{"base64": "..."}` as above;
//! - `{"id": ID, "error": MESSAGE, "kind": ERROR}`, where `kind` is the core's
//!   [`BrokerError`] in serde form (`null` for a line that could not be parsed);
//! - `{"id": ID, "status": {"topics": [...], "pending": [...]}}`.
//!
//! Two more lines are events: `{"event": "ready"}` once recovery is done, and
//! `{"event": "halted", "reason": MESSAGE}` if the broker halts. On a halt, every
//! request in flight is answered with an error saying its outcome is unknown, and
//! `serve` ends with exit status 3 (see [`Outcome::Halted`]): it does not restart
//! itself. A supervisor starts it again, and that start recovers from what is durable;
//! nothing is retried in the halted process, so a failed fsync is never retried. At end
//! of input, `serve` waits for the replies still owed, then ends.

use crate::driver::{Driver, DriverEvent};
use crate::jsonbytes;
use broker_core::{BrokerError, Command, DeletionStatus, HaltReason, Reply, RequestId, TopicDescription};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// What reaches the driver's loop from other threads: lines of standard input, and
/// commands of the Kafka listener.
#[derive(Debug)]
pub enum Input {
    /// One request line.
    Line(String),
    /// End of input (or a read error).
    End,
    /// A command from the Kafka listener, answered through the channel.
    Call(Command, tokio::sync::oneshot::Sender<Result<Reply, BrokerError>>),
    /// Stop serving (a signal): answer what is in flight, then end.
    Stop,
}

/// How `serve` runs.
#[derive(Debug, Default)]
pub struct ServeOptions {
    /// Keep serving after the end of standard input (the Kafka listener serves on);
    /// then only [`Input::Stop`] ends `serve`.
    pub outlive_input: bool,
    /// Event lines written right after `{"event": "ready"}`.
    pub ready_events: Vec<Value>,
}

/// Who waits for the reply to a submitted command.
enum Waiter {
    /// A JSON-lines request, by its id.
    Line(Value),
    /// A Kafka request.
    Kafka(tokio::sync::oneshot::Sender<Result<Reply, BrokerError>>),
}

/// One request line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    #[serde(default)]
    id: Value,
    /// The core's `Command`, with keys and values in any form [`jsonbytes`] reads.
    #[serde(default)]
    command: Option<Value>,
    #[serde(default)]
    status: Option<Value>,
}

/// A status answer.
#[derive(Debug, Serialize)]
pub struct Status {
    /// Live topics.
    pub topics: Vec<TopicJson>,
    /// Pending deletions, with their progress.
    pub pending: Vec<PendingJson>,
    /// Acknowledged records that cannot be read back, found when the logs were opened.
    pub damaged: Vec<DamagedJson>,
}

/// Acknowledged records of one partition that cannot be read back, in JSON output.
#[derive(Debug, Serialize)]
pub struct DamagedJson {
    /// The topic name.
    pub name: String,
    /// The incarnation id.
    pub id: u64,
    /// The partition.
    pub partition: u32,
    /// The first damaged offset.
    pub from: u64,
    /// One past the last damaged offset.
    pub to: u64,
    /// What was found, and where.
    pub detail: String,
}

impl From<&broker_core::DamagedRecords> for DamagedJson {
    fn from(d: &broker_core::DamagedRecords) -> DamagedJson {
        DamagedJson {
            name: d.name.clone(),
            id: d.topic.0,
            partition: d.partition,
            from: d.range.from,
            to: d.range.to,
            detail: d.range.detail.clone(),
        }
    }
}

/// A live topic in JSON output.
#[derive(Debug, Serialize)]
pub struct TopicJson {
    /// The name.
    pub name: String,
    /// The incarnation id.
    pub id: u64,
    /// The partition count.
    pub partitions: u32,
    /// The deletion grace delay, in milliseconds.
    pub grace_ms: u64,
    /// The next offset to be acknowledged, per partition.
    pub high_watermarks: Vec<u64>,
    /// The first offset of every partition (past every offset of the topics deleted
    /// before this one was created).
    pub log_start: u64,
}

impl From<&TopicDescription> for TopicJson {
    fn from(t: &TopicDescription) -> TopicJson {
        TopicJson {
            name: t.name.clone(),
            id: t.id.0,
            partitions: t.partitions,
            grace_ms: t.settings.deletion_grace_ms,
            high_watermarks: t.high_watermarks.clone(),
            log_start: t.log_start,
        }
    }
}

/// A pending deletion in JSON output.
#[derive(Debug, Serialize)]
pub struct PendingJson {
    /// The name the topic had.
    pub name: String,
    /// The incarnation being removed.
    pub id: u64,
    /// Its partition count.
    pub partitions: u32,
    /// How many of its logs are removed.
    pub removed: u32,
    /// Whether its tombstone is durable (the delete is acknowledged once the
    /// incarnation's storage operations have drained too).
    pub tombstone_durable: bool,
    /// When its grace delay ends, in milliseconds since the Unix epoch (durable with
    /// the tombstone: restarts do not start it again).
    pub remove_after_unix_ms: u64,
    /// How much of its grace delay is left now, in milliseconds (0: removal may run).
    pub grace_left_ms: u64,
}

impl From<&DeletionStatus> for PendingJson {
    fn from(d: &DeletionStatus) -> PendingJson {
        PendingJson {
            name: d.name.clone(),
            id: d.topic.0,
            partitions: d.partitions,
            removed: d.removed,
            tombstone_durable: d.tombstone_durable,
            remove_after_unix_ms: d.remove_after.as_micros() / 1000,
            grace_left_ms: d
                .remove_after
                .as_micros()
                .saturating_sub(crate::driver::wall_clock().as_micros())
                .div_ceil(1000),
        }
    }
}

/// The status of a driver, as `serve` and `status --json` report it.
pub fn status_of<M: Send + 'static>(driver: &Driver<M>) -> Status {
    Status {
        topics: driver.live_topics().iter().map(TopicJson::from).collect(),
        pending: driver.pending_deletions().iter().map(PendingJson::from).collect(),
        damaged: driver.broker().damaged_records().iter().map(DamagedJson::from).collect(),
    }
}

/// How `serve` ended.
#[derive(Debug)]
pub enum Outcome {
    /// End of input, every reply sent.
    Finished,
    /// The broker halted (exit status 3): the `halted` event is written, the reason
    /// is for the caller to print.
    Halted(HaltReason),
    /// Writing a reply failed (the reader went away).
    OutputClosed(std::io::Error),
}

/// Serves JSON-lines requests from `input` until its end (or, with
/// [`ServeOptions::outlive_input`], until [`Input::Stop`]), and commands sent as
/// [`Input::Call`]; writes replies to `output` and notices (warnings) to `log`. `input`
/// is read on its own thread.
pub fn serve(
    mut driver: Driver<Input>,
    input: impl BufRead + Send + 'static,
    output: &mut impl Write,
    log: &mut impl Write,
    options: ServeOptions,
) -> Outcome {
    let mailbox = driver.mailbox();
    // Reading blocks, so it has a thread of its own; it feeds lines into the loop.
    let spawned = std::thread::Builder::new().name("broker-fs-stdin".into()).spawn(move || {
        for line in input.lines() {
            match line {
                Ok(l) => {
                    if !mailbox.send(Input::Line(l)) {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        mailbox.send(Input::End);
    });
    if let Err(e) = spawned {
        return Outcome::OutputClosed(e);
    }
    let mut in_flight: BTreeMap<RequestId, Waiter> = BTreeMap::new();
    let mut ended = false;
    let result = (|| -> std::io::Result<Outcome> {
        emit_notices(&mut driver, log);
        write_line(output, &serde_json::json!({ "event": "ready" }))?;
        for event in &options.ready_events {
            write_line(output, event)?;
        }
        loop {
            if ended && in_flight.is_empty() {
                // A halt that came with the last replies still ends in a halt.
                return match driver.halted() {
                    Some(reason) => halt(output, reason.clone()),
                    None => Ok(Outcome::Finished),
                };
            }
            let event = driver.next_event(None);
            emit_notices(&mut driver, log);
            match event {
                None => {}
                Some(DriverEvent::Message(Input::End)) => ended |= !options.outlive_input,
                Some(DriverEvent::Message(Input::Stop)) => ended = true,
                Some(DriverEvent::Message(Input::Call(command, reply))) => {
                    if ended {
                        let _ = reply.send(Err(BrokerError::Unavailable("broker-fs is stopping".into())));
                        continue;
                    }
                    let request = driver.submit(command);
                    in_flight.insert(request, Waiter::Kafka(reply));
                }
                Some(DriverEvent::Message(Input::Line(line))) => {
                    if line.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Request>(&line) {
                        Ok(Request { id, command: Some(command), status: None }) => match command_from_json(command) {
                            Ok(command) => {
                                let request = driver.submit(command);
                                in_flight.insert(request, Waiter::Line(id));
                            }
                            Err(e) => {
                                let msg = format!("invalid command: {e}");
                                write_line(output, &serde_json::json!({ "id": id, "error": msg, "kind": null }))?;
                            }
                        },
                        Ok(Request { id, command: None, status: Some(_) }) => {
                            let status = serde_json::to_value(status_of(&driver)).unwrap_or(Value::Null);
                            write_line(output, &serde_json::json!({ "id": id, "status": status }))?;
                        }
                        Ok(Request { id, .. }) => {
                            let msg = "a request needs exactly one of \"command\" and \"status\"";
                            write_line(output, &serde_json::json!({ "id": id, "error": msg, "kind": null }))?;
                        }
                        Err(e) => {
                            let id = serde_json::from_str::<Value>(&line)
                                .ok()
                                .and_then(|v| v.get("id").cloned())
                                .unwrap_or(Value::Null);
                            let msg = format!("invalid request line: {e}");
                            write_line(output, &serde_json::json!({ "id": id, "error": msg, "kind": null }))?;
                        }
                    }
                }
                Some(DriverEvent::Reply { request, reply }) => match in_flight.remove(&request) {
                    Some(Waiter::Kafka(tx)) => {
                        // The connection may be gone; its reply is then dropped.
                        let _ = tx.send(reply);
                    }
                    Some(Waiter::Line(id)) => write_line(output, &reply_json(id, &reply))?,
                    None => write_line(output, &reply_json(Value::Null, &reply))?,
                },
                Some(DriverEvent::Halted(reason)) => return halt(output, reason),
            }
        }
    })();
    result.unwrap_or_else(Outcome::OutputClosed)
}

/// Writes the `halted` event; the caller prints the reason to standard error.
fn halt(output: &mut impl Write, reason: HaltReason) -> std::io::Result<Outcome> {
    write_line(output, &serde_json::json!({ "event": "halted", "reason": reason.to_string() }))?;
    Ok(Outcome::Halted(reason))
}

/// The JSON line answering one request.
pub fn reply_json(id: Value, reply: &Result<Reply, BrokerError>) -> Value {
    match reply {
        Ok(r) => serde_json::json!({ "id": id, "ok": reply_value(r) }),
        Err(e) => serde_json::json!({ "id": id, "error": e.to_string(), "kind": e }),
    }
}

/// A reply in the core's serde form, except that fetched keys and values are strings
/// or `{"base64": ...}` (see [`jsonbytes`]) instead of arrays of numbers.
pub fn reply_value(reply: &Reply) -> Value {
    match reply {
        Reply::Fetched { topic, records, high_watermark } => {
            let records: Vec<Value> = records
                .iter()
                .map(|r| {
                    let key = r.key.as_deref().map_or(Value::Null, jsonbytes::to_json);
                    serde_json::json!({ "offset": r.offset, "key": key, "value": jsonbytes::to_json(&r.value) })
                })
                .collect();
            serde_json::json!({ "Fetched": { "topic": topic, "records": records, "high_watermark": high_watermark } })
        }
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// The core's command from its serde form, where the key and value of each produced
/// record may also come as a string or `{"base64": ...}` (see [`jsonbytes`]).
pub fn command_from_json(mut command: Value) -> Result<Command, String> {
    let records = command.get_mut("Produce").and_then(|p| p.get_mut("records")).and_then(Value::as_array_mut);
    for (i, record) in records.into_iter().flatten().enumerate() {
        let Some(fields) = record.as_object_mut() else { continue };
        for name in ["key", "value"] {
            match fields.get(name) {
                None | Some(Value::Null) => {}
                Some(form) => {
                    let bytes = jsonbytes::from_json(form).map_err(|e| format!("record {i}: {name}: {e}"))?;
                    fields.insert(name.to_string(), Value::from(bytes));
                }
            }
        }
    }
    serde_json::from_value(command).map_err(|e| e.to_string())
}

fn write_line(out: &mut impl Write, v: &Value) -> std::io::Result<()> {
    writeln!(out, "{v}")?;
    out.flush()
}

fn emit_notices<M: Send + 'static>(driver: &mut Driver<M>, log: &mut impl Write) {
    for n in driver.take_notices() {
        let level = if n.is_warning() { "warning" } else { "note" };
        let _ = writeln!(log, "{level}: {n}");
    }
}
