#!/usr/bin/env python3
"""Real Kafka clients against `broker-fs serve --kafka ADDR`.

Driven by runtimes/fs/tests/kafka_clients.rs; runnable by hand too:

    python scenarios.py SCENARIO --bootstrap 127.0.0.1:PORT [options]

Three clients: kafka-python (pure Python, its own protocol code), confluent-kafka
(librdkafka) and aiokafka (asyncio, its own protocol code; in the recreate scenario).
Each scenario exits 0 when every check holds, and otherwise exits 1 with a
message on standard error that names the client, the operation and what came back.
Whatever the Rust side checks itself (partition choices, topic ids, offsets, the
records it compares with `broker-fs fetch`) is printed as one JSON object on the last
line of standard output.

Compression is left at each client's default (none), and the compression scenario
produces with every codec each client has; idempotence is left at each
client's default (on in kafka-python, off in librdkafka), and the idempotent scenario
turns it on in confluent-kafka and aiokafka. Most
scenarios read with assign and an explicit offset (kafka-python with `group_id=None`;
confluent-kafka, which refuses to build a consumer without `group.id`, with a throwaway
one it sends nothing about as long as it only assigns); the group-* scenarios subscribe
with a group id, in each client's default configuration.
"""

import argparse
import asyncio
import json
import sys
import threading
import time

import confluent_kafka
import kafka
import kafka.errors as kerrors
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

# Bounds on every wait, so that a hung server fails the scenario instead of hanging it.
TIMEOUT_S = 30.0
KP_TIMEOUT_MS = int(TIMEOUT_S * 1000)

# A consumer that has seen nothing new for this long is taken to have read everything.
QUIET_S = 2.0


class ScenarioFailed(Exception):
    """A check did not hold; the message says which and what came back."""


def check(condition, message):
    if not condition:
        raise ScenarioFailed(message)


def log(message):
    print(message, file=sys.stderr, flush=True)


def emit(result):
    """The scenario's result, for the Rust side: one JSON line on standard output."""
    print(json.dumps(result, sort_keys=True), flush=True)


# --- kafka-python ------------------------------------------------------------------------


def kp_admin(bootstrap):
    return kafka.KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="broker-fs-test-admin",
        request_timeout_ms=KP_TIMEOUT_MS,
    )


def kp_producer(bootstrap, **extra):
    config = dict(
        bootstrap_servers=bootstrap,
        client_id="broker-fs-test-producer",
        acks="all",
        request_timeout_ms=KP_TIMEOUT_MS,
        max_block_ms=KP_TIMEOUT_MS,
    )
    # Idempotence is kafka-python's default (3.0 on): left on, so that the default is
    # what every scenario runs.
    config.update(extra)
    return kafka.KafkaProducer(**config)


def kp_consumer(bootstrap, **extra):
    config = dict(
        bootstrap_servers=bootstrap,
        client_id="broker-fs-test-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=KP_TIMEOUT_MS,
        fetch_max_wait_ms=200,
    )
    config.update(extra)
    return kafka.KafkaConsumer(**config)


def kp_create(admin, name, partitions, configs=None):
    admin.create_topics(
        {name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
        timeout_ms=KP_TIMEOUT_MS,
    )


def kp_describe(admin, name):
    """The Metadata topic entry for `name` (a dict: error_code, topic_id, partitions...)."""
    topics = [t for t in admin.describe_topics([name]) if t["name"] == name]
    check(len(topics) == 1, f"kafka-python Metadata for [{name!r}]: got {len(topics)} entries for it")
    return topics[0]


def kp_topic_id(admin, name):
    """The topic id (Metadata v10+) as a string, or None if the response has none."""
    topic = kp_describe(admin, name)
    check(topic["error_code"] == 0, f"kafka-python Metadata for {name!r}: error {topic['error_code']}")
    tid = topic.get("topic_id")
    if tid is None or str(tid) == "00000000-0000-0000-0000-000000000000":
        return None
    return str(tid)


def kp_assign_from(consumer, topic, partitions, offset):
    tps = [kafka.TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, offset)
    return tps


def kp_poll(consumer, timeout_s):
    """One poll; the records as dicts."""
    out = []
    for tp, records in consumer.poll(timeout_ms=int(timeout_s * 1000)).items():
        for r in records:
            out.append(record(tp.topic, tp.partition, r.offset, r.key, r.value))
    return out


# --- confluent-kafka (librdkafka) --------------------------------------------------------


def ck_admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "broker-fs-test-admin"})


def ck_producer(bootstrap, **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "client.id": "broker-fs-test-producer",
        "acks": "all",
        # enable.idempotence is left at librdkafka's default, false; the idempotent
        # scenario turns it on.
        "message.timeout.ms": int(TIMEOUT_S * 1000),
    }
    config.update(extra)
    return confluent_kafka.Producer(config)


def ck_consumer(bootstrap, **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "client.id": "broker-fs-test-consumer",
        # Required by the binding, unused: assign with explicit offsets, no commits.
        "group.id": "broker-fs-test-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 200,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    config.update(extra)
    return confluent_kafka.Consumer(config)


def ck_result(future, what):
    """Waits for an admin future; returns None on success, else the KafkaError."""
    try:
        future.result(timeout=TIMEOUT_S)
        return None
    except KafkaException as e:
        return e.args[0]
    except Exception as e:  # a timeout or a transport failure: the scenario fails
        raise ScenarioFailed(f"confluent-kafka {what}: {type(e).__name__}: {e}") from e


def ck_create(admin, name, partitions, configs=None):
    """Creates a topic; returns None on success, else the KafkaError."""
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})],
        request_timeout=TIMEOUT_S,
    )
    return ck_result(futures[name], f"CreateTopics {name!r}")


def ck_delete(admin, name):
    futures = admin.delete_topics([name], request_timeout=TIMEOUT_S)
    return ck_result(futures[name], f"DeleteTopics {name!r}")


def ck_topics(admin):
    """All topics: name -> partition count."""
    md = admin.list_topics(timeout=TIMEOUT_S)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def ck_poll(consumer, timeout_s, errors):
    """One poll; the record as a one-element list, errors appended to `errors`."""
    msg = consumer.poll(timeout_s)
    if msg is None:
        return []
    if msg.error() is not None:
        errors.append(msg.error().name())
        return []
    return [record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())]


def ck_produce_all(producer, topic, items, partition=None):
    """Produces (key, value) pairs and waits for every delivery report.

    Returns the reports as records in production order; a failed delivery fails the
    scenario.
    """
    reports = [None] * len(items)

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                reports[i] = ScenarioFailed(f"confluent-kafka Produce to {topic!r}: {err.name()}: {err.str()}")
            else:
                reports[i] = record(topic, msg.partition(), msg.offset(), msg.key(), msg.value())

        return cb

    for i, (key, value) in enumerate(items):
        kwargs = {"key": key, "value": value, "on_delivery": on_delivery(i)}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    check(left == 0, f"confluent-kafka Produce to {topic!r}: {left} records undelivered after {TIMEOUT_S}s")
    for r in reports:
        if isinstance(r, ScenarioFailed):
            raise r
    return reports


