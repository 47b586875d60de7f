// Lite topic scenarios (RocketMQ 5.5, RIP-83) of the official RocketMQ 5.x Node.js client (npm
// rocketmq-client-nodejs, pinned in tests/interop/nodejs/package.json) against Skiff's gRPC
// endpoint; run by tests/interop/test_nodejs_lite_client.py with the client installed under build/.
//
// Usage: node lite_client.js SPEC_JSON, SPEC = {"endpoint": "host:port", "parent": topic,
// "consumerGroup": group, "count": lite topics, "each": messages per lite topic, "debug": log to stderr}.
// Prints one JSON line: what the scenario saw (the test asserts on it).
'use strict';

const { Producer, ConsumeResult, LitePushConsumerImpl } = require('rocketmq-client-nodejs');

const SPEC = JSON.parse(process.argv[2]);
const DEADLINE_MS = 60000;

// The client's log: none, or with SPEC.debug every line on stderr with a millisecond clock.
function logger() {
  const say = SPEC.debug ? (...a) => process.stderr.write(`${Date.now() % 100000} ${a.map(String).join(' ')}\n`) : () => {};
  return { info: say, warn: say, error: say, debug: say, trace: () => {} };
}

// A LitePushConsumer subscribes `count` lite topics one by one (subscribeLite, a PARTIAL_ADD each);
// `each` messages per lite topic were sent before; every message must arrive, in order per lite topic.
async function pushSubscribed() {
  const options = { endpoints: SPEC.endpoint, namespace: '', logger: logger() };
  const producer = new Producer({ ...options, topics: [SPEC.parent] });
  await producer.startup();
  const sent = [];
  for (let k = 0; k < SPEC.each; k++) {
    for (let i = 0; i < SPEC.count; i++) {
      const receipt = await producer.send({ topic: SPEC.parent, body: Buffer.from(`${i}:${k}`), liteTopic: `node-${i}` });
      sent.push(receipt.messageId);
    }
  }
  await producer.shutdown();
  const got = [];
  const consumer = new LitePushConsumerImpl({
    ...options, consumerGroup: SPEC.consumerGroup, bindTopic: SPEC.parent,
    messageListener: {
      consume(m) {
        got.push({ id: m.messageId, lite: m.liteTopic, body: m.body.toString(), topic: m.topic });
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  for (let i = 0; i < SPEC.count; i++) {
    await consumer.subscribeLite(`node-${i}`);
  }
  const end = Date.now() + DEADLINE_MS;
  while (got.length < sent.length && Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // no shutdown: it waits for the receive in flight, which the server holds for its long-polling
  // time (the client takes the Settings' 20 s over its own option); the process exits instead
  return { sent, got };
}

pushSubscribed().then((result) => {
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
}, (err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
