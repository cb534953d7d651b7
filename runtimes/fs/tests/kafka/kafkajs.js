// kafkajs against `broker-fs serve --kafka ADDR`, driven by runtimes/fs/tests/kafka_clients.rs:
//
//     node kafkajs.js BOOTSTRAP TOPIC [SCENARIO]
//
// Without a scenario, kafkajs as an admin and a producer in its default configuration
// (idempotence off, no compression): create a topic, produce, read the offsets with
// fetchTopicOffsets (ListOffsets), delete it, create it again, read the offsets again
// (the new topic begins past the deleted one's), produce again. The scenarios
// group-resume, group-split and group-recreate run its consumer, which always reads
// through a consumer group, in its default configuration (see each one below);
// idempotent produces with `idempotent: true` and reads back, gzip produces batches
// with kafkajs's one built-in codec and reads back, times looks offsets up by
// timestamp, transactional tries a transaction (see each one below).
// Prints one JSON object on its last line; exits 1 with the reason on a failure.
"use strict";

const { Kafka, logLevel, CompressionTypes } = require("kafkajs");

const [bootstrap, topic, scenario] = process.argv.slice(2);
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

const TIMEOUT_MS = 30000;
const QUIET_MS = 2000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what, condition) {
  const deadline = Date.now() + TIMEOUT_MS;
  while (!condition()) {
    check(Date.now() < deadline, `${what}: not within ${TIMEOUT_MS} ms`);
    await sleep(50);
  }
}

// `perPartition` records to each of `partitions` of `name`, values PREFIX-pP-I; their
// offsets, by partition.
async function produceValues(producer, name, partitions, prefix, perPartition) {
  const messages = [];
  for (const p of partitions) {
    for (let i = 0; i < perPartition; i++) messages.push({ value: `${prefix}-p${p}-${i}`, partition: p });
  }
  const acked = await producer.send({ topic: name, messages, acks: -1 });
  check(acked.every((a) => a.errorCode === 0), `produce ${prefix}: ${JSON.stringify(acked)}`);
  return messages.map((m) => m.value);
}

// A consumer of `group` subscribed to `name` and running: what it reads, and its
// assignment as its last GROUP_JOIN said.
async function member(group, name, fromBeginning) {
  const consumer = kafka.consumer({ groupId: group });
  const state = { consumer, read: [], assigned: [], joins: 0, crashes: [] };
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    state.assigned = (e.payload.memberAssignment[name] || []).slice().sort();
    state.joins += 1;
  });
  consumer.on(consumer.events.CRASH, (e) => state.crashes.push(String(e.payload.error)));
  await consumer.connect();
  await consumer.subscribe({ topic: name, fromBeginning });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      state.read.push({ partition, offset: Number(message.offset), value: message.value.toString() });
    },
  });
  return state;
}

const sorted = (xs) => xs.slice().sort();
const same = (a, b) => JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));

// The group's committed offsets of `name` (OffsetFetch), by partition; -1: none.
async function committed(admin, group, name) {
  const got = await admin.fetchOffsets({ groupId: group, topics: [name] });
  return Object.fromEntries(got[0].partitions.map((p) => [p.partition, Number(p.offset)]));
}

// A consumer reads, commits (kafkajs commits as it goes, and on disconnect) and stops;
// a second one, from the latest offset by default, reads exactly what came next.
async function groupResume(admin, producer) {
  const group = `${topic}-group`;
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }), "create");
  const first = await produceValues(producer, topic, [0, 1], "first", 5);
  const c1 = await member(group, topic, true);
  await until("the first consumer reads the first records", () => c1.read.length >= first.length);
  await sleep(QUIET_MS);
  await c1.consumer.disconnect();
  check(same(c1.read.map((r) => r.value), first), `first consumer read ${JSON.stringify(c1.read)}`);
  const offsets = await committed(admin, group, topic);
  const ends = {};
  for (const r of c1.read) ends[r.partition] = Math.max(ends[r.partition] || 0, r.offset + 1);
  check(JSON.stringify(offsets) === JSON.stringify(ends), `committed ${JSON.stringify(offsets)}, want ${JSON.stringify(ends)}`);
  const second = await produceValues(producer, topic, [0, 1], "second", 5);
  const c2 = await member(group, topic, false);
  await until("the second consumer reads the second records", () => c2.read.length >= second.length);
  await sleep(QUIET_MS);
  await c2.consumer.disconnect();
  check(same(c2.read.map((r) => r.value), second), `second consumer read ${JSON.stringify(c2.read)}, want only ${second}`);
  return { committed: offsets, first: c1.read.length, second: c2.read.length };
}

