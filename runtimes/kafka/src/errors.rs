//! The Kafka error code a client gets for each broker-core error.

use broker_core::BrokerError;
use kafka_protocol::ResponseError as E;

/// The Kafka error code for `e`. Unknown topics and partitions (deleted ones included,
/// from the moment their deletion is acknowledged) are `UNKNOWN_TOPIC_OR_PARTITION`,
/// which clients treat as a retriable metadata error; a request cut off by a halt, whose
/// outcome is unknown, is `REQUEST_TIMED_OUT`, as a broker that never answered would be.
pub fn code(e: &BrokerError) -> i16 {
    match e {
        BrokerError::TopicNotFound { .. } | BrokerError::PartitionNotFound { .. } => E::UnknownTopicOrPartition,
        // A position of an incarnation that is gone: as for its topic, which is gone too.
        BrokerError::StaleIncarnation { .. } => E::UnknownTopicOrPartition,
        BrokerError::InvalidGroup { .. } => E::InvalidGroupId,
        BrokerError::GroupNotFound { .. } => E::GroupIdNotFound,
        BrokerError::OffsetMetadataTooLarge { .. } => E::OffsetMetadataTooLarge,
        BrokerError::UnknownProducer { .. } => E::UnknownProducerId,
        BrokerError::ProducerFenced { .. } => E::InvalidProducerEpoch,
        BrokerError::OutOfOrderSequence { .. } => E::OutOfOrderSequenceNumber,
        BrokerError::InvalidTopicName { .. } => E::InvalidTopicException,
        BrokerError::InvalidPartitionCount { .. } => E::InvalidPartitions,
        BrokerError::InvalidSettings(_) => E::InvalidConfig,
        BrokerError::TopicAlreadyExists { .. } => E::TopicAlreadyExists,
        BrokerError::OffsetOutOfRange { .. } | BrokerError::OffsetBeforeStart { .. } => E::OffsetOutOfRange,
        // Kafka's answer to a batch over `max.message.bytes`; the Java producer splits
        // the batch and tries again.
        BrokerError::BatchTooLarge { .. } => E::MessageTooLarge,
        BrokerError::InvalidRequest(_) => E::InvalidRequest,
        BrokerError::Unavailable(_) => E::LeaderNotAvailable,
        BrokerError::Halted(_) | BrokerError::OutcomeUnknown(_) => E::RequestTimedOut,
        BrokerError::CorruptRecord { .. } => E::CorruptMessage,
        BrokerError::ReadOnly(_) | BrokerError::Storage(_) => E::KafkaStorageError,
        // Kafka has no code for a broker's bound on what it keeps.
        BrokerError::DuplicateRequestId(_) | BrokerError::CommittedOffsetsFull { .. } => E::UnknownServerError,
    }
    .code()
}
