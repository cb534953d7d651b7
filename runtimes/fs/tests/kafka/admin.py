#!/usr/bin/env python3
"""Kafka admin clients against `broker-fs serve --kafka ADDR`: what each shows of
DescribeConfigs, DescribeCluster and CreatePartitions.

Driven by runtimes/fs/tests/kafka_admin.rs; runnable by hand too:

    python admin.py CLIENT --bootstrap 127.0.0.1:PORT

CLIENT is kafka-python (KafkaAdminClient) or confluent-kafka (AdminClient, librdkafka);
`python admin.py clients` only checks that both import. Each run creates its own
topics, makes the calls, and prints what the client returned or raised as one JSON
object on the last line of standard output, for the Rust side to check; it exits 1
(with the reason on standard error) only when a call fails in a way it does not
record, such as a timeout.
"""

import argparse
import json
import sys

TIMEOUT_S = 30.0
TIMEOUT_MS = int(TIMEOUT_S * 1000)


def log(message):
    print(message, file=sys.stderr, flush=True)


def emit(result):
    print(json.dumps(result, sort_keys=True), flush=True)


def raised(e):
    """An exception as the user sees it: its type and its text."""
    return {"type": type(e).__name__, "text": str(e)}


# --- kafka-python ------------------------------------------------------------------------


def run_kafka_python(bootstrap, graced, plain):
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = kafka.KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="broker-fs-test-admin", request_timeout_ms=TIMEOUT_MS
    )
    admin.create_topics(
        [NewTopic(graced, 3, 1, topic_configs={"deletion.grace.ms": "5000"}), NewTopic(plain, 2, 1)],
        timeout_ms=TIMEOUT_MS,
    )
    topic = ConfigResourceType.TOPIC

    def configs(resource, **kw):
        described = admin.describe_configs([resource], **kw)
        kind = resource.resource_type.name.lower()
        return {
            name: {k: entry[k] for k in ("value", "config_source", "read_only")}
            for name, entry in described.get(kind, {}).get(resource.name, {}).items()
        }

    out = {
        "all": configs(ConfigResource(topic, graced), config_filter="all"),
        # kafka-python's default filter: only what differs from the defaults.
        "modified": configs(ConfigResource(topic, graced)),
        "plain_modified": configs(ConfigResource(topic, plain)),
        "named": configs(ConfigResource(topic, graced, ["retention.ms", "no.such.config"]), config_filter="all"),
        "unknown": configs(ConfigResource(topic, "no-such-topic"), config_filter="all"),
        "broker": configs(ConfigResource(ConfigResourceType.BROKER, "0"), config_filter="all"),
    }
    log(f"kafka-python describe_configs {graced}: {out['all']}")

    cluster = admin.describe_cluster()
    log(f"kafka-python describe_cluster: {cluster}")
    out["cluster"] = {
        "cluster_id": cluster["cluster_id"],
        "controller": cluster["controller_id"],
        "brokers": [[b["broker_id"], b["host"], b["port"]] for b in cluster["brokers"]],
    }

    refusals = {}
    for case, topic_partitions, validate_only in [
        ("grow", {graced: 6}, False),
        ("validate", {graced: 6}, True),
        ("unknown", {"no-such-topic": 6}, False),
    ]:
        try:
            response = admin.create_partitions(topic_partitions, timeout_ms=TIMEOUT_MS, validate_only=validate_only)
            refusals[case] = {"returned": str(response)}
        except Exception as e:  # what the user sees
            refusals[case] = raised(e)
            log(f"kafka-python create_partitions {case}: {type(e).__name__}: {e}")
    out["create_partitions"] = refusals
    admin.close()
    return out


# --- confluent-kafka ---------------------------------------------------------------------


def run_confluent_kafka(bootstrap, graced, plain):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "broker-fs-test-admin"})
    created = admin.create_topics(
        [
            NewTopic(graced, num_partitions=3, replication_factor=1, config={"deletion.grace.ms": "5000"}),
            NewTopic(plain, num_partitions=2, replication_factor=1),
        ],
        request_timeout=TIMEOUT_S,
    )
    for f in created.values():
        f.result(TIMEOUT_S)

    def error(e):
        if isinstance(e, KafkaException) and e.args:
            k = e.args[0]
            return {"type": type(e).__name__, "code": k.code(), "name": k.name(), "text": k.str(), "shown": str(e)}
        return raised(e)

    def configs(resource):
        future = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]
        try:
            described = future.result(TIMEOUT_S)
        except Exception as e:
            return {"error": error(e)}
        return {
            name: {
                "value": entry.value,
                "source": entry.source,
                "is_default": entry.is_default,
                "read_only": entry.is_read_only,
            }
            for name, entry in described.items()
        }

    out = {
        "all": configs(ConfigResource("topic", graced)),
        "plain": configs(ConfigResource("topic", plain)),
        "unknown": configs(ConfigResource("topic", "no-such-topic")),
        "broker": configs(ConfigResource("broker", "0")),
    }
    log(f"confluent-kafka describe_configs {graced}: {out['all']}")

    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    out["cluster"] = {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller.id if cluster.controller else None,
        "brokers": [[n.id, n.host, n.port] for n in cluster.nodes],
        "authorized_operations": [op.name for op in (cluster.authorized_operations or [])],
    }
    log(f"confluent-kafka describe_cluster: {out['cluster']}")

    refusals = {}
    for case, partitions, validate_only in [
        ("grow", NewPartitions(graced, 6), False),
        ("validate", NewPartitions(graced, 6), True),
        ("unknown", NewPartitions("no-such-topic", 6), False),
    ]:
        future = admin.create_partitions([partitions], validate_only=validate_only, request_timeout=TIMEOUT_S)
        try:
            refusals[case] = {"returned": str(future[partitions.topic].result(TIMEOUT_S))}
        except Exception as e:
            refusals[case] = error(e)
            log(f"confluent-kafka create_partitions {case}: {e}")
    out["create_partitions"] = refusals
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("client", choices=["clients", "kafka-python", "confluent-kafka"])
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    if args.client == "clients":
        import confluent_kafka
        import kafka

        confluent_kafka.libversion()
        print(f"kafka-python {kafka.__version__}, confluent-kafka {confluent_kafka.version()[0]}")
        return
    run = run_kafka_python if args.client == "kafka-python" else run_confluent_kafka
    prefix = args.client.replace("-", "_")
    emit(run(args.bootstrap, f"{prefix}_graced", f"{prefix}_plain"))


if __name__ == "__main__":
    main()
