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
//! run concurrently: replies come in the order they complete, one line each (every
//! non-empty line gets one, whatever its bytes: see [`crate::request_lines`] for the
//! longest line taken and how far `serve` reads ahead of its replies):
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

use crate::broker_loop::{self, Handled, Input, LineInput, Lines};
use crate::driver::Driver;
use crate::jsonbytes::{self, JsonBytes};
use crate::request_lines::{self, ReadAhead, ReadLine};
use broker_core::{BrokerError, Command, DeletionStatus, HaltReason, ProduceRecord, Reply, TopicDescription};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// How `serve` runs.
#[derive(Debug)]
pub struct ServeOptions {
    /// Keep serving after the end of standard input (the Kafka listener serves on);
    /// then only [`Input::Stop`] ends `serve`.
    pub outlive_input: bool,
    /// Event lines written right after `{"event": "ready"}`.
    pub ready_events: Vec<Value>,
    /// The longest request line taken (see [`request_lines::max_line_bytes`]).
    pub max_line_bytes: usize,
    /// The most request lines read and not yet answered.
    pub read_ahead_lines: usize,
    /// The most bytes of request lines read and not yet answered.
    pub read_ahead_bytes: usize,
}

impl ServeOptions {
    /// The defaults, with the longest line set by the core's batch limit in `config`.
    pub fn for_config(config: &broker_core::Config) -> ServeOptions {
        ServeOptions {
            outlive_input: false,
            ready_events: Vec::new(),
            max_line_bytes: request_lines::max_line_bytes(config.batch_bytes_limit()),
            read_ahead_lines: request_lines::READ_AHEAD_LINES,
            read_ahead_bytes: request_lines::READ_AHEAD_BYTES,
        }
    }
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions::for_config(&broker_core::Config::default())
    }
}

/// One request line, read without building a [`Value`] of the whole (which would take
/// many times the line's size): the command is parsed from its text, the id kept as text
/// until it is checked for size.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    /// The core's `Command`, with keys and values in any form [`jsonbytes`] reads.
    #[serde(default, borrow)]
    command: Option<&'a RawValue>,
    #[serde(default)]
    status: Option<IgnoredAny>,
}

/// The id of a line that is not a valid request, if one can be read.
#[derive(Debug, Deserialize)]
struct IdOnly<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
}

/// The longest request id taken, as JSON text: ids are echoed, so they are kept.
pub const MAX_ID_BYTES: usize = 64 << 10;

/// What a request line asks.
#[derive(Debug)]
pub enum Parsed {
    /// Nothing: an empty line.
    Blank,
    /// A command, by the request's id.
    Command(Value, Command),
    /// A status request.
    Status(Value),
    /// Not a request: the error to answer, with the id if one could be read.
    Invalid(Value, String),
}

/// Parses one request line (any bytes: a line that is not a request is
/// [`Parsed::Invalid`], with the error its reply gives).
pub fn parse_line(line: Vec<u8>) -> Parsed {
    let line = match String::from_utf8(line) {
        Ok(line) => line,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let msg = format!(
                "invalid request line: not UTF-8 (byte {at} is 0x{:02X}): JSON text is UTF-8; send bytes that \
                 are not as {{\"base64\": ...}}",
                e.as_bytes()[at]
            );
            return Parsed::Invalid(id_of(&String::from_utf8_lossy(e.as_bytes())), msg);
        }
    };
    if line.trim().is_empty() {
        return Parsed::Blank;
    }
    let request = match serde_json::from_str::<Request>(&line) {
        Ok(request) => request,
        Err(e) => return Parsed::Invalid(id_of(&line), format!("invalid request line: {e}")),
    };
    let id = match request.id.map(RawValue::get) {
        None => Value::Null,
        Some(text) if text.len() > MAX_ID_BYTES => {
            let msg = format!("the request's id is {} bytes of JSON, more than the {MAX_ID_BYTES} taken", text.len());
            return Parsed::Invalid(Value::Null, msg);
        }
        Some(text) => serde_json::from_str(text).unwrap_or(Value::Null),
    };
    match (request.command, request.status) {
        (Some(command), None) => match command_from_json(command.get()) {
            Ok(command) => Parsed::Command(id, command),
            Err(e) => Parsed::Invalid(id, format!("invalid command: {e}")),
        },
        (None, Some(_)) => Parsed::Status(id),
        _ => Parsed::Invalid(id, "a request needs exactly one of \"command\" and \"status\"".into()),
    }
}

