"""Push consumers against real `skiff namesrv` and `skiff broker` processes:
clustering and broadcasting, tags and SQL92, retries with reconsume times, the
DLQ, orderly consumption, flow control, offsets across restarts and graceful
shutdown. Every test asserts on the messages that arrived."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from skiff.client import (
    AsyncAdmin,
    AsyncPullClient,
    AsyncPushConsumer,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Message,
    MessageModel,
    MessageQueue,
    MessageSelector,
    PullStatus,
    SelectByHash,
)
from skiff.client.errors import ClientStateError
from skiff.client.errors import NoRouteError
from skiff.common.names import dlq_topic
from skiff.testing.cluster import Cluster
from tests.integration.consumer_kit import (
    Recorder,
    assert_all_received,
    config,
    create_topic,
    numbered,
    run,
    send,
    wait_caught_up,
    wait_for,
)

GROUP_OPTIONS: dict[str, Any] = {"consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("consumer-cluster"), broker_args=["--enablePropertyFilter=true"]) as c:
        yield c


def consumer(ns: str, group: str, name: str, recorder: Recorder, topic: str, expression: Any = "*",
             **options: Any) -> AsyncPushConsumer:
    """A concurrent push consumer whose listener records everything and succeeds."""
    c = AsyncPushConsumer(group, client_config=config(ns, name), **{**GROUP_OPTIONS, **options})
    c.subscribe(topic, expression)

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        recorder.record(name, msgs, ctx.message_queue, time.monotonic())
        return ConsumeStatus.CONSUME_SUCCESS

    c.register_listener(listener)
    return c


def held(c: AsyncPushConsumer, topic: str) -> set[MessageQueue]:
    return {mq for mq in c.running_info().mq_table if mq.topic == topic}


def settled(consumers: list[AsyncPushConsumer], topic: str, queues: int) -> bool:
    """Every queue held by exactly one member, and every member holds some."""
    shares = [held(c, topic) for c in consumers]
    return all(shares) and sum(len(s) for s in shares) == queues and len(set().union(*shares)) == queues


async def dlq_bodies(ns: str, group: str) -> list[tuple[str, int]]:
    """(body, reconsume times) of every message in the group's DLQ."""
    puller = AsyncPullClient(client_config=config(ns, "dlq-reader"))
    await puller.start()
    try:
        out, offset = [], 0
        mq = MessageQueue(dlq_topic(group), "broker-a", 0)
        while True:
            result = await puller.pull(mq, offset, 32)
            if result.status is not PullStatus.FOUND:
                return out
            out += [(m.body.decode(), m.reconsume_times) for m in result.messages]
            offset = result.next_begin_offset
    finally:
        await puller.shutdown()


