//! FindCoordinator: this broker coordinates every group. Transactions and share groups
//! have no coordinator here.

use super::context::{ready, text, Context, Pending};
use super::init_producer_id::{NO_TRANSACTIONS, TRANSACTIONS_REFUSED};
use crate::apis::Response;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

/// The key type of a consumer group (Kafka's `CoordinatorType.GROUP`).
const GROUP: i8 = 0;
/// The key type of a transactional id (`CoordinatorType.TRANSACTION`).
const TRANSACTION: i8 = 1;

/// FindCoordinator, one key (versions 0-3) or several (4 on): for a group, this
/// broker's own id, host and port (as Metadata names it); for a transactional id,
/// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, which every client takes as fatal, with
/// the reason (transactions are not supported); for any other key type,
/// `INVALID_REQUEST`, which clients do not retry.
pub(super) fn find_coordinator(ctx: &Context, v: i16, r: FindCoordinatorRequest) -> Pending {
    let (node, host, port) = (ctx.limits.node_id, ctx.local.ip().to_string(), i32::from(ctx.local.port()));
    let answer = |key: StrBytes| {
        let c = Coordinator::default().with_key(key);
        let (error, why) = match r.key_type {
            GROUP => return c.with_node_id(BrokerId(node)).with_host(text(host.clone())).with_port(port),
            TRANSACTION => (TRANSACTIONS_REFUSED, NO_TRANSACTIONS.to_string()),
            other => {
                (E::InvalidRequest, format!("key type {other} has no coordinator here: only consumer groups (0) do"))
            }
        };
        c.with_node_id(BrokerId(-1))
            .with_host(text(""))
            .with_port(-1)
            .with_error_code(error.code())
            .with_error_message(Some(text(why)))
    };
    let response = if v >= 4 {
        let coordinators = r.coordinator_keys.iter().map(|k| answer(k.clone())).collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let c = answer(r.key.clone());
        let message = if v >= 1 { c.error_message } else { None };
        FindCoordinatorResponse::default()
            .with_error_code(c.error_code)
            .with_error_message(message)
            .with_node_id(c.node_id)
            .with_host(c.host)
            .with_port(c.port)
    };
    ready(Response::FindCoordinator(response))
}
