//! DescribeGroups: a group's state, protocol and members (their metadata and
//! assignments once it is stable, as Kafka shows them).

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use broker_core::{Command, Reply};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeSet;

/// Kafka's ACL operations on a group (read, delete, describe): every one is allowed,
/// as on a Kafka broker without an authorizer.
const GROUP_OPERATIONS: i32 = 1 << 3 | 1 << 6 | 1 << 8;

/// DescribeGroups. A group without members but with committed offsets is `Empty`; one
/// with neither is `Dead` (and, from version 6, `GROUP_ID_NOT_FOUND`), as in Kafka. A
/// group named twice is described once: its members' metadata and assignments (up to
/// 1 MiB each) would otherwise be written out again for every repetition.
pub(super) fn describe_groups(ctx: &Context, v: i16, r: DescribeGroupsRequest) -> Pending {
    let mut seen = BTreeSet::new();
    let views: Vec<_> = r
        .groups
        .into_iter()
        .filter(|g| seen.insert(g.clone()))
        .map(|g| {
            let view = ctx.groups.with(|c, _| c.describe(&g.0));
            (g, view)
        })
        .collect();
    let stored = views.iter().any(|(_, view)| view.is_none()).then(|| ctx.core.submit(Command::ListGroups));
    let operations = if v >= 3 && r.include_authorized_operations { GROUP_OPERATIONS } else { i32::MIN };
    Box::pin(async move {
        let stored: BTreeSet<String> = match stored {
            Some(answer) => match answer.get().await {
                Ok(Reply::Groups(names)) => names.into_iter().collect(),
                _ => BTreeSet::new(),
            },
            None => BTreeSet::new(),
        };
        let groups = views
            .into_iter()
            .map(|(group, view)| {
                let described = DescribedGroup::default().with_authorized_operations(operations);
                let Some(view) = view else {
                    if stored.contains(group.0.as_str()) {
                        return described.with_group_id(group).with_group_state(text("Empty"));
                    }
                    let described = described.with_group_id(group).with_group_state(text("Dead"));
                    return if v >= 6 {
                        described
                            .with_error_code(E::GroupIdNotFound.code())
                            .with_error_message(Some(text("no member and no committed offset")))
                    } else {
                        described
                    };
                };
                let members = view
                    .members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(text(m.member_id))
                            .with_client_id(text(m.client_id))
                            .with_client_host(text(m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment)
                    })
                    .collect();
                described
                    .with_group_id(group)
                    .with_group_state(text(view.state.name()))
                    .with_protocol_type(text(view.protocol_type))
                    .with_protocol_data(text(view.protocol))
                    .with_members(members)
            })
            .collect();
        Outcome::Respond(Response::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups)))
    })
}
