"""Allocation strategies, with the cases of RocketMQ's own tests (same inputs, same answers)."""

from __future__ import annotations

import random

import pytest

from skiff.client._impl.strategies import (
    AllocateAverage,
    AllocateAverageByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
    AllocateMachineRoomNearby,
    AllocateStrategy,
    java_queue_key,
    md5_hash,
)
from skiff.common.message import MessageQueue


def cids(n: int, prefix: str = "CID_PREFIX") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def mqs(n: int, broker: str = "brokerName", topic: str = "topic") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def allocate_all(strategy: AllocateStrategy, mq_all: list[MessageQueue], cid_all: list[str]) -> dict[str, list[MessageQueue]]:
    return {cid: strategy.allocate("G", cid, mq_all, cid_all) for cid in cid_all}


def assert_partition(result: dict[str, list[MessageQueue]], mq_all: list[MessageQueue]) -> None:
    """Every queue goes to exactly one member."""
    given = [mq for share in result.values() for mq in share]
    assert sorted(given) == sorted(mq_all)


def test_average_sizes_match_java() -> None:
    result = allocate_all(AllocateAverage(), mqs(10), cids(4))
    assert [len(result[c]) for c in cids(4)] == [3, 3, 2, 2]
    assert [mq.queue_id for mq in result["CID_PREFIX0"]] == [0, 1, 2]
    assert [mq.queue_id for mq in result["CID_PREFIX2"]] == [6, 7]
    assert_partition(result, mqs(10))


def test_average_more_members_than_queues() -> None:
    result = allocate_all(AllocateAverage(), mqs(3), cids(5))
    assert [[mq.queue_id for mq in result[c]] for c in cids(5)] == [[0], [1], [2], [], []]


@pytest.mark.parametrize("queues,members", [(1, 1), (7, 3), (16, 5), (8, 8), (3, 9), (100, 7)])
def test_average_and_circle_partition(queues: int, members: int) -> None:
    for strategy in (AllocateAverage(), AllocateAverageByCircle()):
        assert_partition(allocate_all(strategy, mqs(queues), cids(members)), mqs(queues))


def test_circle_matches_java() -> None:
    strategy = AllocateAverageByCircle()
    assert strategy.allocate("", "CID_PREFIX", mqs(10), cids(4)) == []
    result = allocate_all(strategy, mqs(10), cids(4))
    assert [[mq.queue_id for mq in result[c]] for c in cids(4)] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]


@pytest.mark.parametrize("strategy", [AllocateAverage(), AllocateAverageByCircle(), AllocateConsistentHash()])
def test_bad_arguments_raise_and_strangers_get_nothing(strategy: AllocateStrategy) -> None:
    with pytest.raises(ValueError, match="currentCID is empty"):
        strategy.allocate("", "", mqs(6), cids(2))
    with pytest.raises(ValueError, match="mqAll"):
        strategy.allocate("", "0", [], cids(2))
    with pytest.raises(ValueError, match="cidAll"):
        strategy.allocate("", "0", mqs(6), [])
    assert strategy.allocate("", str(2**31 - 1), mqs(6), cids(2)) == []


