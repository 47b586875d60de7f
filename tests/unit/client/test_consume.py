"""Consume services without a broker: broadcasting consumers (no send-back, no locks)
with a local offset store, so what the listener answers shows in the offsets."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.consume_concurrently import ConsumeConcurrentlyService
from skiff.client._impl.consume_orderly import ConsumeOrderlyService
from skiff.client._impl.consumer_core import ConsumerCore, ConsumerSettings, Subscription, java_string_hash
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.listener import SKIPPED, ConsumeConcurrentlyContext, ConsumeOrderlyContext, ListenerRunner
from skiff.client._impl.offset_store import LocalFileOffsetStore
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client._impl.wakeup import Wakeup
from skiff.client._impl.worker_pool import WorkerPool
from skiff.client.errors import ClientConfigError
from skiff.client.results import ConsumeOrderlyStatus, ConsumeStatus, MessageSelector
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.heartbeat import ExpressionType, MessageModel

MQ = MessageQueue("T", "broker-a", 0)
DEADLINE_S = 10.0


def msgs(first: int, count: int) -> list[StoredMessage]:
    return [StoredMessage("T", f"m{o}".encode(), {}, queue_offset=o) for o in range(first, first + count)]


async def until(predicate: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.005)


def make_core(tmp_path: Path, **settings: Any) -> ConsumerCore:
    instance = ClientInstance.get(ClientConfig("127.0.0.1:1"))  # never started: no traffic
    store = LocalFileOffsetStore(tmp_path / "offsets.json")
    options = {"message_model": MessageModel.BROADCASTING, **settings}
    return ConsumerCore("G", ConsumerSettings(**options), instance, store, consume_type=1)  # type: ignore[arg-type]


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro_fn())


def test_concurrent_batches_commit_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        core = make_core(tmp_path, consume_message_batch_max_size=3)
        seen: list[list[int]] = []
        release = threading.Event()

        def listener(batch: list[StoredMessage], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            seen.append([m.queue_offset for m in batch])
            if batch[0].queue_offset == 0:
                release.wait(DEADLINE_S)  # the first batch is slow: nothing past it may be committed
            return ConsumeStatus.CONSUME_SUCCESS

        runner = ListenerRunner(listener, 4)
        woken: list[MessageQueue] = []
        service = ConsumeConcurrentlyService(core, runner, woken.append)
        pq = ProcessQueue()
        batch = msgs(0, 8)
        pq.add(batch)
        service.submit(batch, pq, MQ)
        await until(lambda: pq.count == 3)
        assert core.offset_store.read_memory(MQ) == 0, "offset 0 is still being consumed: nothing past it"
        release.set()
        await until(lambda: pq.count == 0)
        assert core.offset_store.read_memory(MQ) == 8
        assert sorted(seen) == [[0, 1, 2], [3, 4, 5], [6, 7]]
        assert woken and set(woken) == {MQ}
        assert (core.counters.consumed_ok, core.counters.batches) == (8, 3)
        runner.shutdown()

    run(scenario)


def test_ack_index_and_failures_in_broadcasting_drop_with_a_warning(tmp_path: Path, caplog: Any) -> None:
    async def scenario() -> None:
        core = make_core(tmp_path, consume_message_batch_max_size=4)

        async def listener(batch: list[StoredMessage], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            if batch[0].queue_offset == 0:
                ctx.ack_index = 1  # the first two done, the rest failed
                return ConsumeStatus.CONSUME_SUCCESS
            raise RuntimeError("listener bug")

        runner = ListenerRunner(listener, 2)
        service = ConsumeConcurrentlyService(core, runner, lambda mq: None)
        pq = ProcessQueue()
        batch = msgs(0, 8)
        pq.add(batch)
        service.submit(batch, pq, MQ)
        await until(lambda: pq.empty)
        assert (core.counters.consumed_ok, core.counters.consumed_failed) == (2, 6)
        assert core.offset_store.read_memory(MQ) == 8
        assert "broadcasting: dropping message" in caplog.text

    run(scenario)


def test_closed_runner_skips_queued_batches(tmp_path: Path) -> None:
    async def scenario() -> None:
        core = make_core(tmp_path)
        started = threading.Event()
        release = threading.Event()
        calls: list[int] = []

        def listener(batch: list[StoredMessage], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            calls.append(batch[0].queue_offset)
            started.set()
            release.wait(DEADLINE_S)
            return ConsumeStatus.CONSUME_SUCCESS

        runner = ListenerRunner(listener, 1)
        service = ConsumeConcurrentlyService(core, runner, lambda mq: None)
        pq = ProcessQueue()
        batch = msgs(0, 5)
        pq.add(batch)
        service.submit(batch, pq, MQ)
        await asyncio.get_running_loop().run_in_executor(None, started.wait, DEADLINE_S)
        runner.close()
        release.set()
        assert await runner.drain(DEADLINE_S)
        assert calls == [0], "batches queued behind the running one never reach the listener"
        assert pq.count == 4 and core.offset_store.read_memory(MQ) == 1
        runner.shutdown()

    run(scenario)


def test_orderly_suspend_redelivers_the_same_messages_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        core = make_core(tmp_path, consume_message_batch_max_size=2, suspend_current_queue_time_ms=10)
        seen: list[tuple[int, int]] = []
        inside = 0
        most_inside = 0

        def listener(batch: list[StoredMessage], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            nonlocal inside, most_inside
            inside += 1
            most_inside = max(most_inside, inside)
            seen.extend((m.queue_offset, m.reconsume_times) for m in batch)
            inside -= 1
            if batch[0].queue_offset == 2 and batch[0].reconsume_times < 2:
                ctx.suspend_current_queue_time_ms = 5
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        async def no_lock(mq: MessageQueue) -> bool:
            raise AssertionError("broadcasting consumers never lock")

        runner = ListenerRunner(listener, 4)
        service = ConsumeOrderlyService(core, runner, no_lock, lambda mq: None)
        pq = ProcessQueue()
        for part in (msgs(0, 3), msgs(3, 3)):
            pq.add(part)
            service.submit(part, pq, MQ)
        await until(lambda: pq.empty)
        assert seen == [(0, 0), (1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2), (4, 0), (5, 0)]
        assert most_inside == 1
        assert core.offset_store.read_memory(MQ) == 6
        runner.shutdown()

    run(scenario)


def test_orderly_messages_submitted_as_the_queue_task_ends_are_consumed(tmp_path: Path) -> None:
    """The loop turn between a queue task's return and its done-callback: a submit then must
    not take the finished task for a running one (a full suite once stalled a queue so)."""
    async def scenario() -> None:
        core = make_core(tmp_path)
        seen: list[int] = []
        runner = ListenerRunner(lambda batch, ctx: seen.extend(m.queue_offset for m in batch)
                                or ConsumeOrderlyStatus.SUCCESS, 2)

        async def no_lock(mq: MessageQueue) -> bool:
            raise AssertionError("broadcasting consumers never lock")

        service = ConsumeOrderlyService(core, runner, no_lock, lambda mq: None)
        finished = asyncio.get_running_loop().create_future()
        finished.set_result(None)
        service._running[MQ] = finished  # type: ignore[assignment]  # returned, callback not yet run
        pq = ProcessQueue()
        pq.add(msgs(0, 3))
        service.submit(msgs(0, 3), pq, MQ)
        await until(lambda: pq.empty)
        assert seen == [0, 1, 2]
        runner.shutdown()

    run(scenario)


def test_listener_runner_reports_exceptions_and_skips_after_close() -> None:
    async def scenario() -> None:
        def bad(batch: list[StoredMessage], ctx: object) -> None:
            raise ValueError("boom")

        runner = ListenerRunner(bad, 1)
        outcome = await runner.call(msgs(0, 1), ConsumeConcurrentlyContext(MQ))
        assert isinstance(outcome, ValueError)
        runner.close()
        assert await runner.call(msgs(1, 1), ConsumeConcurrentlyContext(MQ)) is SKIPPED
        runner.shutdown()

    run(scenario)


def test_settings_are_checked_with_the_bad_value_named() -> None:
    with pytest.raises(ClientConfigError, match="consume_thread_min"):
        ConsumerSettings(consume_thread_min=5, consume_thread_max=2)
    with pytest.raises(ClientConfigError, match="pull_batch_size must be between 1 and 1024, not 0"):
        ConsumerSettings(pull_batch_size=0)
    assert ConsumerSettings(message_model="broadcasting").message_model is MessageModel.BROADCASTING  # type: ignore[arg-type]
    assert ConsumerSettings(max_reconsume_times=-1).max_reconsume(orderly=True) == 2**31 - 1
    assert ConsumerSettings(max_reconsume_times=-1).max_reconsume(orderly=False) == 16


def test_subscriptions_compile_and_describe_themselves() -> None:
    tags = Subscription.of("T", "b || a")
    data = tags.to_data()
    assert (data.sub_string, data.tags_set, data.code_set) == ("b || a", ("a", "b"), (97, 98))
    assert Subscription.of("T", "*").to_data().tags_set == ()
    sql = Subscription.of("T", MessageSelector.by_sql("a > 5")).to_data()
    assert (sql.expression_type, sql.sub_string) == (ExpressionType.SQL92, "a > 5")
    with pytest.raises(ClientConfigError, match="topic"):
        Subscription.of("bad topic!", "*")
    assert java_string_hash("TagA") == 2598919 and java_string_hash("é") == 233
    assert java_string_hash("polygenelubricants") == -(2**31)  # the well-known Integer.MIN_VALUE case


def test_wakeup_ends_early_times_out_and_lets_cancellation_through() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        wake = Wakeup()
        started = loop.time()
        loop.call_later(0.01, wake.set)
        await wake.wait(DEADLINE_S)
        assert loop.time() - started < DEADLINE_S / 2, "set() ended the wait"
        started = loop.time()
        await wake.wait(0.02)
        assert loop.time() - started >= 0.015, "no set(): the timeout ended it"
        task = loop.create_task(wake.wait(DEADLINE_S))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario)


def test_worker_pool_returns_results_and_errors_and_bounds_its_threads() -> None:
    async def scenario() -> None:
        pool = WorkerPool(3, name="test-pool")
        inside = 0
        most = 0
        lock = threading.Lock()

        def work(i: int) -> int:
            nonlocal inside, most
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.002)
            with lock:
                inside -= 1
            if i == 7:
                raise ValueError("seven")
            return i * i

        futures = [pool.submit(work, i) for i in range(20)]
        results = await asyncio.gather(*futures, return_exceptions=True)
        pool.shutdown()
        assert [r for i, r in enumerate(results) if i != 7] == [i * i for i in range(20) if i != 7]
        assert isinstance(results[7], ValueError)
        assert 1 <= most <= 3

    run(scenario)
