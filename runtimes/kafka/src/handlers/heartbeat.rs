//! Heartbeat: a member is alive; it is told when the group rebalances.

use super::context::{ready, Context, Pending};
use crate::apis::Response;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

pub(super) fn heartbeat(ctx: &Context, r: HeartbeatRequest) -> Pending {
    let (group, member) = (r.group_id.0.to_string(), r.member_id.to_string());
    let instance = r.group_instance_id.is_some();
    let answer = ctx.groups.with(|c, now| c.heartbeat(now, &group, r.generation_id, &member, instance));
    let error = answer.err().map_or(0, |e| e.code());
    ready(Response::Heartbeat(HeartbeatResponse::default().with_error_code(error)))
}