// Two members split four partitions; when one leaves, the other takes all of them and
// reads on from the committed offsets.
async function groupSplit(admin, producer) {
  const group = `${topic}-group`;
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true }), "create");
  const a = await member(group, topic, true);
  await until("the first member holds every partition", () => a.assigned.length === 4);
  const b = await member(group, topic, true);
  const split = () =>
    a.assigned.length > 0 && b.assigned.length > 0 && a.assigned.length + b.assigned.length === 4 && a.assigned.every((p) => !b.assigned.includes(p));
  await until(`the members split the partitions (${JSON.stringify([a.assigned, b.assigned])})`, split);
  const halves = [a.assigned.slice(), b.assigned.slice()];
  const first = await produceValues(producer, topic, [0, 1, 2, 3], "first", 3);
  await until("the members read the first records", () => a.read.length + b.read.length >= first.length);
  await sleep(QUIET_MS);
  check(a.read.every((r) => halves[0].includes(r.partition)), `member a read outside ${halves[0]}: ${JSON.stringify(a.read)}`);
  check(b.read.every((r) => halves[1].includes(r.partition)), `member b read outside ${halves[1]}: ${JSON.stringify(b.read)}`);
  check(same([...a.read, ...b.read].map((r) => r.value), first), "each first record read once");
  const before = a.read.length;
  await b.consumer.disconnect();
  await until("the remaining member takes every partition", () => a.assigned.length === 4);
  const second = await produceValues(producer, topic, [0, 1, 2, 3], "second", 3);
  await until("the remaining member reads the second records", () => a.read.length >= before + second.length);
  await sleep(QUIET_MS);
  await a.consumer.disconnect();
  const after = a.read.slice(before).map((r) => r.value);
  check(same(after, second), `after the leave, read ${after}, want ${second}`);
  check(a.crashes.length === 0 && b.crashes.length === 0, `crashes: ${a.crashes} ${b.crashes}`);
  return { split: halves, first: first.length, second: second.length };
}

// A group reads a topic, commits at its end and stops; the topic is deleted and
// created again with 30 records. The group's committed offset is none, and a member
// (latest by default) reads none of the 30 (it would read them all from the old
// offset, where the new topic begins) and then the 5 produced after it joined.
async function groupRecreate(admin, producer) {
  const group = `${topic}-group`;
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), "create");
  const old = await produceValues(producer, topic, [0], "old", 15);
  const c1 = await member(group, topic, true);
  await until("the reader reads the old records", () => c1.read.length >= old.length);
  await sleep(QUIET_MS);
  await c1.consumer.disconnect();
  const oldCommit = (await committed(admin, group, topic))[0];
  check(oldCommit === c1.read[c1.read.length - 1].offset + 1, `committed ${oldCommit}`);
  await admin.deleteTopics({ topics: [topic] });
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), "re-create");
  await produceValues(producer, topic, [0], "new", 30);
  const none = (await committed(admin, group, topic))[0];
  check(none === -1, `the group's committed offset after the re-create: ${none}, want none (it was ${oldCommit})`);
  const c2 = await member(group, topic, false);
  await until("the member joins", () => c2.assigned.length === 1);
  await sleep(QUIET_MS);
  const more = await produceValues(producer, topic, [0], "more", 5);
  await until("the member reads what came after it joined", () => c2.read.length >= more.length);
  await sleep(QUIET_MS);
  await c2.consumer.disconnect();
  const read = c2.read.map((r) => r.value);
  check(JSON.stringify(read) === JSON.stringify(more), `after the re-create read ${read}, want ${more}`);
  return { old_commit: oldCommit, read };
}

