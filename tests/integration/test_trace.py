"""Message trace through real processes: sends and consumptions written to the trace
topic and read back (by msg id, offset msg id and key, through `query_trace` and
`skiff message trace`), a retried consumption, lite pull polls, a custom trace
topic, tracing turned off, and a full or failing trace path that never fails a send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from skiff.client import (
    AsyncAdmin,
    AsyncLitePullConsumer,
    AsyncProducer,
    AsyncPushConsumer,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageQueue,
    SendResult,
    SendStatus,
)
from skiff.client.errors import ClientError
from skiff.client.trace import TRACE_TOPIC, TraceEvent, TraceSettings, query_trace
from skiff.testing.cluster import Cluster
from skiff.testing.processes import run_skiff
from skiff.testing.waits import eventually
from tests.integration.consumer_kit import config, create_topic, run, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("trace")) as c:
        yield c


async def produce(ns: str, group: str, msgs: list[Message], **options: Any) -> list[SendResult]:
    async with AsyncProducer(group, client_config=config(ns, group), **options) as producer:
        return [await producer.send(m) for m in msgs]


async def trace_of(ns: str, key: str, trace_topic: str = TRACE_TOPIC) -> list[TraceEvent]:
    async with AsyncAdmin(client_config=config(ns, "trace-reader")) as admin:
        return await query_trace(admin, key, trace_topic=trace_topic)


async def default_trace_of(ns: str, key: str) -> list[TraceEvent]:
    """`trace_of` the default trace topic, which a fresh cluster does not have until some
    client traces to it (whether one did depends on which tests ran first on this cluster)."""
    try:
        return await trace_of(ns, key)
    except ClientError as exc:
        assert "does not exist" in str(exc), exc
        return []


async def trace_messages(ns: str, trace_topic: str = TRACE_TOPIC) -> int:
    async with AsyncAdmin(client_config=config(ns, "trace-counter")) as admin:
        return sum(q.max_offset for q in await admin.topic_status(trace_topic))


def consumer(ns: str, group: str, topic: str, seen: list[tuple[str, int]], **options: Any) -> AsyncPushConsumer:
    """Records (key, reconsume times); a message keyed ``retry-*`` fails its first delivery."""
    c = AsyncPushConsumer(group, client_config=config(ns, group), consume_from_where=FIRST, **options)
    c.subscribe(topic, "*")

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        m = msgs[0]
        seen.append((m.keys[0], m.reconsume_times))
        if m.keys[0].startswith("retry-") and m.reconsume_times == 0:
            ctx.delay_level_when_next_consume = 1
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    c.register_listener(listener)
    return c


def test_a_send_and_its_consumptions_are_traced(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr

    async def scenario() -> tuple[SendResult, SendResult]:
        await create_topic(ns, "Traced", 2)
        seen: list[tuple[str, int]] = []
        c = consumer(ns, "g-traced", "Traced", seen)
        await c.start()
        try:
            plain, retried = await produce(ns, "p-traced", [
                Message.of("Traced", "hello", tags="TagA", keys="order-1"),
                Message.of("Traced", "again", keys="retry-1")])
            await wait_for(lambda: sorted(seen) == [("order-1", 0), ("retry-1", 0), ("retry-1", 1)],
                           "each consumption, the retry's twice")
        finally:
            await c.shutdown()
        return plain, retried

    plain, retried = run(scenario())
    events = run(trace_of(ns, plain.msg_id))
    assert [(e.kind, e.group, e.status) for e in events] == [("send", "p-traced", "success"),
                                                             ("consume", "g-traced", "success")]
    send, consume = events
    assert (send.msg_id, send.offset_msg_id, send.topic, send.tags, send.keys) == (
        plain.msg_id, plain.offset_msg_id, "Traced", "TagA", "order-1")
    assert (send.broker_name, send.queue_id, send.queue_offset, send.store_host) == (
        "broker-a", plain.message_queue.queue_id, plain.queue_offset, cluster.broker_addr(0))
    assert send.client_host and consume.client_host and consume.time_ms >= send.time_ms
    assert (consume.reconsume_times, consume.consume_result) == (0, "SUCCESS")

    retries = run(trace_of(ns, "retry-1"))
    assert [(e.kind, e.status, e.reconsume_times, e.consume_result) for e in retries] == [
        ("send", "success", 0, ""), ("consume", "failed", 0, "FAILED"), ("consume", "success", 1, "SUCCESS")]
    assert run(trace_of(ns, retried.offset_msg_id)) == retries, "an offset msg id finds the same timeline"

    cli = run_skiff(["message", "trace", plain.msg_id, "-n", ns, "--json"])
    assert cli.returncode == 0, cli.stdout
    assert [(e["kind"], e["group"]) for e in orjson.loads(cli.stdout)] == [("send", "p-traced"),
                                                                          ("consume", "g-traced")]
    table = run_skiff(["message", "trace", "order-1", "-n", ns])
    assert table.returncode == 0, table.stdout
    assert f"{plain.msg_id}: topic Traced, tags TagA, keys order-1" in table.stdout
    rows = [line.split() for line in table.stdout.splitlines() if " send " in line or " consume " in line]
    assert [(r[2], r[3], r[6]) for r in rows] == [("send", "p-traced", "success"), ("consume", "g-traced", "success")]
    unknown = run_skiff(["message", "trace", "no-such-key", "-n", ns])
    assert unknown.returncode == 1 and "nothing in RMQ_SYS_TRACE_TOPIC traces 'no-such-key'" in unknown.stdout


def test_lite_pull_polls_are_traced_to_a_custom_topic(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    custom = TraceSettings(topic="TraceCustom")

    async def scenario() -> SendResult:
        await create_topic(ns, "TracedLite", 1)
        (sent,) = await produce(ns, "p-lite", [Message.of("TracedLite", "x", keys="lite-1")], trace=custom)
        lite = AsyncLitePullConsumer("g-lite-traced", client_config=config(ns, "lite"), consume_from_where=FIRST,
                                     trace=custom)
        lite.subscribe("TracedLite", "*")
        await lite.start()
        try:
            await eventually(lambda: lite.poll(200), 30, "the message polled")
        finally:
            await lite.shutdown()
        return sent

    sent = run(scenario())
    events = run(trace_of(ns, sent.msg_id, "TraceCustom"))
    assert [(e.kind, e.group, e.status, e.consume_result) for e in events] == [
        ("send", "p-lite", "success", ""), ("consume", "g-lite-traced", "success", "SUCCESS")]
    assert run(default_trace_of(ns, sent.msg_id)) == [], "nothing went to the default trace topic"


def test_trace_off_writes_nothing(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr

    async def scenario() -> tuple[SendResult, int, int]:
        await create_topic(ns, "Untraced", 1)
        (warm,) = await produce(ns, "p-warm", [Message.of("Untraced", "warm-up")])  # makes the trace topic
        await eventually(lambda: default_trace_of(ns, warm.msg_id), 60, "the traced warm-up")
        before = await trace_messages(ns)
        seen: list[tuple[str, int]] = []
        c = consumer(ns, "g-untraced", "Untraced", seen, trace=False)
        await c.start()
        try:
            (quiet,) = await produce(ns, "p-untraced", [Message.of("Untraced", "quiet", keys="quiet-1")], trace=False)
            await wait_for(lambda: ("quiet-1", 0) in seen, "the untraced message consumed")
        finally:
            await c.shutdown()
        return quiet, before, await trace_messages(ns)

    quiet, before, after = run(scenario())
    assert after == before, "neither the producer nor the consumer wrote a trace"
    assert run(default_trace_of(ns, quiet.msg_id)) == []


def test_a_full_or_failing_trace_path_never_fails_a_send(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr

    async def scenario() -> None:
        await create_topic(ns, "TraceFull", 1)
        tiny = TraceSettings(buffer_max_records=1, flush_interval_ms=60_000)
        async with AsyncProducer("p-full", client_config=config(ns, "p-full"), trace=tiny) as producer:
            results = await producer.send_batch([Message.of("TraceFull", f"b{i}") for i in range(20)])
            assert [r.send_status for r in results] == [SendStatus.SEND_OK]
            stats = producer.trace_stats()
            assert stats is not None and (stats.recorded, stats.dropped) == (1, 19)
        assert producer.trace_stats().sent == 1  # type: ignore[union-attr]
        unwritable = TraceSettings(topic="SCHEDULE_TOPIC_XXXX", flush_interval_ms=50)
        async with AsyncProducer("p-unwritable", client_config=config(ns, "p-bad"), trace=unwritable) as producer:
            results = [await producer.send(Message.of("TraceFull", f"s{i}")) for i in range(5)]
        assert all(r.send_status is SendStatus.SEND_OK for r in results)
        stats = producer.trace_stats()
        assert stats is not None and (stats.recorded, stats.failed, stats.sent) == (5, 5, 0)
        async with AsyncAdmin(client_config=config(ns, "full-reader")) as admin:
            assert await admin.max_offset(MessageQueue("TraceFull", "broker-a", 0)) == 25

    run(scenario())
