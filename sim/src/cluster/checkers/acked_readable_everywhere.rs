//! **acked-readable-everywhere**: once the run has settled, every record ever written
//! to a live topic reads back from every node, at its offset, to the partition's end;
//! each fetch shows the incarnation, the high watermark the store's record ends at, and
//! only records written there.

use super::settled::Settled;
use crate::violation::Checker;
use broker_core::{Command, Reply, TopicId};

/// A live topic as the journal holds it: name, incarnation, partitions.
pub type LiveTopic = (String, TopicId, u32);

/// The live topics the journal holds, to be read back.
pub fn live(cluster: &impl Settled) -> Vec<LiveTopic> {
    cluster.store().truth.live_topics().map(|(n, id, t)| (n.to_string(), id, t.partitions)).collect()
}

/// Reads every partition of `live` back from node `n`, fetch after fetch, and stops at
/// a partition's first wrong answer.
pub fn read_back(cluster: &mut impl Settled, n: usize, live: &[LiveTopic]) {
    for (name, topic, partitions) in live {
        for p in 0..*partitions {
            let end = cluster.store().end(*topic, p);
            let mut offset = 0;
            while offset < end {
                let max_records = cluster.max_fetch_records();
                let fetch = Command::Fetch { topic: name.clone(), partition: p, offset, max_records, max_bytes: None };
                let got = cluster.ask(n, fetch);
                let Some(Ok(Reply::Fetched { topic: t, records, high_watermark })) = got else {
                    cluster.flags().flag(
                        Checker::AckedReadableEverywhere,
                        format!("node {n}: fetch of {name:?}/{p}@{offset} answered {got:?}"),
                    );
                    break;
                };
                let store = cluster.store();
                let wrong = records.iter().find(|r| store.value_at(*topic, p, r.offset) != Some(&r.value[..]));
                if t != *topic || high_watermark != end || records.is_empty() || wrong.is_some() {
                    let first = records.first().map(|r| r.offset);
                    let wrong = wrong.is_some();
                    cluster.flags().flag(
                        Checker::AckedReadableEverywhere,
                        format!(
                            "node {n}: {name:?}/{p}@{offset} ({topic}, written to {end}) served {t} with {} records \
                             from {first:?}, high watermark {high_watermark}{}",
                            records.len(),
                            if wrong { ", one of them never written there" } else { "" }
                        ),
                    );
                    break;
                }
                offset += records.len() as u64;
            }
        }
    }
}
