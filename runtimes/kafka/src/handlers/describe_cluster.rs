//! DescribeCluster: the brokers Metadata names (this one, and on a cluster node the
//! other live ones), the cluster id, and this broker as the controller, as Metadata
//! reports them.

use super::context::{brokers, operations, ready, text, Context, Pending, CLUSTER_ID, CLUSTER_OPERATIONS};
use crate::apis::Response;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError as E;

/// Kafka's endpoint types (KIP-919): brokers, and the controllers of a KRaft quorum.
const BROKERS: i8 = 1;
const CONTROLLERS: i8 = 2;

/// DescribeCluster. Asked for controllers (version 1 on), it answers as a Kafka broker
/// does, `MISMATCHED_ENDPOINT_TYPE`: this listener is a broker's. No broker is ever
/// fenced, so asking for fenced ones too (version 2) lists the same brokers.
pub(super) fn describe_cluster(ctx: &Context, v: i16, r: DescribeClusterRequest) -> Pending {
    let response = DescribeClusterResponse::default();
    if v >= 1 && r.endpoint_type != BROKERS {
        let (error, message) = if r.endpoint_type == CONTROLLERS {
            let message = "this listener is a broker's, which names brokers only (endpoint type 1): there is no \
                           controller quorum to describe";
            (E::MismatchedEndpointType, message.to_string())
        } else {
            let message = format!("endpoint type {}: give 1 for brokers", r.endpoint_type);
            (E::UnsupportedEndpointType, message)
        };
        return ready(Response::DescribeCluster(
            response.with_error_code(error.code()).with_error_message(Some(text(message))),
        ));
    }
    let brokers = brokers(ctx)
        .into_iter()
        .map(|(id, host, port)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(text(host))
                .with_port(i32::from(port))
        })
        .collect();
    let authorized = if r.include_cluster_authorized_operations { operations(&CLUSTER_OPERATIONS) } else { i32::MIN };
    ready(Response::DescribeCluster(
        response
            .with_endpoint_type(BROKERS)
            .with_cluster_id(text(CLUSTER_ID))
            .with_controller_id(BrokerId(ctx.limits.node_id))
            .with_brokers(brokers)
            .with_cluster_authorized_operations(authorized),
    ))
}
