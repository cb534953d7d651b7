//! The admin APIs that tools call, against `broker-fs serve --kafka`: DescribeConfigs
//! (a topic's settings as the broker keeps and enforces them, the broker's own values,
//! the names filter, and the refusals), DescribeCluster (the broker Metadata names) and
//! CreatePartitions (refused for every topic: a partition count is fixed at creation),
//! first on the wire, then through kafka-python's `KafkaAdminClient` and
//! confluent-kafka's `AdminClient`, whose calls `tests/kafka/admin.py` makes. kcat has no
//! admin call (`kcat -L` is Metadata only) and is not run here.
//!
//! The Python comes from `BROKER_KAFKA_PYTHON` (else `python3`), as for
//! `kafka_clients.rs`; `.ci/kafka-clients` installs it. Without the clients each client
//! test prints one `skipped:` line and passes, unless `BROKER_REQUIRE_KAFKA_CLIENTS=1`.

mod common;

use common::clients::{installed, python, run};
use common::wire::{batch, connect, frame, name, record, response, start};
use common::{KafkaServer, TempDir};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::ResponseError as E;
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One client connection: each request's response is read before the next is sent.
struct Client {
    s: TcpStream,
    id: i32,
}

impl Client {
    fn new(server: &KafkaServer) -> Client {
        Client { s: connect(server), id: 0 }
    }

    fn call<Q: Encodable + HeaderVersion, R: Decodable + HeaderVersion>(
        &mut self,
        api: ApiKey,
        v: i16,
        request: &Q,
    ) -> R {
        self.id += 1;
        self.s.write_all(&frame(api, v, self.id, request)).unwrap();
        let (id, r) = response::<R>(&mut self.s, v);
        assert_eq!(id, self.id, "the response to request {}", self.id);
        r
    }

    /// Creates `topic` with `partitions` and `configs`; it must succeed.
    fn create(&mut self, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        let configs = configs
            .iter()
            .map(|(k, v)| CreatableTopicConfig::default().with_name(text(k)).with_value(Some(text(v))))
            .collect();
        let r = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(configs)]);
        let got: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &r);
        assert_eq!(got.topics[0].error_code, 0, "create {topic}: {:?}", got.topics[0].error_message);
    }

    /// The live topics and their partition counts, by Metadata.
    fn topics(&mut self) -> Vec<(String, usize)> {
        let got: MetadataResponse = self.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None));
        let mut topics: Vec<(String, usize)> = got
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(), t.partitions.len()))
            .collect();
        topics.sort();
        topics
    }

    fn describe(&mut self, v: i16, resources: Vec<DescribeConfigsResource>) -> Vec<DescribeConfigsResult> {
        let r = DescribeConfigsRequest::default()
            .with_resources(resources)
            .with_include_synonyms(true)
            .with_include_documentation(v >= 3);
        let got: DescribeConfigsResponse = self.call(ApiKey::DescribeConfigs, v, &r);
        got.results
    }
}

fn resource(kind: i8, name_: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
    DescribeConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(text(name_))
        .with_configuration_keys(keys.map(|k| k.iter().map(|k| text(k)).collect()))
}

/// A config as the test checks it: name, value, source, type.
fn entry(c: &DescribeConfigsResourceResult) -> (String, String, i8, i8) {
    (c.name.to_string(), c.value.as_deref().unwrap_or("null").to_string(), c.config_source, c.config_type)
}

fn owned(entries: &[(&str, &str, i8, i8)]) -> Vec<(String, String, i8, i8)> {
    entries.iter().map(|(n, v, s, t)| (n.to_string(), v.to_string(), *s, *t)).collect()
}

/// The configs of a topic with a grace delay of `grace` ms, in Kafka's sources (1: the
/// topic's own, 5: the default) and types (2: string, 3: int, 5: long, 7: list).
fn topic_configs(grace: &str) -> Vec<(String, String, i8, i8)> {
    owned(&[
        ("cleanup.policy", "delete", 5, 7),
        ("compression.type", "producer", 5, 2),
        ("deletion.grace.ms", grace, if grace == "0" { 5 } else { 1 }, 5),
        ("max.message.bytes", "1048576", 5, 3),
        ("message.timestamp.type", "CreateTime", 5, 2),
        ("retention.bytes", "-1", 5, 5),
        ("retention.ms", "-1", 5, 5),
    ])
}