def kp_produce_all(producer, topic, items, partition=None):
    """Like ck_produce_all, with kafka-python: waits for every acknowledgement."""
    futures = [producer.send(topic, key=key, value=value, partition=partition) for key, value in items]
    producer.flush(timeout=TIMEOUT_S)
    out = []
    for (key, value), f in zip(items, futures):
        try:
            md = f.get(timeout=TIMEOUT_S)
        except kerrors.KafkaError as e:
            raise ScenarioFailed(f"kafka-python Produce to {topic!r}: {type(e).__name__}: {e}") from e
        out.append(record(topic, md.partition, md.offset, key, value))
    return out


# --- shared ------------------------------------------------------------------------------


def record(topic, partition, offset, key, value):
    """A record as both sides print it: keys and values are UTF-8 text here."""
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": None if key is None else key.decode(),
        "value": None if value is None else value.decode(),
    }


def consume_until(poll_once, expected_count, what):
    """Polls until `expected_count` records came and then QUIET_S passed with nothing
    more (so that extra records are caught too), or TIMEOUT_S passed."""
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = None
    while time.monotonic() < deadline:
        batch = poll_once(0.2)
        got.extend(batch)
        if batch:
            quiet_since = None
        elif len(got) >= expected_count:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= QUIET_S:
                return got
    check(
        len(got) >= expected_count,
        f"{what}: {len(got)} of {expected_count} records within {TIMEOUT_S}s: {got}",
    )
    return got


def key_of(r):
    return (r["topic"], r["partition"], r["offset"])


def check_dense(records, partitions, what):
    """Per partition, the offsets are consecutive, each once (from the topic's first
    offset, which is past every offset of the topics deleted before it)."""
    for p in range(partitions):
        offsets = sorted(r["offset"] for r in records if r["partition"] == p)
        first = offsets[0] if offsets else 0
        check(offsets == list(range(first, first + len(offsets))), f"{what}: partition {p} offsets {offsets}, not dense")


# --- scenarios ---------------------------------------------------------------------------


def scenario_clients(_args):
    """The Python clients import: the harness's precondition. Prints their versions."""
    import aiokafka

    emit(
        {
            "kafka-python": kafka.__version__,
            "confluent-kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
            "aiokafka": aiokafka.__version__,
        }
    )


def scenario_create(args):
    """(a) Admin create with both clients; both list the topics; a second create of
    either name, by either client, fails with TOPIC_ALREADY_EXISTS; a create with a
    config other than deletion.grace.ms fails with INVALID_CONFIG and creates nothing."""
    kp_name, ck_name = f"{args.prefix}-kp", f"{args.prefix}-ck"
    kp, ck = kp_admin(args.bootstrap), ck_admin(args.bootstrap)
    try:
        kp_create(kp, kp_name, 3)
    except kerrors.KafkaError as e:
        raise ScenarioFailed(f"kafka-python CreateTopics {kp_name!r} (3 partitions): {type(e).__name__}: {e}") from e
    err = ck_create(ck, ck_name, 5, {"deletion.grace.ms": "100"})
    check(err is None, f"confluent-kafka CreateTopics {ck_name!r} (5 partitions, grace 100 ms): {err}")

    expected = {kp_name: 3, ck_name: 5}
    ck_seen = ck_topics(ck)
    kp_listed = set(kp.list_topics())
    for name, n in expected.items():
        check(ck_seen.get(name) == n, f"confluent-kafka Metadata (all topics): {name!r} has {ck_seen.get(name)} partitions, want {n}; all: {ck_seen}")
        check(name in kp_listed, f"kafka-python list_topics: {name!r} missing from {sorted(kp_listed)}")
        desc = kp_describe(kp, name)
        check(desc["error_code"] == 0, f"kafka-python Metadata [{name!r}]: error {desc['error_code']}")
        check(len(desc["partitions"]) == n, f"kafka-python Metadata [{name!r}]: {len(desc['partitions'])} partitions, want {n}")

    for name in expected:
        try:
            kp_create(kp, name, 2)
            raise ScenarioFailed(f"kafka-python CreateTopics of existing {name!r}: succeeded")
        except kerrors.TopicAlreadyExistsError:
            pass
        except kerrors.KafkaError as e:
            raise ScenarioFailed(f"kafka-python CreateTopics of existing {name!r}: {type(e).__name__}, want TopicAlreadyExistsError") from e
        err = ck_create(ck, name, 2)
        check(
            err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS,
            f"confluent-kafka CreateTopics of existing {name!r}: {err}, want TOPIC_ALREADY_EXISTS",
        )

    bad = f"{args.prefix}-badconfig"
    err = ck_create(ck, bad, 1, {"cleanup.policy": "compact"})
    check(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"confluent-kafka CreateTopics {bad!r} with cleanup.policy: {err}, want INVALID_CONFIG")
    try:
        kp_create(kp, bad, 1, {"retention.ms": "1000"})
        raise ScenarioFailed(f"kafka-python CreateTopics {bad!r} with retention.ms: succeeded, want INVALID_CONFIG")
    except kerrors.InvalidConfigurationError:
        pass
    check(bad not in ck_topics(ck), f"topic {bad!r} exists after its creates were refused")

    # The second creates changed nothing.
    after = ck_topics(ck)
    check(after == expected, f"confluent-kafka Metadata (all topics) after the refused creates: {after}, want {expected}")
    kp.close()
    emit({"topics": expected})


def scenario_produce_consume(args):
    """(b) Keyed and keyless records, acks=all, from both producers; consumers of both
    clients read every record back by assign and seek; offsets dense from 0."""
    topic, partitions = args.topic, 3
    err = ck_create(ck_admin(args.bootstrap), topic, partitions)
    check(err is None, f"confluent-kafka CreateTopics {topic!r}: {err}")

    kp_items = [(f"kp-key-{i % 4}".encode(), f"kp-keyed-{i}".encode()) for i in range(12)]
    kp_items += [(None, f"kp-keyless-{i}".encode()) for i in range(6)]
    ck_items = [(f"ck-key-{i % 4}".encode(), f"ck-keyed-{i}".encode()) for i in range(12)]
    ck_items += [(None, f"ck-keyless-{i}".encode()) for i in range(6)]

    kpp = kp_producer(args.bootstrap)
    produced = kp_produce_all(kpp, topic, kp_items)
    kpp.close(timeout=TIMEOUT_S)
    produced += ck_produce_all(ck_producer(args.bootstrap), topic, ck_items)

    check_dense(produced, partitions, "acknowledged positions")
    for r in produced:
        check(0 <= r["partition"] < partitions, f"acknowledged partition out of range: {r}")
    # Records with one key went to one partition, in order (both producers hash alike
    # only where the partitioner scenario says so; here each key is checked on its own).
    by_key = {}
    for r in produced:
        if r["key"] is not None:
            by_key.setdefault(r["key"], set()).add(r["partition"])
    for key, ps in by_key.items():
        check(len(ps) == 1, f"records with key {key!r} were spread over partitions {sorted(ps)}")

    want = sorted(produced, key=key_of)
    high = {p: sum(1 for r in produced if r["partition"] == p) for p in range(partitions)}

    # kafka-python: assign, seek to 0, poll; ListOffsets through beginning/end_offsets.
    kpc = kp_consumer(args.bootstrap)
    tps = kp_assign_from(kpc, topic, range(partitions), 0)
    ends = kpc.end_offsets(tps)
    begins = kpc.beginning_offsets(tps)
    for tp in tps:
        check(begins[tp] == 0, f"kafka-python ListOffsets earliest {tp}: {begins[tp]}, want 0")
        check(ends[tp] == high[tp.partition], f"kafka-python ListOffsets latest {tp}: {ends[tp]}, want {high[tp.partition]}")
    got = consume_until(lambda t: kp_poll(kpc, t), len(want), "kafka-python Fetch")
    kpc.close()
    check(sorted(got, key=key_of) == want, f"kafka-python consumer read {sorted(got, key=key_of)}, want {want}")

    # confluent-kafka: assign at offset 0; ListOffsets through get_watermark_offsets.
    ckc = ck_consumer(args.bootstrap)
    ckc.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    for p in range(partitions):
        low, hi = ckc.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=TIMEOUT_S, cached=False)
        check((low, hi) == (0, high[p]), f"confluent-kafka ListOffsets partition {p}: ({low}, {hi}), want (0, {high[p]})")
    errors = []
    got = consume_until(lambda t: ck_poll(ckc, t, errors), len(want), "confluent-kafka Fetch")
    ckc.close()
    check(not errors, f"confluent-kafka consumer errors: {errors}")
    check(sorted(got, key=key_of) == want, f"confluent-kafka consumer read {sorted(got, key=key_of)}, want {want}")
    emit({"topic": topic, "partitions": partitions, "records": want})


