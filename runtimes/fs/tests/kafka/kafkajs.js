// kafkajs against `broker-fs serve --kafka ADDR`, driven by runtimes/fs/tests/kafka_clients.rs:
//
//     node kafkajs.js BOOTSTRAP TOPIC
//
// kafkajs's consumer joins a consumer group (it has no other way to read), which this
// broker does not serve yet, so kafkajs is tried as an admin and a producer in its
// default configuration (idempotence off, no compression): create a topic, produce,
// read the offsets with fetchTopicOffsets (ListOffsets), delete it, create it again,
// read the offsets again (the new topic begins past the deleted one's), produce again.
// Prints one JSON object on its last line; exits 1 with the reason on a failure.
"use strict";

const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "broker-fs-test-kafkajs", brokers: [bootstrap], logLevel: logLevel.NOTHING });

function check(ok, message) {
  if (!ok) throw new Error(message);
}

async function produce(producer, prefix, n) {
  const messages = Array.from({ length: n }, (_, i) => ({ value: `${prefix}-${i}`, partition: 0 }));
  const acked = await producer.send({ topic, messages, acks: -1 });
  check(acked.length === 1 && acked[0].errorCode === 0, `produce ${prefix}: ${JSON.stringify(acked)}`);
  return Number(acked[0].baseOffset);
}

async function offsets(admin) {
  const got = await admin.fetchTopicOffsets(topic);
  check(got.length === 1, `fetchTopicOffsets: ${JSON.stringify(got)}`);
  return { low: Number(got[0].low), high: Number(got[0].high) };
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), "create");
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const firstBase = await produce(producer, "old", 5);
  const before = await offsets(admin);
  check(before.high === before.low + 5 && firstBase === before.low, `offsets before the delete: ${JSON.stringify(before)}, base ${firstBase}`);
  await admin.deleteTopics({ topics: [topic] });
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), "re-create");
  const fresh = await offsets(admin);
  check(fresh.low === fresh.high && fresh.low >= before.high, `offsets of the re-created topic: ${JSON.stringify(fresh)}, the deleted one ended at ${before.high}`);
  await producer.disconnect();
  const again = kafka.producer({ allowAutoTopicCreation: false });
  await again.connect();
  const newBase = await produce(again, "new", 3);
  check(newBase === fresh.low, `the re-created topic's first record at ${newBase}, its offsets begin at ${fresh.low}`);
  const after = await offsets(admin);
  check(after.high === fresh.low + 3, `offsets after producing 3: ${JSON.stringify(after)}`);
  await again.disconnect();
  await admin.disconnect();
  console.log(JSON.stringify({ before, fresh, after, new_base: newBase }));
}

main().catch((e) => {
  console.error(`FAILED kafkajs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
