"""The SYNC_MASTER loss the chaos runs found (docs/reliability.md), step by step in the chaos
cluster: a master cut off from the other brokers and etcd (still reachable by clients) stores
a send it cannot replicate (FLUSH_SLAVE_TIMEOUT); it used to serve it to a reader at queue
offset n, and the new master, which never had it, stores the next SEND_OK message at that
same offset n, so a consumer that read n from the old master asked the new one for n + 1 and
never saw the SEND_OK message. The invariant asserted: what a broker of the group serves at
an offset stays what the group holds there. A SYNC_MASTER in controller mode now serves reads
only up to what its whole SyncStateSet acknowledged (RocketMQ 5's confirmOffset), so the
isolated master serves nothing past the last replicated record."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.codes import ResponseCode
from skiff.testing.chaos.cluster import ChaosCluster, broker_node
from skiff.testing.chaos.workers import create_topic
from skiff.testing.netns import netns_unavailable
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd is not installed (make etcd)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and tmpfs mounts need root")]

TOPIC = "ChaosTopic"


async def bodies(addr: str, offset: int) -> list[bytes]:
    wire = BrokerWire(addr, timeout_ms=2000)
    try:
        return [m.body for m in await wire.pull_messages("reader", TOPIC, 0, offset)]
    finally:
        await wire.close()


async def send(addr: str, body: bytes) -> int:
    wire = BrokerWire(addr, timeout_ms=5000)
    try:
        return (await wire.send(Message(TOPIC, body), queue_id=0)).code
    finally:
        await wire.close()


def test_what_the_isolated_master_served_at_an_offset_is_what_the_group_keeps_there(tmp_path: Path) -> None:
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with ChaosCluster(tmp_path, lease_ms=2000, broker_args=("--slaveTimeout=1000",)) as cluster:
        async def main() -> None:
            await eventually(lambda: asyncio.to_thread(cluster.in_sync), 60, "every broker in sync")
            await create_topic(cluster.namesrv_addr, 60)
            old = await asyncio.to_thread(cluster.master)
            assert old is not None
            old_addr = cluster.brokers.addr(old)
            assert await send(old_addr, b"acked-before") == ResponseCode.SUCCESS
            offset = len(await bodies(old_addr, 0))
            cluster.lab.partition([broker_node(old)], [n for n in cluster.nodes if n != broker_node(old)])
            assert await send(old_addr, b"never-replicated") == ResponseCode.FLUSH_SLAVE_TIMEOUT
            served = await bodies(old_addr, offset)
            new = await eventually(lambda: asyncio.to_thread(lambda: (m := cluster.master()) != old and m),
                                   30, "another broker elected in a newer epoch")
            assert await send(cluster.brokers.addr(new), b"acked-after") == ResponseCode.SUCCESS
            kept = await bodies(cluster.brokers.addr(new), offset)
            cluster.lab.heal()
            print(f"offset {offset}: the isolated master served {served}, the new master holds {kept}")
            assert kept == [b"acked-after"]
            assert served in ([], kept), f"offset {offset} served as {served} by the old master, kept as {kept}"
        asyncio.run(main())