def scenario_delete_while_polling(args):
    """(c) A consumer polls the topic while the admin client of the same library
    deletes it. The consumer has read every record of partitions 0 and 1 before the
    delete; partition 2 holds records it never read. After the acknowledgement it must
    get no record at all: not by polling on, and not after seeking every partition,
    2 included, back to offset 0 (unknown-topic errors are fine). Then the name is
    created again: its offsets begin past every offset of the deleted topic (and of any
    topic deleted before it), read from offset 0 (before its start: reset to the
    earliest) it is empty, and produces to it start at its first offset."""
    topic, partitions = args.topic, 3
    client = args.client
    ck = ck_admin(args.bootstrap)
    kp = kp_admin(args.bootstrap)

    def create():
        if client == "confluent":
            err = ck_create(ck, topic, partitions)
            check(err is None, f"confluent-kafka CreateTopics {topic!r}: {err}")
        else:
            kp_create(kp, topic, partitions)

    create()
    old_id = kp_topic_id(kp, topic)
    producer = ck_producer(args.bootstrap)
    # Five records in each partition; the consumer will read partitions 0 and 1 only.
    old = {p: ck_produce_all(producer, topic, [(None, f"old-p{p}-{i}".encode()) for i in range(5)], p) for p in range(partitions)}
    seen_part, unseen = old[0] + old[1], old[2]

    errors = []
    if client == "confluent":
        consumer = ck_consumer(args.bootstrap)
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])

        def poll_once(t):
            return ck_poll(consumer, t, errors)

        def seek_all_to_zero():
            consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])

        def delete():
            err = ck_delete(ck, topic)
            check(err is None, f"confluent-kafka DeleteTopics {topic!r}: {err}")

    else:
        consumer = kp_consumer(args.bootstrap)
        kp_assign_from(consumer, topic, (0, 1), 0)

        def poll_once(t):
            try:
                return kp_poll(consumer, t)
            except kerrors.KafkaError as e:
                errors.append(type(e).__name__)
                return []

        def seek_all_to_zero():
            kp_assign_from(consumer, topic, range(partitions), 0)

        def delete():
            kp.delete_topics([topic], timeout_ms=KP_TIMEOUT_MS)

    # Read everything of partitions 0 and 1, so that nothing is left for it to get.
    before = consume_until(poll_once, len(seen_part), f"{client} consumer before the delete")
    check(sorted(before, key=key_of) == sorted(seen_part, key=key_of), f"{client} consumer before the delete read {before}, want {seen_part}")

    # The delete runs in its own thread while this one keeps polling, so that fetches
    # are in flight when it arrives.
    acked = threading.Event()
    delete_error = []

    def run_delete():
        try:
            delete()
        except Exception as e:
            delete_error.append(f"{type(e).__name__}: {e}")
        finally:
            acked.set()

    deleter = threading.Thread(target=run_delete)
    deleter.start()
    during, after = [], []
    deadline = time.monotonic() + TIMEOUT_S
    while not acked.is_set() and time.monotonic() < deadline:
        # A poll that began before the acknowledgement was seen counts as "during":
        # what it returns may have been served before the acknowledgement.
        during.extend(poll_once(0.1))
    deleter.join(TIMEOUT_S)
    check(not delete_error, f"{client} DeleteTopics {topic!r}: {delete_error}")
    check(acked.is_set(), f"{client} DeleteTopics {topic!r}: no acknowledgement within {TIMEOUT_S}s")

    # Poll on for a while, then seek every partition back to 0 and poll again.
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        after.extend(poll_once(0.2))
    seek_all_to_zero()
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        after.extend(poll_once(0.2))
    check(not after, f"{client} consumer got records after the delete of {topic!r} was acknowledged: {after}")
    check(not during, f"{client} consumer, which had read everything, got records while the delete ran: {during}")
    consumer.close()

    # The same name again: a new, empty topic.
    create()
    new_id = kp_topic_id(kp, topic)
    old_end = max(r["offset"] for p in range(partitions) for r in old[p]) + 1
    starts = set()
    for p in range(partitions):
        low, hi = ck_consumer_watermarks(args.bootstrap, topic, p)
        check(low == hi and low >= old_end, f"confluent-kafka ListOffsets of re-created {topic!r} partition {p}: ({low}, {hi}), want empty from {old_end} on")
        starts.add(low)
    check(len(starts) == 1, f"re-created {topic!r}: partitions begin at {starts}, want one first offset")
    start = starts.pop()
    fresh = kp_consumer(args.bootstrap)
    kp_assign_from(fresh, topic, range(partitions), 0)
    stale = []
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        stale.extend(kp_poll(fresh, 0.2))
    check(not stale, f"kafka-python consumer read re-created {topic!r} from offset 0 and got {stale}")
    # A new producer: what the old one cached about the first incarnation is not tested.
    producer = ck_producer(args.bootstrap)
    new = [r for p in range(partitions) for r in ck_produce_all(producer, topic, [(None, f"new-p{p}".encode())], p)]
    for r in new:
        check(r["offset"] == start, f"confluent-kafka Produce to re-created {topic!r}: acknowledged at {r}, want offset {start}")
    got = consume_until(lambda t: kp_poll(fresh, t), len(new), "kafka-python consumer of the re-created topic")
    fresh.close()
    check(sorted(got, key=key_of) == sorted(new, key=key_of), f"kafka-python consumer of re-created {topic!r} read {got}, want only {new}")
    kp.close()
    emit(
        {
            "topic": topic,
            "client": client,
            "old_topic_id": old_id,
            "new_topic_id": new_id,
            "consumer_errors": sorted(set(errors)),
            "unseen_before_delete": unseen,
            "records": sorted(new, key=key_of),
        }
    )


