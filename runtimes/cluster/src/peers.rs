//! The nodes' registry in the shared store, for `serve --spread-leadership`: Metadata
//! then names every live node and spreads the partitions' leadership over them, so that
//! clients send each partition's produces to one node. (Nodes leading partitions of
//! one topic still race each other for the topic's next object: DESIGN.md, section 10.)
//!
//! Each such node creates `n/{node}/{boot}/{beat}` every second, holding its Kafka
//! address, and deletes its beats before the last; it lists `n/` as often, and takes a
//! node as live while it has seen that node's newest beat change within
//! [`LIVE_FOR`] (by its own clock: no two machines' clocks are compared). A node that
//! stopped cleanly deletes its beats; those of a node that died are deleted by the
//! others once unchanged for [`FORGET_AFTER`]. The registry only steers clients: every
//! node serves every partition, so a stale view costs a client a retry on another node,
//! never a wrong answer, and the protocol of DESIGN.md section 10 never reads `n/`.

use crate::store::Store;
use broker_core::cluster::store::{StoreOp, StoreOutput};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The registry's prefix in the store.
pub const PREFIX: &str = "n/";
/// How often a node beats and reads the others' beats.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);
/// A node whose newest beat has not changed for this long is not named in Metadata.
pub const LIVE_FOR: Duration = Duration::from_secs(3);
/// A node whose newest beat has not changed for this long has its beats deleted.
pub const FORGET_AFTER: Duration = Duration::from_secs(60);

/// A beat's key.
fn beat_key(node: u32, boot: u64, beat: u64) -> String {
    format!("{PREFIX}{node:010}/{boot:020}/{beat:020}")
}

/// A beat key's node, boot and beat, if it is one.
fn parse_beat_key(key: &str) -> Option<(u32, u64, u64)> {
    let mut parts = key.strip_prefix(PREFIX)?.split('/');
    let (node, boot, beat) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || node.len() != 10 || boot.len() != 20 || beat.len() != 20 {
        return None;
    }
    Some((node.parse().ok()?, boot.parse().ok()?, beat.parse().ok()?))
}

/// What a node has seen of one life (node, boot) of another.
#[derive(Debug)]
struct Seen {
    /// Its newest beat, and when this node saw it change.
    beat: u64,
    changed: Instant,
    /// Its Kafka address, once read.
    address: Option<(String, u16)>,
    /// Every beat key listed for it.
    keys: Vec<String>,
}

/// One node's registry: its own beats and what it has seen of the others.
pub struct Registry {
    node: u32,
    boot: u64,
    address: String,
    store: Arc<dyn Store>,
    seen: Mutex<BTreeMap<(u32, u64), Seen>>,
    /// The task that beats and looks, stopped by [`Registry::leave`].
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("node", &self.node).field("boot", &self.boot).finish_non_exhaustive()
    }
}

impl Registry {
    /// Starts beating and listening on the current tokio runtime, as `node` of this
    /// `boot`, reachable by Kafka clients at `address` (host:port).
    pub fn start(store: Arc<dyn Store>, node: u32, boot: u64, address: String) -> Arc<Registry> {
        let registry = Arc::new(Registry {
            node,
            boot,
            address,
            store,
            seen: Mutex::new(BTreeMap::new()),
            task: Mutex::new(None),
        });
        let r = registry.clone();
        let task = tokio::spawn(async move {
            let mut beat = 0u64;
            loop {
                r.beat(beat).await;
                r.look().await;
                beat += 1;
                tokio::time::sleep(BEAT_EVERY).await;
            }
        });
        *registry.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        registry
    }

    /// Creates beat `beat` and deletes the one two before it (the one before stays,
    /// so that a reader that lists between the two always finds one).
    async fn beat(&self, beat: u64) {
        let op = StoreOp::Create { key: beat_key(self.node, self.boot, beat), bytes: self.address.clone().into() };
        let _ = self.store.run(op).await;
        if let Some(old) = beat.checked_sub(2) {
            let _ = self.store.run(StoreOp::Delete { key: beat_key(self.node, self.boot, old) }).await;
        }
    }

