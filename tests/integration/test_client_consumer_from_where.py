"""Where a new consumer group starts: CONSUME_FROM_FIRST/LAST/TIMESTAMP.

While a queue still holds its message 0, a broker answers a new group's offset
query with 0 (RocketMQ's rule for young queues), so all three read from the
start. Here the broker deletes old CommitLog files at once (tiny files, a disk
"full" at 1 %), so the queue's first messages are gone and its min offset is
above 0: then FIRST starts at the oldest message left, LAST at the end, and
TIMESTAMP at the first message stored at or after the given time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from skiff.client import AsyncAdmin, AsyncPushConsumer, ConsumeFromWhere, ConsumeStatus, Message, MessageQueue
from skiff.common.msgid import decode_offset_msg_id
from skiff.testing.cluster import Cluster
from tests.integration.consumer_kit import config, create_topic, run, send, wait_for

FILE_BYTES = 65536
RETENTION = [f"--mappedFileSizeCommitLog={FILE_BYTES}", "--mappedFileSizeConsumeQueue=400",
             "--diskMaxUsedSpaceRatio=1", "--diskSpaceCleanForciblyRatio=1", "--cleanResourceInterval=100"]
TOPIC = "FromWhereTopic"
MQ = MessageQueue(TOPIC, "broker-a", 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("from-where-cluster"), broker_args=RETENTION) as c:
        yield c


async def age_the_queue(ns: str) -> int:
    """Fill CommitLog files until a new one starts and the older ones are deleted; the
    queue's min offset then is the first message of the newest file, returned."""
    last_position = -1
    i = 0
    while True:
        (result,) = await send(ns, [Message.of(TOPIC, b"o" * 1000, keys=f"old{i}")])
        i += 1
        position = decode_offset_msg_id(result.offset_msg_id).physical_offset % FILE_BYTES
        if position < last_position and i > 3 * FILE_BYTES // 1000:
            first_of_newest = result.queue_offset
            break
        last_position = position
    admin = AsyncAdmin(client_config=config(ns, "admin"))
    await admin.start()
    try:
        deadline = time.monotonic() + 30
        while await admin.min_offset(MQ) < first_of_newest:
            assert time.monotonic() < deadline, "the broker never deleted the old files"
            await asyncio.sleep(0.05)
        return first_of_newest
    finally:
        await admin.shutdown()


def test_first_last_and_timestamp_on_a_queue_whose_start_is_gone(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns = cluster.namesrv_addr
        await create_topic(ns, TOPIC, 1)
        oldest_left = await age_the_queue(ns)
        time.sleep(0.01)
        mid_ms = int(time.time() * 1000)
        time.sleep(0.01)
        await send(ns, [Message.of(TOPIC, f"mid{i}") for i in range(5)])

        got: dict[str, list[tuple[int, str]]] = {}
        consumers = []
        for where, extra in ((ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, {}),
                             (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, {}),
                             (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, {"consume_timestamp_ms": mid_ms})):
            name = where.name
            got[name] = []
            c = AsyncPushConsumer(f"g-{name.lower().replace('_', '-')}", client_config=config(ns, name),
                                  consume_from_where=where, **extra)
            c.subscribe(TOPIC, "*")

            def listener(msgs: list[Any], ctx: Any, into: list[tuple[int, str]] = got[name]) -> ConsumeStatus:
                into.extend((m.queue_offset, m.keys[0] if m.keys else m.body.decode()) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            c.register_listener(listener)
            await c.start()
            consumers.append(c)
        try:
            await wait_for(lambda: all(MQ in c.running_info().mq_table for c in consumers), "the queue held")
            await send(ns, [Message.of(TOPIC, f"new{i}") for i in range(5)])
            new = {f"new{i}" for i in range(5)}
            mid = {f"mid{i}" for i in range(5)}
            await wait_for(lambda: all(new <= {b for _, b in got[n]} for n in got), "the new messages everywhere")
        finally:
            for c in consumers:
                await c.shutdown()
        first = got["CONSUME_FROM_FIRST_OFFSET"]
        assert min(o for o, _ in first) == oldest_left, "FIRST starts at the oldest message left"
        assert mid | new <= {b for _, b in first}
        assert {b for _, b in got["CONSUME_FROM_LAST_OFFSET"]} == new, "LAST starts after what was there"
        assert {b for _, b in got["CONSUME_FROM_TIMESTAMP"]} == mid | new, "TIMESTAMP starts at mid_ms"

    run(scenario())
