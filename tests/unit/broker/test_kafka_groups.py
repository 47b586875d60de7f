"""The Kafka group coordinator's state machine, in process with short timeouts: the two-step
join, the leader's assignment handed to each member, a rebalance on a join, a leave and an
expired session, and the offset commit checks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from skiff.broker.kafka.groups import GroupCoordinator, State
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations import OffsetsOperation
from skiff.protocol.kafka.errors import ErrorCode

PEER = ("127.0.0.1", 1)
V5 = SimpleNamespace(client_id="c", api_version=5)


def join_req(member: str, session_ms: int = 300, protocols: tuple[str, ...] = ("range",)) -> dict[str, Any]:
    return {"group_id": "g", "session_timeout_ms": session_ms, "rebalance_timeout_ms": 2_000, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": p, "metadata": f"{member or 'new'}:{p}".encode()} for p in protocols]}


async def join(c: GroupCoordinator, member: str = "") -> dict[str, Any]:
    """The whole join: the first answer hands out an id (MEMBER_ID_REQUIRED), the second joins."""
    first = await c.join(join_req(member), V5, PEER)
    if first["error_code"] != ErrorCode.MEMBER_ID_REQUIRED:
        return first
    return await c.join(join_req(first["member_id"]), V5, PEER)


def sync_req(gen: int, member: str, assignments: dict[str, bytes] | None = None) -> dict[str, Any]:
    return {"group_id": "g", "generation_id": gen, "member_id": member, "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}


def heartbeat_req(gen: int, member: str) -> dict[str, Any]:
    return {"group_id": "g", "generation_id": gen, "member_id": member, "group_instance_id": None}


def coordinator(tmp_path: Path) -> GroupCoordinator:
    offsets = OffsetsOperation(None, ConsumerOffsetManager(str(tmp_path)))  # type: ignore[arg-type]
    return GroupCoordinator(offsets, session_ms=(100, 10_000), initial_delay_ms=50)


def test_two_members_join_sync_and_rebalance_on_leave_and_expiry(tmp_path: Path) -> None:
    async def run() -> None:
        c = coordinator(tmp_path)
        a, b = await asyncio.gather(join(c), join(c))
        assert a["error_code"] == b["error_code"] == 0 and a["generation_id"] == b["generation_id"] == 1
        leader, follower = (a, b) if a["members"] else (b, a)
        assert leader["leader"] == follower["leader"] == leader["member_id"] and follower["members"] == []
        assert sorted(m["member_id"] for m in leader["members"]) == sorted([a["member_id"], b["member_id"]])
        lid, fid = leader["member_id"], follower["member_id"]

        waiting = asyncio.ensure_future(c.sync(sync_req(1, fid), V5, PEER))  # the follower waits for the leader
        await asyncio.sleep(0)
        assert not waiting.done()
        given = await c.sync(sync_req(1, lid, {lid: b"to-leader", fid: b"to-follower"}), V5, PEER)
        assert given["assignment"] == b"to-leader" and (await waiting)["assignment"] == b"to-follower"
        assert c.groups["g"].state is State.STABLE
        assert (await c.heartbeat(heartbeat_req(1, lid), V5, PEER))["error_code"] == 0
        assert (await c.heartbeat(heartbeat_req(0, lid), V5, PEER))["error_code"] == ErrorCode.ILLEGAL_GENERATION

        # the follower leaves: the leader learns it from its heartbeat and rejoins alone
        assert (await c.leave({"group_id": "g", "member_id": fid}, V5, PEER))["error_code"] == 0
        assert (await c.heartbeat(heartbeat_req(1, lid), V5, PEER))["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
        again = await join(c, lid)
        assert (again["generation_id"], [m["member_id"] for m in again["members"]]) == (2, [lid])

        # a new member joins, then falls silent: its session expires and the group rebalances without it
        newcomer_join = asyncio.ensure_future(join(c))
        while (await c.heartbeat(heartbeat_req(2, lid), V5, PEER))["error_code"] != ErrorCode.REBALANCE_IN_PROGRESS:
            await asyncio.sleep(0.01)
        both = await join(c, lid)
        newcomer = await newcomer_join
        assert both["generation_id"] == newcomer["generation_id"] == 3 and len(both["members"]) == 2
        await c.sync(sync_req(3, lid, {lid: b"x", newcomer["member_id"]: b"y"}), V5, PEER)
        for _ in range(100):  # the leader keeps heartbeating; the newcomer never does
            await asyncio.sleep(0.02)
            code = (await c.heartbeat(heartbeat_req(3, lid), V5, PEER))["error_code"]
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        assert code == ErrorCode.REBALANCE_IN_PROGRESS, "the silent member's session never expired"
        alone = await join(c, lid)
        assert (alone["generation_id"], [m["member_id"] for m in alone["members"]]) == (4, [lid])
    asyncio.run(run())


def test_commits_are_checked_against_the_generation(tmp_path: Path) -> None:
    async def run() -> None:
        c = coordinator(tmp_path)
        member = await join(c)
        mid, gen = member["member_id"], member["generation_id"]

        async def commit_code(generation: int, member_id: str) -> int:
            req = {"group_id": "g", "generation_id": generation, "member_id": member_id, "retention_time_ms": -1,
                   "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                            "committed_metadata": None}]}]}
            answer = await c.offset_commit(req, V5, PEER)
            return int(answer["topics"][0]["partitions"][0]["error_code"])

        assert await commit_code(gen, mid) == ErrorCode.REBALANCE_IN_PROGRESS  # joined, not synced yet
        await c.sync(sync_req(gen, mid, {mid: b""}), V5, PEER)
        assert await commit_code(gen + 1, mid) == ErrorCode.ILLEGAL_GENERATION
        assert await commit_code(gen, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
        assert await commit_code(-1, "") == ErrorCode.ILLEGAL_GENERATION  # the group has members
        assert await commit_code(gen, mid) == 0
        fetched = await c.offset_fetch({"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
                                       V5, PEER)
        assert [(p["partition_index"], p["committed_offset"]) for p in fetched["topics"][0]["partitions"]] == \
            [(0, 7), (1, -1)]
    asyncio.run(run())
