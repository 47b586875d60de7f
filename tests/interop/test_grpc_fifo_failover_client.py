"""FIFO across a broker failover with the official RocketMQ 5.x Python client (PyPI
rocketmq-python-client 5.1.2, unchanged, in its own venv): a controller-mode pair (etcd,
SYNC_MASTER) on 127.0.0.1 and 127.0.0.2 with one grpcServerPort, so a route's endpoint names
either broker; the client's access point lists both ("127.0.0.1:P;127.0.0.2:P": its channel
falls over to the other when one is down). The master is the second address, so the client's
first routes come from the slave, which names its master (skiff.broker.grpc.routes). Its Producer
sends 20 message groups x 50 messages (the issue's numbers) to a FIFO topic while a SimpleConsumer
of a consumeMessageOrderly group receives and acknowledges; the master is killed -9 in the middle.
The producer retries each send until it is answered OK, which happens once its route refresh (10 s
after its start, then every 30 s: the client's own period) names the new master; the consumer
likewise.

What FIFO at-least-once allows, and what is asserted per message group: every message sent is
acknowledged; the deliveries count up in send order, and a step back (a redelivery) goes only
to a message already delivered, from where the sequence counts up again without a gap: the
batch out at the kill, or acknowledged after the slave's last offset copy, comes again from the
copied offset (docs/grpc.md, ReceiveMessage); never a message ahead of its turn.

The scenario runs in tests/interop/grpc/fifo_failover_client.py under SKIFF_RMQ5_PYTHON.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from skiff.client.admin import Admin
from skiff.protocol.codes import RequestCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import all_in_sync, master_of
from skiff.testing.ha import ControllerGroup
from skiff.testing.processes import free_port
from skiff.testing.waits import eventually
from tests.integration.test_grpc_fifo_failover import in_order, table
from tests.interop.test_grpc_client import rmq5_python, run_client

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(240),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

SCRIPT = Path(__file__).resolve().parent / "grpc" / "fifo_failover_client.py"
TOPIC, GROUP = "GFifoFailover", "G-fifo-failover-client"
GROUPS, PER_GROUP = 20, 50
HOSTS = {1: "127.0.0.2", 2: "127.0.0.1"}
"""The first master on 127.0.0.2: the client's channel takes the access point's addresses in order, so
its first route comes from the slave, which must name its master."""


def test_official_client_fifo_across_a_master_failover(tmp_path: Path) -> None:
    rmq5_python()
    port = free_port()
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(
            tmp_path, etcd.endpoint, first_is_master=True, hosts=HOSTS,
            broker_args=[f"--grpcServerPort={port}", "--slaveTimeout=1000", "--slaveSyncInterval=300"]) as group:
        assert asyncio.run(eventually(lambda: master_of(group), 20, "a master elected")) == 1
        asyncio.run(eventually(lambda: all_in_sync(group, 1), 30, "both brokers in sync"))
        with Admin(group.namesrv_addr, instance_name="fifo-failover-admin") as admin:
            admin.create_topic(TOPIC, broker_addr=group.addr(1), attributes={"message.type": "FIFO"})
            admin.create_consumer_group(GROUP, broker_addr=group.addr(1), consume_message_orderly=True)

        async def slave_knows() -> bool:
            topics = await table(group.addr(2), RequestCode.GET_ALL_TOPIC_CONFIG)
            groups = await table(group.addr(2), RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return TOPIC in topics.get("topicConfigTable", {}) and GROUP in groups.get("subscriptionGroupTable", {})
        asyncio.run(eventually(slave_knows, 20, "the slave has the topic and the orderly group"))

        half, killed = tmp_path / "half", tmp_path / "killed"
        out: dict[str, Any] = {}

        def client() -> None:
            out.update(run_client(";".join(f"{h}:{port}" for h in sorted(HOSTS.values())), tmp_path, "fifo_failover",
                                  script=SCRIPT, timeout_s=150, topic=TOPIC, group=GROUP, groups=GROUPS,
                                  per_group=PER_GROUP, half=str(half), killed=str(killed)))
        thread = threading.Thread(target=client)
        thread.start()
        try:
            async def halfway() -> bool:
                return half.exists() or not thread.is_alive()
            asyncio.run(eventually(halfway, 60, "half of the messages sent, a quarter acknowledged"))
            assert half.exists(), "the client ended before its half"
            group.kill_broker(1)
            killed.touch()
            assert asyncio.run(eventually(lambda: master_of(group), 20, "the slave elected")) == 2
        finally:
            killed.touch()
            thread.join(180)
        assert out, "the client failed (see its output above)"

    r = out["fifo_failover"]
    want = {f"g{g}": [f"g{g}:{k}" for k in range(PER_GROUP)] for g in range(GROUPS)}
    sent: dict[str, list[str]] = {}
    for body in r["sent"]:
        sent.setdefault(body.split(":")[0], []).append(body)
    assert sent == want, "every message sent, in order, each answered OK"
    assert r["acked"] == sorted(b for bodies in want.values() for b in bodies), "every message acknowledged"
    assert r["errors"]["send"] > 0, "the producer met the dead master"
    for g in range(GROUPS):
        numbers = [int(k) for mg, k in (body.split(":") for body, _ in r["got"]) if mg == f"g{g}"]
        assert in_order(numbers), (g, numbers)
    again = len(r["got"]) - len({body for body, _ in r["got"]})
    print(f"{len(r['got'])} deliveries, {again} again; errors {r['errors']}; client {out['fifo_failover_s']} s")
