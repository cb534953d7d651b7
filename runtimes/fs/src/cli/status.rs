//! `status`: live topics, damaged records, pending deletions with their progress, what
//! recovery noticed, and what the lock file says; read-only.

use super::failure::Failure;
use super::output::emit;
use broker_core::{Durability, TopicId};
use broker_fs::datadir::{lock_file_pid, pid_running};
use broker_fs::driver::Driver;
use broker_fs::serve::{DamagedJson, PendingJson, TopicJson};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// The durability as `status` prints it, saying what it costs.
fn durability_line(d: Durability) -> String {
    match d {
        Durability::Journaled => "journaled (a produce is acknowledged once its log is synced and then its end is \
                                  journaled)"
            .into(),
        Durability::LogSync { journal_ends_ms } => format!(
            "log-sync (a produce is acknowledged once its log is synced; ends are journaled within {journal_ends_ms} \
             ms, and rot in records past the journal's end is cut at the next start, reported)"
        ),
    }
}

fn durability_json(d: Durability) -> serde_json::Value {
    match d {
        Durability::Journaled => json!({ "mode": "journaled" }),
        Durability::LogSync { journal_ends_ms } => json!({ "mode": "log-sync", "journal_ends_ms": journal_ends_ms }),
    }
}

/// Reports the state of the directory opened read-only.
pub fn run(d: &mut Driver, json: bool, data_dir: &Path, out: &mut impl Write) -> Result<(), Failure> {
    let pending: Vec<PendingJson> = d.pending_deletions().iter().map(|p| PendingJson::new(p, d.clock())).collect();
    let topics: Vec<TopicJson> = d.live_topics().iter().map(TopicJson::from).collect();
    let damaged: Vec<DamagedJson> = d.broker().damaged_records().iter().map(DamagedJson::from).collect();
    let notices = d.take_notices();
    // Status holds the lock shared, so no writer holds it now; what LOCK says is for the
    // operator who wonders whether a leftover pid is stale.
    let pid = lock_file_pid(data_dir);
    let pid_running = pid.and_then(pid_running);
    if json {
        let notices: Vec<String> = notices.iter().map(ToString::to_string).collect();
        let lock = json!({ "pid": pid, "pid_running": pid_running });
        let durability = durability_json(d.broker().config().durability);
        return emit(
            out,
            &json!({
                "durability": durability,
                "topics": topics,
                "pending": pending,
                "damaged": damaged,
                "lock": lock,
                "notices": notices
            }),
        );
    }
    writeln!(out, "durability: {}", durability_line(d.broker().config().durability))?;
    writeln!(out, "topics: {} live", topics.len())?;
    for r in &damaged {
        writeln!(
            out,
            "damaged: {:?} (id {}) partition {} offsets {}..{} cannot be read back: {}",
            r.name,
            TopicId(r.id),
            r.partition,
            r.from,
            r.to,
            r.detail
        )?;
    }
    pending_text(out, &pending)?;
    for n in &notices {
        writeln!(out, "{n}")?;
    }
    let named = match (pid, pid_running) {
        (None, _) => String::new(),
        (Some(pid), Some(false)) => format!("; LOCK names pid {pid}, the last writer, not running (nothing to do)"),
        (Some(pid), Some(true)) => format!("; LOCK names pid {pid}, running, not writing"),
        (Some(pid), None) => format!("; LOCK names pid {pid}"),
    };
    writeln!(out, "lock: free{named}")?;
    Ok(())
}

/// The pending deletions, one a line, each with how far its removal has gone.
fn pending_text(out: &mut impl Write, pending: &[PendingJson]) -> std::io::Result<()> {
    if pending.is_empty() {
        return writeln!(out, "pending deletions: none");
    }
    writeln!(out, "pending deletions: {}", pending.len())?;
    for p in pending {
        let durable = if p.tombstone_durable { "" } else { " (tombstone not yet durable)" };
        let stage = if p.grace_left_ms > 0 {
            format!("waits in its grace delay, {:.1} s left", p.grace_left_ms as f64 / 1000.0)
        } else {
            "its grace delay is over: removal runs while a broker-fs command that writes (recover, serve, create, \
             produce, delete) has the directory open"
                .to_string()
        };
        writeln!(
            out,
            "  {:?} (id {}): {} of {} logs removed{durable}; {stage}",
            p.name,
            TopicId(p.id),
            p.removed,
            p.partitions
        )?;
    }
    Ok(())
}
