//! What each Kafka request does to the broker core (and, for the group APIs, to the
//! groups' membership, [`crate::groups`]), and the response it gets: one module per API.
//!
//! Every handler submits its core commands at once, while the connection's requests are
//! read (so a connection's commands reach the core in the order it sent them), and
//! returns a future that waits for their replies and builds the response.

mod api_versions;
mod context;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod sync_group;

pub use context::{leader_epoch, topic_uuid, Context, Outcome, Pending};
pub use create_topics::{GRACE_CONFIG, INTERNAL_TOPICS};
pub use fetch::{fetch_reservation, FETCH_RESPONSE_MAX};

use crate::apis::Request;

/// Handles one decoded request of version `v` from the client named `client_id` in
/// its request header.
pub fn handle(ctx: &Context, v: i16, client_id: &str, request: Request) -> Pending {
    match request {
        Request::ApiVersions(_) => api_versions::api_versions(ctx),
        Request::Metadata(r) => metadata::metadata(ctx, v, r),
        Request::Produce(r) => produce::produce(ctx, v, r),
        Request::Fetch(r) => fetch::fetch(ctx, v, r),
        Request::ListOffsets(r) => list_offsets::list_offsets(ctx, v, r),
        Request::CreateTopics(r) => create_topics::create_topics(ctx, r),
        Request::DeleteTopics(r) => delete_topics::delete_topics(ctx, r),
        Request::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::offsets_for_epochs(ctx, r),
        Request::FindCoordinator(r) => find_coordinator::find_coordinator(ctx, v, r),
        Request::JoinGroup(r) => join_group::join_group(ctx, v, client_id, r),
        Request::SyncGroup(r) => sync_group::sync_group(ctx, v, r),
        Request::Heartbeat(r) => heartbeat::heartbeat(ctx, r),
        Request::LeaveGroup(r) => leave_group::leave_group(ctx, v, r),
        Request::OffsetCommit(r) => offset_commit::offset_commit(ctx, v, r),
        Request::OffsetFetch(r) => offset_fetch::offset_fetch(ctx, v, r),
        Request::ListGroups(r) => list_groups::list_groups(ctx, v, r),
        Request::DescribeGroups(r) => describe_groups::describe_groups(ctx, v, r),
        Request::DeleteGroups(r) => delete_groups::delete_groups(ctx, r),
        Request::InitProducerId(r) => init_producer_id::init_producer_id(ctx, r),
        Request::DescribeConfigs(r) => describe_configs::describe_configs(ctx, r),
        Request::DescribeCluster(r) => describe_cluster::describe_cluster(ctx, v, r),
        Request::CreatePartitions(r) => create_partitions::create_partitions(ctx, r),
    }
}
