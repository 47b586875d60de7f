"""The lite pull consumer against real `skiff` processes: subscribe (shared in a
group), assign, poll, seek, commit and committed offsets, pause and resume, and
auto-commit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from skiff.client import AsyncLitePullConsumer, ConsumeFromWhere, MessageQueue
from skiff.client.errors import ClientConfigError, ClientStateError
from skiff.testing.cluster import Cluster
from tests.integration.consumer_kit import config, create_topic, numbered, run, send, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("lite-cluster")) as c:
        yield c


def lite(ns: str, group: str, name: str, **options: Any) -> AsyncLitePullConsumer:
    return AsyncLitePullConsumer(group, client_config=config(ns, name), consume_from_where=FIRST, **options)


async def poll_until(consumer: AsyncLitePullConsumer, count: int, timeout_s: float = 30.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"polled {len(got)} of {count}"
        got += await consumer.poll(200)
    return got


def test_subscribed_members_share_the_topic(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "LiteShared"
        await create_topic(ns, topic, 4)
        members = [lite(ns, "g-lite-shared", f"l{i}") for i in range(2)]
        for m in members:
            m.subscribe(topic, "*")
            await m.start()
        try:
            await wait_for(lambda: len(members[0].assignment() | members[1].assignment()) == 4
                           and not members[0].assignment() & members[1].assignment()
                           and all(m.assignment() for m in members), "the members to split the queues")
            await send(ns, numbered(topic, 200))
            got: dict[str, list[str]] = {"l0": [], "l1": []}
            deadline = time.monotonic() + 30
            while len(got["l0"]) + len(got["l1"]) < 200:
                assert time.monotonic() < deadline
                for name, m in zip(("l0", "l1"), members):
                    for msg in await m.poll(50):
                        assert MessageQueue(topic, "broker-a", msg.queue_id) in m.assignment()
                        got[name].append(msg.body.decode())
            assert got["l0"] and got["l1"]
            assert sorted(got["l0"] + got["l1"]) == sorted(f"m{i}" for i in range(200))
        finally:
            for m in members:
                await m.shutdown()

    run(scenario())


def test_assign_seek_commit_and_committed(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "LiteAssign"
        await create_topic(ns, topic, 2)
        mid_ms = 0
        results = await send(ns, numbered(topic, 40, prefix="early"))
        time.sleep(0.01)
        mid_ms = int(time.time() * 1000)
        results += await send(ns, numbered(topic, 40, prefix="late"))
        per_queue = {q: sum(1 for r in results if r.message_queue.queue_id == q) for q in (0, 1)}

        c = lite(ns, "g-lite-assign", "a", auto_commit=False)
        queues = await c.fetch_message_queues(topic)
        assert queues == [MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)]
        await c.assign(queues)
        await c.start()
        try:
            assert c.assignment() == set(queues)
            first = await poll_until(c, 80)
            assert sorted(m.body.decode() for m in first) == sorted(
                [f"early{i}" for i in range(40)] + [f"late{i}" for i in range(40)])
            assert await c.committed(queues[0]) in (-1, 0), "nothing committed before commit_sync"
            await c.commit_sync()
            assert [await c.committed(q) for q in queues] == [per_queue[0], per_queue[1]]

            q0 = queues[0]
            await c.seek(q0, 3)
            again = await poll_until(c, per_queue[0] - 3)
            assert [m.queue_offset for m in again] == list(range(3, per_queue[0]))
            assert {m.queue_id for m in again} == {0}

            late_start = await c.offset_for_timestamp(q0, mid_ms)
            await c.seek(q0, late_start)
            late = await poll_until(c, per_queue[0] - late_start)
            assert all(m.body.startswith(b"late") for m in late)
            assert late_start == sum(1 for r in results if r.message_queue.queue_id == 0
                                     and r.msg_id in {x.msg_id for x in results[:40]})

            await c.seek_to_end(q0)
            assert await c.poll(300) == []
            await c.seek_to_begin(q0)
            assert [m.queue_offset for m in await poll_until(c, per_queue[0])][:3] == [0, 1, 2]

            with pytest.raises(ClientConfigError, match="outside its range"):
                await c.seek(q0, per_queue[0] + 5)
            await c.commit({q0: 1})
            assert await c.committed(q0) == 1
        finally:
            await c.shutdown()
        with pytest.raises(ClientStateError):
            await c.poll(10)

    run(scenario())


def test_paused_queues_are_held_back_until_resumed(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "LitePause"
        await create_topic(ns, topic, 2)
        results = await send(ns, numbered(topic, 60))
        per_queue = {q: sum(1 for r in results if r.message_queue.queue_id == q) for q in (0, 1)}
        c = lite(ns, "g-lite-pause", "p")
        queues = await c.fetch_message_queues(topic)
        await c.assign(queues)
        await c.start()
        try:
            c.pause([queues[0]])
            got = await poll_until(c, per_queue[1])
            assert {m.queue_id for m in got} == {1}
            assert await c.poll(300) == [], "the paused queue's messages wait"
            c.resume([queues[0]])
            rest = await poll_until(c, per_queue[0])
            assert {m.queue_id for m in rest} == {0}
        finally:
            await c.shutdown()

    run(scenario())


def test_auto_commit_commits_what_earlier_polls_returned(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic, group = cluster.namesrv_addr, "LiteAutoCommit", "g-lite-auto"
        await create_topic(ns, topic, 1)
        await send(ns, numbered(topic, 30, prefix="a"))
        c = lite(ns, group, "auto", auto_commit=True, auto_commit_interval_ms=100)
        c.subscribe(topic, "*")
        await c.start()
        mq = MessageQueue(topic, "broker-a", 0)
        try:
            assert len(await poll_until(c, 30)) == 30
            deadline = time.monotonic() + 30
            while await c.committed(mq) != 30:
                assert time.monotonic() < deadline, "auto-commit never caught up"
                await c.poll(50)  # polling is what commits
        finally:
            await c.shutdown()
        await send(ns, numbered(topic, 5, prefix="b"))
        again = lite(ns, group, "auto2")
        again.subscribe(topic, "*")
        await again.start()
        try:
            got = await poll_until(again, 5)
            assert sorted(m.body.decode() for m in got) == [f"b{i}" for i in range(5)]
        finally:
            await again.shutdown()

    run(scenario())
