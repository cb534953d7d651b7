//! SyncGroup: the leader hands out the assignments; every member gets its own, a
//! follower once the leader's have come (the answer is a future).

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::groups::{SyncRequest, Wait};
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::ResponseError as E;

pub(super) fn sync_group(ctx: &Context, v: i16, r: SyncGroupRequest) -> Pending {
    let request = SyncRequest {
        group: r.group_id.0.to_string(),
        member_id: r.member_id.to_string(),
        group_instance_id: r.group_instance_id.map(|s| s.to_string()),
        generation: r.generation_id,
        protocol_type: r.protocol_type.map(|s| s.to_string()),
        protocol_name: r.protocol_name.map(|s| s.to_string()),
        assignments: r.assignments.into_iter().map(|a| (a.member_id.to_string(), a.assignment)).collect(),
    };
    let answer = ctx.groups.with(|c, now| c.sync(now, request));
    Box::pin(async move {
        let outcome = match answer {
            Wait::Now(outcome) => outcome,
            Wait::Later(waiting) => waiting.await.unwrap_or(Err(E::CoordinatorNotAvailable)),
        };
        let response = match outcome {
            Ok(s) if v >= 5 => SyncGroupResponse::default()
                .with_protocol_type(s.protocol_type.map(text))
                .with_protocol_name(s.protocol_name.map(text))
                .with_assignment(s.assignment),
            Ok(s) => SyncGroupResponse::default().with_assignment(s.assignment),
            Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
        };
        Outcome::Respond(Response::SyncGroup(response))
    })
}
