//! `describe NAME`: one live topic, its settings and its partitions' record counts.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Command, Reply, TopicDescription};
use broker_fs::driver::Driver;
use broker_fs::serve::TopicJson;
use std::io::Write;

/// Describes the topic.
pub fn run(d: &mut Driver, name: String, json: bool, out: &mut impl Write) -> Result<(), Failure> {
    let reply = d.request(Command::DescribeTopic { name })?;
    let Reply::Described(t) = reply else { return Err(Failure::unexpected(&reply)) };
    if json {
        emit(out, &serde_json::to_value(TopicJson::from(&t)).unwrap_or_default())?;
    } else {
        text(out, &t)?;
    }
    Ok(())
}

fn text(out: &mut impl Write, t: &TopicDescription) -> std::io::Result<()> {
    writeln!(out, "topic {:?}", t.name)?;
    writeln!(out, "  id          {}", t.id)?;
    writeln!(out, "  partitions  {}", t.partitions)?;
    writeln!(out, "  grace       {} ms", t.settings.deletion_grace_ms)?;
    if t.log_start > 0 {
        // Past every offset of the topics deleted before this one was created.
        writeln!(out, "  offsets     from {}", t.log_start)?;
    }
    for (p, hw) in t.high_watermarks.iter().enumerate() {
        writeln!(out, "  partition {p}: {} records", hw - t.log_start)?;
    }
    Ok(())
}
