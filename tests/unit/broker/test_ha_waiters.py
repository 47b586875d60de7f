"""Group commit for SYNC_MASTER: one queue of waiters answered by acknowledgements or timed out."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from skiff.broker.ha.waiters import ReplicaWaiters


def _wait(waiters: ReplicaWaiters, end: int) -> asyncio.Future[bool]:
    """A waiter as a future: True once acknowledged, False once timed out."""
    fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    if not waiters.add(end, lambda ok: fut.done() or fut.set_result(ok)):
        fut.set_result(True)
    return fut


async def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.005)


def test_an_ack_answers_every_waiter_it_covers_and_the_rest_time_out():
    async def main() -> None:
        waiters = ReplicaWaiters(0.2)
        futs = [_wait(waiters, end) for end in (100, 200, 300)]
        waiters.ack(250)
        await asyncio.sleep(0)
        assert [f.done() and f.result() for f in futs[:2]] == [True, True] and not futs[2].done()
        began = time.monotonic()
        assert await futs[2] is False
        assert 0.1 < time.monotonic() - began < 2.0
        assert len(waiters) == 0
        assert _wait(waiters, 250).result() is True  # already acknowledged
        late = _wait(waiters, 400)
        waiters.fail_all()
        assert late.result() is False
    asyncio.run(main())


def test_many_waiters_share_one_timer():
    async def main() -> None:
        waiters = ReplicaWaiters(5.0)
        futs = [_wait(waiters, i) for i in range(1, 10_001)]
        waiters.ack(10_000)
        assert all(f.result() for f in futs)
        assert waiters._timer is not None  # one handle for the whole queue, left to expire harmlessly
    asyncio.run(main())


def test_callbacks_are_called_once_each_in_offset_order():
    async def main():
        waiters = ReplicaWaiters(0.05)
        calls: list[tuple[int, bool]] = []
        for end in (10, 20, 30):
            assert waiters.add(end, lambda ok, end=end: calls.append((end, ok)))
        waiters.ack(20)
        assert calls == [(10, True), (20, True)]
        assert not waiters.add(15, lambda ok: calls.append((15, ok)))  # acknowledged already: not queued
        await _until(lambda: len(calls) == 3)
        waiters.ack(30)  # too late: timed out once, not answered again
        assert calls == [(10, True), (20, True), (30, False)]

    asyncio.run(main())


def test_a_failing_waiter_is_logged_and_the_others_are_still_answered(caplog: pytest.LogCaptureFixture):
    """A waiter writes its send's answer; one that raises must not leave the waiters behind it
    unanswered, nor the timer unarmed."""
    async def main():
        waiters = ReplicaWaiters(0.05)
        calls: list[tuple[int, bool]] = []

        def broken(ok: bool) -> None:
            raise RuntimeError("the answer could not be written")
        for end in (10, 20, 30):
            waiters.add(end, broken if end == 10 else lambda ok, end=end: calls.append((end, ok)))
        waiters.ack(20)
        assert calls == [(20, True)]
        waiters.add(40, broken)
        waiters.add(50, lambda ok: calls.append((50, ok)))
        await _until(lambda: len(calls) == 3)
        assert calls == [(20, True), (30, False), (50, False)]

    with caplog.at_level(logging.ERROR, logger="skiff.broker.ha.waiters"):
        asyncio.run(main())
    assert [str(r.exc_info[1]) for r in caplog.records if r.exc_info] == ["the answer could not be written"] * 2
