//! The shared-store kit against the core's `MemStore`, the reference every simulated
//! store wraps, and against a store that breaks each rule (so that every check can fail).

use broker_conformance::{check_store, store_checks, FreshStore};
use broker_core::cluster::memstore::MemStore;
use broker_core::cluster::store::{StoreOp, StoreOutput, StoreResult};

type Mem = FreshStore<fn() -> MemStore, fn(&mut MemStore, StoreOp) -> StoreResult>;

fn mem() -> Mem {
    FreshStore(MemStore::default, |s, op| Ok(s.apply(&op)))
}

#[test]
fn memstore_conforms() {
    let report = check_store(&mut mem());
    report.assert_conforms();
    assert_eq!(report.passed().len(), store_checks().len());
}

/// A store broken in one way: `bend` rewrites `MemStore`'s output of an operation.
fn broken(bend: fn(&StoreOp, StoreOutput) -> StoreOutput) -> Vec<&'static str> {
    let mut subject = FreshStore(MemStore::default, move |s: &mut MemStore, op: StoreOp| {
        let out = s.apply(&op);
        Ok(bend(&op, out))
    });
    check_store(&mut subject).failed()
}

#[test]
fn each_broken_rule_is_caught() {
    // Listings in reverse order.
    let failed = broken(|_, out| match out {
        StoreOutput::Listed { mut keys, more } => {
            keys.reverse();
            StoreOutput::Listed { keys, more }
        }
        other => other,
    });
    assert!(failed.contains(&"list-in-byte-order"), "{failed:?}");
    // A page that says nothing follows when it is full: a listing stops early.
    let failed = broken(|_, out| match out {
        StoreOutput::Listed { keys, .. } => StoreOutput::Listed { keys, more: false },
        other => other,
    });
    assert!(failed.contains(&"list-pages-continue"), "{failed:?}");
    // Every create wins.
    let failed = broken(|_, out| match out {
        StoreOutput::Exists => StoreOutput::Created,
        other => other,
    });
    assert!(failed.contains(&"create-existing-keeps-first"), "{failed:?}");
    assert!(failed.contains(&"create-race-one-winner"), "{failed:?}");
    // Values cut to 1 MiB.
    let failed = broken(|_, out| match out {
        StoreOutput::Found(b) if b.len() > 1 << 20 => StoreOutput::Found(b.slice(..1 << 20)),
        other => other,
    });
    assert_eq!(failed, ["create-then-get"]);
    // A delete of an absent key said missing (as Found of nothing would be wrong too).
    let failed = broken(|op, out| match (op, out) {
        (StoreOp::Delete { .. }, _) => StoreOutput::Missing,
        (_, other) => other,
    });
    assert_eq!(failed, ["delete-removes"]);
    // Keys the layout does not know are hidden.
    let failed = broken(|_, out| match out {
        StoreOutput::Listed { keys, more } => StoreOutput::Listed {
            keys: keys.into_iter().filter(|k| !k.contains("README") && !k.contains("notes")).collect(),
            more,
        },
        other => other,
    });
    assert_eq!(failed, ["foreign-keys-listed"]);
}

#[test]
fn a_store_that_fails_everything_fails_every_check() {
    let mut subject = FreshStore(MemStore::default, |_: &mut MemStore, _: StoreOp| {
        Err(broker_core::cluster::store::StoreError::Failed("unreachable".into()))
    });
    let report = check_store(&mut subject);
    assert_eq!(report.failed().len(), store_checks().len(), "{report}");
}
