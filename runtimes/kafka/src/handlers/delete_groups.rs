//! DeleteGroups: a group's committed offsets are forgotten, if it has no members.

use super::context::{Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use broker_core::{Command, Reply};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeSet;

/// DeleteGroups: `NON_EMPTY_GROUP` for a group with members; otherwise the core's
/// `DeleteGroup` (`GROUP_ID_NOT_FOUND` if it holds no offset). A group named twice is
/// answered once, as Kafka answers it (its response is keyed by group).
pub(super) fn delete_groups(ctx: &Context, r: DeleteGroupsRequest) -> Pending {
    let mut seen = BTreeSet::new();
    let deleting: Vec<_> = r
        .groups_names
        .into_iter()
        .filter(|g| seen.insert(g.clone()))
        .map(|g| {
            let answer = if ctx.groups.with(|c, _| c.has_members(&g.0)) {
                None
            } else {
                Some(ctx.core.submit(Command::DeleteGroup { group: g.0.to_string() }))
            };
            (g, answer)
        })
        .collect();
    Box::pin(async move {
        let mut results = Vec::new();
        for (group, answer) in deleting {
            let error = match answer {
                None => E::NonEmptyGroup.code(),
                Some(answer) => match answer.get().await {
                    Ok(Reply::GroupDeleted) => 0,
                    Ok(_) => E::UnknownServerError.code(),
                    Err(e) => code(&e),
                },
            };
            results.push(DeletableGroupResult::default().with_group_id(group).with_error_code(error));
        }
        Outcome::Respond(Response::DeleteGroups(DeleteGroupsResponse::default().with_results(results)))
    })
}