    /// Lists `n/`, notes whose beats changed, reads new lives' addresses, and deletes
    /// the beats of lives unchanged for [`FORGET_AFTER`]. A store that fails leaves the
    /// view as it was, to age.
    async fn look(&self) {
        let mut keys = Vec::new();
        let mut after = None;
        loop {
            let op = StoreOp::List { prefix: PREFIX.into(), after: after.clone(), limit: 1_000 };
            match self.store.run(op).await {
                Ok(StoreOutput::Listed { keys: page, more }) => {
                    after = page.last().cloned().or(after);
                    keys.extend(page);
                    if !more {
                        break;
                    }
                }
                _ => return,
            }
        }
        let now = Instant::now();
        let mut newest: BTreeMap<(u32, u64), (u64, Vec<String>)> = BTreeMap::new();
        for key in keys {
            if let Some((node, boot, beat)) = parse_beat_key(&key) {
                let e = newest.entry((node, boot)).or_insert((beat, Vec::new()));
                e.0 = e.0.max(beat);
                e.1.push(key);
            }
        }
        let mut unread = Vec::new();
        let mut forgotten = Vec::new();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.retain(|life, _| newest.contains_key(life));
            for (life, (beat, keys)) in newest {
                if life == (self.node, self.boot) {
                    continue;
                }
                // A life first seen is live only once its beat changes: its beats may be
                // a dead node's, left behind.
                let first = now.checked_sub(LIVE_FOR).unwrap_or(now);
                let s = seen.entry(life).or_insert(Seen { beat, changed: first, address: None, keys: Vec::new() });
                if beat != s.beat {
                    (s.beat, s.changed) = (beat, now);
                }
                s.keys = keys;
                if s.address.is_none() {
                    unread.push((life, beat_key(life.0, life.1, beat)));
                }
                if now.duration_since(s.changed) >= FORGET_AFTER {
                    forgotten.extend(s.keys.clone());
                }
            }
        }
        for (life, key) in unread {
            if let Ok(StoreOutput::Found(bytes)) = self.store.run(StoreOp::Get { key }).await {
                let address = String::from_utf8_lossy(&bytes).into_owned();
                let parsed = address.rsplit_once(':').and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)));
                if let Some(s) = self.seen.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&life) {
                    s.address = parsed;
                }
            }
        }
        for key in forgotten {
            let _ = self.store.run(StoreOp::Delete { key }).await;
        }
    }

    /// Stops beating, then deletes this life's beats (a clean stop).
    pub async fn leave(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
        let prefix = format!("{PREFIX}{:010}/{:020}/", self.node, self.boot);
        let op = StoreOp::List { prefix, after: None, limit: 1_000 };
        if let Ok(StoreOutput::Listed { keys, .. }) = self.store.run(op).await {
            for key in keys {
                let _ = self.store.run(StoreOp::Delete { key }).await;
            }
        }
    }
}

impl broker_kafka::Peers for Registry {
    fn others(&self) -> Vec<(i32, String, u16)> {
        let now = Instant::now();
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // The newest live life of each node id (a node restarted has a new boot).
        let mut live: BTreeMap<u32, (u64, String, u16)> = BTreeMap::new();
        for ((node, boot), s) in seen.iter() {
            let Some((host, port)) = &s.address else { continue };
            if *node == self.node || now.duration_since(s.changed) >= LIVE_FOR {
                continue;
            }
            if live.get(node).is_none_or(|(b, _, _)| *b < *boot) {
                live.insert(*node, (*boot, host.clone(), *port));
            }
        }
        live.into_iter().filter_map(|(node, (_, host, port))| Some((i32::try_from(node).ok()?, host, port))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beat_keys_parse_as_written_and_nothing_else_does() {
        let key = beat_key(7, 1_796_510_603_440_325_258, 42);
        assert_eq!(parse_beat_key(&key), Some((7, 1_796_510_603_440_325_258, 42)));
        for other in ["n/", "n/0000000007", "d/0000000007/00000000000000000001/00000000000000000002", "n/7/1/2"] {
            assert_eq!(parse_beat_key(other), None, "{other}");
        }
        assert_eq!(parse_beat_key(&format!("{key}/x")), None);
    }
}
