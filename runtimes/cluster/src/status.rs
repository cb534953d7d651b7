//! `status`: what the shared store says of the cluster, read as a node reads it. A node
//! of its own, which only fences (lists the journal, reads its entries and the newest
//! snapshot, folds them) and is never given the passing of time, so it removes,
//! compacts and reconciles nothing: status writes nothing to the store.

use crate::store::Store;
use broker_core::cluster::node::{Node, NodeEffect, NodeOptions};
use broker_core::{Command, Config, RequestId, Time};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// What status found.
#[derive(Debug)]
pub struct Status {
    /// The journal's position: the seq of the last entry folded.
    pub position: u64,
    /// Live topics: name, incarnation id, partitions.
    pub live: Vec<(String, u64, u32)>,
    /// Incarnations deleted whose objects are not all removed yet: name, id.
    pub deleting: Vec<(String, u64)>,
}

/// Reads the cluster's state from `store`; an error names what the store answered, or
/// that it did not answer within `timeout`.
pub async fn read(store: Arc<dyn Store>, timeout: Duration) -> Result<Status, String> {
    let options = NodeOptions {
        node: u32::MAX,
        boot: 0,
        config: Config::default(),
        list_limit: 1_000,
        tail_every_ms: 0,
        reconcile_every_ms: 0,
        compact_after_entries: 0,
        gather_ms: 0,
        request_timeout_ms: 0,
    };
    let mut node = Node::new(options);
    node.handle_command(Time::ZERO, RequestId(0), Command::ListTopics);
    let mut in_flight = FuturesUnordered::new();
    let mut last_error = None;
    let work = async {
        loop {
            while let Some(effect) = node.poll_effect() {
                match effect {
                    NodeEffect::Store { id, op } => {
                        let store = store.clone();
                        in_flight.push(async move { (id, store.run(op).await) });
                    }
                    NodeEffect::Reply { reply, .. } => return reply.map_err(|e| e.to_string()),
                }
            }
            // A failed operation waits for a retry that time would bring: status
            // reports it instead, at the deadline.
            let Some((id, result)) = in_flight.next().await else {
                std::future::pending::<()>().await;
                continue;
            };
            if let Err(e) = &result {
                last_error = Some(e.to_string());
            }
            node.handle_store(Time::ZERO, id, result);
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let why = last_error.unwrap_or_else(|| "no answer".into());
            return Err(format!("the store did not let the journal be read within {timeout:?}: {why}"));
        }
    }
    let catalog = node.catalog();
    Ok(Status {
        position: catalog.position(),
        live: catalog.live_topics().map(|(name, id, t)| (name.to_string(), id.0, t.partitions)).collect(),
        deleting: catalog.deleting().map(|(id, t)| (t.name.clone(), id.0)).collect(),
    })
}

/// The status as JSON (`status --json`): `reachable`, and `error` or what was found.
pub fn to_json(store: &str, status: &Result<Status, String>) -> Value {
    match status {
        Ok(s) => json!({
            "store": store,
            "reachable": true,
            "position": s.position,
            "live": s.live.iter().map(|(name, id, partitions)| json!({"name": name, "id": id, "partitions": partitions})).collect::<Vec<_>>(),
            "deleting": s.deleting.iter().map(|(name, id)| json!({"name": name, "id": id})).collect::<Vec<_>>(),
        }),
        Err(e) => json!({"store": store, "reachable": false, "error": e}),
    }
}

/// The status as text, a line per fact.
pub fn to_text(store: &str, status: &Result<Status, String>) -> String {
    match status {
        Err(e) => format!("store: {store}\nreachable: no: {e}\n"),
        Ok(s) => {
            let mut out = format!("store: {store}\nreachable: yes\njournal position: {}\n", s.position);
            out += &format!("live topics: {}\n", s.live.len());
            for (name, id, partitions) in &s.live {
                out += &format!("  {name} (incarnation {id}, {partitions} partitions)\n");
            }
            out += &format!("deletions whose objects are being removed: {}\n", s.deleting.len());
            for (name, id) in &s.deleting {
                out += &format!("  {name} (incarnation {id})\n");
            }
            out
        }
    }
}