def scenario_recreate(args):
    """(g) A consumer holds a position in a topic that is deleted and created again
    while it is paused: 15 records were produced, it read 10 (its position is 10), the
    name was deleted and re-created, and 30 records were produced to the new topic
    before it resumes. It must never be served the new topic from the middle (new-10
    onwards without new-0 first, as a consumer whose position carried over would be):
    with auto.offset.reset=earliest it reads new-0..new-29 exactly; with the client's
    default reset (latest) it reads none of them; an error it reports instead is also
    fine. Old records never come back."""
    topic, client, reset = args.topic, args.client, args.reset
    producer = ck_producer(args.bootstrap)
    kp = kp_admin(args.bootstrap)
    kp_create(kp, topic, 1)
    ck_produce_all(producer, topic, [(None, f"old-{i}".encode()) for i in range(15)], 0)
    errors = []
    if client == "aiokafka":
        got, old_position = asyncio.run(aio_recreate(args, kp, producer, errors))
    else:
        if client == "confluent":
            config = {"auto.offset.reset": "earliest" if reset == "earliest" else "largest"}
            consumer = ck_consumer(args.bootstrap, **config)
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])

            def poll_once(t):
                return ck_poll(consumer, t, errors)

            def pause(p):
                (consumer.pause if p else consumer.resume)([confluent_kafka.TopicPartition(topic, 0)])

            def seek_to(offset):
                consumer.seek(confluent_kafka.TopicPartition(topic, 0, offset))

        else:
            reset_to = "earliest" if reset == "earliest" else "latest"
            consumer = kp_consumer(args.bootstrap, auto_offset_reset=reset_to, metadata_max_age_ms=1000)
            tp = kafka.TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)

            def poll_once(t):
                try:
                    return kp_poll(consumer, t)
                except kerrors.KafkaError as e:
                    errors.append(type(e).__name__)
                    return []

            def pause(p):
                (consumer.pause if p else consumer.resume)(tp)

            def seek_to(offset):
                consumer.seek(tp, offset)

        first = consume_until(poll_once, 15, f"{client} consumer of the first topic")
        check([r["value"] for r in first] == [f"old-{i}" for i in range(15)], f"{client} read {first}")
        # Back to the 11th record, as a consumer that had read 10 of them would be.
        old_position = first[10]["offset"]
        seek_to(old_position)
        pause(True)
        poll_once(0.5)
        recreate(kp, producer, topic)
        pause(False)
        got = settle(poll_once)
        consumer.close()
    kp.close()
    values = [r["value"] for r in got]
    check(not any(v.startswith("old-") for v in values), f"{client}: old records came back: {values}")
    new_all = [f"new-{i}" for i in range(30)]
    if reset == "earliest":
        ok = values == new_all or (not values and errors)
        check(ok, f"{client} (earliest): read {values} (errors {errors}), want new-0..new-29 or an error")
    else:
        check(not values or values == new_all, f"{client} (default reset): read {values}, want none (or all from new-0)")
    emit({"client": client, "reset": reset, "position_before": old_position, "read": values, "errors": sorted(set(errors)), "offsets": [r["offset"] for r in got]})


def recreate(kp, producer, topic):
    """Deletes `topic`, creates it again, produces new-0..new-29 to it."""
    kp.delete_topics([topic], timeout_ms=KP_TIMEOUT_MS)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            kp_create(kp, topic, 1)
            break
        except kerrors.TopicAlreadyExistsError:
            check(time.monotonic() < deadline, f"re-create of {topic!r}: still exists after {TIMEOUT_S}s")
            time.sleep(0.1)
    ck_produce_all(producer, topic, [(None, f"new-{i}".encode()) for i in range(30)], 0)


def settle(poll_once):
    """Polls until QUIET_S passes with nothing new (or TIMEOUT_S)."""
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < QUIET_S + 3:
        batch = poll_once(0.2)
        if batch:
            got.extend(batch)
            quiet_since = time.monotonic()
    return got


async def aio_recreate(args, kp, producer, errors):
    """The recreate scenario's consumer side with aiokafka."""
    from aiokafka import AIOKafkaConsumer, TopicPartition as AioTp

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        client_id="broker-fs-test-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if args.reset == "earliest" else "latest",
        request_timeout_ms=KP_TIMEOUT_MS,
        fetch_max_wait_ms=200,
        metadata_max_age_ms=1000,
    )
    await consumer.start()
    tp = AioTp(args.topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)

    async def poll(t):
        try:
            batch = await consumer.getmany(tp, timeout_ms=int(t * 1000))
        except Exception as e:  # noqa: BLE001 - an error reported is an allowed outcome
            errors.append(type(e).__name__)
            return []
        return [record(args.topic, 0, r.offset, r.key, r.value) for r in batch.get(tp, [])]

    first = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(first) < 15 and time.monotonic() < deadline:
        first.extend(await poll(0.2))
    check([r["value"] for r in first] == [f"old-{i}" for i in range(15)], f"aiokafka read {first}")
    old_position = first[10]["offset"]
    consumer.seek(tp, old_position)
    consumer.pause(tp)
    await asyncio.sleep(0.5)
    await asyncio.get_running_loop().run_in_executor(None, recreate, kp, producer, args.topic)
    consumer.resume(tp)
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < QUIET_S + 3:
        batch = await poll(0.2)
        if batch:
            got.extend(batch)
            quiet_since = time.monotonic()
    await consumer.stop()
    return got, old_position


# --- consumer groups ----------------------------------------------------------------------
#
# A consumer that subscribes with a group id, in its client's default configuration
# (auto commit on, the default assignors, session and heartbeat timeouts), with
# `auto_offset_reset` given only where a scenario needs one. The three clients behind one
# interface, each used by one thread at a time.


class KpGroup:
    """kafka-python's KafkaConsumer, subscribed."""

    client = "kafka-python"

    def __init__(self, bootstrap, topic, group, **extra):
        self.topic = topic
        self.errors = []
        self.consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **extra)

    def poll(self, t):
        try:
            return kp_poll(self.consumer, t)
        except kerrors.KafkaError as e:
            self.errors.append(type(e).__name__)
            return []

    def assigned(self):
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}

    def positions(self):
        return {p: self.consumer.position(kafka.TopicPartition(self.topic, p)) for p in self.assigned()}

    def committed(self, partitions):
        return {p: self.consumer.committed(kafka.TopicPartition(self.topic, p)) for p in partitions}

    def commit(self):
        self.consumer.commit()

    def close(self):
        self.consumer.close()


class CkGroup:
    """confluent-kafka's Consumer, subscribed."""

    client = "confluent-kafka"

    def __init__(self, bootstrap, topic, group, auto_offset_reset=None, extra=None):
        self.topic = topic
        self.errors = []
        self.buffered = []
        config = {"bootstrap.servers": bootstrap, "group.id": group, **(extra or {})}
        if auto_offset_reset is not None:
            config["auto.offset.reset"] = auto_offset_reset
        self.consumer = confluent_kafka.Consumer(config)
        self.consumer.subscribe([topic])

    def poll(self, t):
        if self.buffered:
            out, self.buffered = self.buffered, []
            return out
        return ck_poll(self.consumer, t, self.errors)

    def assigned(self):
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}

    def positions(self):
        """Polls for QUIET_S (keeping what it reads), long enough for librdkafka to look
        its positions up, then the positions: librdkafka's are those of the last record
        consumed, so a partition with none consumed yet is None."""
        end = time.monotonic() + QUIET_S
        while time.monotonic() < end:
            self.buffered.extend(ck_poll(self.consumer, 0.1, self.errors))
        tps = [confluent_kafka.TopicPartition(self.topic, p) for p in self.assigned()]
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in self.consumer.position(tps)}

    def committed(self, partitions):
        tps = [confluent_kafka.TopicPartition(self.topic, p) for p in partitions]
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in self.consumer.committed(tps, timeout=TIMEOUT_S)}

    def commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            # Nothing new to commit is not a failure.
            if e.args[0].code() != KafkaError._NO_OFFSET:
                raise

    def close(self):
        self.consumer.close()


