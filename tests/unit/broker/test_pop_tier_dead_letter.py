"""A move to the dead-letter queue (gRPC ForwardMessageToDeadLetterQueue) of a popped message
only the tier holds waits for the tier's fetch of its file (`PopService.dead_letter`): the move
is done once the fetch is; a fetch longer than `TIER_SETTLE_WAIT_S` is refused as busy
(SYSTEM_BUSY: gRPC TOO_MANY_REQUESTS, which clients retry), the message stays in flight, and
the next try moves it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import skiff.broker.pop.service as pop_service
from skiff.broker.operations.pull import PullRequest
from skiff.broker.operations import AckRequest, PopOperation, Refusal
from skiff.broker.pop.service import INIT_MIN, Popped, PopQuery
from skiff.common.clock import ManualClock
from skiff.common.stored_message import decode_records
from skiff.filter import ExpressionType, MessageFilter, build_filter
from skiff.protocol.codes import ResponseCode
from skiff.store import GetResult, GetStatus
from skiff.testing.waits import wait_for
from tests.unit.broker.test_admin_operations import T0, Broker

KEY = ("G", "T", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, ManualClock(T0))
    yield b
    b.close()


class FetchingTier:
    """The pop's tier hook for one record: "being fetched" (MESSAGE_WAS_REMOVING, as
    `TierReads.read` answers) for the first ``fetching`` reads, then the record."""

    def __init__(self, record: bytes, fetching: int) -> None:
        self.record, self.fetching, self.reads = record, fetching, 0

    def __call__(self, req: PullRequest, flt: MessageFilter, local: GetResult) -> GetResult:
        self.reads += 1
        if self.reads <= self.fetching:
            return GetResult(GetStatus.MESSAGE_WAS_REMOVING, req.offset, local.min_offset, local.max_offset)
        return GetResult(GetStatus.FOUND, req.offset + 1, local.min_offset, local.max_offset,
                         [memoryview(self.record)], 1, len(self.record), [req.offset])


def popped_from_tier(broker: Broker) -> tuple[Popped, bytes]:
    """A popped message whose CommitLog copy is gone, as after retention (its in-flight entry
    names a CommitLog offset past the end), and its stored record."""
    broker.topic("T", queues=1)
    broker.put("T", 0, 2)
    query = PopQuery("G", "T", 0, 1, 60_000, build_filter("*", ExpressionType.TAG), init_mode=INIT_MIN)
    (popped,) = broker.pop.pop_once(query)
    entry = broker.pop.state.find(KEY, popped.queue_offset, popped.handle.pop_time, False)
    assert entry is not None
    entry.commit_log_offset += 1 << 40
    assert broker.store.read_record(entry.commit_log_offset) is None
    return popped, bytes(popped.record)


def dead_letters(broker: Broker) -> list[bytes]:
    wait_for(lambda: broker.store.get_max_offset("%DLQ%G", 0) > 0, 10, "the DLQ copy to be dispatched")
    found = broker.store.get_messages("%DLQ%G", 0, 0, 10)
    return [m.body for m in decode_records(b"".join(bytes(b) for b in found.buffers))]


def in_flight(broker: Broker, popped: Popped) -> bool:
    return broker.pop.state.find(KEY, popped.queue_offset, popped.handle.pop_time, False) is not None


def test_a_dead_letter_move_waits_for_the_tiers_fetch(broker: Broker) -> None:
    popped, record = popped_from_tier(broker)
    tier = broker.pop.tier_read = FetchingTier(record, fetching=3)  # the file, then its row group, ...
    assert asyncio.run(broker.pop.dead_letter("G", "T", popped.handle))
    assert tier.reads == 4
    assert dead_letters(broker) == [decode_records(record)[0].body]
    assert not in_flight(broker, popped)


def test_a_fetch_longer_than_the_bound_is_refused_as_busy_and_the_next_try_moves_it(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pop_service, "TIER_SETTLE_WAIT_S", 0.2)
    popped, record = popped_from_tier(broker)
    tier = broker.pop.tier_read = FetchingTier(record, fetching=1_000)
    refused = asyncio.run(PopOperation(broker.config, broker.gate, broker.pop).dead_letter(
        AckRequest("G", "T", popped.handle)))
    assert isinstance(refused, Refusal) and refused.code == ResponseCode.SYSTEM_BUSY  # busy: the client asks again
    assert re.search(r"being fetched from the tier .* ask again", refused.reason), refused
    assert tier.reads == round(0.2 / pop_service.TIER_RETRY_S)  # looked again every TIER_RETRY_S, then gave up
    assert in_flight(broker, popped) and broker.store.get_max_offset("%DLQ%G", 0) == 0
    tier.fetching = 0  # the fetch went on meanwhile: the client's next try finds the file cached
    assert asyncio.run(broker.pop.dead_letter("G", "T", popped.handle))
    assert dead_letters(broker) == [decode_records(record)[0].body] and not in_flight(broker, popped)