/// The id of a line that is not a valid request, where one can be read and is not too
/// long to echo.
fn id_of(line: &str) -> Value {
    serde_json::from_str::<IdOnly>(line)
        .ok()
        .and_then(|r| r.id)
        .filter(|id| id.get().len() <= MAX_ID_BYTES)
        .and_then(|id| serde_json::from_str(id.get()).ok())
        .unwrap_or(Value::Null)
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
    /// How much of its grace delay is left now, in milliseconds (0: removal may run):
    /// never more than the whole delay, as the broker waits no longer should the clock
    /// have gone back since the delete.
    pub grace_left_ms: u64,
}

impl PendingJson {
    /// `d` as of `now`, in the broker's clock ([`Driver::clock`]).
    pub fn new(d: &DeletionStatus, now: broker_core::Time) -> PendingJson {
        PendingJson {
            name: d.name.clone(),
            id: d.topic.0,
            partitions: d.partitions,
            removed: d.removed,
            tombstone_durable: d.tombstone_durable,
            remove_after_unix_ms: d.remove_after.as_micros() / 1000,
            grace_left_ms: d.removal_due.as_micros().saturating_sub(now.as_micros()).div_ceil(1000),
        }
    }
}

/// The status of a driver, as `serve` and `status --json` report it.
pub fn status_of<M: Send + 'static>(driver: &Driver<M>) -> Status {
    Status {
        topics: driver.live_topics().iter().map(TopicJson::from).collect(),
        pending: driver.pending_deletions().iter().map(|d| PendingJson::new(d, driver.clock())).collect(),
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
/// [`ServeOptions::outlive_input`], until [`Input::Stop`]), beside the commands other
/// peers send the loop ([`crate::broker_loop`]); writes replies to `output` and notices
/// (warnings) to `log`. `input` is read on its own thread, within the bounds of
/// [`request_lines`].
pub fn serve(
    driver: Driver<Input>,
    input: impl BufRead + Send + 'static,
    output: &mut impl Write,
    log: &mut impl Write,
    options: ServeOptions,
) -> Outcome {
    let read_ahead = ReadAhead::new(options.read_ahead_lines, options.read_ahead_bytes);
    let reader = read_ahead.clone();
    let (mailbox, max_line) = (driver.mailbox(), options.max_line_bytes);
    // Reading blocks, so it has a thread of its own; it feeds lines into the loop.
    let spawned = std::thread::Builder::new().name("broker-fs-stdin".into()).spawn(move || {
        let mut input = input;
        while reader.wait_for_room() {
            let message = match request_lines::read_line(&mut input, max_line) {
                Ok(ReadLine::Line(line)) => {
                    reader.read(line.len());
                    LineInput::Line(line)
                }
                Ok(ReadLine::TooLong { bytes }) => {
                    reader.read(0);
                    LineInput::TooLong(bytes)
                }
                Ok(ReadLine::End) => LineInput::End,
                Err(e) => LineInput::ReadFailed(e),
            };
            let last = matches!(message, LineInput::End | LineInput::ReadFailed(_));
            if !mailbox.send(Input::Lines(message)) || last {
                return;
            }
        }
    });
    if let Err(e) = spawned {
        return Outcome::OutputClosed(e);
    }
    let outlive_input = options.outlive_input;
    let mut lines = JsonLines { output, log, max_line, ready_events: options.ready_events, read_ahead: &read_ahead };
    let outcome = match broker_loop::run(driver, &mut lines, outlive_input) {
        Ok(None) => Outcome::Finished,
        Ok(Some(reason)) => Outcome::Halted(reason),
        Err(e) => Outcome::OutputClosed(e),
    };
    // Lets the reading thread go if it waits for room.
    read_ahead.close();
    outcome
}

/// The JSON-lines side of `serve`'s loop: lines in, one reply line each out.
struct JsonLines<'a, O, L> {
    output: &'a mut O,
    log: &'a mut L,
    max_line: usize,
    ready_events: Vec<Value>,
    read_ahead: &'a ReadAhead,
}