class AioGroup:
    """aiokafka's AIOKafkaConsumer, subscribed, driven from a thread of its own that
    runs its event loop."""

    client = "aiokafka"

    def __init__(self, bootstrap, topic, group, **extra):
        from aiokafka import AIOKafkaConsumer

        self.topic = topic
        self.errors = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **extra)
            await c.start()
            return c

        self.consumer = self.run(start())

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(2 * TIMEOUT_S)

    def poll(self, t):
        async def once():
            try:
                batches = await self.consumer.getmany(timeout_ms=int(t * 1000))
            except Exception as e:  # noqa: BLE001 - an error reported is recorded
                self.errors.append(type(e).__name__)
                await asyncio.sleep(t)
                return []
            return [record(tp.topic, tp.partition, r.offset, r.key, r.value) for tp, rs in batches.items() for r in rs]

        return self.run(once())

    def assigned(self):
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}

    def positions(self):
        from aiokafka import TopicPartition as AioTp

        async def all_positions():
            return {p: await self.consumer.position(AioTp(self.topic, p)) for p in self.assigned()}

        return self.run(all_positions())

    def committed(self, partitions):
        from aiokafka import TopicPartition as AioTp

        async def all_committed():
            return {p: await self.consumer.committed(AioTp(self.topic, p)) for p in partitions}

        return self.run(all_committed())

    def commit(self):
        self.run(self.consumer.commit())

    def close(self):
        try:
            self.run(self.consumer.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(TIMEOUT_S)


GROUP_CLIENTS = {"kafka-python": KpGroup, "confluent": CkGroup, "aiokafka": AioGroup}


def group_consumer(args, topic, group, fast_metadata=False, **extra):
    """A subscribed consumer of the scenario's client; `extra` in kafka-python's names
    (aiokafka shares them; for confluent-kafka, only auto_offset_reset).
    `fast_metadata`: the topic's metadata is refreshed every second (instead of every
    five minutes), so that a topic created again is seen within the scenario's time."""
    cls = GROUP_CLIENTS[args.client]
    if cls is CkGroup:
        config = {"topic.metadata.refresh.interval.ms": 1000} if fast_metadata else {}
        return CkGroup(args.bootstrap, topic, group, extra.get("auto_offset_reset"), config)
    if fast_metadata:
        extra["metadata_max_age_ms"] = 1000
    return cls(args.bootstrap, topic, group, **extra)


def until_assigned(c, want, what, poll=True):
    """Polls `c` until its assignment is `want` (a set of partitions); what it read
    meanwhile."""
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while c.assigned() != want:
        check(time.monotonic() < deadline, f"{c.client} {what}: assigned {sorted(c.assigned())}, want {sorted(want)} within {TIMEOUT_S}s (errors {c.errors})")
        if poll:
            got.extend(c.poll(0.2))
        else:
            time.sleep(0.05)
    return got


def produce_values(bootstrap, topic, partitions, prefix, per_partition):
    """`per_partition` keyless records to each of `partitions`, with confluent-kafka."""
    producer = ck_producer(bootstrap)
    out = []
    for p in partitions:
        out += ck_produce_all(producer, topic, [(None, f"{prefix}-p{p}-{i}".encode()) for i in range(per_partition)], p)
    return out


def values(records):
    return sorted(r["value"] for r in records)


def scenario_group_resume(args):
    """A consumer subscribes with a group, reads, commits and stops; the records
    produced next are read by a second consumer of the group, in its client's default
    configuration (offset reset: latest), from the committed offsets: exactly those
    records, none of the first ones again."""
    topic, group, partitions = args.topic, f"{args.topic}-group", 2
    kp = kp_admin(args.bootstrap)
    kp_create(kp, topic, partitions)
    first = produce_values(args.bootstrap, topic, range(partitions), "first", 5)
    c1 = group_consumer(args, topic, group, auto_offset_reset="earliest")
    got1 = consume_until(c1.poll, len(first), f"{c1.client} first consumer of group {group!r}")
    check(values(got1) == values(first), f"{c1.client} first consumer read {values(got1)}, want {values(first)}")
    c1.commit()
    committed = c1.committed(range(partitions))
    ends = {p: max(r["offset"] for r in first if r["partition"] == p) + 1 for p in range(partitions)}
    check(committed == ends, f"{c1.client}: committed {committed}, want {ends}")
    check(not c1.errors, f"{c1.client} first consumer errors: {c1.errors}")
    c1.close()

    second = produce_values(args.bootstrap, topic, range(partitions), "second", 5)
    c2 = group_consumer(args, topic, group)
    got2 = consume_until(c2.poll, len(second), f"{c2.client} second consumer of group {group!r}")
    check(values(got2) == values(second), f"{c2.client} second consumer read {values(got2)}, want {values(second)} only")
    check(not c2.errors, f"{c2.client} second consumer errors: {c2.errors}")
    c2.close()
    kp.close()
    emit({"client": args.client, "group": group, "first": sorted(got1, key=key_of), "second": sorted(got2, key=key_of), "committed": committed})


class Poller(threading.Thread):
    """Polls one group consumer on a thread of its own until stopped, then closes it;
    what it read and its assignment are read by the scenario's thread."""

    def __init__(self, make):
        super().__init__(daemon=True)
        self.make = make
        self.records = []
        self.assignment = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.failure = None

    def run(self):
        try:
            c = self.make()
            self.client = c.client
            self.ready.set()
            while not self.stopping.is_set():
                got = c.poll(0.2)
                with self.lock:
                    self.records.extend(got)
                    self.assignment = c.assigned()
            self.errors = c.errors
            c.close()
        except Exception as e:  # noqa: BLE001 - reported by the scenario
            self.failure = f"{type(e).__name__}: {e}"
            self.ready.set()

    def snapshot(self):
        with self.lock:
            return set(self.assignment), list(self.records)

    def stop(self):
        self.stopping.set()
        self.join(2 * TIMEOUT_S)
        check(self.failure is None, f"a consumer failed: {self.failure}")


def wait_until(what, condition, pollers):
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        for p in pollers:
            check(p.failure is None, f"{what}: a consumer failed: {p.failure}")
        states = [(sorted(p.snapshot()[0]), len(p.snapshot()[1])) for p in pollers]
        check(time.monotonic() < deadline, f"{what}: not within {TIMEOUT_S}s; (assignment, records read): {states}")
        time.sleep(0.1)


def scenario_group_split(args):
    """Two members of one group split four partitions between them; each reads its
    own; when one leaves (closing, as a consumer stops), the other takes every
    partition over and reads on from the committed offsets: every record is read once."""
    topic, group, partitions = args.topic, f"{args.topic}-group", 4
    kp = kp_admin(args.bootstrap)
    kp_create(kp, topic, partitions)
    everything = set(range(partitions))
    a = Poller(lambda: group_consumer(args, topic, group, auto_offset_reset="earliest"))
    a.start()
    wait_until("the first member holds every partition", lambda: a.snapshot()[0] == everything, [a])
    b = Poller(lambda: group_consumer(args, topic, group, auto_offset_reset="earliest"))
    b.start()

    def split():
        (sa, _), (sb, _) = a.snapshot(), b.snapshot()
        return sa and sb and not sa & sb and sa | sb == everything

    wait_until("the two members split the partitions", split, [a, b])
    split_a, split_b = a.snapshot()[0], b.snapshot()[0]
    first = produce_values(args.bootstrap, topic, range(partitions), "first", 3)
    wait_until("the two members read the first records", lambda: len(a.snapshot()[1]) + len(b.snapshot()[1]) >= len(first), [a, b])
    time.sleep(QUIET_S)
    read_a, read_b = a.snapshot()[1], b.snapshot()[1]
    check({r["partition"] for r in read_a} <= split_a, f"member a read partitions outside its {sorted(split_a)}: {read_a}")
    check({r["partition"] for r in read_b} <= split_b, f"member b read partitions outside its {sorted(split_b)}: {read_b}")
    check(values(read_a + read_b) == values(first), f"the members read {values(read_a + read_b)}, want {values(first)} once each")

    b.stop()
    wait_until("the remaining member takes every partition", lambda: a.snapshot()[0] == everything, [a])
    second = produce_values(args.bootstrap, topic, range(partitions), "second", 3)
    wait_until("the remaining member reads the second records", lambda: len(a.snapshot()[1]) >= len(read_a) + len(second), [a])
    time.sleep(QUIET_S)
    after = a.snapshot()[1][len(read_a):]
    a.stop()
    check(values(after) == values(second), f"after the leave, member a read {values(after)}, want {values(second)} (nothing twice, nothing lost)")
    kp.close()
    emit({"client": args.client, "split": [sorted(split_a), sorted(split_b)], "first": len(first), "second": len(second)})


def scenario_group_recreate(args):
    """Delete a topic while a group consumes it, and create it again.

    (1) A member reads 15 records, commits and goes on polling while the topic is
    deleted, created again and given 30 new records: it reads new-0..new-29 (its
    position is where the new incarnation begins, or its reset policy, earliest, puts
    it there), never an old record, never the new ones from the middle.

    (2) Another group reads 15 records of a second topic, commits (offset 15, where the
    next incarnation will begin) and stops; the topic is deleted and created again with
    30 records. The group's committed offset is then none, and a member in the default
    configuration (offset reset: latest) reads none of the 30 (it would read all 30
    from a committed offset carried over) and then the 5 produced after it started;
    with `--reset earliest`, all 35."""
    kp = kp_admin(args.bootstrap)
    running = f"{args.topic}-running"
    kp_create(kp, running, 1)
    old = produce_values(args.bootstrap, running, [0], "old", 15)
    c = Poller(lambda: group_consumer(args, running, f"{running}-group", auto_offset_reset="earliest", fast_metadata=True))
    c.start()
    wait_until("the member reads the old records", lambda: len(c.snapshot()[1]) >= len(old), [c])
    time.sleep(QUIET_S)
    check(values(c.snapshot()[1]) == values(old), f"the member read {values(c.snapshot()[1])}, want {values(old)}")
    recreate(kp, ck_producer(args.bootstrap), running)
    seen = len(old)
    wait_until("the member reads the new records", lambda: len(c.snapshot()[1]) >= seen + 30, [c])
    time.sleep(QUIET_S + 1)
    after = c.snapshot()[1][seen:]
    c.stop()
    want = [f"new-{i}" for i in range(30)]
    check(sorted(r["value"] for r in after) == sorted(want), f"while consuming through the re-create, read {[r['value'] for r in after]}, want new-0..new-29 once each")

    stopped, group = f"{args.topic}-stopped", f"{args.topic}-stopped-group"
    kp_create(kp, stopped, 1)
    old = produce_values(args.bootstrap, stopped, [0], "old", 15)
    c1 = group_consumer(args, stopped, group, auto_offset_reset="earliest")
    got = consume_until(c1.poll, 15, f"{c1.client} reader of {stopped!r}")
    check(values(got) == values(old), f"{c1.client} read {values(got)}")
    c1.commit()
    old_commit = c1.committed([0])[0]
    check(old_commit == old[-1]["offset"] + 1, f"{c1.client}: committed {old_commit}, want {old[-1]['offset'] + 1}")
    c1.close()
    recreate(kp, ck_producer(args.bootstrap), stopped)
    reset = {"auto_offset_reset": "earliest"} if args.reset == "earliest" else {}
    c2 = group_consumer(args, stopped, group, **reset)
    got = until_assigned(c2, {0}, "member after the re-create")
    committed = c2.committed([0])[0]
    check(committed is None, f"{c2.client}: the group's committed offset after the re-create is {committed}, want none (the old one was {old_commit})")
    # Its position is looked up (by its reset policy) before more records come.
    position = c2.positions()[0]
    more = produce_values(args.bootstrap, stopped, [0], "more", 5)
    want = 35 if args.reset == "earliest" else 5
    got += consume_until(c2.poll, want - len(got), f"{c2.client} member after the re-create")
    c2.close()
    read = [r["value"] for r in sorted(got, key=key_of)]
    expected = [f"new-{i}" for i in range(30)] + [r["value"] for r in more] if args.reset == "earliest" else [r["value"] for r in more]
    check(read == expected, f"{args.client} ({args.reset}) after the re-create read {read}, want {expected}")
    kp.close()
    emit({"client": args.client, "reset": args.reset, "old_commit": old_commit, "position": position, "read": read})


def ck_consumer_watermarks(bootstrap, topic, partition):
    consumer = ck_consumer(bootstrap)
    try:
        return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=TIMEOUT_S, cached=False)
    finally:
        consumer.close()


