//! What each Kafka request does to the broker core, and the response it gets: one
//! module per API or pair of APIs.
//!
//! Every handler submits its core commands at once, while the connection's requests are
//! read (so a connection's commands reach the core in the order it sent them), and
//! returns a future that waits for their replies and builds the response.

mod api_versions;
mod context;
mod create_topics;
mod delete_topics;
mod fetch;
mod list_offsets;
mod metadata;
mod offset_for_leader_epoch;
mod produce;

pub use context::{leader_epoch, topic_uuid, Context, Outcome, Pending};
pub use create_topics::{GRACE_CONFIG, INTERNAL_TOPICS};
pub use fetch::{fetch_reservation, FETCH_RESPONSE_MAX};

use crate::apis::Request;

/// Handles one decoded request of version `v`.
pub fn handle(ctx: &Context, v: i16, request: Request) -> Pending {
    match request {
        Request::ApiVersions(_) => api_versions::api_versions(),
        Request::Metadata(r) => metadata::metadata(ctx, v, r),
        Request::Produce(r) => produce::produce(ctx, r),
        Request::Fetch(r) => fetch::fetch(ctx, r),
        Request::ListOffsets(r) => list_offsets::list_offsets(ctx, v, r),
        Request::CreateTopics(r) => create_topics::create_topics(ctx, r),
        Request::DeleteTopics(r) => delete_topics::delete_topics(ctx, r),
        Request::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::offsets_for_epochs(ctx, r),
    }
}
