"""SQL92 subscriptions end to end, through real `skiff` processes: push and lite
pull consumers receive exactly the messages their expression selects (asserted
by message id, after the group has read every queue to its end, so a wrong
extra would have arrived), TAGS in SQL, retries of a SQL92 subscription, bad
expressions answered with their position at subscribe, heartbeat, check and
pull, and a broker with ``enablePropertyFilter=false`` refusing SQL92 clearly."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from skiff.client import (
    AsyncAdmin,
    AsyncLitePullConsumer,
    AsyncPushConsumer,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageSelector,
    SendResult,
)
from skiff.client.errors import NoOffsetsError
from skiff.filter import FilterSyntaxError
from skiff.protocol.bodies.heartbeat import CheckClientRequestBody, ConsumerData, ExpressionType, SubscriptionData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.errors import BrokerSystemError
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, consumer
from tests.integration.consumer_kit import config, create_topic, run, send, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
SELECTIVE = "a > 5 AND region IN ('eu','us')"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("sql92"), broker_args=["--enablePropertyFilter=true"]) as c:
        yield c


def orders(topic: str, count: int) -> list[Message]:
    """Messages with ``a`` = i % 10, a region from a cycle, tags A/B/C; every seventh has no ``a``."""
    regions = ("eu", "us", "ap")
    out = []
    for i in range(count):
        props = {"region": regions[i % 3], "n": str(i)}
        if i % 7:
            props["a"] = str(i % 10)
        out.append(Message.of(topic, f"m{i}", tags="ABC"[i % 3], properties=props))
    return out


async def backlog(cluster: Cluster, topic: str, queues: int, count: int) -> tuple[str, list[Message],
                                                                               list[SendResult]]:
    """A new topic holding `orders`: the NameServer address, the messages and their send results."""
    ns = cluster.namesrv_addr
    await create_topic(ns, topic, queues)
    msgs = orders(topic, count)
    return ns, msgs, await send(ns, msgs)


def expected_ids(msgs: list[Message], results: list[SendResult], keep: Any) -> set[str]:
    return {r.msg_id for m, r in zip(msgs, results) if keep(m.properties)}


def selective(p: dict[str, str]) -> bool:
    return "a" in p and int(p["a"]) > 5 and p["region"] in ("eu", "us")


async def lag_of(ns: str, group: str) -> int:
    """The group's total lag; -1 until the group has committed an offset (not yet "no lag")."""
    async with AsyncAdmin(client_config=config(ns, "lag-reader")) as admin:
        try:
            return (await admin.consumer_progress(group)).total_lag
        except NoOffsetsError:
            return -1


def push(ns: str, group: str, topic: str, selector: MessageSelector, got: list[Any],
         first_status: ConsumeStatus = ConsumeStatus.CONSUME_SUCCESS) -> AsyncPushConsumer:
    """A push consumer recording (msg id, reconsume times, properties); ``first_status``
    answers a message's first delivery."""
    c = AsyncPushConsumer(group, client_config=config(ns, group), consume_from_where=FIRST)
    c.subscribe(topic, selector)

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend((m.msg_id, m.reconsume_times, dict(m.properties)) for m in msgs)
        if msgs[0].reconsume_times == 0 and first_status is not ConsumeStatus.CONSUME_SUCCESS:
            ctx.delay_level_when_next_consume = 1
            return first_status
        return ConsumeStatus.CONSUME_SUCCESS

    c.register_listener(listener)
    return c


async def consume_all(ns: str, group: str, topic: str, selector: MessageSelector, want: set[str]) -> list[Any]:
    """Run a push consumer until it has ``want`` and the group's lag is 0 (every queue read to
    its end, so anything wrongly let through would have been delivered); return what came."""
    got: list[Any] = []
    c = push(ns, group, topic, selector, got)
    await c.start()
    try:
        async def complete() -> bool:
            return {g[0] for g in got} >= want and await lag_of(ns, group) == 0

        await eventually(complete, 60, f"{len(want)} messages and no lag for {group}")
    finally:
        await c.shutdown()
    return got