# Keys for the partitioner: lengths 0 to 26 (every murmur2 tail length), non-ASCII
# UTF-8, and Kafka's own test vectors ("21", "foobar", ...).
PARTITIONER_KEYS = (
    ["", "a", "ab", "abc", "21", "foobar", "a-little-bit-long-string", "a-little-bit-longer-string"]
    + ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", "clé-ü-日本", "customer-7"]
    + [f"key-{i}" for i in range(40)]
)


def scenario_partitioner(args):
    """(d) Keyed records, no partition chosen: librdkafka with murmur2_random and
    kafka-python's default partitioner. Prints every (key, partition) for the Rust side
    to check against broker_core::partitioner::partition_for_key."""
    results = []
    admin = ck_admin(args.bootstrap)
    for partitions in (5, 16):
        topic = f"{args.prefix}-{partitions}"
        err = ck_create(admin, topic, partitions)
        check(err is None, f"confluent-kafka CreateTopics {topic!r}: {err}")
        items = [(k.encode(), f"v-{k}".encode()) for k in PARTITIONER_KEYS]
        ck = ck_produce_all(ck_producer(args.bootstrap, partitioner="murmur2_random"), topic, items)
        kpp = kp_producer(args.bootstrap)
        kp = kp_produce_all(kpp, topic, items)
        kpp.close(timeout=TIMEOUT_S)
        for client, reports in (("confluent-kafka", ck), ("kafka-python", kp)):
            for r in reports:
                results.append({"client": client, "partitions": partitions, "key": r["key"], "partition": r["partition"]})
    emit({"results": results})


