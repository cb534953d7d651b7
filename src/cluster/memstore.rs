//! A shared store in memory that keeps the store contract exactly and never fails: the
//! reference for tests, and what the simulator wraps in latency and faults.

use crate::cluster::store::{StoreOp, StoreOutput};
use crate::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Objects by key, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStore {
    objects: BTreeMap<String, Bytes>,
}

impl MemStore {
    /// Carries out `op` at once.
    pub fn apply(&mut self, op: &StoreOp) -> StoreOutput {
        match op {
            StoreOp::Create { key, bytes } => {
                if self.objects.contains_key(key) {
                    StoreOutput::Exists
                } else {
                    self.objects.insert(key.clone(), bytes.clone());
                    StoreOutput::Created
                }
            }
            StoreOp::Get { key } => match self.objects.get(key) {
                Some(bytes) => StoreOutput::Found(bytes.clone()),
                None => StoreOutput::Missing,
            },
            StoreOp::List { prefix, after, limit } => {
                // Start past `after` when it is within the prefix's range: a listing
                // costs the keys it returns, not the keys before them.
                let from = match after {
                    Some(a) if a.as_str() >= prefix.as_str() => Bound::Excluded(a),
                    _ => Bound::Included(prefix),
                };
                let mut keys: Vec<String> = self
                    .objects
                    .range::<String, _>((from, Bound::Unbounded))
                    .map(|(k, _)| k)
                    .take_while(|k| k.starts_with(prefix.as_str()))
                    .filter(|k| after.as_ref().is_none_or(|a| *k > a))
                    .take(*limit as usize + 1)
                    .cloned()
                    .collect();
                let more = keys.len() > *limit as usize;
                keys.truncate(*limit as usize);
                StoreOutput::Listed { keys, more }
            }
            StoreOp::Delete { key } => {
                self.objects.remove(key);
                StoreOutput::Deleted
            }
        }
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.objects.get(key).map(|b| &b[..])
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(key: &str) -> StoreOp {
        StoreOp::Create { key: key.into(), bytes: key.as_bytes().to_vec().into() }
    }

    #[test]
    fn create_is_create_if_absent_and_list_walks_a_prefix_in_order() {
        let mut s = MemStore::default();
        assert_eq!(s.apply(&create("j/2")), StoreOutput::Created);
        assert_eq!(s.apply(&StoreOp::Create { key: "j/2".into(), bytes: vec![9].into() }), StoreOutput::Exists);
        assert_eq!(s.get("j/2"), Some(&b"j/2"[..]), "the first writer's bytes stay");
        for k in ["j/1", "j/3", "i/9", "k/0", "j"] {
            s.apply(&create(k));
        }
        let list =
            |after: Option<&str>, limit| StoreOp::List { prefix: "j/".into(), after: after.map(Into::into), limit };
        let page =
            |keys: &[&str], more| StoreOutput::Listed { keys: keys.iter().map(|k| k.to_string()).collect(), more };
        assert_eq!(s.apply(&list(None, 10)), page(&["j/1", "j/2", "j/3"], false));
        assert_eq!(s.apply(&list(None, 3)), page(&["j/1", "j/2", "j/3"], false), "exactly full, and the last");
        assert_eq!(s.apply(&list(Some("j/1"), 1)), page(&["j/2"], true));
        assert_eq!(s.apply(&list(Some("j/3"), 10)), page(&[], false));
        assert_eq!(s.apply(&StoreOp::Delete { key: "j/2".into() }), StoreOutput::Deleted);
        assert_eq!(s.apply(&StoreOp::Delete { key: "j/2".into() }), StoreOutput::Deleted, "deleting twice is fine");
        assert_eq!(s.apply(&StoreOp::Get { key: "j/2".into() }), StoreOutput::Missing);
        assert_eq!(s.keys().collect::<Vec<_>>(), vec!["i/9", "j", "j/1", "j/3", "k/0"]);
    }
}
