"""Held requests (a Kafka Fetch, a gRPC PullMessage held for the tier): woken by a queue's growth,
and by the tier when what they wait for is fetched (`QueueWaiters.wake`, called on the tier's
worker thread), only on their own queues; `close` wakes every one at once."""

from __future__ import annotations

import asyncio
import threading

from skiff.broker.queue_waiters import QueueWaiters
from skiff.transport.loop import run_coroutine


def test_the_tier_wakes_only_the_requests_held_on_its_queues_from_another_thread() -> None:
    async def main() -> None:
        waiters = QueueWaiters()
        waiters.start()
        mine, other = asyncio.Event(), asyncio.Event()
        waiters.register([("T", 0), ("T", 1)], mine)
        waiters.register([("U", 0)], other)
        threading.Thread(target=waiters.wake, args=([("T", 1), ("X", 3)],)).start()
        await asyncio.wait_for(mine.wait(), 10)
        await asyncio.sleep(0)  # the same loop step would have set both
        assert not other.is_set()
        waiters.unregister([("T", 0), ("T", 1)], mine)
        waiters.unregister([("U", 0)], other)
        waiters.wake([("U", 0)])  # nobody held: nothing to do, no error
    run_coroutine(main())


def test_a_dispatch_on_the_loop_wakes_its_queues_at_once_and_close_wakes_every_one() -> None:
    async def main() -> None:
        waiters = QueueWaiters()
        waiters.start()
        grown, idle = asyncio.Event(), asyncio.Event()
        waiters.register([("T", 0)], grown)
        waiters.register([("U", 0)], idle)
        waiters.notify([("T", 0, 7)])  # the store's dispatch listener, on the loop's thread
        assert grown.is_set() and not idle.is_set() and not waiters.closed
        waiters.close()
        assert idle.is_set() and waiters.closed
    run_coroutine(main())