def test_clustering_members_split_the_queues_and_each_message_arrives_once(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "ClusterTopic"
        await create_topic(ns, topic, 8)
        rec = Recorder()
        members = [consumer(ns, "g-cluster", f"c{i}", rec, topic) for i in range(2)]
        for m in members:
            await m.start()
        try:
            await wait_for(lambda: settled(members, topic, 8), "the two members to split the 8 queues")
            await send(ns, numbered(topic, 1000))
            await wait_for(lambda: rec.distinct() == 1000, "all 1000 messages")
            counts = assert_all_received(rec, (f"m{i}" for i in range(1000)))
            assert max(counts.values()) == 1, "no rebalance or retry happened, so nothing twice"
            for m, name in zip(members, ("c0", "c1")):
                got_from = {d.mq for d in rec.snapshot() if d.consumer == name}
                assert got_from and got_from <= held(m, topic)
        finally:
            for m in members:
                await m.shutdown()

    run(scenario())


def test_broadcasting_every_member_gets_everything_and_keeps_offsets_locally(cluster: Cluster,
                                                                              tmp_path: Path) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "BroadcastTopic"
        await create_topic(ns, topic, 4)
        rec = Recorder()
        members = [consumer(ns, "g-broadcast", f"b{i}", rec, topic, message_model=MessageModel.BROADCASTING,
                            offsets_dir=str(tmp_path)) for i in range(2)]
        for m in members:
            await m.start()
        await send(ns, numbered(topic, 200))
        await wait_for(lambda: all(len(rec.bodies(n)) == 200 for n in ("b0", "b1")), "200 messages at each member")
        for m in members:
            await m.shutdown()
        expected = {f"m{i}" for i in range(200)}
        assert set(rec.bodies("b0")) == set(rec.bodies("b1")) == expected
        for name in ("b0", "b1"):
            files = list(tmp_path.glob(f"*@{name}/g-broadcast.json"))
            assert len(files) == 1, f"one offsets file for {name}"
            rows = orjson.loads(files[0].read_bytes())["offsetTable"]
            assert sum(r["offset"] for r in rows if r["topic"] == topic) == 200

    run(scenario())


def test_tags_are_filtered_exactly_and_sql92_by_properties(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "FilterTopic"
        await create_topic(ns, topic, 2)
        tags, sql = Recorder(), Recorder()
        by_tag = consumer(ns, "g-tags", "t", tags, topic, "A || B")
        by_sql = consumer(ns, "g-sql", "s", sql, topic, MessageSelector.by_sql("n >= 15 AND kind = 'odd'"))
        await by_tag.start()
        await by_sql.start()
        try:
            msgs = [Message.of(topic, f"m{i}", tags="ABC"[i % 3], properties={"n": str(i), "kind": "odd" if i % 2
                                                                             else "even"}) for i in range(30)]
            await send(ns, msgs)
            want_tags = {f"m{i}" for i in range(30) if i % 3 != 2}
            want_sql = {f"m{i}" for i in range(15, 30) if i % 2}
            await wait_for(lambda: set(tags.bodies()) == want_tags and set(sql.bodies()) == want_sql,
                           "the tag and SQL92 subscriptions' messages")
            await wait_caught_up(by_tag, ns, topic)
            await wait_caught_up(by_sql, ns, topic)
            assert set(tags.bodies()) == want_tags and set(sql.bodies()) == want_sql
        finally:
            await by_tag.shutdown()
            await by_sql.shutdown()

    run(scenario())


def test_reconsume_later_comes_back_from_the_retry_topic_with_its_count(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "RetryTopic"
        await create_topic(ns, topic, 2)
        seen: list[tuple[str, int, str, list[str]]] = []
        c = AsyncPushConsumer("g-retry", client_config=config(ns, "r"), **GROUP_OPTIONS)
        c.subscribe(topic, "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            seen.extend((m.body.decode(), m.reconsume_times, m.topic, m.keys) for m in msgs)
            if msgs[0].reconsume_times == 0:
                ctx.delay_level_when_next_consume = 1  # one second, not the default ten
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(listener)
        await c.start()
        try:
            await send(ns, numbered(topic, 5))
            await wait_for(lambda: {(b, t) for b, t, _, _ in seen} >= {(f"m{i}", t) for i in range(5) for t in (0, 1)},
                           "each message twice")
        finally:
            await c.shutdown()
        by_body = defaultdict(set)
        for body, times, got_topic, keys in seen:
            by_body[body].add(times)
            assert got_topic == topic, "a retried message shows its original topic"
            assert keys == [body]
        # a send-back that timed out on a loaded machine is also retried locally: more, never fewer
        assert by_body == {f"m{i}": {0, 1} for i in range(5)}

    run(scenario())


def test_messages_failing_max_reconsume_times_go_to_the_dlq(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "DlqTopic", "g-dlq"
        await create_topic(ns, topic, 1)
        seen: list[tuple[str, int]] = []
        c = AsyncPushConsumer(group, client_config=config(ns, "d"), max_reconsume_times=2, **GROUP_OPTIONS)
        c.subscribe(topic, "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            seen.extend((m.body.decode(), m.reconsume_times) for m in msgs)
            ctx.delay_level_when_next_consume = 1
            return ConsumeStatus.RECONSUME_LATER

        c.register_listener(listener)
        await c.start()
        try:
            await send(ns, numbered(topic, 3))
            await wait_for(lambda: set(seen) >= {(f"m{i}", t) for i in range(3) for t in (0, 1, 2)},
                           "three deliveries of each message")
            dead: list[tuple[str, int]] = []

            async def in_dlq() -> bool:
                try:
                    dead[:] = await dlq_bodies(ns, group)
                except NoRouteError:  # the first dead message's DLQ topic is not routed yet
                    return False
                return {b for b, _ in dead} == {"m0", "m1", "m2"}

            deadline = time.monotonic() + 30
            while not await in_dlq():
                assert time.monotonic() < deadline, f"DLQ holds {dead}"
                await asyncio.sleep(0.1)
        finally:
            await c.shutdown()
        assert set(seen) == {(f"m{i}", t) for i in range(3) for t in (0, 1, 2)}, f"no fourth delivery: {seen}"
        assert {b for b, _ in dead} == {"m0", "m1", "m2"}

    run(scenario())


def test_orderly_consumers_keep_each_keys_order_through_suspends(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "OrderTopic", "g-orderly"
        await create_topic(ns, topic, 4)
        keys, steps = 12, 15
        steps_by_key: dict[str, list[int]] = defaultdict(list)
        suspended: set[str] = set()
        windows: list[tuple[MessageQueue, str, float, float]] = []

        def make(name: str) -> AsyncPushConsumer:
            c = AsyncPushConsumer(group, client_config=config(ns, name), suspend_current_queue_time_ms=20,
                                  consume_message_batch_max_size=3, **GROUP_OPTIONS)
            c.subscribe(topic, "*")

            def listener(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
                start = time.monotonic()
                for m in msgs:
                    body = m.body.decode()
                    if body.endswith(":7") and body not in suspended:
                        suspended.add(body)
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                for m in msgs:
                    key, _, step = m.body.decode().partition(":")
                    steps_by_key[key].append(int(step))
                windows.append((ctx.message_queue, name, start, time.monotonic()))
                return ConsumeOrderlyStatus.SUCCESS

            c.register_orderly_listener(listener)
            return c

        members = [make("o0"), make("o1")]
        for m in members:
            await m.start()
        try:
            await wait_for(lambda: settled(members, topic, 4), "the orderly members to split the queues")
            msgs = [Message.of(topic, f"k{k}:{s}", keys=f"k{k}") for s in range(steps) for k in range(keys)]
            await send(ns, msgs, selector=SelectByHash(), key_of=lambda m: m.keys[0])
            await wait_for(lambda: sum(len(v) for v in steps_by_key.values()) >= keys * steps, "every step")
        finally:
            for m in members:
                await m.shutdown()
        assert {k: v for k, v in steps_by_key.items()} == {f"k{k}": list(range(steps)) for k in range(keys)}
        assert len(suspended) == keys
        for mq in {w[0] for w in windows}:
            spans = sorted((s, e, n) for q, n, s, e in windows if q == mq)
            for (s1, e1, n1), (s2, _, n2) in zip(spans, spans[1:]):
                assert e1 <= s2, f"{mq}: {n1} and {n2} consumed it at the same time"

    run(scenario())


def test_orderly_gives_up_to_the_dlq_after_max_reconsume_times(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "OrderDlqTopic", "g-orderly-dlq"
        await create_topic(ns, topic, 1)
        seen: list[tuple[str, int]] = []
        c = AsyncPushConsumer(group, client_config=config(ns, "od"), max_reconsume_times=2,
                              suspend_current_queue_time_ms=10, **GROUP_OPTIONS)
        c.subscribe(topic, "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
            seen.extend((m.body.decode(), m.reconsume_times) for m in msgs)
            if msgs[0].body == b"m1":
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        c.register_orderly_listener(listener)
        await c.start()
        try:
            await send(ns, numbered(topic, 3))
            await wait_for(lambda: ("m2", 0) in seen, "the message after the poisoned one")
            dead = await dlq_bodies(ns, group)
        finally:
            await c.shutdown()
        assert seen == [("m0", 0), ("m1", 0), ("m1", 1), ("m1", 2), ("m2", 0)]
        assert [b for b, _ in dead] == ["m1"]

    run(scenario())


def test_flow_control_bounds_the_messages_held_per_queue(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "FlowTopic"
        await create_topic(ns, topic, 1)
        await send(ns, numbered(topic, 600))
        most_held = 0
        count = 0
        c = AsyncPushConsumer("g-flow", client_config=config(ns, "f"), pull_threshold_for_queue=40,
                              pull_batch_size=16, consume_thread_max=2, consume_thread_min=1, **GROUP_OPTIONS)
        c.subscribe(topic, "*")

        async def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            nonlocal most_held, count
            info = c.running_info().mq_table
            most_held = max(most_held, *(q.cached_msg_count for q in info.values()))
            await asyncio.sleep(0.002)
            count += len(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(listener)
        await c.start()
        try:
            await wait_for(lambda: count >= 600, "all 600 messages")
        finally:
            await c.shutdown()
        assert 16 < most_held <= 40 + 16, f"held at most {most_held} messages"

    run(scenario())


def test_committed_offsets_survive_a_restart(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "RestartTopic", "g-restart"
        await create_topic(ns, topic, 4)
        first, second = Recorder(), Recorder()
        c = consumer(ns, group, "first", first, topic)
        await c.start()
        await send(ns, numbered(topic, 100, prefix="a"))
        await wait_for(lambda: first.distinct() == 100, "the first 100")
        await c.shutdown()

        await send(ns, numbered(topic, 50, prefix="b"))
        c = consumer(ns, group, "second", second, topic)
        await c.start()
        try:
            await wait_for(lambda: second.distinct() == 50, "the next 50")
            await wait_caught_up(c, ns, topic)
        finally:
            await c.shutdown()
        assert set(second.bodies()) == {f"b{i}" for i in range(50)}, "nothing committed came again"

    run(scenario())


def test_graceful_shutdown_commits_what_was_consumed_and_hands_back_the_rest(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "ShutdownTopic", "g-shutdown"
        await create_topic(ns, topic, 2)
        await send(ns, numbered(topic, 300))
        rec = Recorder()
        c = AsyncPushConsumer(group, client_config=config(ns, "slow"), consume_thread_min=1, consume_thread_max=1,
                              **GROUP_OPTIONS)
        c.subscribe(topic, "*")

        def slow(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            time.sleep(0.005)
            rec.record("slow", msgs, ctx.message_queue, time.monotonic())
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(slow)
        await c.start()
        await wait_for(lambda: rec.distinct() >= 30, "some messages consumed")
        await c.shutdown()
        consumed = set(rec.bodies())
        assert len(consumed) < 300, "shutdown came before the end"

        rest = Recorder()
        c = consumer(ns, group, "next", rest, topic)
        await c.start()
        try:
            await wait_for(lambda: consumed | set(rest.bodies()) == {f"m{i}" for i in range(300)},
                           "the next owner to get what the first did not consume")
        finally:
            await c.shutdown()
        assert not consumed & set(rest.bodies()), "what the first consumed was committed at shutdown"

    run(scenario())


def test_an_admin_reset_by_time_replays_the_topic_to_a_live_consumer(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "ResetTopic", "g-reset"
        await create_topic(ns, topic, 2)
        rec = Recorder()
        c = consumer(ns, group, "live", rec, topic)
        await c.start()
        try:
            before_ms = int(time.time() * 1000) - 1
            await send(ns, numbered(topic, 40))
            await wait_for(lambda: rec.distinct() == 40, "the 40 messages")
            admin = AsyncAdmin(client_config=config(ns, "resetter"))
            await admin.start()
            try:
                offsets = await admin.reset_offset_by_time(group, topic, before_ms)
            finally:
                await admin.shutdown()
            assert sorted(offsets.values()) == [0, 0]
            await wait_for(lambda: all(n == 2 for n in rec.bodies().values()), "every message a second time")
        finally:
            await c.shutdown()
        assert set(rec.bodies()) == {f"m{i}" for i in range(40)}

    run(scenario())


def test_a_second_consumer_of_a_group_in_one_instance_is_refused_and_harms_nothing(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "TwiceTopic", "g-twice"
        await create_topic(ns, topic, 2)
        rec = Recorder()
        first = consumer(ns, group, "same", rec, topic)
        await first.start()
        try:
            second = consumer(ns, group, "same", Recorder(), topic)
            with pytest.raises(ClientStateError, match="another instance_name"):
                await second.start()
            await send(ns, numbered(topic, 20))
            await wait_for(lambda: rec.distinct() == 20, "the first consumer to go on consuming")
        finally:
            await first.shutdown()

    run(scenario())