/// Every version of DescribeConfigs describes a topic's settings as the broker keeps
/// them (its grace delay as given, or the default), read-only, each its own synonym,
/// documented from version 3 on; the names filter is honoured, unknown names dropped.
#[test]
fn describe_configs_gives_a_topics_settings_as_kept() {
    let dir = TempDir::new("kafka-admin-topic-configs");
    let server = start(&dir);
    let mut c = Client::new(&server);
    c.create("graced", 3, &[("deletion.grace.ms", "5000")]);
    c.create("plain", 2, &[]);
    for v in 1..=4 {
        let results = c.describe(
            v,
            vec![
                resource(2, "graced", None),
                resource(2, "plain", None),
                resource(2, "graced", Some(&["retention.ms", "max.message.bytes", "no.such.config"])),
                // An empty list asks for every config, as Kafka reads it.
                resource(2, "plain", Some(&[])),
            ],
        );
        assert_eq!(results.len(), 4, "v{v}");
        for r in &results {
            assert_eq!((r.error_code, r.error_message.as_deref(), r.resource_type), (0, None, 2), "v{v}: {r:?}");
            for c in &r.configs {
                assert!(c.read_only && !c.is_sensitive, "v{v}: {c:?}");
                let synonym = &c.synonyms[..];
                assert!(
                    synonym.len() == 1 && synonym[0].name == c.name && synonym[0].value == c.value,
                    "v{v}: itself as its one synonym: {c:?}"
                );
                if v >= 3 {
                    let doc = c.documentation.as_deref().unwrap_or("");
                    assert!(doc.len() > 20, "v{v}: documentation from version 3 on: {c:?}");
                }
            }
        }
        let entries = |i: usize| results[i].configs.iter().map(entry).collect::<Vec<_>>();
        // The types are on the wire from version 3 on.
        let typed = |mut e: Vec<(String, String, i8, i8)>| {
            if v < 3 {
                e.iter_mut().for_each(|c| c.3 = 0);
            }
            e
        };
        assert_eq!(entries(0), typed(topic_configs("5000")), "v{v}");
        assert_eq!(entries(1), typed(topic_configs("0")), "v{v}");
        let named: Vec<String> = entries(2).into_iter().map(|e| e.0).collect();
        assert_eq!(named, ["max.message.bytes", "retention.ms"], "v{v}: the names asked for, no others");
        assert_eq!(entries(3), entries(1), "v{v}: every config");
        assert_eq!(results[0].resource_name.as_str(), "graced");
    }
}

/// The `max.message.bytes` described is the limit a produce meets: a batch of that many
/// bytes is appended, one a byte larger gets MESSAGE_TOO_LARGE.
#[test]
fn the_described_max_message_bytes_is_the_limit_enforced() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let dir = TempDir::new("kafka-admin-max-message");
    let server = start(&dir);
    let mut c = Client::new(&server);
    c.create("t", 1, &[]);
    let results = c.describe(4, vec![resource(2, "t", Some(&["max.message.bytes"]))]);
    let limit: usize = results[0].configs[0].value.as_deref().unwrap().parse().unwrap();
    // One record whose value fills the batch to `bytes` (the record's own framing
    // varies by a byte or two with the value's length: found by trying).
    let sized = |bytes: usize| {
        (bytes.saturating_sub(100)..bytes)
            .map(|n| batch(&[record(0, None, "x".repeat(n))]))
            .find(|b| b.len() == bytes)
            .unwrap_or_else(|| panic!("no batch of {bytes} bytes"))
    };
    for (bytes, error) in [(limit, 0), (limit + 1, E::MessageTooLarge.code())] {
        let r = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name("t")).with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(sized(bytes)))]),
        ]);
        let got: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
        let p = &got.responses[0].partition_responses[0];
        assert_eq!(p.error_code, error, "a batch of {bytes} bytes: {:?}", p.error_message);
    }
}

