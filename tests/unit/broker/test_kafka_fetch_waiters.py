"""Held Kafka fetches: woken by a queue's growth, and by the tier when what they wait for is
fetched (`FetchWaiters.wake`, called on the tier's worker thread), only on their own queues."""

from __future__ import annotations

import asyncio
import threading

from skiff.broker.kafka.fetch import FetchWaiters
from skiff.transport.loop import run_coroutine


def test_the_tier_wakes_only_the_fetches_held_on_its_queues_from_another_thread() -> None:
    async def main() -> None:
        waiters = FetchWaiters()
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