def test_push_consumer_receives_exactly_the_matching_messages(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, msgs, results = await backlog(cluster, "SqlPush", 4, 300)
        want = expected_ids(msgs, results, selective)
        assert 0 < len(want) < 100
        got = await consume_all(ns, "g-sql-push", "SqlPush", MessageSelector.by_sql(SELECTIVE), want)
        assert sorted(g[0] for g in got) == sorted(want), "each matching message once, nothing else"
        assert all(selective(g[2]) for g in got)

    run(scenario())


def test_tags_in_sql_select_by_tag_and_property(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, msgs, results = await backlog(cluster, "SqlTags", 2, 120)
        by_tag = expected_ids(msgs, results, lambda p: p["TAGS"] == "B")
        mixed = expected_ids(msgs, results, lambda p: p["TAGS"] in ("A", "C") and int(p["n"]) >= 60)
        got_tag = await consume_all(ns, "g-sql-tag", "SqlTags", MessageSelector.by_sql("TAGS = 'B'"), by_tag)
        got_mixed = await consume_all(ns, "g-sql-mixed", "SqlTags",
                                      MessageSelector.by_sql("TAGS IN ('A', 'C') AND n >= 60"), mixed)
        assert sorted(g[0] for g in got_tag) == sorted(by_tag)
        assert sorted(g[0] for g in got_mixed) == sorted(mixed)

    run(scenario())


def test_lite_pull_consumer_polls_exactly_the_matching_messages(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, msgs, results = await backlog(cluster, "SqlLite", 4, 200)
        want = expected_ids(msgs, results, selective)
        lite = AsyncLitePullConsumer("g-sql-lite", client_config=config(ns, "lite"), consume_from_where=FIRST)
        lite.subscribe("SqlLite", MessageSelector.by_sql(SELECTIVE))
        await lite.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < len(want) or await lag_of(ns, "g-sql-lite"):
                assert time.monotonic() < deadline, f"polled {len(got)} of {len(want)}"
                batch = await lite.poll(200)
                assert all(selective(m.properties) for m in batch)
                got += [m.msg_id for m in batch]
                await lite.commit_sync()
        finally:
            await lite.shutdown()
        assert sorted(got) == sorted(want)

    run(scenario())


def test_a_sql92_message_consumed_later_comes_back_from_the_retry_topic(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, msgs, results = await backlog(cluster, "SqlRetry", 2, 40)
        want = expected_ids(msgs, results, selective)
        got: list[Any] = []
        c = push(ns, "g-sql-retry", "SqlRetry", MessageSelector.by_sql(SELECTIVE), got, ConsumeStatus.RECONSUME_LATER)
        await c.start()
        try:
            await wait_for(lambda: sorted((g[0], g[1]) for g in got) == sorted(
                [(i, 0) for i in want] + [(i, 1) for i in want]), "each message, then its retry")
        finally:
            await c.shutdown()
        assert all(selective(g[2]) for g in got), "a retry keeps the properties the expression selected"

    run(scenario())


def test_a_syntax_error_reaches_the_user_with_its_position(cluster: Cluster) -> None:
    bad = "a > 5 AND region IN ('eu' 'us')"
    c = AsyncPushConsumer("g-sql-bad", client_config=config(cluster.namesrv_addr, "bad"))
    with pytest.raises(FilterSyntaxError) as raised:
        c.subscribe("SqlBad", MessageSelector.by_sql(bad))
    assert raised.value.position.column == 27, raised.value
    assert "column 27" in str(raised.value)

    async def through_the_broker(wire: BrokerWire) -> None:
        sub = SubscriptionData("SqlBad", bad, expression_type=ExpressionType.SQL92)
        beat = await wire.heartbeat("c-bad", consumers=[with_subscription("g-sql-bad", sub)])
        check = await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None,
                                CheckClientRequestBody("c-bad", "g-sql-bad", sub).to_json())
        pulled = await wire.pull("g-sql-bad", "SqlBad", 0, 0, subscription=bad, expression_type="SQL92")
        for resp in (beat, check, pulled):
            assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, resp
            assert "SQL92 syntax error at column 27" in resp.remark
        assert beat.remark.startswith("consumer group g-sql-bad, topic SqlBad: ")

    run(_with_wire(cluster, "SqlBad", through_the_broker))


def with_subscription(group: str, sub: SubscriptionData) -> ConsumerData:
    return dataclasses.replace(consumer(group, sub.topic), subscription_data_set=(sub,))


async def _with_wire(cluster: Cluster, topic: str, test: Any) -> None:
    await create_topic(cluster.namesrv_addr, topic, 1)
    wire = BrokerWire(cluster.broker_addr(0))
    try:
        await test(wire)
    finally:
        await wire.close()


def test_a_broker_without_property_filter_refuses_sql92_clearly(tmp_path: Any) -> None:
    with Cluster(tmp_path) as off:
        ns = off.namesrv_addr

        async def scenario() -> None:
            await create_topic(ns, "SqlOff", 2)
            push_consumer = push(ns, "g-sql-off", "SqlOff", MessageSelector.by_sql("a > 1"), [])
            with pytest.raises(BrokerSystemError, match="set enablePropertyFilter=true") as raised:
                await push_consumer.start()
            assert "consumer group g-sql-off, topic SqlOff: this broker does not filter by SQL92" in str(raised.value)
            lite = AsyncLitePullConsumer("g-sql-off-lite", client_config=config(ns, "lite-off"))
            lite.subscribe("SqlOff", MessageSelector.by_sql("a > 1"))
            with pytest.raises(BrokerSystemError, match="enablePropertyFilter"):
                await lite.start()
            tags_only = push(ns, "g-tags-on-off", "SqlOff", MessageSelector.by_tag("A"), [])
            await tags_only.start()  # tag subscriptions are not checked: they always work
            await tags_only.shutdown()

            async def heartbeat(wire: BrokerWire) -> None:
                sub = SubscriptionData("SqlOff", "a > 1", expression_type=ExpressionType.SQL92)
                beat = await wire.heartbeat("c-off", consumers=[with_subscription("g-off", sub)])
                assert beat.code == ResponseCode.SYSTEM_ERROR and "enablePropertyFilter=true" in beat.remark

            await _with_wire(off, "SqlOff", heartbeat)

        run(scenario())
