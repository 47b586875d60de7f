"""A broker group's state in etcd, and the fenced transactions that change it.

Keys under ``/skiff/<cluster>/groups/<brokerName>/``:

| key | lease | value |
|---|---|---|
| ``state`` | none | `GroupState` JSON: master id and addresses, epoch, SyncStateSet, term list |
| ``master`` | the master's | the master's id and epoch: exists while its lease lives |
| ``live/<id>`` | each broker's | `Live` JSON: addresses, max offset (who is alive, how far) |

Every change of ``state`` is a transaction that compares its mod revision with
the one the writer read (and, for a master's changes, that ``master`` still
holds the writer's lease), so of two racing writers one fails and re-reads.
An election also requires ``master`` to be absent and creates it under the
winner's lease: there is one master key per term, and it goes when the
master's lease does (a crash, a partition from etcd, a clean stop revoking it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from skiff.common.record import parse_host_port

log = logging.getLogger(__name__)

try:  # optional: controller mode only (pip install skiffmq[ha])
    import aetcd
except ImportError:  # pragma: no cover - reported by EtcdGroup.connect
    aetcd = None


class ControllerError(Exception):
    """etcd cannot be reached or answered unexpectedly."""


@dataclass(frozen=True, slots=True)
class GroupState:
    master_id: int
    master_addr: str
    master_ha_addr: str
    epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    epochs: tuple[tuple[int, int], ...]
    """(epoch, CommitLog offset it starts at), oldest first."""

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> GroupState:
        raw: dict[str, Any] = orjson.loads(data)
        return cls(int(raw["master_id"]), raw["master_addr"], raw["master_ha_addr"], int(raw["epoch"]),
                   tuple(int(i) for i in raw["sync_state_set"]), int(raw["sync_state_set_epoch"]),
                   tuple((int(e), int(s)) for e, s in raw["epochs"]))


@dataclass(frozen=True, slots=True)
class Live:
    broker_id: int
    addr: str
    ha_addr: str
    ha_client_addr: str
    """The local address of this broker's HA connection to its master: how the master
    tells its slaves' connections apart (the classic stream carries no id)."""
    max_offset: int
    epoch: int

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> Live:
        raw = orjson.loads(data)
        return cls(int(raw["broker_id"]), raw["addr"], raw["ha_addr"], raw["ha_client_addr"],
                   int(raw["max_offset"]), int(raw["epoch"]))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One read of the group's keys."""

    state: GroupState | None
    state_revision: int
    """mod_revision of ``state`` (0: absent), what a change compares against."""
    master_lease: int
    """The lease ``master`` is bound to (0: no master key: no live master)."""
    lives: dict[int, Live]


