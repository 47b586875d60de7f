"""The real RocketMQ C++ client (PyPI `rocketmq` 0.4.4) with a Skiff master and slave:
with the master killed it consumes from the slave, commits its offsets there, and the
returning master takes those offsets over (docs/replication.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.consumer import QueryConsumerOffsetRequestHeader
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire, with_wire
from tests.interop._cpp import PushConsumer, cpp_python

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TOPIC = "CppHA"
GROUP = "CG-ha"


def offsets_sum(addr: str) -> int:
    total = 0

    async def query(wire: BrokerWire) -> None:
        nonlocal total
        for q in range(4):
            resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                                   QueryConsumerOffsetRequestHeader(GROUP, TOPIC, q).to_ext())
            total += int(resp.ext("offset") or 0) if resp.code == ResponseCode.SUCCESS else 0
    with_wire(addr, query)
    return total


def test_cpp_consumer_reads_the_slave_while_the_master_is_dead(tmp_path: Path) -> None:
    cpp_python()
    with HAGroup(tmp_path / "group", broker_args=["--slaveSyncInterval=500"]) as group:
        sent: list[str] = []

        async def send(wire: BrokerWire) -> None:
            for i in range(20):
                body = f"ha-{i}"
                resp = await wire.send(Message(TOPIC, body.encode()), queue_id=i % 4)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                sent.append(body)
            slave = BrokerWire(group.slave_addr(1))
            try:
                for q in range(4):
                    async def copied(q: int = q) -> bool:
                        resp = await slave.pull("G-probe", TOPIC, q, 0)
                        return resp.code == ResponseCode.SUCCESS and resp.ext("maxOffset") == "5"
                    await eventually(copied, 20, f"the slave holding queue {q}")
            finally:
                await slave.close()
        with_wire(group.master_addr, send)
        group.kill_broker(0)
        consumer = PushConsumer(tmp_path / "home", group.namesrv_addr, GROUP, TOPIC)
        try:
            got = consumer.wait_for(20, 60, "messages from the slave")
            assert sorted(m["body"] for m in got) == sorted(sent)
            wait_for(lambda: offsets_sum(group.slave_addr(1)) == 20, 30, "offsets committed to the slave")
            group.start_master()
            wait_for(lambda: offsets_sum(group.master_addr) == 20, 30, "the master taking the slave's offsets")
            assert len(consumer.snapshot()) == 20  # nothing consumed twice meanwhile
        finally:
            consumer.stop()
