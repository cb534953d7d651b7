//! InitProducerId: a producer id for an idempotent producer, handed out by the core
//! once durable, at epoch 0. Transactional producers are refused.

use super::context::{Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use broker_core::{Command, Reply};
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError as E;

/// What a transactional producer is told, by InitProducerId and by FindCoordinator for
/// a transaction coordinator: `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, the one error that
/// kafka-python, librdkafka, aiokafka and kafkajs all take as fatal at once (any other
/// is retried until the client's timeout, or reported as unexpected). FindCoordinator
/// (version 1 on) carries [`NO_TRANSACTIONS`] with it, which librdkafka shows.
pub(super) const TRANSACTIONS_REFUSED: E = E::TransactionalIdAuthorizationFailed;

/// Why transactions are refused, where a response has room for a message.
pub(super) const NO_TRANSACTIONS: &str = "this broker (broker-core) does not support transactions: \
     use an idempotent producer without transactional.id";

/// InitProducerId. A non-transactional request gets a new producer id at epoch 0, as
/// from Kafka, which also ignores the id and epoch a request names (KIP-360: a producer
/// that lost its sequence state asks again) and hands a new id out: a client takes it
/// as it takes a new epoch, its sequences starting again at 0.
pub(super) fn init_producer_id(ctx: &Context, r: InitProducerIdRequest) -> Pending {
    if r.transactional_id.is_some() {
        // Transactions need a transaction coordinator, markers and read-committed
        // fetches, none of which this broker has.
        let response = refused(TRANSACTIONS_REFUSED.code());
        return Box::pin(async move { Outcome::Respond(Response::InitProducerId(response)) });
    }
    let answer = ctx.core.submit(Command::InitProducer);
    Box::pin(async move {
        let response = match answer.get().await {
            Ok(Reply::ProducerInitialized { producer_id, epoch }) => {
                match (i64::try_from(producer_id), i16::try_from(epoch)) {
                    (Ok(id), Ok(epoch)) => {
                        InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(epoch)
                    }
                    // Past Kafka's fields: no client could use it.
                    _ => refused(E::UnknownServerError.code()),
                }
            }
            Ok(_) => refused(E::UnknownServerError.code()),
            Err(e) => refused(code(&e)),
        };
        Outcome::Respond(Response::InitProducerId(response))
    })
}

/// A refusal: `error`, with no producer id (-1) and no epoch (-1), as Kafka answers.
fn refused(error: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default().with_error_code(error).with_producer_id(ProducerId(-1)).with_producer_epoch(-1)
}
