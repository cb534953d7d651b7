//! ApiVersions: the APIs and versions served ([`crate::apis::SUPPORTED`], and the
//! group and producer APIs where the broker keeps what they need).

use super::context::{ready, Context, Pending};
use crate::apis::{api_versions as served, Response};

/// ApiVersions at a version served; one of a newer version is answered by the
/// listener itself, as Kafka specifies (`UNSUPPORTED_VERSION` in a version 0 response).
pub(super) fn api_versions(ctx: &Context) -> Pending {
    ready(Response::ApiVersions(served(0, &ctx.limits)))
}
