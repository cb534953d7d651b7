//! `list`: the live topics, as a table or one JSON object each.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Command, Reply};
use broker_fs::driver::Driver;
use broker_fs::serve::TopicJson;
use std::io::Write;

/// Lists the live topics with their record counts.
pub fn run(d: &mut Driver, json: bool, out: &mut impl Write) -> Result<(), Failure> {
    let reply = d.request(Command::ListTopics)?;
    let Reply::Topics(topics) = reply else { return Err(Failure::unexpected(&reply)) };
    if json {
        for t in &topics {
            emit(out, &serde_json::to_value(TopicJson::from(t)).unwrap_or_default())?;
        }
    } else if topics.is_empty() {
        writeln!(out, "no topics")?;
    } else {
        writeln!(out, "{:<24} {:>6} {:>10} {:>8}", "NAME", "ID", "PARTITIONS", "RECORDS")?;
        for t in &topics {
            let records: u64 = t.high_watermarks.iter().map(|hw| hw - t.log_start).sum();
            writeln!(out, "{:<24} {:>6} {:>10} {:>8}", t.name, t.id.to_string(), t.partitions, records)?;
        }
    }
    Ok(())
}
