"""Controller mode: the master and a slave killed together (the chaos run's kill-majority)
with a long lease. The survivor is elected without waiting for either dead broker's lease:
the master's is revoked when its port refuses connections, and a dead slave whose ``live``
key still says it has as much data and a lower id is passed over for the same reason
(docs/replication.md, "Election")."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from skiff.broker.ha.controller import EtcdGroup
from skiff.common.message import Message
from skiff.protocol.codes import ResponseCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import equals, info, master_of, sync_set
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow,
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

LEASE_MS = 20_000
"""A dead broker's keys would live 13-20 s (renewed every third of the lease): long enough
that waiting for them cannot pass for the shortcut, however loaded the machine."""


def test_the_survivor_of_a_killed_master_and_slave_is_elected_before_their_leases_expire(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint, brokers=3, lease_ms=LEASE_MS,
                                                          first_is_master=True) as group:
        async def main() -> None:
            assert await eventually(lambda: master_of(group), 30, "broker 1 elected") == 1
            await eventually(lambda: equals(sync_set(group, 1), "1,2,3"), 40, "both slaves in the SyncStateSet")
            wire = BrokerWire(group.addr(1))
            sent = [f"m{i}".encode() for i in range(20)]
            try:
                for body in sent:
                    resp = await wire.send(Message("KM", body), queue_id=0)
                    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            finally:
                await wire.close()
            await eventually(lambda: published_ends(group, etcd.endpoint, {2, 3}), 20, "both slaves' live keys at the end")
            # broker 2's live key says it has every message, as broker 3 has, and 2 is the lower id:
            # it outranks broker 3 until its lease expires
            group.kill_broker(1)
            group.kill_broker(2)
            killed = time.monotonic()
            assert await eventually(lambda: master_of(group), 30, "broker 3 elected") == 3
            took = time.monotonic() - killed
            assert took < 10.0, f"broker 3 elected {took:.1f} s after the kills: it waited for a lease"
            survivor = BrokerWire(group.addr(3))
            try:
                assert [m.body for m in await survivor.pull_messages("G", "KM", 0)] == sent
                after = await survivor.send(Message("KM", b"after"), queue_id=0)
                assert after.code == ResponseCode.SUCCESS, (after.code, after.remark)
            finally:
                await survivor.close()
            assert "refuses connections (its process is gone): not waiting for its lease" in group.proc(3).output
        asyncio.run(main())


async def published_ends(group: ControllerGroup, endpoint: str, slaves: set[int]) -> bool:
    """Each slave's ``live`` key in etcd names the master's end as its max offset."""
    table = await info(group.addr(1))
    if table is None:
        return False
    keys = EtcdGroup((endpoint,), "DefaultCluster", "broker-a", 5)
    await keys.connect()
    try:
        lives = (await keys.read()).lives
    finally:
        await keys.close()
    return all(i in lives and lives[i].max_offset == int(table["commitLogMaxOffset"]) for i in slaves)