/// An unknown topic, an invalid name, a broker other than this one and a resource type
/// without configs each get Kafka's error with a message that names the problem; the
/// broker's own id gets the broker-wide values, and "" (the cluster's dynamic defaults)
/// none, without error. Nothing changes.
#[test]
fn describe_configs_refuses_what_it_cannot_describe() {
    let dir = TempDir::new("kafka-admin-refusals");
    let server = start(&dir);
    let mut c = Client::new(&server);
    c.create("t", 1, &[]);
    let before = c.topics();
    let results = c.describe(
        4,
        vec![
            resource(2, "no-such-topic", None),
            resource(2, "bad/name", None),
            resource(4, "0", None),
            resource(4, "", None),
            resource(4, "7", None),
            resource(4, "zero", None),
            resource(8, "0", None),
            resource(32, "group", None),
            resource(4, "0", Some(&["node.id", "message.max.bytes"])),
        ],
    );
    let answers: Vec<(i16, String, usize)> = results
        .iter()
        .map(|r| (r.error_code, r.error_message.as_deref().unwrap_or("").to_string(), r.configs.len()))
        .collect();
    let codes: Vec<i16> = answers.iter().map(|a| a.0).collect();
    assert_eq!(
        codes,
        [
            E::UnknownTopicOrPartition.code(),
            E::InvalidTopicException.code(),
            0,
            0,
            E::InvalidRequest.code(),
            E::InvalidRequest.code(),
            E::InvalidRequest.code(),
            E::InvalidRequest.code(),
            0
        ],
        "{answers:?}"
    );
    assert!(answers[0].1.contains("no-such-topic") && answers[0].2 == 0, "{:?}", answers[0]);
    assert!(answers[1].1.contains("bad/name"), "{:?}", answers[1]);
    assert!(answers[4].1.contains("broker 7 is not this one") && answers[4].1.contains("broker 0"), "{:?}", answers[4]);
    assert!(answers[5].1.contains("\"zero\" is not a number"), "{:?}", answers[5]);
    for refused in &answers[6..8] {
        assert!(refused.1.contains("describes topics (type 2) and brokers (type 4)"), "{refused:?}");
        assert_eq!(refused.2, 0);
    }
    let broker: Vec<_> = results[2].configs.iter().map(entry).collect();
    assert_eq!(
        broker,
        owned(&[
            ("auto.create.topics.enable", "false", 5, 1),
            ("default.replication.factor", "1", 5, 3),
            ("delete.topic.enable", "true", 5, 1),
            ("message.max.bytes", "1048576", 5, 3),
            ("node.id", "0", 5, 3),
            ("num.partitions", "1", 5, 3),
        ])
    );
    assert!(results[2].configs.iter().all(|c| c.read_only));
    assert_eq!(results[3].configs.len(), 0, "no dynamic defaults");
    let named: Vec<String> = results[8].configs.iter().map(|c| c.name.to_string()).collect();
    assert_eq!(named, ["message.max.bytes", "node.id"]);
    assert_eq!(c.topics(), before, "a describe changes nothing");
}

