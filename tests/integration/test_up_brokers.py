"""`skiff up --brokers 2`: two broker processes behind one NameServer, each its own store and
ports; a topic created on the cluster gets queues on both, a producer spreads its sends over
both by the normal route, and a push consumer receives every message once, from the queue it was sent to."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from skiff.client import Admin, AsyncProducer, AsyncPushConsumer, ConsumeStatus, Message
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.testing.processes import SkiffProcess, start_skiff
from skiff.testing.up_ha import free_ports_apart, started_on_free_ports
from skiff.testing.waits import eventually

COUNT = 400


def test_two_brokers_share_a_topic_and_every_message_arrives_once(tmp_path: Path) -> None:
    base = 0

    def start() -> SkiffProcess:
        nonlocal base
        base = free_ports_apart((0, 1, 10, 11))  # each broker's listen and HA ports, broker-b's 10 above
        return start_skiff(["up", "--brokers", "2", "--dir", str(tmp_path), "--namesrv-port", "0",
                            "--broker-port", str(base), "--grpc-port", "0", "--metrics-port", "0",
                            "--namesrv-metrics-port", "0", "--kafka-port", "0", "--no-dashboard"], timeout_s=60)

    proc, ready = started_on_free_ports(start, r"skiff up --brokers 2: NameServer (\S+),")
    try:
        ns = ready[1]
        children = {m[1]: (int(m[2]), m[3]) for m in re.finditer(
            r"(broker-[ab]): pid (\d+), (\S+),", proc.output)}
        assert sorted(children) == ["broker-a", "broker-b"]
        assert children["broker-b"][1] == f"127.0.0.1:{base + 10}"
        assert {p.name for p in tmp_path.iterdir()} >= {"broker-a", "broker-b"}  # a store each
        asyncio.run(move_messages(ns))
    finally:
        assert proc.stop() == 0


async def move_messages(ns: str) -> None:
    topic = "UpBrokers"
    with Admin(ns) as admin:
        written = admin.create_topic(topic, queue_nums=4)
    assert len(written) == 2  # one master each

    received: dict[tuple[str, int], list[int]] = defaultdict(list)

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            received[(ctx.message_queue.broker_name, ctx.message_queue.queue_id)].append(int(m.body))
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = AsyncPushConsumer("up-brokers-group", ns, trace=False,
                                 consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    producer = AsyncProducer("up-brokers-producer", ns, trace=False)
    await producer.start()
    await consumer.start()
    try:
        sent: dict[tuple[str, int], list[int]] = defaultdict(list)
        for i in range(COUNT):  # one at a time: each queue's order is the sending order
            result = await producer.send(Message.of(topic, str(i).encode()))
            sent[(result.message_queue.broker_name, result.message_queue.queue_id)].append(i)
        assert {broker for broker, _ in sent} == {"broker-a", "broker-b"}
        assert len(sent) == 8  # every queue of both brokers written

        await eventually(lambda: sum(map(len, received.values())) >= COUNT or None, 30, "every message consumed")
        assert sorted(i for got in received.values() for i in got) == list(range(COUNT))  # each exactly once
        assert {q: sorted(got) for q, got in received.items()} == dict(sent)  # from the queues they were sent to
    finally:
        await consumer.shutdown()
        await producer.shutdown()
