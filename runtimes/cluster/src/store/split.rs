//! Metadata in one store and data in another (`--meta-store URL --data-store URL`): the
//! journal and snapshots (`j/`, `s/`) in, say, PostgreSQL, the segments (`d/`) in object
//! storage, as the key layout already separates them (`broker_core::cluster::keys`).
//!
//! A key goes to the data store when it begins with `d/`, else to the metadata store.
//! A listing whose prefix decides the store goes there alone; one whose prefix does
//! not (an empty prefix, or `d`) lists both past the same key and merges their pages:
//! the merged page ends at the last key it returns, so keys either store held past it
//! are listed by the next page, and more follow if either store said so or the merge
//! left keys out.

use super::adapter::{Pending, Store};
use broker_core::cluster::keys::DATA_PREFIX;
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use std::sync::Arc;

/// Two stores, one for metadata and one for data.
#[derive(Clone)]
pub struct Split {
    meta: Arc<dyn Store>,
    data: Arc<dyn Store>,
}

/// Where a prefix's keys live.
enum Side {
    Meta,
    Data,
    Both,
}

fn side_of_prefix(prefix: &str) -> Side {
    if prefix.starts_with(DATA_PREFIX) {
        Side::Data
    } else if DATA_PREFIX.starts_with(prefix) {
        Side::Both
    } else {
        Side::Meta
    }
}

impl Split {
    /// Metadata in `meta`, data in `data`.
    pub fn new(meta: Arc<dyn Store>, data: Arc<dyn Store>) -> Split {
        Split { meta, data }
    }

    fn of_key(&self, key: &str) -> &Arc<dyn Store> {
        if key.starts_with(DATA_PREFIX) {
            &self.data
        } else {
            &self.meta
        }
    }

    /// Carries out `op`.
    pub async fn apply(&self, op: StoreOp) -> StoreResult {
        match &op {
            StoreOp::Create { key, .. } | StoreOp::Get { key } | StoreOp::Delete { key } => {
                self.of_key(key).run(op.clone()).await
            }
            StoreOp::List { prefix, after, limit } => match side_of_prefix(prefix) {
                Side::Meta => self.meta.run(op).await,
                Side::Data => self.data.run(op).await,
                Side::Both => {
                    let (meta, data) = futures::join!(self.meta.run(op.clone()), self.data.run(op.clone()));
                    Ok(merge([listed(meta?)?, listed(data?)?], after.as_deref(), *limit))
                }
            },
        }
    }
}

/// A listing's page: its keys, and whether more follow.
type Page = (Vec<String>, bool);

fn listed(output: StoreOutput) -> Result<Page, StoreError> {
    match output {
        StoreOutput::Listed { keys, more } => Ok((keys, more)),
        other => Err(StoreError::Failed(format!("a store answered a listing with {other:?}"))),
    }
}

/// Two stores' pages of one listing as one page. A store that said more follow may hold
/// keys past its page's last key (or past `after`, if its page was empty), so the merged
/// page stops at the least such key: the next page goes on from there in both stores.
fn merge(pages: [Page; 2], after: Option<&str>, limit: u32) -> StoreOutput {
    let mut bound: Option<Option<String>> = None;
    let mut more = false;
    for (keys, page_more) in &pages {
        if *page_more {
            more = true;
            let last = keys.last().cloned().or_else(|| after.map(str::to_string));
            bound = Some(match bound {
                Some(b) => b.min(last),
                None => last,
            });
        }
    }
    let mut keys: Vec<String> = pages.into_iter().flat_map(|(keys, _)| keys).collect();
    keys.sort_unstable();
    keys.dedup();
    if let Some(bound) = bound {
        // `None`: a store said more follow from the very start, and gave nothing.
        keys.retain(|k| bound.as_ref().is_some_and(|b| k <= b));
    }
    if keys.len() > limit as usize {
        keys.truncate(limit as usize);
        more = true;
    }
    StoreOutput::Listed { keys, more }
}

impl Store for Split {
    fn run(&self, op: StoreOp) -> Pending {
        let store = self.clone();
        Box::pin(async move { store.apply(op).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(keys: &[&str], more: bool) -> Page {
        (keys.iter().map(|k| k.to_string()).collect(), more)
    }

    fn keys_of(out: StoreOutput) -> (Vec<String>, bool) {
        listed(out).unwrap()
    }

    #[test]
    fn a_merged_page_stops_where_a_store_with_more_stopped() {
        // The metadata store's page was cut short at "j/2": the data store's keys past it
        // wait for the next page, or "j/3" and on would be skipped.
        let out = merge([page(&["j/1", "j/2"], true), page(&["d/1", "d/2"], false)], None, 10);
        assert_eq!(keys_of(out), (vec!["d/1".into(), "d/2".into(), "j/1".into(), "j/2".into()], true));
        // Data keys past the metadata page's last key wait for the next page.
        let out = merge([page(&["a/1"], true), page(&["d/1", "d/2"], false)], None, 10);
        assert_eq!(keys_of(out), (vec!["a/1".into()], true));
        // An empty page with more: nothing past `after` yet.
        let out = merge([page(&[], true), page(&["d/1"], false)], Some("a"), 10);
        assert_eq!(keys_of(out), (vec![], true));
        let out = merge([page(&[], true), page(&["d/1"], false)], None, 10);
        assert_eq!(keys_of(out), (vec![], true));
    }

    #[test]
    fn a_merged_page_keeps_its_limit() {
        let out = merge([page(&["j/1", "j/2"], false), page(&["d/1", "d/2"], false)], None, 3);
        assert_eq!(keys_of(out), (vec!["d/1".into(), "d/2".into(), "j/1".into()], true));
        let out = merge([page(&["j/1"], false), page(&["d/1"], false)], None, 3);
        assert_eq!(keys_of(out), (vec!["d/1".into(), "j/1".into()], false));
    }
}