/// DescribeCluster names the broker, cluster id and controller that Metadata names, at
/// every version; every cluster operation is allowed when asked (no authorizer); a
/// request for the controllers' endpoints gets MISMATCHED_ENDPOINT_TYPE, an unknown
/// endpoint type UNSUPPORTED_ENDPOINT_TYPE, both with a message.
#[test]
fn describe_cluster_names_the_broker_metadata_names() {
    let dir = TempDir::new("kafka-admin-cluster");
    let server = start(&dir);
    let mut c = Client::new(&server);
    let metadata: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None));
    let named: Vec<(i32, String, i32)> =
        metadata.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect();
    let port: i32 = server.address.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(named, [(0, "127.0.0.1".to_string(), port)]);
    for v in 0..=2 {
        for ops in [false, true] {
            let r = DescribeClusterRequest::default().with_include_cluster_authorized_operations(ops);
            let got: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &r);
            assert_eq!((got.error_code, got.error_message), (0, None), "v{v}");
            let brokers: Vec<(i32, String, i32)> =
                got.brokers.iter().map(|b| (b.broker_id.0, b.host.to_string(), b.port)).collect();
            assert_eq!(brokers, named, "v{v}: Metadata's brokers");
            assert!(got.brokers.iter().all(|b| b.rack.is_none() && !b.is_fenced), "v{v}");
            assert_eq!(Some(got.cluster_id.to_string()), metadata.cluster_id.as_ref().map(|c| c.to_string()));
            assert_eq!(got.controller_id, metadata.controller_id, "v{v}");
            // Create, alter, describe, cluster action, describe and alter configs,
            // idempotent write: Kafka's bits for the cluster.
            let all = [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |bits, op| bits | 1 << op);
            assert_eq!(got.cluster_authorized_operations, if ops { all } else { i32::MIN }, "v{v}");
        }
    }
    for v in 1..=2 {
        for (kind, error, says) in
            [(2, E::MismatchedEndpointType, "no controller quorum"), (7, E::UnsupportedEndpointType, "endpoint type 7")]
        {
            let r = DescribeClusterRequest::default().with_endpoint_type(kind);
            let got: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &r);
            assert_eq!(got.error_code, error.code(), "v{v} endpoint type {kind}");
            let message = got.error_message.as_deref().unwrap_or("").to_string();
            assert!(message.contains(says), "v{v}: {message}");
            assert!(got.brokers.is_empty());
        }
    }
}

/// CreatePartitions is refused for every topic, at every version and also when it only
/// validates: a known topic gets INVALID_PARTITIONS with its partition count and what to
/// do instead, an unknown one UNKNOWN_TOPIC_OR_PARTITION, a name given twice one
/// INVALID_REQUEST. No partition is added.
#[test]
fn create_partitions_is_refused_and_changes_nothing() {
    let dir = TempDir::new("kafka-admin-partitions");
    let server = start(&dir);
    let mut c = Client::new(&server);
    c.create("t", 3, &[]);
    c.create("u", 1, &[]);
    c.create("w", 2, &[]);
    let before = c.topics();
    assert_eq!(before, [("t".to_string(), 3), ("u".to_string(), 1), ("w".to_string(), 2)]);
    let topic = |n: &str, count: i32| CreatePartitionsTopic::default().with_name(name(n)).with_count(count);
    for v in 0..=3 {
        for validate_only in [false, true] {
            // More, as many, fewer; an unknown topic; a name given twice.
            let r = CreatePartitionsRequest::default()
                .with_topics(vec![
                    topic("t", 6),
                    topic("u", 1),
                    topic("w", 1),
                    topic("no-such-topic", 2),
                    topic("twice", 4),
                    topic("twice", 5),
                ])
                .with_timeout_ms(30_000)
                .with_validate_only(validate_only);
            let got: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, v, &r);
            let results: Vec<(String, i16, String)> = got
                .results
                .iter()
                .map(|r| (r.name.0.to_string(), r.error_code, r.error_message.as_deref().unwrap_or("").to_string()))
                .collect();
            let codes: Vec<(&str, i16)> = results.iter().map(|(n, e, _)| (n.as_str(), *e)).collect();
            assert_eq!(
                codes,
                [
                    ("t", E::InvalidPartitions.code()),
                    ("u", E::InvalidPartitions.code()),
                    ("w", E::InvalidPartitions.code()),
                    ("no-such-topic", E::UnknownTopicOrPartition.code()),
                    ("twice", E::InvalidRequest.code()),
                ],
                "v{v} validate_only={validate_only}: {results:?}"
            );
            let grow = &results[0].2;
            for says in [
                "topic \"t\" has 3 partitions and cannot get more",
                "fixed when it is created",
                "murmur2(key) % partitions",
                "To have 6 partitions, create a new topic with 6 partitions and produce to it",
            ] {
                assert!(grow.contains(says), "v{v}: {grow:?} says {says:?}");
            }
            assert!(results[1].2.contains("topic \"u\" already has 1 partition ("), "{:?}", results[1]);
            assert!(results[2].2.contains("has 2 partitions, more than the 1 asked for"), "{:?}", results[2]);
            assert!(results[3].2.contains("no-such-topic"), "{:?}", results[3]);
            assert!(results[4].2.contains("Duplicate topic"), "{:?}", results[4]);
        }
    }
    assert_eq!(c.topics(), before, "no partition was added");
}