def test_java_queue_key_and_md5_hash() -> None:
    assert java_queue_key(MessageQueue("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"
    # md5("a") = 0cc175b9...; Java keeps the first four bytes as an unsigned number.
    assert md5_hash("a") == 0x0CC175B9


def check_consistent_hash(queue_count: int, member_count: int) -> None:
    """Java's testAllocate: removing a member moves only its queues; adding one moves only queues to it."""
    strategy = AllocateConsistentHash(3)
    mq_all = mqs(queue_count, topic="topic_test")
    members = cids(member_count, "CID-")
    before = allocate_all(strategy, mq_all, members)
    assert_partition(before, mq_all)
    owner_before = {mq: cid for cid, share in before.items() for mq in share}

    removed, rest = members[0], members[1:]
    after_remove = allocate_all(strategy, mq_all, rest) if rest else {}
    if rest:
        assert_partition(after_remove, mq_all)
    owner_after = {mq: cid for cid, share in after_remove.items() for mq in share}
    for mq, cid in owner_before.items():
        if cid != removed:
            assert owner_after[mq] == cid

    grown = [*rest, "CID-NEW"]
    after_add = allocate_all(strategy, mq_all, grown)
    assert_partition(after_add, mq_all)
    for cid, share in after_add.items():
        for mq in share:
            if cid != "CID-NEW":
                assert owner_after[mq] == cid


@pytest.mark.parametrize("queue_count,member_count", [(20, 10), (10, 20), (1, 1), (5, 1)])
def test_consistent_hash_moves_little(queue_count: int, member_count: int) -> None:
    check_consistent_hash(queue_count, member_count)


def test_consistent_hash_random_cases() -> None:
    rng = random.Random(7)
    for _ in range(10):
        check_consistent_hash(rng.randint(1, 20), rng.randint(1, 20))


def test_consistent_hash_rejects_negative_virtual_nodes() -> None:
    with pytest.raises(ValueError, match="virtualNodeCnt"):
        AllocateConsistentHash(-1)


def test_by_config_returns_the_configured_queues() -> None:
    chosen = (MessageQueue("t", "b", 1), MessageQueue("t", "b", 5))
    strategy = AllocateByConfig(chosen)
    assert strategy.allocate("G", "any", mqs(8), ["any", "other"]) == list(chosen)


def test_by_machine_room_matches_java() -> None:
    mq_all = [MessageQueue("topic", "room1@broker-a" if i < 5 else "room2@broker-b", i) for i in range(10)]
    strategy = AllocateByMachineRoom(frozenset({"room1"}))
    with pytest.raises(ValueError, match="mqAll is null or mqAll empty"):
        strategy.allocate("", "CID_PREFIX0", [], cids(2))
    result = allocate_all(strategy, mq_all, cids(2))
    assert [mq.queue_id for mq in result["CID_PREFIX0"]] == [0, 1, 4]
    assert [mq.queue_id for mq in result["CID_PREFIX1"]] == [2, 3]


class DashResolver:
    """Java's test resolver: the room is the text before the first '-'."""

    def broker_room(self, mq: MessageQueue) -> str:
        return mq.broker_name.split("-")[0]

    def consumer_room(self, client_id: str) -> str:
        return client_id.split("-")[0]


def rooms_mqs(rooms: int, per_room: int) -> list[MessageQueue]:
    return [MessageQueue("topic_test", f"IDC{r}-brokerName", i) for r in range(1, rooms + 1) for i in range(per_room)]


def rooms_cids(rooms: int, per_room: int) -> list[str]:
    return [f"IDC{r}-CID-{i}" for r in range(1, rooms + 1) for i in range(per_room)]


NEARBY = AllocateMachineRoomNearby(DashResolver(), AllocateAverage())


@pytest.mark.parametrize("consumers", [10, 20, 30])
def test_nearby_same_rooms_keep_queues_local(consumers: int) -> None:
    mq_all, cid_all = rooms_mqs(5, 20), rooms_cids(5, consumers)
    result = allocate_all(NEARBY, mq_all, cid_all)
    for cid, share in result.items():
        assert all(NEARBY.resolver.broker_room(mq) == NEARBY.resolver.consumer_room(cid) for mq in share)
    assert_partition(result, mq_all)


@pytest.mark.parametrize("consumers", [10, 5, 20])
def test_nearby_extra_consumer_rooms(consumers: int) -> None:
    mq_all, cid_all = rooms_mqs(5, 10), rooms_cids(6, consumers)
    result = allocate_all(NEARBY, mq_all, cid_all)
    for cid, share in result.items():
        assert all(NEARBY.resolver.broker_room(mq) == NEARBY.resolver.consumer_room(cid) for mq in share)
    assert_partition(result, mq_all)


@pytest.mark.parametrize("consumers", [10, 5, 20])
def test_nearby_rooms_without_consumers_are_shared(consumers: int) -> None:
    mq_all, cid_all = rooms_mqs(5, 10), rooms_cids(3, consumers)
    result = allocate_all(NEARBY, mq_all, cid_all)
    assert_partition(result, mq_all)
    for room in ("IDC1", "IDC2", "IDC3"):
        held = {mq for cid, share in result.items() if cid.startswith(room + "-") for mq in share}
        assert {mq for mq in mq_all if mq.broker_name.startswith(room + "-")} <= held
    assert NEARBY.name == "MACHINE_ROOM_NEARBY-AVG"


def test_nearby_rejects_an_empty_room() -> None:
    class Blank(DashResolver):
        def broker_room(self, mq: MessageQueue) -> str:
            return ""

    with pytest.raises(ValueError, match="Machine room is null"):
        AllocateMachineRoomNearby(Blank()).allocate("G", "IDC1-CID-0", rooms_mqs(1, 2), ["IDC1-CID-0"])