def scenario_metadata_missing(args):
    """(e) Metadata for a name that does not exist: an error for it, and no topic made,
    though both producers ask with allow_auto_topic_creation=true."""
    name = args.topic
    ck = ck_admin(args.bootstrap)
    md = ck.list_topics(topic=name, timeout=TIMEOUT_S)
    t = md.topics.get(name)
    check(t is not None and t.error is not None, f"confluent-kafka Metadata [{name!r}]: no error for it: {t}")
    check(t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"confluent-kafka Metadata [{name!r}]: {t.error}, want UNKNOWN_TOPIC_OR_PART")
    ck_error = t.error.name()

    # A librdkafka producer asks with allow_auto_topic_creation=true.
    producer = ck_producer(args.bootstrap)
    pmd = producer.list_topics(topic=name, timeout=TIMEOUT_S)
    check(pmd.topics[name].error is not None, f"confluent-kafka producer Metadata [{name!r}]: no error: {pmd.topics[name]}")

    kp = kp_admin(args.bootstrap)
    desc = kp_describe(kp, name)
    check(desc["error_code"] == 3, f"kafka-python Metadata [{name!r}]: error code {desc['error_code']}, want 3 (UNKNOWN_TOPIC_OR_PARTITION)")
    # kafka-python's producer also asks with allow_auto_topic_creation=true; it waits
    # for the topic and gives up.
    kpp = kp_producer(args.bootstrap, max_block_ms=3000)
    try:
        parts = kpp.partitions_for(name)
        raise ScenarioFailed(f"kafka-python producer partitions_for({name!r}): {parts}, want a timeout")
    except kerrors.KafkaTimeoutError:
        pass
    kpp.close(timeout=TIMEOUT_S)

    all_topics = ck_topics(ck)
    check(name not in all_topics, f"{name!r} exists after Metadata requests for it: {all_topics}")
    check(name not in kp.list_topics(), f"kafka-python list_topics shows {name!r}")
    kp.close()
    emit({"topic": name, "confluent_error": ck_error, "kafka_python_error_code": desc["error_code"], "topics": all_topics})


CODECS = ["gzip", "snappy", "lz4", "zstd"]


def aio_produce_all(bootstrap, topic, items, **extra):
    """Like kp_produce_all, with aiokafka's producer."""
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=KP_TIMEOUT_MS, **extra)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=value, partition=0) for key, value in items]
            out = []
            for (key, value), f in zip(items, futures):
                md = await asyncio.wait_for(f, TIMEOUT_S)
                out.append(record(topic, md.partition, md.offset, key, value))
            return out
        finally:
            await producer.stop()

    try:
        return asyncio.run(run())
    except Exception as e:  # any failure of the client is the scenario's failure
        raise ScenarioFailed(f"aiokafka Produce to {topic!r}: {type(e).__name__}: {e}") from e