// --- Real clients -----------------------------------------------------------------------

const ADMIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka/admin.py");

/// Runs `admin.py CLIENT --bootstrap ADDR`; it must exit 0. The JSON object on the last
/// line of its standard output is returned.
fn admin(server: &mut KafkaServer, client: &str) -> Value {
    let address = server.address.clone();
    let stdout = run(server, &python(), &[ADMIN, client, "--bootstrap", &address]);
    let last = stdout.lines().last().unwrap_or_else(|| panic!("admin.py {client} printed nothing"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("admin.py {client}: last line {last:?}: {e}"))
}

/// The message every client must show for growing the topic `topic` from 3 to 6.
fn grow_refusal(topic: &str) -> String {
    format!(
        "topic \"{topic}\" has 3 partitions and cannot get more: a topic's partition count is fixed when it is \
         created (a key's partition is murmur2(key) % partitions, so adding partitions would move keys). To have 6 \
         partitions, create a new topic with 6 partitions and produce to it"
    )
}

/// kafka-python's `describe_configs` shows the topic's settings (its default filter only
/// the grace delay, the one set on the topic), drops unknown names and shows an unknown
/// topic as empty (it does not read the error); `describe_cluster` lists the one broker;
/// `create_partitions` raises `InvalidPartitionsError` with the broker's message, also
/// when it only validates, and `UnknownTopicOrPartitionError` for an unknown topic.
#[test]
fn kafka_python_admin() {
    let Some(_one) = installed(ADMIN) else { return };
    let dir = TempDir::new("kafka-admin-kafka-python");
    let mut server = start(&dir);
    let got = admin(&mut server, "kafka-python");
    let port: i64 = server.address.rsplit(':').next().unwrap().parse().unwrap();
    let config = |value: &str, source: &str| json!({"value": value, "config_source": source, "read_only": true});
    assert_eq!(
        got["all"],
        json!({
            "cleanup.policy": config("delete", "DEFAULT_CONFIG"),
            "compression.type": config("producer", "DEFAULT_CONFIG"),
            "deletion.grace.ms": config("5000", "DYNAMIC_TOPIC_CONFIG"),
            "max.message.bytes": config("1048576", "DEFAULT_CONFIG"),
            "message.timestamp.type": config("CreateTime", "DEFAULT_CONFIG"),
            "retention.bytes": config("-1", "DEFAULT_CONFIG"),
            "retention.ms": config("-1", "DEFAULT_CONFIG"),
        })
    );
    assert_eq!(got["modified"], json!({"deletion.grace.ms": config("5000", "DYNAMIC_TOPIC_CONFIG")}));
    assert_eq!(got["plain_modified"], json!({}));
    assert_eq!(got["named"], json!({"retention.ms": config("-1", "DEFAULT_CONFIG")}));
    assert_eq!(got["unknown"], json!({}));
    assert_eq!(got["broker"]["node.id"], config("0", "DEFAULT_CONFIG"));
    assert_eq!(got["broker"]["auto.create.topics.enable"], config("false", "DEFAULT_CONFIG"));
    assert_eq!(got["broker"].as_object().unwrap().len(), 6, "{}", got["broker"]);
    assert_eq!(
        got["cluster"],
        json!({"cluster_id": "broker-core", "controller": 0, "brokers": [[0, "127.0.0.1", port]]})
    );
    let refusals = &got["create_partitions"];
    for case in ["grow", "validate"] {
        let r = &refusals[case];
        assert_eq!(r["type"], "InvalidPartitionsError", "{case}: {r}");
        let shown = r["text"].as_str().unwrap();
        assert!(shown.starts_with("[Error 37] InvalidPartitionsError"), "{case}: {shown}");
        // kafka-python shows the response, the broker's message quoted in it.
        let message = grow_refusal("kafka_python_graced").replace('\'', "\\'");
        assert!(shown.contains(&message), "{case}: the broker's message reaches the user: {shown}");
    }
    assert_eq!(refusals["unknown"]["type"], "UnknownTopicOrPartitionError", "{}", refusals["unknown"]);
    assert!(refusals["unknown"]["text"].as_str().unwrap().contains("topic \"no-such-topic\" not found"));
    server.terminate();
}

/// confluent-kafka's `describe_configs` shows the topic's settings with their sources
/// (the grace delay the topic's own, the rest defaults), every one read-only, and raises
/// `UNKNOWN_TOPIC_OR_PART` with the broker's message for an unknown topic;
/// `describe_cluster` names the broker, the controller and every cluster operation;
/// `create_partitions` raises `INVALID_PARTITIONS` with the broker's message, also when
/// it only validates, and `UNKNOWN_TOPIC_OR_PART` for an unknown topic.
#[test]
fn confluent_kafka_admin() {
    let Some(_one) = installed(ADMIN) else { return };
    let dir = TempDir::new("kafka-admin-confluent-kafka");
    let mut server = start(&dir);
    let got = admin(&mut server, "confluent-kafka");
    let port: i64 = server.address.rsplit(':').next().unwrap().parse().unwrap();
    // librdkafka's sources: 1 the topic's own config, 5 the default.
    let config = |value: &str, source: i64| json!({"value": value, "source": source, "is_default": source == 5, "read_only": true});
    assert_eq!(
        got["all"],
        json!({
            "cleanup.policy": config("delete", 5),
            "compression.type": config("producer", 5),
            "deletion.grace.ms": config("5000", 1),
            "max.message.bytes": config("1048576", 5),
            "message.timestamp.type": config("CreateTime", 5),
            "retention.bytes": config("-1", 5),
            "retention.ms": config("-1", 5),
        })
    );
    assert_eq!(got["plain"]["deletion.grace.ms"], config("0", 5));
    let unknown = &got["unknown"]["error"];
    assert_eq!((unknown["code"].as_i64(), unknown["name"].as_str()), (Some(3), Some("UNKNOWN_TOPIC_OR_PART")));
    assert_eq!(unknown["text"], "topic \"no-such-topic\" not found");
    assert_eq!(got["broker"]["message.max.bytes"], config("1048576", 5));
    assert_eq!(got["broker"]["num.partitions"], config("1", 5));
    assert_eq!(got["broker"].as_object().unwrap().len(), 6, "{}", got["broker"]);
    let cluster = &got["cluster"];
    assert_eq!(cluster["cluster_id"], "broker-core");
    assert_eq!(cluster["controller"], 0);
    assert_eq!(cluster["brokers"], json!([[0, "127.0.0.1", port]]));
    assert_eq!(
        cluster["authorized_operations"],
        json!([
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE"
        ])
    );
    let refusals = &got["create_partitions"];
    for case in ["grow", "validate"] {
        let r = &refusals[case];
        assert_eq!((r["code"].as_i64(), r["name"].as_str()), (Some(37), Some("INVALID_PARTITIONS")), "{case}: {r}");
        assert_eq!(r["text"], grow_refusal("confluent_kafka_graced"), "{case}: the broker's message as shown");
        assert!(r["shown"].as_str().unwrap().contains("cannot get more"), "{case}: {r}");
    }
    let unknown = &refusals["unknown"];
    assert_eq!((unknown["code"].as_i64(), unknown["name"].as_str()), (Some(3), Some("UNKNOWN_TOPIC_OR_PART")));
    assert_eq!(unknown["text"], "topic \"no-such-topic\" not found");
    server.terminate();
}
