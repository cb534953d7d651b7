//! CreatePartitions: refused for every topic. A topic's partition count is fixed when
//! it is created: a key's partition is `murmur2(key) % partitions`, so more partitions
//! would move keys, and the core has no command that adds any. The answer tells the
//! user to create a new topic with the partitions wanted.

use super::context::{text, Context, Outcome, Pending};
use crate::apis::Response;
use crate::errors::code;
use crate::Answer;
use broker_core::{Command, Reply};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, TopicName};
use kafka_protocol::ResponseError as E;
use std::collections::BTreeMap;

/// CreatePartitions, a request that only validates (`validate_only`) too: an unknown
/// topic gets `UNKNOWN_TOPIC_OR_PARTITION`, a known one `INVALID_PARTITIONS` with what
/// to do instead, and a name given twice is answered once, `INVALID_REQUEST`, as Kafka
/// answers it. Nothing changes.
pub(super) fn create_partitions(ctx: &Context, r: CreatePartitionsRequest) -> Pending {
    let mut named: BTreeMap<TopicName, usize> = BTreeMap::new();
    for t in &r.topics {
        *named.entry(t.name.clone()).or_default() += 1;
    }
    let mut asked: Vec<(TopicName, i32, Option<Answer>)> = Vec::new();
    for t in r.topics {
        match named.get_mut(&t.name) {
            // A duplicate, after its first mention: answered there.
            Some(0) => {}
            Some(n) if *n > 1 => {
                *n = 0;
                asked.push((t.name, t.count, None));
            }
            _ => {
                let answer = ctx.core.submit(Command::DescribeTopic { name: t.name.0.to_string() });
                asked.push((t.name, t.count, Some(answer)));
            }
        }
    }
    Box::pin(async move {
        let mut results = Vec::new();
        for (name, count, answer) in asked {
            let (error, message) = match answer {
                None => (
                    E::InvalidRequest.code(),
                    "Duplicate topic in request: each topic is named once a request; none of its mentions was \
                     answered otherwise"
                        .to_string(),
                ),
                Some(answer) => match answer.get().await {
                    Ok(Reply::Described(t)) => (E::InvalidPartitions.code(), refusal(&t.name, t.partitions, count)),
                    Ok(other) => (E::UnknownServerError.code(), format!("unexpected reply {other:?}")),
                    Err(e) => (code(&e), e.to_string()),
                },
            };
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(error)
                    .with_error_message(Some(text(message))),
            );
        }
        Outcome::Respond(Response::CreatePartitions(CreatePartitionsResponse::default().with_results(results)))
    })
}

/// Why `topic`, which has `has` partitions, does not get `asked` partitions, and what
/// to do instead.
fn refusal(topic: &str, has: u32, asked: i32) -> String {
    let fixed = "a topic's partition count is fixed when it is created";
    let partitions = |n: i64| if n == 1 { "1 partition".to_string() } else { format!("{n} partitions") };
    let (has, asked) = (i64::from(has), i64::from(asked));
    match asked.cmp(&has) {
        std::cmp::Ordering::Greater => format!(
            "topic {topic:?} has {} and cannot get more: {fixed} (a key's partition is murmur2(key) % partitions, \
             so adding partitions would move keys). To have {}, create a new topic with {} and produce to it",
            partitions(has),
            partitions(asked),
            partitions(asked),
        ),
        std::cmp::Ordering::Equal => format!("topic {topic:?} already has {} ({fixed})", partitions(has)),
        std::cmp::Ordering::Less => format!(
            "topic {topic:?} has {}, more than the {asked} asked for: partitions are never removed, and {fixed}",
            partitions(has)
        ),
    }
}