def aio_read_from(bootstrap, topic, offset, expected_count):
    """aiokafka: assign partition 0, seek to `offset`, read until quiet."""
    from aiokafka import AIOKafkaConsumer, TopicPartition as AioTp

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=KP_TIMEOUT_MS)
        await consumer.start()
        try:
            tp = AioTp(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            got, quiet_since = [], None
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=200)
                msgs = [record(m.topic, m.partition, m.offset, m.key, m.value) for m in batch.get(tp, [])]
                got.extend(msgs)
                if msgs:
                    quiet_since = None
                elif len(got) >= expected_count:
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since >= QUIET_S:
                        break
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def scenario_compression(args):
    """Every codec each Python client produces (gzip, snappy, lz4, zstd), in batches of
    many records; every client reads all of them back, in order, from the first offset
    and from the middle of a batch."""
    topic = args.topic
    err = ck_create(ck_admin(args.bootstrap), topic, 1)
    check(err is None, f"confluent-kafka CreateTopics {topic!r}: {err}")
    produced, runs = [], []
    per_run = 40
    for client in ["kafka-python", "confluent", "aiokafka"]:
        for codec in CODECS:
            # Repetitive values, so that a batch compresses; all sent before the flush,
            # with a linger, so that they go in batches of many records.
            items = [(f"{client}-{codec}-{i % 3}".encode(), f"{client} {codec} {i:04} ".encode() * 8) for i in range(per_run)]
            if client == "kafka-python":
                p = kp_producer(args.bootstrap, compression_type=codec, linger_ms=50)
                got = kp_produce_all(p, topic, items, partition=0)
                p.close(timeout=TIMEOUT_S)
            elif client == "confluent":
                got = ck_produce_all(ck_producer(args.bootstrap, **{"compression.type": codec, "linger.ms": 50}), topic, items, partition=0)
            else:
                got = aio_produce_all(args.bootstrap, topic, items, compression_type=codec, linger_ms=50)
            check([r["value"] for r in got] == [v.decode() for _, v in items], f"{client} {codec}: acknowledged {got}")
            runs.append({"client": client, "codec": codec, "first": got[0]["offset"], "count": len(got)})
            produced += got
    check_dense(produced, 1, "acknowledged positions")
    want = sorted(produced, key=key_of)
    # From the first offset, and from inside the second run's batches.
    middle = want[per_run + per_run // 2]["offset"]
    for start in [0, middle]:
        expect = [r for r in want if r["offset"] >= start]
        kpc = kp_consumer(args.bootstrap)
        kp_assign_from(kpc, topic, [0], start)
        got = consume_until(lambda t: kp_poll(kpc, t), len(expect), f"kafka-python Fetch from {start}")
        kpc.close()
        check(sorted(got, key=key_of) == expect, f"kafka-python read from {start}: {len(got)} records, want {len(expect)}: {got[:3]}")
        ckc = ck_consumer(args.bootstrap)
        ckc.assign([confluent_kafka.TopicPartition(topic, 0, start)])
        errors = []
        got = consume_until(lambda t: ck_poll(ckc, t, errors), len(expect), f"confluent-kafka Fetch from {start}")
        ckc.close()
        check(not errors, f"confluent-kafka consumer errors: {errors}")
        check(sorted(got, key=key_of) == expect, f"confluent-kafka read from {start}: {len(got)} records, want {len(expect)}: {got[:3]}")
        got = aio_read_from(args.bootstrap, topic, start, len(expect))
        check(sorted(got, key=key_of) == expect, f"aiokafka read from {start}: {len(got)} records, want {len(expect)}: {got[:3]}")
    emit({"topic": topic, "runs": runs, "records": want, "middle": middle})


def scenario_idempotent(args):
    """Idempotent producers: kafka-python in its default configuration, confluent-kafka
    and aiokafka with idempotence turned on, each produce three rounds to two partitions
    of its own topic; each topic is read back (kafka-python's consumer, by assign): every
    record exactly once, at dense offsets from 0."""
    ck = ck_admin(args.bootstrap)
    counts = {}
    for client in ["kafka-python", "confluent", "aiokafka"]:
        topic = f"{args.topic}-{client}"
        err = ck_create(ck, topic, 2)
        check(err is None, f"confluent-kafka CreateTopics {topic!r}: {err}")
        rounds = [[(None, f"{client}-r{r}-p{p}-{i}".encode()) for i in range(4)] for r in range(3) for p in range(2)]
        produced = []
        if client == "kafka-python":
            kpp = kp_producer(args.bootstrap)
            check(kpp.config["enable_idempotence"], "kafka-python: idempotence is not on by default")
            for n, items in enumerate(rounds):
                produced += kp_produce_all(kpp, topic, items, partition=n % 2)
            kpp.close(timeout=TIMEOUT_S)
        elif client == "confluent":
            ckp = ck_producer(args.bootstrap, **{"enable.idempotence": True})
            for n, items in enumerate(rounds):
                produced += ck_produce_all(ckp, topic, items, partition=n % 2)
        else:
            produced += asyncio.run(aio_produce(args.bootstrap, topic, rounds))
        check_dense(produced, 2, f"{client} idempotent acknowledgements")
        kpc = kp_consumer(args.bootstrap)
        kp_assign_from(kpc, topic, range(2), 0)
        got = consume_until(lambda t: kp_poll(kpc, t), len(produced), f"{client} read back")
        kpc.close()
        check(sorted(got, key=key_of) == sorted(produced, key=key_of), f"{client}: read {got}, want {produced} once each")
        counts[client] = len(got)
    emit({"read": counts})


async def aio_produce(bootstrap, topic, rounds):
    """aiokafka with enable_idempotence=True: each round to its partition, acknowledged."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, request_timeout_ms=KP_TIMEOUT_MS)
    await producer.start()
    out = []
    try:
        for n, items in enumerate(rounds):
            futures = [await producer.send(topic, value=v, key=k, partition=n % 2) for k, v in items]
            for (k, v), f in zip(items, futures):
                md = await f
                out.append(record(topic, md.partition, md.offset, k, v))
    finally:
        await producer.stop()
    return out


def scenario_transactional(args):
    """A transactional producer of each Python client (transactional_id set) fails at its
    first step, within seconds; the message each gives is printed."""
    messages = {}
    started = time.monotonic()
    kpp = kp_producer(args.bootstrap, transactional_id="broker-fs-txn")
    try:
        kpp.init_transactions()
        raise ScenarioFailed("kafka-python init_transactions succeeded")
    except kerrors.KafkaError as e:
        messages["kafka-python"] = f"{type(e).__name__}: {e}"
    kpp.close(timeout=TIMEOUT_S)

    ckp = ck_producer(args.bootstrap, **{"transactional.id": "broker-fs-txn"})
    try:
        ckp.init_transactions(TIMEOUT_S)
        raise ScenarioFailed("confluent-kafka init_transactions succeeded")
    except KafkaException as e:
        err = e.args[0]
        messages["confluent"] = f"{err.name()}: {err.str()} (fatal: {err.fatal()})"

    async def aio():
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, transactional_id="broker-fs-txn")
        try:
            await producer.start()
            async with producer.transaction():
                await producer.send_and_wait(args.topic, b"never")
            raise ScenarioFailed("aiokafka's transaction went through")
        except kerrors.KafkaError as e:
            return f"{type(e).__name__}: {e}"
        except Exception as e:  # aiokafka's own error classes
            if isinstance(e, ScenarioFailed):
                raise
            return f"{type(e).__name__}: {e}"
        finally:
            await producer.stop()

    messages["aiokafka"] = asyncio.run(asyncio.wait_for(aio(), TIMEOUT_S))
    seconds = time.monotonic() - started
    check(seconds < TIMEOUT_S, f"the transactional producers took {seconds:.1f}s to fail")
    emit({"messages": messages, "seconds": round(seconds, 1)})


# --- steps for the kill -9 test ----------------------------------------------------------


def step_create(args):
    """Creates one topic with confluent-kafka's admin, with the given topic configs."""
    configs = dict(c.split("=", 1) for c in args.config)
    err = ck_create(ck_admin(args.bootstrap), args.topic, args.partitions, configs)
    check(err is None, f"confluent-kafka CreateTopics {args.topic!r} {configs}: {err}")
    emit({"topic": args.topic, "partitions": args.partitions})


def step_produce(args):
    """`count` keyless records to every partition, with kafka-python."""
    kpp = kp_producer(args.bootstrap)
    out = []
    for p in range(args.partitions):
        out += kp_produce_all(kpp, args.topic, [(None, f"r-{p}-{i}".encode()) for i in range(args.count)], p)
    kpp.close(timeout=TIMEOUT_S)
    check_dense(out, args.partitions, f"kafka-python Produce to {args.topic!r}")
    emit({"topic": args.topic, "records": len(out)})


def step_delete(args):
    """Deletes with kafka-python's admin; prints the acknowledgement at once, so that
    the caller can act on it before this process has even shut its client down."""
    kp = kp_admin(args.bootstrap)
    try:
        kp.delete_topics([args.topic], timeout_ms=KP_TIMEOUT_MS)
    except kerrors.KafkaError as e:
        raise ScenarioFailed(f"kafka-python DeleteTopics {args.topic!r}: {type(e).__name__}: {e}") from e
    emit({"deleted": args.topic})
    kp.close()


def step_absent(args):
    """The topic is absent for both clients: not listed, and Metadata for it errs."""
    ck = ck_admin(args.bootstrap)
    all_topics = ck_topics(ck)
    check(args.topic not in all_topics, f"confluent-kafka Metadata (all topics) lists {args.topic!r}: {all_topics}")
    t = ck.list_topics(topic=args.topic, timeout=TIMEOUT_S).topics.get(args.topic)
    check(t is not None and t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"confluent-kafka Metadata [{args.topic!r}]: {t and t.error}, want UNKNOWN_TOPIC_OR_PART")
    kp = kp_admin(args.bootstrap)
    desc = kp_describe(kp, args.topic)
    check(desc["error_code"] == 3, f"kafka-python Metadata [{args.topic!r}]: error {desc['error_code']}, want 3")
    kp.close()
    emit({"absent": args.topic, "topics": all_topics})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="scenario", required=True)

    def add(name, fn, *options):
        p = sub.add_parser(name, help=" ".join(fn.__doc__.split("\n\n")[0].split()))
        if name != "clients":
            p.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
        for opt in options:
            opt(p)
        p.set_defaults(run=fn)

    def prefix(p):
        p.add_argument("--prefix", default="t", help="prefix of the topic names")

    def topic(p):
        p.add_argument("--topic", required=True)

    def client(p):
        p.add_argument("--client", choices=["confluent", "kafka-python"], required=True)

    def partitions(p):
        p.add_argument("--partitions", type=int, default=1)

    def config(p):
        p.add_argument("--config", action="append", default=[], help="KEY=VALUE topic config")

    def count(p):
        p.add_argument("--count", type=int, default=5, help="records per partition")

    add("clients", scenario_clients)
    add("create", scenario_create, prefix)
    add("produce-consume", scenario_produce_consume, topic)
    add("delete-while-polling", scenario_delete_while_polling, topic, client)
    add("partitioner", scenario_partitioner, prefix)
    add("metadata-missing", scenario_metadata_missing, topic)
    add("idempotent", scenario_idempotent, topic)
    add("transactional", scenario_transactional, topic)
    add("compression", scenario_compression, topic)

    def recreate_client(p):
        p.add_argument("--client", choices=["confluent", "kafka-python", "aiokafka"], required=True)
        p.add_argument("--reset", choices=["default", "earliest"], default="default")

    add("recreate", scenario_recreate, topic, recreate_client)

    def group_client(p):
        p.add_argument("--client", choices=sorted(GROUP_CLIENTS), required=True)
        p.add_argument("--reset", choices=["default", "earliest"], default="default")

    add("group-resume", scenario_group_resume, topic, group_client)
    add("group-split", scenario_group_split, topic, group_client)
    add("group-recreate", scenario_group_recreate, topic, group_client)
    add("create-topic", step_create, topic, partitions, config)
    add("produce", step_produce, topic, partitions, count)
    add("delete", step_delete, topic)
    add("absent", step_absent, topic)

    args = parser.parse_args()
    try:
        args.run(args)
    except ScenarioFailed as e:
        log(f"FAILED {args.scenario}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
