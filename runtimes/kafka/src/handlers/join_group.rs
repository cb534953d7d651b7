//! JoinGroup: a member joins or rejoins a group, and is answered once the rebalance
//! completes (the answer is a future; the connection's later responses wait behind it,
//! as Kafka's do).

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::groups::{JoinOutcome, JoinRequest, Wait};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::ResponseError as E;

pub(super) fn join_group(ctx: &Context, v: i16, client_id: &str, r: JoinGroupRequest) -> Pending {
    let member_id = r.member_id.to_string();
    let request = JoinRequest {
        group: r.group_id.0.to_string(),
        member_id: member_id.clone(),
        group_instance_id: r.group_instance_id.map(|s| s.to_string()),
        client_id: client_id.to_string(),
        client_host: super::context::client_host(ctx),
        session_timeout_ms: r.session_timeout_ms,
        rebalance_timeout_ms: if v == 0 { -1 } else { r.rebalance_timeout_ms },
        protocol_type: r.protocol_type.to_string(),
        protocols: r.protocols.into_iter().map(|p| (p.name.to_string(), p.metadata)).collect(),
        require_known_member_id: v >= 4,
    };
    let answer = ctx.groups.with(|c, now| c.join(now, request));
    Box::pin(async move {
        let outcome = match answer {
            Wait::Now(outcome) => outcome,
            Wait::Later(waiting) => {
                waiting.await.unwrap_or_else(|_| JoinOutcome::failed(E::CoordinatorNotAvailable, member_id))
            }
        };
        Outcome::Respond(Response::JoinGroup(response(v, outcome)))
    })
}

/// The response at version `v`: the protocol type from version 7 on; the protocol name
/// null only from version 7 on (an empty string before, where it cannot be null).
fn response(v: i16, outcome: JoinOutcome) -> JoinGroupResponse {
    let base = JoinGroupResponse::default();
    match outcome {
        JoinOutcome::Joined(j) => {
            let members = j
                .members
                .into_iter()
                .map(|(id, metadata)| {
                    JoinGroupResponseMember::default().with_member_id(text(id)).with_metadata(metadata)
                })
                .collect();
            let protocol_name = j.protocol_name.unwrap_or_default();
            base.with_generation_id(j.generation)
                .with_protocol_type(if v >= 7 { j.protocol_type.map(text) } else { None })
                .with_protocol_name(Some(text(protocol_name)))
                .with_leader(text(j.leader))
                .with_member_id(text(j.member_id))
                .with_members(members)
        }
        JoinOutcome::Failed { error, member_id } => base
            .with_error_code(error.code())
            .with_generation_id(-1)
            .with_protocol_name(if v >= 7 { None } else { Some(text("")) })
            .with_member_id(text(member_id)),
    }
}