class EtcdGroup:
    def __init__(self, endpoints: tuple[str, ...], cluster: str, group: str, ttl_s: int) -> None:
        self.endpoints = endpoints
        self.prefix = f"/skiff/{cluster}/groups/{group}/".encode()
        self.ttl_s = ttl_s
        self.client: Any = None
        self.lease: Any = None
        self._next = 0
        self._moving = asyncio.Lock()

    @property
    def state_key(self) -> bytes:
        return self.prefix + b"state"

    @property
    def master_key(self) -> bytes:
        return self.prefix + b"master"

    def live_key(self, broker_id: int) -> bytes:
        return self.prefix + f"live/{broker_id}".encode()

    async def connect(self) -> None:
        """A client to the next endpoint and a fresh lease; ControllerError if none answers."""
        await self.close()
        self.client, self.lease = await self._open(lambda client: client.lease(self.ttl_s))

    async def change_member(self, failed: Any) -> bool:
        """Go on with the same lease through another member once a call on ``failed`` (the
        client then in use) failed: an etcd that keeps its majority keeps the lease, so losing
        the member a broker talks to costs a master neither its sends nor its term. True once
        the lease is renewed through the new member, False when etcd says it has expired,
        ControllerError when no member renews it."""
        async with self._moving:
            if self.client is not failed and self.client is not None:
                return await self.keepalive()  # another task has moved: renew through its member
            lease = self.lease
            if lease is None:
                raise ControllerError("no lease to keep")

            async def renew(client: Any) -> bool:
                reply = await client.refresh_lease(lease.id)
                return bool(reply.TTL > 0)
            client, alive = await self._open(renew)
            if not alive:
                await _quiet_close(client)
                return False
            old, self.client = self.client, client
            if old is not None:
                await _quiet_close(old)
            return True

    async def _open(self, start: Callable[[Any], Awaitable[Any]]) -> tuple[Any, Any]:
        """A connected client to the next endpoint on which ``start`` succeeds, and its result."""
        if aetcd is None:
            raise ControllerError("enableControllerMode needs the Python package aetcd (pip install 'skiffmq[ha]')")
        errors = []
        for _ in range(len(self.endpoints)):
            endpoint = self.endpoints[self._next % len(self.endpoints)]
            self._next += 1
            host, port = parse_host_port(endpoint)
            client = aetcd.Client(host, port, timeout=max(1, self.ttl_s // 2), connect_wait_timeout=2)

            async def opening(client: Any = client) -> Any:
                await client.connect()
                return await start(client)
            try:
                return client, await self._call(opening())
            except ControllerError as exc:
                errors.append(f"{endpoint}: {exc}")
                await _quiet_close(client)
        raise ControllerError("no etcd endpoint answers: " + "; ".join(errors))

    async def close(self) -> None:
        client, self.client, self.lease = self.client, None, None
        if client is not None:
            await _quiet_close(client)

    async def keepalive(self) -> bool:
        """Renew the lease; False when etcd says it has expired (its keys are gone)."""
        client, lease = self.client, self.lease
        if client is None or lease is None:
            raise ControllerError("no etcd session")
        reply = await self._call(client.refresh_lease(lease.id))
        return reply is not None and reply.TTL > 0

    async def resign(self) -> None:
        """Revoke the lease (a clean stop): the master key goes at once, so a successor is
        elected without waiting for the lease to run out."""
        if self.lease is not None:
            await self._call(self.client.revoke_lease(self.lease.id))

    async def revoke(self, lease_id: int) -> None:
        """End another broker's lease (its process is gone): its keys go at once."""
        await self._call(self.client.revoke_lease(lease_id))

    async def read(self) -> Snapshot:
        found = await self._call(self.client.get_prefix(self.prefix))
        state, state_rev, master_lease, lives = None, 0, 0, {}
        for kv in found.kvs:
            name = kv.key[len(self.prefix):]
            if name == b"state":
                state, state_rev = GroupState.from_json(kv.value), kv.mod_revision
            elif name == b"master":
                master_lease = kv.lease
            elif name.startswith(b"live/"):
                live = Live.from_json(kv.value)
                lives[live.broker_id] = live
        return Snapshot(state, state_rev, master_lease, lives)

    async def publish(self, live: Live) -> None:
        await self._call(self.client.put(self.live_key(live.broker_id), live.to_json(), lease=self.lease))

    async def elect(self, new: GroupState, seen: Snapshot) -> bool:
        """Become master: ``state`` unchanged since ``seen`` and no master key, then write
        ``new`` and create the master key under this broker's lease."""
        tx = self.client.transactions
        compare = [tx.mod(self.state_key) == seen.state_revision, tx.version(self.master_key) == 0]
        success = [tx.put(self.state_key, new.to_json()),
                   tx.put(self.master_key, f"{new.master_id}@{new.epoch}".encode(), lease=self.lease)]
        ok, _ = await self._call(self.client.transaction(compare=compare, success=success, failure=[]))
        return bool(ok)

    async def alter(self, new: GroupState, seen: Snapshot) -> bool:
        """The master's change of the SyncStateSet: fenced on the state's revision and on the
        master key still being bound to this broker's lease."""
        tx = self.client.transactions
        compare = [tx.mod(self.state_key) == seen.state_revision,
                   tx.value(self.master_key) == f"{new.master_id}@{new.epoch}".encode()]
        ok, _ = await self._call(self.client.transaction(
            compare=compare, success=[tx.put(self.state_key, new.to_json())], failure=[]))
        return bool(ok)

    @property
    def call_timeout_s(self) -> float:
        """Every etcd call's deadline: aetcd's own per-RPC timeout (TTL/2, at least 1 s) and
        a little more for a connect it makes first."""
        return max(1, self.ttl_s // 2) + 1.0

    async def _call(self, coro: Any) -> Any:
        """``coro``'s result within `call_timeout_s`; ControllerError for whatever goes wrong.

        A call on a client that another task closes (`change_member` does, once it has moved to
        another member) ends with grpc's *local* cancellation: asyncio.CancelledError, which no
        ``except Exception`` catches. It is an etcd failure like any other, not a cancellation of
        this task, so it is one here too (a real cancellation of this task still propagates)."""
        try:
            return await asyncio.wait_for(coro, self.call_timeout_s)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise ControllerError("etcd: the call was cancelled under it (its client was closed)") from exc
        except asyncio.TimeoutError as exc:
            raise ControllerError(f"etcd: no answer within {self.call_timeout_s:g} s") from exc
        except Exception as exc:  # noqa: BLE001 - aetcd's and grpc's errors alike
            raise ControllerError(f"etcd: {type(exc).__name__}: {exc}") from exc


async def _quiet_close(client: Any) -> None:
    try:
        await asyncio.wait_for(client.close(), 3.0)
    except Exception:  # noqa: BLE001 - closing a broken channel (TimeoutError included)
        pass
