"""A gRPC PullMessage the tier answers "retry" while it fetches the offset's row group is held
(`Offsets._hold_for_tier`): answered with the records once the tier's job ends and its ready
listener (`QueueWaiters.wake`, on the job's worker thread) wakes it; at `TIER_PULL_HOLD_MAX_MS`
answered as before the hold ("no message", the same offset); at the broker's stop at once; not
held at all when the tier is not working for the queue (a broker without a tier)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest

import skiff.broker.grpc.offsets as grpc_offsets
from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.offsets import Offsets
from skiff.broker.operations import Pulled, PullRequest
from skiff.broker.queue_waiters import QueueWaiters
from skiff.filter import MessageFilter
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.store import GetResult, GetStatus
from skiff.transport.loop import run_coroutine
from tests.unit.tier.records import make_records

OFFSET, COUNT = 40, 5
RECORDS = make_records("T", 0, OFFSET, COUNT)
BODIES = [f"body-{i}-" * (1 + i % 5) for i in range(OFFSET, OFFSET + COUNT)]
DEADLINE_S = 10.0
"""How long a test waits for an answer: far past any hold a test leaves running."""


class FetchingTier:
    """The pull operation as the gRPC door uses it, over a tier fetching the row group of
    ``OFFSET``: each read answers ``retry`` (MESSAGE_WAS_REMOVING: "retry at once", as
    `TierReads.read` does) and `tier_waiting` is ``waiting`` until `fetched` (the job's end, on a
    worker thread, which then tells the ready listeners); from then on a read answers the records."""

    def __init__(self, retry: GetStatus = GetStatus.MESSAGE_WAS_REMOVING, waiting: bool = True) -> None:
        self.done = threading.Event()
        self.retry = retry
        self.waiting = waiting
        self.reads = 0
        self.ready_listeners: list[Any] = []
        self.asked: asyncio.Event | None = None
        """Set when the door asked `tier_waiting`: the pull is about to be held."""

    def pull(self, req: PullRequest) -> Pulled:
        return self.read(req, cast(MessageFilter, None))

    def read(self, req: PullRequest, flt: MessageFilter) -> Pulled:
        self.reads += 1
        if not self.done.is_set():
            return Pulled(GetResult(self.retry, req.offset, 0, 100), flt)
        return Pulled(GetResult(GetStatus.FOUND, req.offset + COUNT, 0, 100, [memoryview(RECORDS)], COUNT,
                                len(RECORDS), list(range(req.offset, req.offset + COUNT))), flt)

    def tier_waiting(self, topic: str, queue_id: int) -> bool:
        if self.asked is not None:
            self.asked.set()
        return self.waiting and not self.done.is_set()

    def fetched(self) -> None:
        self.done.set()
        for listener in self.ready_listeners:
            listener([("T", 0)])


def door(tier: FetchingTier) -> Offsets:
    """The gRPC door's Offsets over ``tier``, its waiters told by the tier as the broker wires them."""
    waiters = QueueWaiters()
    waiters.start()
    tier.ready_listeners.append(waiters.wake)
    return Offsets(BrokerConfig(broker_name="b"), cast(Any, None), cast(Any, None), cast(Any, tier), waiters)


async def answer(offsets: Offsets) -> tuple[int, list[str], int]:
    """A PullMessage of queue T/0 at ``OFFSET``: its status code, the bodies, its next offset."""
    req = rpc.PullMessageRequest(group=pb.Resource(name="G"), offset=OFFSET, batch_size=32,
                                 message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0))
    responses = [r async for r in offsets.pull(req)]
    (code,) = [r.status.code for r in responses if r.HasField("status")]
    (next_offset,) = [r.next_offset for r in responses if r.HasField("next_offset")]
    return code, [r.message.body.decode() for r in responses if r.HasField("message")], next_offset


async def held(offsets: Offsets, tier: FetchingTier) -> asyncio.Task[tuple[int, list[str], int]]:
    """A pull started and held (it asked whether the tier works for its queue, and has not answered)."""
    tier.asked = asyncio.Event()
    task = asyncio.create_task(answer(offsets))
    await asyncio.wait_for(tier.asked.wait(), DEADLINE_S)
    await asyncio.sleep(0)
    assert not task.done() and tier.reads == 1
    return task


