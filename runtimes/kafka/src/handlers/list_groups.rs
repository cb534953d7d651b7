//! ListGroups: the groups with members (in memory, with their state) and the groups
//! holding committed offsets (the core's, `Empty` unless they have members).

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use broker_core::{Command, Reply};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::ResponseError as E;
use std::collections::{BTreeMap, BTreeSet};

/// The type every group here has: Kafka's classic protocol.
const CLASSIC: &str = "classic";

/// ListGroups, filtered by state (version 4 on) and type (5 on), case-insensitively
/// as Kafka filters; every group is of the classic type.
pub(super) fn list_groups(ctx: &Context, v: i16, r: ListGroupsRequest) -> Pending {
    let stored = ctx.core.submit(Command::ListGroups);
    let members = ctx.groups.with(|c, _| c.list());
    Box::pin(async move {
        let mut groups: BTreeMap<String, (&'static str, String)> = BTreeMap::new();
        match stored.get().await {
            Ok(Reply::Groups(names)) => {
                for name in names {
                    groups.insert(name, ("Empty", String::new()));
                }
            }
            other => {
                let error = other.err().as_ref().map_or(E::UnknownServerError.code(), code);
                return Outcome::Respond(Response::ListGroups(ListGroupsResponse::default().with_error_code(error)));
            }
        }
        for g in members {
            groups.insert(g.group, (g.state.name(), g.protocol_type));
        }
        // Each filter read once, into a set: a long filter costs a lookup per group.
        let lower = |filter: &[kafka_protocol::protocol::StrBytes]| -> BTreeSet<String> {
            filter.iter().map(|f| f.to_ascii_lowercase()).collect()
        };
        let (states, types) = (lower(&r.states_filter), lower(&r.types_filter));
        let wanted =
            |filter: &BTreeSet<String>, value: &str| filter.is_empty() || filter.contains(&value.to_ascii_lowercase());
        let classic = wanted(&types, CLASSIC);
        let listed = groups
            .into_iter()
            .filter(|(_, (state, _))| v < 4 || wanted(&states, state))
            .filter(|_| v < 5 || classic)
            .map(|(group, (state, protocol_type))| {
                let g =
                    ListedGroup::default().with_group_id(GroupId(text(group))).with_protocol_type(text(protocol_type));
                let g = if v >= 4 { g.with_group_state(text(state)) } else { g };
                if v >= 5 {
                    g.with_group_type(text(CLASSIC))
                } else {
                    g
                }
            })
            .collect();
        Outcome::Respond(Response::ListGroups(ListGroupsResponse::default().with_groups(listed)))
    })
}
