// Scenarios of the official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs, pinned
// in tests/interop/nodejs/package.json) against Skiff's gRPC endpoint; run by
// tests/interop/test_nodejs_client.py with the client installed under build/.
//
// Usage: node client.js SPEC_JSON, SPEC = {"endpoint": "host:port", "scenario": name, ...}.
// Prints one JSON line: what the scenario saw (the test asserts on it).
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const SPEC = JSON.parse(process.argv[2]);
const DEADLINE_MS = 30000;

function quiet() {
  const nothing = () => {};
  return { info: nothing, warn: nothing, error: nothing, debug: nothing, trace: nothing };
}

// One message group's messages, then an orderly group's SimpleConsumer receives and acks
// them in order (the client asks for queue 0 whatever queue holds them).
async function fifoOneGroup() {
  const options = { endpoints: SPEC.endpoint, namespace: '', logger: quiet() };
  const producer = new Producer({ ...options, topics: [SPEC.topic] });
  await producer.startup();
  const sent = [];
  for (let i = 0; i < SPEC.count; i++) {
    const body = `${SPEC.group}-${String(i).padStart(2, '0')}`;
    const receipt = await producer.send({ topic: SPEC.topic, body: Buffer.from(body), messageGroup: SPEC.group });
    sent.push(body);
    void receipt;
  }
  await producer.shutdown();
  const consumer = new SimpleConsumer({
    ...options, consumerGroup: SPEC.consumerGroup, awaitDuration: 2000,
    subscriptions: new Map().set(SPEC.topic, '*'),
  });
  await consumer.startup();
  const got = [];
  const end = Date.now() + DEADLINE_MS;
  while (got.length < SPEC.count && Date.now() < end) {
    for (const m of await consumer.receive(32, 10000)) {
      got.push({ body: m.body.toString(), group: m.messageGroup, queue: m.messageQueue ? m.messageQueue.queueId : null });
      await consumer.ack(m);
    }
  }
  await consumer.shutdown();
  return { sent, got };
}

const SCENARIOS = { fifo_one_group: fifoOneGroup };

SCENARIOS[SPEC.scenario]().then((result) => {
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
}, (err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
