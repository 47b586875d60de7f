"""How a consumer group splits a topic's queues among its members: RocketMQ's
``AllocateMessageQueue*`` strategies, as pure functions of the sorted lists.

Every member of a group runs the same strategy over the same inputs (all queues
sorted, all client ids sorted) and keeps only its own share, so the members
agree without talking to each other. The results match Java's for the same
inputs, so Skiff and Java consumers can share a group with the same strategy.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from skiff.common.message import MessageQueue

T = TypeVar("T")


class AllocateStrategy(Protocol):
    """Which of ``mq_all`` the client ``current_cid`` takes, given every member ``cid_all``.

    Callers pass both lists sorted (queues by topic, broker name, queue id;
    client ids as strings) and never empty.
    """

    @property
    def name(self) -> str:
        """The strategy's name (read only: the strategies are frozen dataclasses)."""
        ...

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Java's argument checks: empty inputs are bugs; a client not in the list gets nothing."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


@dataclass(frozen=True, slots=True)
class AllocateAverage:
    """Contiguous runs: the first ``len(mq) % len(cid)`` members take one queue more."""

    name: str = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        queues, members = len(mq_all), len(cid_all)
        mod = queues % members
        if queues <= members:
            size = 1
        else:
            size = queues // members + (1 if index < mod else 0)
        start = index * size if index < mod else index * size + mod
        count = min(size, queues - start)
        return [mq_all[(start + i) % queues] for i in range(count)]


@dataclass(frozen=True, slots=True)
class AllocateAverageByCircle:
    """Round-robin: member *i* takes queues *i*, *i + n*, *i + 2n*, ..."""

    name: str = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str) -> int:
    """Java's ConsistentHashRouter MD5Hash: the first four digest bytes as an unsigned int."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def java_queue_key(mq: MessageQueue) -> str:
    """``MessageQueue.toString()`` in Java: the key consistent hashing routes a queue by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


@dataclass(frozen=True, slots=True)
class AllocateConsistentHash:
    """A hash ring with ``virtual_nodes`` points per member (keys ``cid-i``); each queue
    goes to the first point at or after its hash. A member joining or leaving moves
    only the queues next to its points."""

    virtual_nodes: int = 10
    hash_fn: Callable[[str], int] = md5_hash
    name: str = "CONSISTENT_HASH"

    def __post_init__(self) -> None:
        if self.virtual_nodes < 0:
            raise ValueError(f"illegal virtualNodeCnt :{self.virtual_nodes}")

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:  # later points overwrite earlier ones on a collision, as in Java's TreeMap
            for i in range(self.virtual_nodes):
                ring[self.hash_fn(f"{cid}-{i}")] = cid
        if not ring:
            return []
        points = sorted(ring)
        out = []
        for mq in mq_all:
            at = bisect.bisect_left(points, self.hash_fn(java_queue_key(mq)))
            if ring[points[at % len(points)]] == current_cid:
                out.append(mq)
        return out


@dataclass(frozen=True, slots=True)
class AllocateByConfig:
    """Always the configured queues, whoever else is in the group (manual assignment)."""

    queues: tuple[MessageQueue, ...] = ()
    name: str = "CONFIG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.queues)


@dataclass(frozen=True, slots=True)
class AllocateByMachineRoom:
    """Only queues of brokers named ``<room>@<name>`` whose room is in ``consumer_rooms``,
    split in contiguous runs with the remainder handed out one each from the end."""

    consumer_rooms: frozenset[str] = frozenset()
    name: str = "MACHINE_ROOM"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        eligible = [mq for mq in mq_all if _broker_room(mq.broker_name) in self.consumer_rooms]
        per, rem = divmod(len(eligible), len(cid_all))
        out = eligible[per * index : per * index + per]
        if rem > index:
            out.append(eligible[index + per * len(cid_all)])
        return out


def _broker_room(broker_name: str) -> str | None:
    parts = broker_name.split("@")
    return parts[0] if len(parts) == 2 else None


class MachineRoomResolver(Protocol):
    """Where a broker and a consumer are deployed; neither answer may be empty."""

    def broker_room(self, mq: MessageQueue) -> str: ...

    def consumer_room(self, client_id: str) -> str: ...


@dataclass(frozen=True, slots=True)
class AllocateMachineRoomNearby:
    """Queues of a room go to the consumers in that room (split by ``inner``); queues of
    a room with no live consumer are shared by every consumer."""

    resolver: MachineRoomResolver
    inner: AllocateStrategy = field(default_factory=AllocateAverage)

    @property
    def name(self) -> str:
        return f"MACHINE_ROOM_NEARBY-{self.inner.name}"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        mq_by_room = _group_by(mq_all, self.resolver.broker_room, "mq")
        cid_by_room = _group_by(cid_all, self.resolver.consumer_room, "consumer id")
        room = self.resolver.consumer_room(current_cid)
        out: list[MessageQueue] = []
        local = mq_by_room.pop(room, None)
        if local:
            out += self.inner.allocate(group, current_cid, local, cid_by_room[room])
        for other_room in sorted(mq_by_room):
            if other_room not in cid_by_room:
                out += self.inner.allocate(group, current_cid, mq_by_room[other_room], cid_all)
        return out


def _group_by(items: Iterable[T], key: Callable[[T], str], what: str) -> dict[str, list[T]]:
    out: dict[str, list[T]] = {}
    for item in items:
        k = key(item)
        if not k:
            raise ValueError(f"Machine room is null for {what} {item}")
        out.setdefault(k, []).append(item)
    return out