// An idempotent producer (kafkajs's `idempotent: true`; off by default) sends three
// batches to each of two partitions; a group member from the beginning reads each
// record exactly once. The producer id it was given is printed.
async function idempotent(admin) {
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }), "create");
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true });
  await producer.connect();
  const sent = [];
  for (let batch = 0; batch < 3; batch++) sent.push(...(await produceValues(producer, topic, [0, 1], `idem${batch}`, 4)));
  await producer.disconnect();
  const c = await member(`${topic}-group`, topic, true);
  await until("the member reads every record", () => c.read.length >= sent.length);
  await sleep(QUIET_MS);
  await c.consumer.disconnect();
  const read = c.read.map((r) => r.value);
  check(same(read, sent), `read ${read}, want each of ${sent} once`);
  return { read: read.length };
}

// Batches of 20 records compressed with gzip (kafkajs's one built-in codec; the others
// need plugins) to each of two partitions; a group member from the beginning reads each
// record exactly once.
async function gzip(admin, producer) {
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }), "create");
  const sent = [];
  for (let batch = 0; batch < 3; batch++) {
    for (const partition of [0, 1]) {
      const values = Array.from({ length: 20 }, (_, i) => `gzip${batch}-p${partition}-${i} ${"text ".repeat(10)}`);
      const messages = values.map((value) => ({ value, partition }));
      const acked = await producer.send({ topic, messages, acks: -1, compression: CompressionTypes.GZIP });
      check(acked.length === 1 && acked[0].errorCode === 0, `gzip produce: ${JSON.stringify(acked)}`);
      sent.push(...values);
    }
  }
  const c = await member(`${topic}-group`, topic, true);
  await until("the member reads every record", () => c.read.length >= sent.length);
  await sleep(QUIET_MS);
  await c.consumer.disconnect();
  const read = c.read.map((r) => r.value);
  check(same(read, sent), `read ${read.length} records, want each of ${sent.length} once`);
  return { read: read.length };
}

// Records with explicit timestamps (one send, so one batch), then the admin's
// fetchTopicOffsetsByTimestamp (ListOffsets by time) for each time asked: the offsets
// it gives are printed with their times. (Where no record's timestamp reaches the time,
// kafkajs gives the high watermark instead of the broker's -1.)
async function times(admin, producer) {
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), "create");
  const produced = [1000000, 2000000, 3000000, 2500000, 4000000, 5000000];
  const messages = produced.map((t, i) => ({ value: `t${i}`, partition: 0, timestamp: String(t) }));
  const acked = await producer.send({ topic, messages, acks: -1 });
  check(acked.length === 1 && acked[0].errorCode === 0, `produce: ${JSON.stringify(acked)}`);
  // Offsets from the first record's (the topic begins past the deleted topics' offsets).
  const base = Number(acked[0].baseOffset);
  const answers = [];
  for (const t of [0, 1000000, 1500000, 2200000, 3000001, 5000000, 5000001]) {
    const got = await admin.fetchTopicOffsetsByTimestamp(topic, t);
    check(got.length === 1, `fetchTopicOffsetsByTimestamp(${t}): ${JSON.stringify(got)}`);
    answers.push([t, Number(got[0].offset) - base]);
  }
  return { base, answers };
}

// A transactional producer (`transactionalId`): its first transaction fails at once,
// and the message it gives is printed.
async function transactional() {
  const producer = kafka.producer({ transactionalId: "broker-fs-txn", idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const started = Date.now();
  let error = null;
  try {
    const txn = await producer.transaction();
    await txn.abort();
  } catch (e) {
    error = `${e.name}: ${e.message}`;
  }
  await producer.disconnect();
  check(error !== null, "a transaction began");
  return { error, ms: Date.now() - started };
}

async function groups() {
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const run = {
    "group-resume": groupResume,
    "group-split": groupSplit,
    "group-recreate": groupRecreate,
    idempotent,
    gzip,
    times,
    transactional,
  }[scenario];
  check(run, `unknown scenario ${scenario}`);
  const out = await run(admin, producer);
  await producer.disconnect();
  await admin.disconnect();
  console.log(JSON.stringify({ scenario, ...out }));
}

(scenario ? groups() : main()).catch((e) => {
  console.error(`FAILED kafkajs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
