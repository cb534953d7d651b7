#!/usr/bin/env python3
"""Steps of real Kafka clients against `broker-cluster serve` nodes, one per process run.

Driven by runtimes/cluster/tests/kafka_cluster.rs; runnable by hand too:

    python steps.py STEP --bootstrap 127.0.0.1:PORT [options]

The steps of broker-fs's client scenarios (create-topic, produce, delete, absent,
and its compression scenario) are reused as they are (runtimes/fs/tests/kafka/scenarios.py, whose docstring says
what each client is configured with); `consume` is this file's. Each step exits 0 when
its checks hold, else 1 with the reason on standard error, and prints its result as one
JSON line on standard output.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fs", "tests", "kafka"))

import kafka  # noqa: E402
import scenarios as s  # noqa: E402

# A cluster node keeps no idempotent producer state and does not serve InitProducerId,
# so kafka-python's producers run here with idempotence off (its default is on), as the
# cluster's README tells users to run them.
_kp_producer = s.kp_producer


def kp_producer_without_idempotence(bootstrap, **extra):
    return _kp_producer(bootstrap, **{"enable_idempotence": False, **extra})


s.kp_producer = kp_producer_without_idempotence


def step_consume(args):
    """Every record of every partition, from offset 0 to the end, with kafka-python."""
    consumer = s.kp_consumer(args.bootstrap)
    tps = s.kp_assign_from(consumer, args.topic, range(args.partitions), 0)
    ends = consumer.end_offsets(tps)
    want = sum(ends.values())
    out = []
    deadline = time.monotonic() + s.TIMEOUT_S
    while len(out) < want:
        s.check(time.monotonic() < deadline, f"kafka-python read {len(out)} of {want} records of {args.topic!r} in {s.TIMEOUT_S} s")
        out += s.kp_poll(consumer, 0.5)
    consumer.close()
    s.check_dense(out, args.partitions, f"kafka-python Fetch of {args.topic!r}")
    values = sorted(r["value"] for r in out)
    s.emit({"topic": args.topic, "records": len(out), "values": values, "ends": {str(tp.partition): e for tp, e in ends.items()}})


def step_produce_until_gone(args):
    """Keyless records to partition 0, one at a time, each printed as a JSON line once
    acknowledged, until the node stops answering (it is killed): then exits 0."""
    kpp = s.kp_producer(args.bootstrap, request_timeout_ms=10000, max_block_ms=10000, retries=0)
    i = 0
    while True:
        value = f"k-{i}".encode()
        try:
            md = kpp.send(args.topic, value=value, partition=0).get(timeout=15)
        except Exception as e:  # the node is gone: whatever the client calls it
            s.log(f"produce of {value!r} ended: {type(e).__name__}: {e}")
            break
        s.emit(s.record(args.topic, md.partition, md.offset, None, value))
        i += 1
    try:
        kpp.close(timeout=1)
    except Exception as e:  # closing a client whose node is gone may complain too
        s.log(f"close: {type(e).__name__}: {e}")


def step_brokers(args):
    """The brokers kafka-python's Metadata names (ids and ports), and the controller."""
    kp = s.kp_admin(args.bootstrap)
    cluster = kp.describe_cluster()
    kp.close()
    brokers = sorted((b["broker_id"], b["port"]) for b in cluster["brokers"])
    s.emit({"brokers": brokers, "controller": cluster["controller_id"]})


def step_leaders(args):
    """The brokers kafka-python's Metadata names, and the leader of each partition of
    the topic."""
    kp = s.kp_admin(args.bootstrap)
    brokers = sorted(b["broker_id"] for b in kp.describe_cluster()["brokers"])
    topics = kp.describe_topics([args.topic])
    kp.close()
    # The response's own field names (kafka-python passes them through).
    leaders = [p["leader_id"] for p in sorted(topics[0]["partitions"], key=lambda p: p["partition_index"])]
    s.emit({"brokers": brokers, "leaders": leaders})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)

    def add(name, fn, *options):
        p = sub.add_parser(name, help=" ".join(fn.__doc__.split("\n\n")[0].split()))
        p.add_argument("--bootstrap", required=True, help="host:port of a node's Kafka listener")
        p.add_argument("--topic", required=True)
        for opt in options:
            opt(p)
        p.set_defaults(run=fn)

    def partitions(p):
        p.add_argument("--partitions", type=int, default=1)

    def count(p):
        p.add_argument("--count", type=int, default=5, help="records per partition")

    def config(p):
        p.add_argument("--config", action="append", default=[], help="KEY=VALUE topic config")

    add("create-topic", s.step_create, partitions, config)
    add("produce", s.step_produce, partitions, count)
    add("consume", step_consume, partitions)
    add("produce-until-gone", step_produce_until_gone)
    add("brokers", step_brokers)
    add("leaders", step_leaders)
    add("delete", s.step_delete)
    add("compression", s.scenario_compression)
    add("absent", s.step_absent)

    args = parser.parse_args()
    try:
        args.run(args)
    except s.ScenarioFailed as e:
        s.log(f"FAILED {args.step}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