impl<O: Write, L: Write> Lines for JsonLines<'_, O, L> {
    /// A line's id, and its length (counted as answered once its reply is written: see
    /// [`ReadAhead`]).
    type Waiting = (Value, usize);

    fn ready(&mut self, _driver: &mut Driver<Input>) -> std::io::Result<()> {
        write_line(self.output, &serde_json::json!({ "event": "ready" }))?;
        for event in &self.ready_events {
            write_line(self.output, event)?;
        }
        Ok(())
    }

    fn input(&mut self, input: LineInput, driver: &mut Driver<Input>) -> std::io::Result<Handled<(Value, usize)>> {
        match input {
            LineInput::End => return Ok(Handled::Ended),
            LineInput::ReadFailed(e) => {
                let _ =
                    writeln!(self.log, "warning: reading standard input failed ({e}): no more request lines are read");
                return Ok(Handled::Ended);
            }
            LineInput::TooLong(bytes) => {
                let msg = format!(
                    "request line of {bytes} bytes is longer than the {} bytes serve takes (a produce of the \
                     largest batch the broker accepts, every byte escaped): skipped to its newline; split the \
                     records over several produces, or send binary values as {{\"base64\": ...}}",
                    self.max_line
                );
                write_line(self.output, &serde_json::json!({ "id": null, "error": msg, "kind": null }))?;
                self.read_ahead.answered(0);
            }
            LineInput::Line(line) => {
                let size = line.len();
                match parse_line(line) {
                    Parsed::Blank => {}
                    Parsed::Command(id, command) => return Ok(Handled::Submitted(driver.submit(command), (id, size))),
                    Parsed::Status(id) => {
                        let status = serde_json::to_value(status_of(driver)).unwrap_or(Value::Null);
                        write_line(self.output, &serde_json::json!({ "id": id, "status": status }))?;
                    }
                    Parsed::Invalid(id, msg) => {
                        write_line(self.output, &serde_json::json!({ "id": id, "error": msg, "kind": null }))?;
                    }
                }
                self.read_ahead.answered(size);
            }
        }
        Ok(Handled::Answered)
    }

    fn reply(&mut self, waiting: Option<(Value, usize)>, reply: &Result<Reply, BrokerError>) -> std::io::Result<()> {
        match waiting {
            Some((id, size)) => {
                write_line(self.output, &reply_json(id, reply))?;
                self.read_ahead.answered(size);
            }
            None => write_line(self.output, &reply_json(Value::Null, reply))?,
        }
        Ok(())
    }

    fn halted(&mut self, reason: &HaltReason) -> std::io::Result<()> {
        // The caller prints the reason to standard error.
        write_line(self.output, &serde_json::json!({ "event": "halted", "reason": reason.to_string() }))
    }

    fn notices(&mut self, driver: &mut Driver<Input>) {
        emit_notices(driver, self.log);
    }
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
/// record may also come as a string or `{"base64": ...}` (see [`jsonbytes`]). A produce
/// is read straight into bytes: an array of numbers never becomes a [`Value`].
pub fn command_from_json(text: &str) -> Result<Command, String> {
    /// A produce, as `Command::Produce` with keys and values in any form.
    #[derive(Deserialize)]
    struct ProduceJson {
        topic: String,
        #[serde(default)]
        partition: Option<u32>,
        records: Vec<RecordJson>,
    }
    #[derive(Deserialize)]
    struct RecordJson {
        #[serde(default)]
        key: Option<JsonBytes>,
        value: JsonBytes,
    }
    // The variant's name, with its body still as text.
    let variant = serde_json::from_str::<BTreeMap<String, &RawValue>>(text).ok().filter(|m| m.len() == 1);
    match variant.as_ref().and_then(|m| m.get("Produce")) {
        Some(body) => {
            let p: ProduceJson = serde_json::from_str(body.get()).map_err(|e| format!("Produce: {e}"))?;
            let records = p
                .records
                .into_iter()
                .map(|r| ProduceRecord { key: r.key.map(|k| k.0), value: r.value.0.into() })
                .collect();
            Ok(Command::Produce { topic: p.topic, partition: p.partition, records })
        }
        None => serde_json::from_str(text).map_err(|e| e.to_string()),
    }
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
