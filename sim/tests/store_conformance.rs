//! The shared-store kit against the simulated store (`SimStore`), as every cluster seed
//! runs it, and with its listings' pages cut short as S3 may cut them (the simulator
//! does so with a seed's chance): the simulated store keeps the contract the real
//! stores' adapters are held to (`runtimes/cluster`'s tests run the same kit on them).

use broker_conformance::{check_store, FreshStore};
use broker_core::cluster::store::{StoreOp, StoreOutput, StoreResult};
use broker_core::Time;
use broker_sim::cluster::store::SimStore;

#[test]
fn the_simulated_store_conforms() {
    let mut subject = FreshStore(SimStore::default, |s: &mut SimStore, op: StoreOp| -> StoreResult {
        Ok(s.apply(Time::ZERO, &op).0)
    });
    check_store(&mut subject).assert_conforms();
}

#[test]
fn the_simulated_store_with_short_pages_conforms() {
    let mut subject = FreshStore(SimStore::default, |s: &mut SimStore, op: StoreOp| -> StoreResult {
        Ok(match s.apply(Time::ZERO, &op).0 {
            // Half of every page (one of a page of one), more said to follow.
            StoreOutput::Listed { mut keys, .. } if !keys.is_empty() => {
                keys.truncate(keys.len().div_ceil(2));
                StoreOutput::Listed { keys, more: true }
            }
            other => other,
        })
    });
    check_store(&mut subject).assert_conforms();
}
