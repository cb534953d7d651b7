//! Checking a produce against the limits, and placing its records in partitions: shared
//! by the broker and by cluster nodes, so both refuse and route alike.

use crate::command::{ProduceRecord, RecordPosition};
use crate::config::Config;
use crate::error::BrokerError;
use crate::partitioner::partition_for_key;

/// Refuses a produce of `records` to a topic of `partitions` partitions, named `name`,
/// that breaks a limit or names a partition the topic lacks. A refused produce changes
/// nothing.
pub fn check_produce(
    config: &Config,
    name: &str,
    partitions: u32,
    partition: Option<u32>,
    records: &[ProduceRecord],
) -> Result<(), BrokerError> {
    if let Some(p) = partition.filter(|p| *p >= partitions) {
        return Err(BrokerError::PartitionNotFound { name: name.to_string(), partition: p, partitions });
    }
    if records.is_empty() {
        return Err(BrokerError::InvalidRequest("a produce needs at least one record".into()));
    }
    if records.len() > config.max_batch_records {
        return Err(BrokerError::InvalidRequest(format!(
            "{} records exceed the batch limit of {}",
            records.len(),
            config.max_batch_records
        )));
    }
    let limit = config.max_record_bytes;
    if let Some(i) = records.iter().position(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.len() > limit) {
        return Err(BrokerError::InvalidRequest(format!("record {i} exceeds the size limit of {limit} bytes")));
    }
    let (bytes, max) = (crate::logcodec::batch_bytes(records), config.batch_bytes_limit());
    if bytes > max {
        return Err(BrokerError::BatchTooLarge { bytes, max });
    }
    Ok(())
}

/// A produce's records in one batch per partition.
#[derive(Debug)]
pub struct Placement<R = ProduceRecord> {
    /// The batches, in ascending partition order.
    pub batches: Vec<(u32, Vec<R>)>,
    /// Where each record went, in the order given: its partition, and its index in that
    /// partition's batch (the caller adds the partition's next offset).
    pub positions: Vec<RecordPosition>,
    /// The round-robin cursor after the keyless records.
    pub cursor: u32,
}

/// Places checked `records` in a topic of `partitions` partitions: all in `partition`
/// if given, else keyed ones by `murmur2(key) % partitions`, keyless ones round-robin
/// from `cursor`.
pub fn place(partitions: u32, cursor: u32, partition: Option<u32>, records: Vec<ProduceRecord>) -> Placement {
    place_as(partitions, cursor, partition, records, |_, record| record)
}

/// [`place`], each record stored in its batch as `make(its index in the batch, record)`
/// (the broker's appends, with offsets counted from 0, built where they go).
pub fn place_as<R>(
    partitions: u32,
    cursor: u32,
    partition: Option<u32>,
    records: Vec<ProduceRecord>,
    mut make: impl FnMut(u64, ProduceRecord) -> R,
) -> Placement<R> {
    let mut cursor = cursor;
    let mut batches: Vec<(u32, Vec<R>)> = Vec::new();
    let mut positions = Vec::with_capacity(records.len());
    for record in records {
        let p = match (partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => {
                let p = cursor % partitions;
                cursor = cursor.wrapping_add(1);
                p
            }
        };
        let i = match batches.binary_search_by_key(&p, |b| b.0) {
            Ok(i) => i,
            Err(i) => {
                batches.insert(i, (p, Vec::new()));
                i
            }
        };
        let batch = &mut batches[i].1;
        let index = batch.len() as u64;
        positions.push(RecordPosition { partition: p, offset: index });
        batch.push(make(index, record));
    }
    Placement { batches, positions, cursor }
}
