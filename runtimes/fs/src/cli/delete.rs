//! `delete NAME [--wait]`: acknowledged once the tombstone is durable; with `--wait`,
//! done once every log of the topic is removed.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Command, Reply};
use broker_fs::driver::Driver;
use serde_json::json;
use std::io::Write;

/// What to do when `--wait` gives up on the removal of the logs.
const WAIT_HINT: &str = "The deletion is acknowledged (its tombstone is durable): fix the cause, then \
                         `broker-fs recover` removes the remaining logs";

/// Deletes the topic, waits for its logs to go if asked, and says what is left.
pub fn run(d: &mut Driver, name: &str, wait: bool, json: bool, out: &mut impl Write) -> Result<(), Failure> {
    let reply = d.request(Command::DeleteTopic { name: name.to_string() })?;
    let Reply::DeleteAccepted { topic } = reply else { return Err(Failure::unexpected(&reply)) };
    let partitions = d.pending_deletions().iter().find(|p| p.topic == topic).map(|p| p.partitions);
    let logs = partitions.map_or("its logs".to_string(), |n| format!("its {n} logs"));
    if wait {
        if !json {
            eprintln!("deleted topic {name:?} (id {topic}); waiting for {logs} to be removed...");
        }
        d.wait_deletion(topic, None).map_err(|e| Failure::waiting(e, WAIT_HINT))?;
    }
    if json {
        let state = if wait { "removed" } else { "pending" };
        emit(out, &json!({ "name": name, "id": topic.0, "deleted": true, "physical": state }))?;
    } else if wait {
        writeln!(out, "deleted topic {name:?} (id {topic}): the tombstone is durable and {logs} are removed")?;
    } else {
        // This process exits now: the removal does not go on without it.
        writeln!(
            out,
            "deleted topic {name:?} (id {topic}): the tombstone is durable; {logs} are still on disk. \
             `broker-fs recover` removes them (so does a running `serve`); any other command that writes \
             (create, produce, delete) resumes the removal for as long as it runs"
        )?;
    }
    Ok(())
}
