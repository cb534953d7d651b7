//! LeaveGroup: members leave (one before version 3, several from it on), and the group
//! rebalances without them.

use super::context::{ready, Context, Pending};
use crate::apis::Response;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

pub(super) fn leave_group(ctx: &Context, v: i16, r: LeaveGroupRequest) -> Pending {
    let group = r.group_id.0.to_string();
    let members: Vec<(String, Option<String>)> = if v >= 3 {
        r.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
            .collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let answers = ctx.groups.with(|c, now| c.leave(now, &group, &members));
    let response = if v >= 3 {
        // A group not in memory: each member is unknown (Kafka's answer, the top-level
        // error staying 0).
        let codes: Vec<i16> = match answers {
            Ok(answers) => answers.iter().map(|a| a.err().map_or(0, |e| e.code())).collect(),
            Err(e) => vec![e.code(); members.len()],
        };
        let members = r
            .members
            .into_iter()
            .zip(codes)
            .map(|(m, e)| {
                MemberResponse::default()
                    .with_member_id(m.member_id)
                    .with_group_instance_id(m.group_instance_id)
                    .with_error_code(e)
            })
            .collect();
        LeaveGroupResponse::default().with_members(members)
    } else {
        let error = match answers {
            Ok(answers) => answers.first().and_then(|a| a.err()).map_or(0, |e| e.code()),
            Err(e) => e.code(),
        };
        LeaveGroupResponse::default().with_error_code(error)
    };
    ready(Response::LeaveGroup(response))
}
