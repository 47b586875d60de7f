"""Held pulls: woken by dispatches (from any thread), re-checked, expired, drained."""

import asyncio
import threading
import time

from skiff.broker.long_polling import PullHoldService
from skiff.protocol.command import RemotingCommand
from skiff.transport.loop import run_coroutine


class Queue:
    """What a held pull re-reads: a queue's max offset, and a count of re-runs."""

    def __init__(self) -> None:
        self.max_offset = 0
        self.reruns = 0

    def rerun(self, offset: int):
        def run(final: bool) -> RemotingCommand | None:
            self.reruns += 1
            if self.max_offset > offset:
                return RemotingCommand(code=0, remark=f"found {self.max_offset}")
            return RemotingCommand(code=19, remark="timeout") if final else None
        return run


def test_a_dispatch_from_another_thread_wakes_only_pulls_behind_the_new_end():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000)
        hold.start()
        q = Queue()
        waiting = hold.hold(("T", 0), 0, q.rerun(0), timeout_ms=15_000)
        ahead = hold.hold(("T", 0), 5, q.rerun(5), timeout_ms=15_000)
        other = hold.hold(("U", 0), 0, q.rerun(0), timeout_ms=15_000)
        assert hold.held_count == 3
        q.max_offset = 1
        started = time.monotonic()
        threading.Thread(target=hold.notify, args=([("T", 0, 1), ("X", 3, 9)],)).start()
        answer = await asyncio.wait_for(waiting, 2)
        assert answer.remark == "found 1" and time.monotonic() - started < 1
        await asyncio.sleep(0.05)
        assert not ahead.given and not other.given and hold.held_count == 2
        await hold.stop()
        assert ahead.given and other.given
        assert ((await ahead).remark, (await other).remark) == ("timeout", "found 1")
        assert hold.hold(("T", 0), 0, q.rerun(0), 1000) is None
    run_coroutine(main())


def test_expiry_answers_with_what_the_final_run_finds():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000)
        hold.start()
        q = Queue()
        started = time.monotonic()
        answer = await asyncio.wait_for(hold.hold(("T", 0), 0, q.rerun(0), timeout_ms=200), 5)
        assert answer.remark == "timeout" and 0.19 <= time.monotonic() - started < 2
        assert hold.held_count == 0
        await hold.stop()
    run_coroutine(main())


def test_recheck_finds_messages_nobody_announced():
    async def main():
        hold = PullHoldService(recheck_interval_ms=100)
        hold.start()
        q = Queue()
        pending = hold.hold(("T", 0), 0, q.rerun(0), timeout_ms=15_000)
        q.max_offset = 3
        assert (await asyncio.wait_for(pending, 5)).remark == "found 3"
        await hold.stop()
    run_coroutine(main())


def test_one_wake_up_per_batch_and_a_bound_on_held_pulls():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000, max_suspended=2)
        hold.start()
        q = Queue()
        futures = [hold.hold(("T", 0), 9, q.rerun(9), 15_000) for _ in range(3)]
        assert futures[2] is None
        q.max_offset = 5
        hold.notify([("T", 0, 5)])
        hold.notify([("T", 0, 6)])
        await asyncio.sleep(0.05)
        assert q.reruns == 0  # both offsets are behind the pulls' offset 9: nothing re-runs
        q.max_offset = 10
        hold.notify([("T", 0, 10)])
        hold.notify([("T", 0, 10)])
        await asyncio.wait_for(asyncio.gather(*futures[:2]), 2)
        assert q.reruns == 2  # one re-run per held pull for the two notifications
        await hold.stop()
    run_coroutine(main())


def test_a_held_pull_whose_rerun_fails_is_answered_with_a_system_error():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000)
        hold.start()

        def broken(final: bool) -> RemotingCommand | None:
            raise OSError("disk gone")

        held = hold.hold(("T", 0), 0, broken, timeout_ms=15_000)
        delivered = []
        held.then(lambda request, answer: delivered.append((request, answer)), "the request")
        hold.notify([("T", 0, 1)])
        answer = await asyncio.wait_for(held, 2)
        assert answer.code == 1 and "disk gone" in answer.remark  # SYSTEM_ERROR, with the reason
        assert delivered == [("the request", answer)] and hold.held_count == 0
        await hold.stop()
    run_coroutine(main())