def test_a_held_pull_is_answered_with_the_records_when_the_tiers_job_wakes_it(monkeypatch) -> None:
    monkeypatch.setattr(grpc_offsets, "TIER_PULL_HOLD_MAX_MS", 600_000)  # only the wake can end it in time

    async def main() -> None:
        tier = FetchingTier()
        offsets = door(tier)
        task = await held(offsets, tier)
        threading.Thread(target=tier.fetched).start()
        assert await asyncio.wait_for(task, DEADLINE_S) == (pb.OK, BODIES, OFFSET + COUNT)
        assert tier.reads == 2  # the first read, and one when woken
    run_coroutine(main())


def test_at_the_limit_a_held_pull_is_answered_as_before_the_hold(monkeypatch) -> None:
    monkeypatch.setattr(grpc_offsets, "TIER_PULL_HOLD_MAX_MS", 20)

    async def main() -> None:
        tier = FetchingTier()  # never fetched
        got = await asyncio.wait_for(answer(door(tier)), DEADLINE_S)
        assert got == (pb.MESSAGE_NOT_FOUND, [], OFFSET)  # no message, pull the same offset again
        assert tier.reads == 2  # the first read, and one at the limit
    run_coroutine(main())


def test_the_brokers_stop_answers_a_held_pull_at_once_and_holds_none_after(monkeypatch) -> None:
    monkeypatch.setattr(grpc_offsets, "TIER_PULL_HOLD_MAX_MS", 600_000)

    async def main() -> None:
        tier = FetchingTier()
        offsets = door(tier)
        task = await held(offsets, tier)
        offsets.close()
        assert await asyncio.wait_for(task, DEADLINE_S) == (pb.MESSAGE_NOT_FOUND, [], OFFSET)
        assert tier.reads == 2
        assert await asyncio.wait_for(answer(offsets), DEADLINE_S) == (pb.MESSAGE_NOT_FOUND, [], OFFSET)
        assert tier.reads == 3  # read once, not held
    run_coroutine(main())


@pytest.mark.parametrize("retry, waiting", [(GetStatus.MESSAGE_WAS_REMOVING, False),
                                            (GetStatus.NO_MATCHED_MESSAGE, True)], ids=["tier idle", "no match"])
def test_a_retry_the_tier_is_not_working_for_is_answered_at_once(monkeypatch, retry, waiting) -> None:
    """The tier is not working for the queue (there is no tier: `tier_waiting` never true): read
    once more, in case its job ended since the read, and answered now; the read found nothing
    the tier has to fetch (a filter matched nothing): one read, answered now."""
    monkeypatch.setattr(grpc_offsets, "TIER_PULL_HOLD_MAX_MS", 600_000)

    async def main() -> None:
        tier = FetchingTier(retry, waiting)
        assert await asyncio.wait_for(answer(door(tier)), DEADLINE_S) == (pb.MESSAGE_NOT_FOUND, [], OFFSET)
        assert tier.reads == (2 if retry is GetStatus.MESSAGE_WAS_REMOVING else 1)
    run_coroutine(main())


def test_a_job_that_ends_between_the_read_and_the_hold_is_read_again_not_answered_empty(monkeypatch) -> None:
    """The tier's worker finished the row group right after the pull's read answered "retry" and
    before the door asked whether the tier works for the queue: the records, from a second read."""
    monkeypatch.setattr(grpc_offsets, "TIER_PULL_HOLD_MAX_MS", 600_000)

    class EndsAfterTheRead(FetchingTier):
        def read(self, req: PullRequest, flt: MessageFilter) -> Pulled:
            pulled = super().read(req, flt)
            if self.reads == 1:
                self.fetched()
            return pulled

    async def main() -> None:
        tier = EndsAfterTheRead()
        got = await asyncio.wait_for(answer(door(tier)), DEADLINE_S)
        assert got == (pb.OK, BODIES, OFFSET + COUNT) and tier.reads == 2
    run_coroutine(main())
