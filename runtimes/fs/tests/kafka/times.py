#!/usr/bin/env python3
"""Offsets by timestamp through real Kafka clients against `broker-fs serve --kafka ADDR`.

Driven by runtimes/fs/tests/kafka_times.rs; runnable by hand too:

    python times.py CLIENT --bootstrap 127.0.0.1:PORT --topic NAME

CLIENT is kafka-python, confluent-kafka (librdkafka) or aiokafka; `python times.py
clients` only checks that they import. Each run creates its topic (one partition),
produces one record for each of PRODUCED's timestamps with that timestamp set
explicitly, asks the client's `offsets_for_times` for each time of ASKED, and prints one
JSON object on the last line of standard output: the timestamps produced, the offsets the
records landed at, and for each time asked, [offset, timestamp] or null where the client
found none.
confluent-kafka's `offsets_for_times` gives offsets only: the timestamp it reports is the
one of the record it then reads at that offset. It exits 1, with the reason on standard
error, if a call fails.
"""

import argparse
import asyncio
import json
import sys

TIMEOUT_S = 30.0
TIMEOUT_MS = int(TIMEOUT_S * 1000)

# The records' timestamps, one record each, in order from offset 0: growing, then one
# back in time. kafka_times.rs holds the same list.
PRODUCED = [1_000_000, 2_000_000, 3_000_000, 2_500_000, 4_000_000, 5_000_000]
# The times asked: before everything, exact, between, inside the records that go back
# in time, and after everything.
ASKED = [0, 999_999, 1_000_000, 1_500_000, 2_200_000, 2_500_000, 2_600_000, 3_000_000, 3_000_001,
         4_000_000, 5_000_000, 5_000_001, 10**13]


def log(message):
    print(message, file=sys.stderr, flush=True)


def emit(result):
    print(json.dumps(result, sort_keys=True), flush=True)


def run_kafka_python(args):
    import kafka

    admin = kafka.KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=TIMEOUT_MS)
    admin.create_topics([kafka.admin.NewTopic(args.topic, 1, 1)], timeout_ms=TIMEOUT_MS)
    admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", request_timeout_ms=TIMEOUT_MS)
    produced = []
    # The first three each in a batch of its own, the rest together in one.
    futures = []
    for i, t in enumerate(PRODUCED):
        futures.append(producer.send(args.topic, value=f"v{i}".encode(), partition=0, timestamp_ms=t))
        if i < 3:
            producer.flush()
    producer.flush()
    produced = [f.get(timeout=TIMEOUT_S).offset for f in futures]
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None, request_timeout_ms=TIMEOUT_MS)
    tp = kafka.TopicPartition(args.topic, 0)
    answers = []
    for t in ASKED:
        found = consumer.offsets_for_times({tp: t}).get(tp)
        log(f"kafka-python offsets_for_times({t}): {found}")
        answers.append([t, None if found is None else [found.offset, found.timestamp]])
    consumer.close()
    return {"produced": produced, "answers": answers}


def run_confluent_kafka(args):
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for future in admin.create_topics([NewTopic(args.topic, num_partitions=1, replication_factor=1)]).values():
        future.result(timeout=TIMEOUT_S)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": args.bootstrap, "acks": "all", "message.timeout.ms": TIMEOUT_MS}
    )
    produced = [None] * len(PRODUCED)
    errors = []

    def delivered(i):
        def cb(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                produced[i] = msg.offset()

        return cb

    for i, t in enumerate(PRODUCED):
        producer.produce(args.topic, value=f"v{i}".encode(), partition=0, timestamp=t, on_delivery=delivered(i))
        if i < 3:
            producer.flush(TIMEOUT_S)
    if producer.flush(TIMEOUT_S) != 0 or errors:
        raise RuntimeError(f"confluent-kafka produce: {errors or 'not delivered'}")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": "broker-fs-test-unused", "enable.auto.commit": False}
    )
    answers = []
    for t in ASKED:
        [found] = consumer.offsets_for_times([confluent_kafka.TopicPartition(args.topic, 0, t)], timeout=TIMEOUT_S)
        log(f"confluent-kafka offsets_for_times({t}): {found}")
        if found.error is not None:
            raise RuntimeError(f"confluent-kafka offsets_for_times({t}): {found.error}")
        if found.offset < 0:
            answers.append([t, None])
            continue
        # The timestamp of the record found: read it.
        consumer.assign([confluent_kafka.TopicPartition(args.topic, 0, found.offset)])
        msg = consumer.poll(TIMEOUT_S)
        if msg is None or msg.error() is not None:
            raise RuntimeError(f"confluent-kafka read at {found.offset}: {msg and msg.error()}")
        answers.append([t, [msg.offset(), msg.timestamp()[1]]])
    consumer.close()
    return {"produced": produced, "answers": answers}


async def aiokafka_run(args):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=TIMEOUT_MS)
    await admin.start()
    await admin.create_topics([NewTopic(args.topic, 1, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, acks="all", request_timeout_ms=TIMEOUT_MS)
    await producer.start()
    produced = []
    try:
        for i, t in enumerate(PRODUCED):
            sent = await producer.send_and_wait(args.topic, value=f"v{i}".encode(), partition=0, timestamp_ms=t)
            produced.append(sent.offset)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None, request_timeout_ms=TIMEOUT_MS)
    await consumer.start()
    tp = TopicPartition(args.topic, 0)
    answers = []
    try:
        for t in ASKED:
            found = (await consumer.offsets_for_times({tp: t})).get(tp)
            log(f"aiokafka offsets_for_times({t}): {found}")
            answers.append([t, None if found is None else [found.offset, found.timestamp]])
    finally:
        await consumer.stop()
    return {"produced": produced, "answers": answers}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["clients", "kafka-python", "confluent-kafka", "aiokafka"])
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic")
    args = parser.parse_args()
    if args.client == "clients":
        import aiokafka  # noqa: F401
        import confluent_kafka  # noqa: F401
        import kafka  # noqa: F401

        return
    if args.client == "kafka-python":
        result = run_kafka_python(args)
    elif args.client == "confluent-kafka":
        result = run_confluent_kafka(args)
    else:
        result = asyncio.run(aiokafka_run(args))
    emit({**result, "timestamps": PRODUCED})


if __name__ == "__main__":
    main()
