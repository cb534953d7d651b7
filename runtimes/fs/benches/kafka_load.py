"""Load for the `kafka` benchmark: produce through confluent-kafka (librdkafka) with
acks=all for a while, or fetch everything back, and print one JSON line of counts.

    python kafka_load.py produce BOOTSTRAP TOPIC SECONDS VALUE_BYTES [CODEC]
    python kafka_load.py fetch BOOTSTRAP TOPIC RECORDS

Each phase reports the CPU seconds this process used (librdkafka's threads included),
so the caller can tell a busy client from a busy broker.

The producer runs with librdkafka's defaults for batching (linger.ms=5,
batch.size=1000000), acks=all, idempotence off and compression.type CODEC (default none);
values are VALUE_BYTES bytes, keyless, to partition 0: text of words drawn from a small
vocabulary with a fixed seed, never the same value twice in one batch (at least 4,096
different values, taken in turn, and 2 MB of them), so that a codec finds what it would in
log lines or JSON: neither one repeated byte nor random noise. Produce requests are counted from librdkafka's own statistics, so the
caller can match the floor's write sizes to the requests the broker really got.
"""

import json
import random
import resource
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


WORDS = ("order user id amount currency eur usd status shipped pending paid item sku "
         "warehouse region north south east west created updated at true false null").split()


def values(value_bytes):
    count = max(4096, 2_000_000 // max(value_bytes, 1))
    rng = random.Random(7)
    out = []
    for i in range(count):
        text = f'{{"seq": {i}, "words": "'
        while len(text) < value_bytes:
            text += rng.choice(WORDS) + (" " if rng.random() < 0.8 else f" {rng.randrange(100000)} ")
        out.append(text[:value_bytes].encode())
    return out


def produce(bootstrap, topic, seconds, value_bytes, codec="none"):
    stats = {}

    def on_stats(raw):
        stats.update(json.loads(raw))

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "statistics.interval.ms": 100,
        "stats_cb": on_stats,
        "queue.buffering.max.kbytes": 65536,
        "compression.type": codec,
    })
    pool = values(value_bytes)
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(str(err))

    sent = 0
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value=pool[sent % len(pool)], partition=0, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.001)
            continue
        if sent % 1000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    produce_seconds = time.monotonic() - start
    if left or failures:
        sys.exit(f"produce failed: {left} undelivered, errors: {failures[:3]}")
    # The last statistics, after the flush: requests sent to the broker.
    time.sleep(0.3)
    producer.poll(0)
    requests = sum(b.get("req", {}).get("Produce", 0) for b in stats.get("brokers", {}).values())
    print(json.dumps({
        "records": sent,
        "seconds": produce_seconds,
        "requests": requests,
        "client_cpu_seconds": cpu_seconds(),
    }))


def fetch(bootstrap, topic, sent):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 10485760,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.monotonic()
    while got < sent:
        # Never more than are left: consume() waits out its timeout for a batch it
        # cannot fill, which would count seconds of waiting as fetching.
        messages = consumer.consume(num_messages=min(10000, sent - got), timeout=5)
        if not messages:
            sys.exit(f"fetch stalled after {got} of {sent} records")
        for m in messages:
            if m.error():
                sys.exit(f"fetch failed: {m.error()}")
        got += len(messages)
    fetch_seconds = time.monotonic() - start
    cpu = cpu_seconds()
    consumer.close()
    print(json.dumps({"records": got, "seconds": fetch_seconds, "client_cpu_seconds": cpu}))


if __name__ == "__main__":
    if sys.argv[1] == "produce":
        produce(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), *sys.argv[6:7])
    else:
        fetch(sys.argv[2], sys.argv[3], int(sys.argv[4]))
