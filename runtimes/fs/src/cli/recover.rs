//! `recover`: the directory recovered (by opening it), every pending deletion waited for,
//! and a report of what recovery did.

use super::failure::Failure;
use super::output::emit;
use broker_core::Notice as CoreNotice;
use broker_fs::driver::Driver;
use broker_fs::report::Notice;
use broker_fs::serve::{PendingJson, TopicJson};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// What to do when the wait for the pending deletions gives up.
const HINT: &str = "Fix the cause, then run `broker-fs recover` again";

/// Waits until nothing is left to do, then reports.
pub fn run(d: &mut Driver, json: bool, data_dir: &Path, out: &mut impl Write) -> Result<(), Failure> {
    let resumed: Vec<PendingJson> = d.pending_deletions().iter().map(|p| PendingJson::new(p, d.clock())).collect();
    if !resumed.is_empty() && !json {
        eprintln!("waiting for {} pending deletion(s) to finish...", resumed.len());
    }
    d.wait_quiescent(None).map_err(|e| Failure::waiting(e, HINT))?;
    // The finished deletions are listed on their own below.
    let mut notices = d.take_notices();
    notices.retain(|n| !matches!(n, Notice::Broker(CoreNotice::DeletionFinished { .. })));
    let topics: Vec<TopicJson> = d.live_topics().iter().map(TopicJson::from).collect();
    let strays: Vec<String> = notices
        .iter()
        .filter_map(|n| match n {
            Notice::Broker(CoreNotice::StrayLogRemoved { log }) => Some(log.file_name()),
            _ => None,
        })
        .collect();
    let unknown: Vec<String> = notices
        .iter()
        .filter_map(|n| match n {
            Notice::UnknownEntry { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let epoch = d.broker().journal_epoch();
    if json {
        let notices: Vec<String> = notices.iter().map(ToString::to_string).collect();
        return emit(
            out,
            &json!({
                "data_dir": data_dir.display().to_string(),
                "journal_epoch": epoch,
                "topics": topics,
                "finished_deletions": resumed,
                "stray_logs_removed": strays,
                "unknown_entries": unknown,
                "pending": [],
                "notices": notices,
            }),
        );
    }
    writeln!(out, "recovered {} (journal epoch {epoch})", data_dir.display())?;
    writeln!(out, "topics: {} live", topics.len())?;
    for r in &resumed {
        writeln!(
            out,
            "finished the deletion of {:?} (id t{}): {} of {} logs were removed before, all are now",
            r.name, r.id, r.removed, r.partitions
        )?;
    }
    if strays.is_empty() {
        writeln!(out, "stray logs removed: none")?;
    }
    for n in &notices {
        writeln!(out, "{n}")?;
    }
    writeln!(out, "pending deletions: none")?;
    Ok(())
}
