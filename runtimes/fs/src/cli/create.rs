//! `create NAME --partitions N [--grace-ms MS]`.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Command, Reply, TopicSettings};
use broker_fs::driver::Driver;
use serde_json::json;
use std::io::Write;

/// Creates the topic and says so.
pub fn run(
    d: &mut Driver,
    name: &str,
    partitions: u32,
    grace_ms: u64,
    json: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let settings = TopicSettings { deletion_grace_ms: grace_ms };
    let command = Command::CreateTopic { name: name.to_string(), partitions, settings };
    let reply = d.request(command).map_err(|e| {
        let hint = format!(
            "The creation of topic {name:?} is journaled: fix the cause (a file or directory in the way of \
             the log, a full disk, permissions) and the next start of broker-fs creates its missing logs \
             (`broker-fs list` then shows the topic)"
        );
        Failure::waiting(e, &hint)
    })?;
    let Reply::Created { topic } = reply else { return Err(Failure::unexpected(&reply)) };
    if json {
        emit(out, &json!({ "name": name, "id": topic.0, "partitions": partitions, "grace_ms": grace_ms }))?;
    } else {
        writeln!(out, "created topic {name:?} (id {topic}, {partitions} partitions)")?;
    }
    Ok(())
}
