"""Kafka's classic consumer group protocol, with this broker as every group's coordinator.

The broker keeps each group's members and generation; the assignment is the leader
client's (its bytes are opaque here). States as Kafka's ``ClassicGroup``:

- Empty: no members; a join starts a rebalance.
- PreparingRebalance: joins are held until every member has rejoined, or the largest
  rebalance timeout passes (members that did not rejoin are dropped). A group leaving
  Empty waits `KAFKA_INITIAL_REBALANCE_DELAY_MS` first, so consumers started together
  join one generation.
- CompletingRebalance: the join answers are out (the leader's with every member's
  subscription); followers' SyncGroups wait for the leader's, which carries the assignment.
- Stable: heartbeats answer NONE; a join, a leave or an expired session (no heartbeat
  within the member's session timeout) starts a rebalance, which members learn from
  REBALANCE_IN_PROGRESS on their next heartbeat.

JoinGroup v4+ uses KIP-394's two steps: a first join without member id is answered
MEMBER_ID_REQUIRED with the id to join with. Committed offsets go to the consumer offset
table of the broker group holding each partition (`PartitionOffsets`), the one RocketMQ
consumer groups use, so `skiff consumer progress` and the dashboard show a Kafka group's
lag; group membership
itself is held in memory and rebuilt by the clients' joins after a restart.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from skiff.broker.kafka.offsets import PartitionOffsets
from skiff.broker.operations import OffsetsOperation
from skiff.common.limits import (
    KAFKA_GROUP_SESSION_MAX_MS,
    KAFKA_GROUP_SESSION_MIN_MS,
    KAFKA_INITIAL_REBALANCE_DELAY_MS,
)
from skiff.common.names import group_error
from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode

Body = dict[str, Any]
log = logging.getLogger(__name__)


class State(enum.Enum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    joining: asyncio.Future[Body] | None = None
    syncing: asyncio.Future[Body] | None = None
    session: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class Group:
    group_id: str
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    """Member ids handed out with MEMBER_ID_REQUIRED, not joined yet."""
    timer: asyncio.TimerHandle | None = None
    initial: bool = False
    """In the initial delay of a rebalance from Empty: joins wait for it even when all are in."""


class GroupCoordinator:
    def __init__(self, offsets: OffsetsOperation, *, register: Callable[[str], object] = lambda group: None,
                 session_ms: tuple[int, int] = (KAFKA_GROUP_SESSION_MIN_MS, KAFKA_GROUP_SESSION_MAX_MS),
                 initial_delay_ms: int = KAFKA_INITIAL_REBALANCE_DELAY_MS,
                 partitions: PartitionOffsets | None = None) -> None:
        """``register``: makes a group that joins or commits a subscription group too (as a
        RocketMQ consumer's heartbeat does when autoCreateSubscriptionGroup), so the broker's
        group lists, `skiff consumer` and the dashboard name it. ``session_ms``: the session
        timeouts members may ask for; ``initial_delay_ms``: a group leaving Empty waits this long
        for more members (both the limits' values, but for tests of the state machine that
        cannot wait seconds). ``partitions``: where each partition's offsets are kept (by
        default this broker's table, partition = queue id)."""
        self.offsets = offsets
        self.partitions = partitions or PartitionOffsets(offsets)
        self.register = register
        self.session_ms = session_ms
        self.initial_delay_ms = initial_delay_ms
        self.groups: dict[str, Group] = {}

    def handlers(self) -> dict[int, Callable[..., Awaitable[Body | None]]]:
        return {
            ApiKey.JOIN_GROUP: self.join,
            ApiKey.SYNC_GROUP: self.sync,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
        }

    # -- membership -------------------------------------------------------------------

    async def join(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        def refuse(code: ErrorCode, member_id: str = "") -> Body:
            return {"throttle_time_ms": 0, "error_code": int(code), "generation_id": -1, "protocol_name": "",
                    "leader": "", "member_id": member_id, "members": []}

        if group_error(req["group_id"]) is not None or "@" in req["group_id"]:
            return refuse(ErrorCode.INVALID_GROUP_ID)
        if not self.session_ms[0] <= req["session_timeout_ms"] <= self.session_ms[1]:
            return refuse(ErrorCode.INVALID_SESSION_TIMEOUT)
        if req["group_id"] not in self.groups:
            self.register(req["group_id"])
        group = self.groups.setdefault(req["group_id"], Group(req["group_id"]))
        protocols = [(p["name"], p["metadata"]) for p in req["protocols"]]
        if group.members and (req["protocol_type"] != group.protocol_type
                              or not self._common(group, {n for n, _ in protocols})):
            return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member_id = req["member_id"]
        if not member_id:
            member_id = f"{header.client_id or 'consumer'}-{uuid.uuid4()}"
            if header.api_version >= 4:
                group.pending.add(member_id)
                return refuse(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        elif member_id not in group.members and member_id not in group.pending:
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        group.pending.discard(member_id)
        member = group.members.get(member_id)
        rebalance_ms: int = req["rebalance_timeout_ms"] if "rebalance_timeout_ms" in req else req["session_timeout_ms"]
        if member is None:
            member = group.members[member_id] = Member(member_id, header.client_id, peer[0],
                                                       req["session_timeout_ms"], rebalance_ms, protocols)
        else:
            member.protocols, member.session_timeout_ms = protocols, req["session_timeout_ms"]
            member.rebalance_timeout_ms = rebalance_ms
        group.protocol_type = req["protocol_type"]
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(refuse(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        joining = member.joining = asyncio.get_running_loop().create_future()
        self._touch(group, member)
        if group.state is not State.PREPARING:
            self._prepare(group)
        if not group.initial and all(m.joining is not None for m in group.members.values()):
            self._complete_join(group)
        return await joining

    def _common(self, group: Group, names: set[str]) -> set[str]:
        common = set(names)
        for m in group.members.values():
            common &= {n for n, _ in m.protocols}
        return common

    def _prepare(self, group: Group) -> None:
        """Start a rebalance: members learn of it from their heartbeats and rejoin."""
        log.info("Kafka group %s: rebalancing from %s (generation %d)", group.group_id, group.state.value,
                 group.generation)
        from_empty = group.initial = group.state is State.EMPTY
        group.state = State.PREPARING
        for m in group.members.values():
            if m.syncing is not None and not m.syncing.done():
                m.syncing.set_result(_sync_answer(ErrorCode.REBALANCE_IN_PROGRESS))
            m.syncing = None
        if group.timer is not None:
            group.timer.cancel()
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay_ms = self.initial_delay_ms if from_empty else timeout_ms
        group.timer = asyncio.get_running_loop().call_later(delay_ms / 1000.0, self._rebalance_due, group, from_empty)

    def _rebalance_due(self, group: Group, initial: bool) -> None:
        group.timer = None
        group.initial = False
        if group.state is not State.PREPARING:
            return
        if initial and not all(m.joining is not None for m in group.members.values()):
            timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            group.timer = asyncio.get_running_loop().call_later(timeout_ms / 1000.0, self._rebalance_due, group, False)
            return
        for m in [m for m in group.members.values() if m.joining is None]:
            self._remove(group, m)  # did not rejoin within the rebalance timeout
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.timer is not None:
            group.timer.cancel()
            group.timer = None
        group.generation += 1
        if not group.members:
            group.state, group.leader, group.protocol = State.EMPTY, "", ""
            return
        votes = Counter(next(n for n, _ in m.protocols if n in self._common(group, {n for n, _ in m.protocols}))
                        for m in group.members.values())
        group.protocol = votes.most_common(1)[0][0]
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = State.COMPLETING
        log.info("Kafka group %s: generation %d, protocol %s, leader %s, members %s", group.group_id,
                 group.generation, group.protocol, group.leader, sorted(group.members))
        everyone = [{"member_id": m.member_id, "group_instance_id": None,
                     "metadata": dict(m.protocols)[group.protocol]} for m in group.members.values()]
        for m in group.members.values():
            joining, m.joining = m.joining, None
            if joining is not None and not joining.done():
                joining.set_result({"throttle_time_ms": 0, "error_code": 0, "generation_id": group.generation,
                                    "protocol_name": group.protocol, "leader": group.leader,
                                    "member_id": m.member_id, "members": everyone if m.member_id == group.leader else []})
            self._touch(group, m)

    async def sync(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        group = self.groups.get(req["group_id"])
        member = None if group is None else group.members.get(req["member_id"])
        if group is None or member is None:
            return _sync_answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if req["generation_id"] != group.generation:
            return _sync_answer(ErrorCode.ILLEGAL_GENERATION)
        if group.state is State.PREPARING:
            return _sync_answer(ErrorCode.REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        if group.state is State.STABLE:
            return _sync_answer(ErrorCode.NONE, member.assignment)
        syncing = member.syncing = asyncio.get_running_loop().create_future()
        if member.member_id == group.leader:
            given = {a["member_id"]: a["assignment"] for a in req["assignments"]}
            group.state = State.STABLE
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
                if m.syncing is not None and not m.syncing.done():
                    m.syncing.set_result(_sync_answer(ErrorCode.NONE, m.assignment))
                m.syncing = None
        return await syncing

    async def heartbeat(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        group = self.groups.get(req["group_id"])
        member = None if group is None else group.members.get(req["member_id"])
        if group is None or member is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        self._touch(group, member)
        if group.state is State.PREPARING:
            return _error(ErrorCode.REBALANCE_IN_PROGRESS)
        if req["generation_id"] != group.generation:
            return _error(ErrorCode.ILLEGAL_GENERATION)
        return _error(ErrorCode.NONE)

    async def leave(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        group = self.groups.get(req["group_id"])
        member = None if group is None else group.members.get(req["member_id"])
        if group is None or member is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        self._remove(group, member)
        self._after_departure(group)
        return _error(ErrorCode.NONE)

    def _after_departure(self, group: Group) -> None:
        if not group.members:
            if group.timer is not None:
                group.timer.cancel()
                group.timer = None
            group.generation += 1
            group.state, group.leader, group.protocol = State.EMPTY, "", ""
        elif group.state is State.PREPARING:
            if not group.initial and all(m.joining is not None for m in group.members.values()):
                self._complete_join(group)
        else:
            self._prepare(group)

    def _remove(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        if member.session is not None:
            member.session.cancel()
        for fut in (member.joining, member.syncing):
            if fut is not None and not fut.done():
                fut.set_result(_sync_answer(ErrorCode.UNKNOWN_MEMBER_ID) | {
                    "generation_id": -1, "protocol_name": "", "leader": "", "member_id": member.member_id,
                    "members": []})

    def _touch(self, group: Group, member: Member) -> None:
        """The member is alive: its session restarts."""
        if member.session is not None:
            member.session.cancel()
        member.session = asyncio.get_running_loop().call_later(member.session_timeout_ms / 1000.0, self._expired,
                                                               group, member)

    def _expired(self, group: Group, member: Member) -> None:
        member.session = None
        if group.members.get(member.member_id) is not member:
            return
        if member.joining is not None:  # held in a join: the join is its heartbeat
            self._touch(group, member)
            return
        self._remove(group, member)
        self._after_departure(group)

    # -- offsets ----------------------------------------------------------------------

    async def offset_commit(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        error = self._commit_refusal(req)
        if error is ErrorCode.NONE and req["group_id"] not in self.groups:
            self.register(req["group_id"])  # a consumer outside any group (assign and commit)
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                code = error
                if error is ErrorCode.NONE:
                    code = await self.partitions.commit(req["group_id"], t["name"], p["partition_index"],
                                                        p["committed_offset"])
                parts.append({"partition_index": p["partition_index"], "error_code": int(code)})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _commit_refusal(self, req: Body) -> ErrorCode:
        if group_error(req["group_id"]) is not None or "@" in req["group_id"]:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(req["group_id"])
        if req["generation_id"] < 0 and not req["member_id"]:  # a consumer without a group (assign/commit)
            return ErrorCode.NONE if group is None or not group.members else ErrorCode.ILLEGAL_GENERATION
        if group is None or req["member_id"] not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is State.COMPLETING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if req["generation_id"] != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    async def offset_fetch(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        group_id = req["group_id"]
        wanted = req["topics"]
        if wanted is None:
            wanted = [{"name": t, "partition_indexes": ps}
                      for t, ps in (await self.partitions.committed_here(group_id)).items()]
        topics = []
        for t in wanted:
            parts = []
            for q in t["partition_indexes"]:
                offset, code = await self.partitions.committed(group_id, t["name"], q)
                parts.append({"partition_index": q, "committed_offset": offset, "metadata": "", "error_code": int(code)})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics, "error_code": 0}

    # -- admin ------------------------------------------------------------------------

    async def list_groups(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        return {"throttle_time_ms": 0, "error_code": 0,
                "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type} for g in self.groups.values()]}

    async def describe_groups(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for name in req["groups"]:
            g = self.groups.get(name)
            if g is None:
                out.append({"error_code": 0, "group_id": name, "group_state": "Dead", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                        "member_metadata": dict(m.protocols).get(g.protocol, b""), "member_assignment": m.assignment}
                       for m in g.members.values()]
            out.append({"error_code": 0, "group_id": name, "group_state": g.state.value,
                        "protocol_type": g.protocol_type, "protocol_data": g.protocol, "members": members})
        return {"throttle_time_ms": 0, "groups": out}


def _sync_answer(code: ErrorCode, assignment: bytes = b"") -> Body:
    return {"throttle_time_ms": 0, "error_code": int(code), "assignment": assignment}


def _error(code: ErrorCode) -> Body:
    return {"throttle_time_ms": 0, "error_code": int(code)}
