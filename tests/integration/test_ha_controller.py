"""Controller mode on a real etcd: election, failover after kill -9 with SYNC_MASTER
sends, a demoted master cutting its unreplicated tail (docs/replication.md)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]


async def info(addr: str) -> dict[str, str] | None:
    wire = BrokerWire(addr, timeout_ms=1000)
    try:
        resp = await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body).table) if resp.code == ResponseCode.SUCCESS else None
    except Exception:  # noqa: BLE001 - a dead broker
        return None
    finally:
        await wire.close()


async def master_of(group: ControllerGroup) -> int | None:
    """The running broker that says it is master (and has a live lease)."""
    for i in group.running():
        table = await info(group.addr(i))
        if table is not None and table["brokerRole"] != "SLAVE":
            return i
    return None


async def sync_set(group: ControllerGroup, broker_id: int) -> str:
    table = await info(group.addr(broker_id))
    return "" if table is None else table.get("controllerSyncStateSet", "")


def test_election_failover_and_rejoin(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: _is(sync_set(group, first), "1,2"), 20, "both brokers in the SyncStateSet")
            wire = BrokerWire(group.addr(first))
            acked = []
            for i in range(20):
                resp = await wire.send(Message("C", f"m{i}".encode()), queue_id=0)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                acked.append(f"m{i}".encode())
            await wire.close()
            refused = await BrokerWire(group.addr(other)).send(Message("C", b"to the slave"))
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            killed_at = time.monotonic()
            group.kill_broker(first)
            assert await eventually(lambda: master_of(group), 15, "a new master") == other
            failover_s = time.monotonic() - killed_at
            assert failover_s <= 5.0, f"failover took {failover_s:.1f} s"
            new = BrokerWire(group.addr(other))
            resp = await new.send(Message("C", b"after failover"), queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            acked.append(b"after failover")
            group.start_broker(first)
            await eventually(lambda: _is(sync_set(group, other), "1,2"), 20, "the old master back in sync")
            stored = await new.pull_messages("G", "C", 0)
            assert [m.body for m in stored] == acked
            old = BrokerWire(group.addr(first))
            assert [m.body for m in await old.pull_messages("G", "C", 0)] == acked
            await old.close()
            await new.close()
        asyncio.run(main())


async def _is(value: object, expected: str) -> bool:
    return await value == expected  # type: ignore[misc]
