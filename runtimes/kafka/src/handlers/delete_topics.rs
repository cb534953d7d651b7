//! DeleteTopics: acknowledged once the deletion is durable; the logs go in the
//! background.

use super::context::{text, topic_uuid, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{Command, Reply};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// DeleteTopics. A name given twice is answered once, `INVALID_REQUEST`, and not
/// deleted, as Kafka answers it; the other names are deleted.
pub(super) fn delete_topics(ctx: &Context, r: DeleteTopicsRequest) -> Pending {
    let mut named: BTreeMap<TopicName, usize> = BTreeMap::new();
    for name in &r.topic_names {
        *named.entry(name.clone()).or_default() += 1;
    }
    let mut deleting: Vec<(TopicName, Option<Answer>)> = Vec::new();
    for name in r.topic_names {
        match named.get_mut(&name) {
            // A duplicate, after its first mention: answered there.
            Some(0) => {}
            Some(n) if *n > 1 => {
                *n = 0;
                deleting.push((name, None));
            }
            _ => {
                let answer = ctx.core.submit(Command::DeleteTopic { name: name.0.to_string() });
                deleting.push((name, Some(answer)));
            }
        }
    }
    Box::pin(async move {
        let mut results = Vec::new();
        for (name, answer) in deleting {
            let result = DeletableTopicResult::default().with_name(Some(name));
            let Some(answer) = answer else {
                let message = "Duplicate topic name: each name is deleted once a request; none of its mentions was";
                results.push(result.with_error_code(E::InvalidRequest.code()).with_error_message(Some(text(message))));
                continue;
            };
            results.push(match answer.get().await {
                Ok(Reply::DeleteAccepted { topic }) => result.with_topic_id(topic_uuid(topic)),
                Ok(other) => result
                    .with_error_code(E::UnknownServerError.code())
                    .with_error_message(Some(text(format!("unexpected reply {other:?}")))),
                Err(e) => result.with_error_code(code(&e)).with_error_message(Some(text(e.to_string()))),
            });
        }
        Outcome::Respond(Response::DeleteTopics(DeleteTopicsResponse::default().with_responses(results)))
    })
}
