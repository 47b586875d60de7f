"""FIFO over gRPC across a broker failover: a consumeMessageOrderly group's 5.x consumer
(in process, skiff.testing.grpc_wire) keeps each message group's order when the master of a
controller-mode pair (etcd) is killed -9 with a batch popped and not acknowledged, twice: once
after its slave copied the group's offsets, once at once (the last acknowledgements unknown to
the slave).

The new master knows the group's progress from the consume offsets its slave copied
(docs/replication.md); the orderly POP state (which batch is out, its receipt handles) was
the old master's memory alone, so the new master serves again from the copied offset: the
un-acknowledged batch (and whatever was acknowledged after the last offset copy) comes again, a
repeat of a prefix of each message group, never a reorder, and nothing is lost; messages sent to
each new master follow in order.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import all_in_sync, master_of
from skiff.testing.grpc_wire import GrpcWire, messages
from skiff.testing.ha import ControllerGroup
from skiff.testing.processes import SkiffProcess, free_port
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC, GROUP = "FifoFailover", "G-fifo-failover"
GROUPS, PER_ROUND = 6, 10  # message groups; messages of each sent to each master in turn
DEADLINE_S = 60


class GrpcControllerGroup(ControllerGroup):
    """A controller-mode group whose brokers each serve gRPC on a port of their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.grpc_ports: dict[int, int] = {}

    def start_broker(self, broker_id: int, *extra: str) -> SkiffProcess:
        port = self.grpc_ports.setdefault(broker_id, free_port())
        return super().start_broker(broker_id, f"--grpcServerPort={port}", *extra)

    def endpoint(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.grpc_ports[broker_id]}"


async def send_fifo(grpc: GrpcWire, numbers: range) -> None:
    """Message i of each group, for i in ``numbers``, one send at a time (the group's order)."""
    for i in numbers:
        for g in range(GROUPS):
            msg = pb.Message(topic=pb.Resource(name=TOPIC), body=f"g{g}:{i}".encode(),
                             system_properties=pb.SystemProperties(
                                 message_id=uuid.uuid4().hex.upper(), message_type=pb.FIFO,
                                 message_group=f"g{g}", body_encoding=pb.IDENTITY))
            resp = await grpc.unary("SendMessage", rpc.SendMessageRequest(messages=[msg]), rpc.SendMessageResponse)
            assert resp.status.code == pb.OK, resp.status


class Consumer:
    """Receives and acknowledges, logging every delivery in order: (group, number)."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int]] = []
        self.acked: list[tuple[int, int]] = []

    async def receive(self, grpc: GrpcWire) -> list[Any]:
        got = messages(await grpc.receive(GROUP, TOPIC, batch=8, wait_ms=500, invisible_ms=60_000))
        for m in got:
            g, i = m.body.decode().split(":")
            self.log.append((int(g[1:]), int(i)))
        return got

    async def until(self, grpc: GrpcWire, count: int) -> None:
        async def enough() -> bool:
            for m in await self.receive(grpc):
                resp = await grpc.ack(GROUP, TOPIC, m.system_properties.receipt_handle)
                assert resp.status.code == pb.OK, resp.status
                g, i = m.body.decode().split(":")
                self.acked.append((int(g[1:]), int(i)))
            return len(set(self.acked)) >= count
        await eventually(enough, DEADLINE_S, f"{count} messages acknowledged (now {len(set(self.acked))})")


def in_order(numbers: list[int]) -> bool:
    """Each delivery is the next one or a step back (a redelivery restarting a prefix), never a skip."""
    return not numbers or (numbers[0] == 0 and all(b == a + 1 or b <= a for a, b in zip(numbers, numbers[1:])))


async def table(addr: str, code: int) -> dict[str, Any]:
    wire = BrokerWire(addr)
    try:
        resp = await wire.call(code)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return dict(json.loads(resp.body or b"{}"))
    finally:
        await wire.close()


def test_fifo_order_per_message_group_kept_across_a_master_failover(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, GrpcControllerGroup(
            tmp_path, etcd.endpoint, first_is_master=True,
            broker_args=["--slaveTimeout=1000", "--slaveSyncInterval=300"]) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: all_in_sync(group, first), 30, "both brokers in sync")
            wire = BrokerWire(group.addr(first))
            try:
                header = CreateTopicRequestHeader(TOPIC, "TBW102", 4, 4, 6, "SINGLE_TAG",
                                                  attributes="+message.type=FIFO")
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                orderly = SubscriptionGroupConfig(GROUP, consume_message_orderly=True)
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orderly.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            finally:
                await wire.close()

            async def slave_knows() -> bool:
                topics = await table(group.addr(other), RequestCode.GET_ALL_TOPIC_CONFIG)
                groups = await table(group.addr(other), RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                return TOPIC in topics.get("topicConfigTable", {}) and GROUP in groups.get("subscriptionGroupTable", {})
            await eventually(slave_knows, 20, "the slave has the topic and the orderly group")

            consumer, held = Consumer(), []
            key = f"{TOPIC}@{GROUP}"

            async def offsets_copied(master: int, slave: int) -> bool:
                mine = (await table(group.addr(master), RequestCode.GET_ALL_CONSUMER_OFFSET))["offsetTable"].get(key)
                copy = (await table(group.addr(slave), RequestCode.GET_ALL_CONSUMER_OFFSET))["offsetTable"].get(key)
                return bool(mine) and mine == copy

            # the first master: a backlog half consumed, a batch held; killed once its slave has the
            # offsets (the batch comes again, nothing acknowledged does)
            grpc = GrpcWire(group.endpoint(first))
            try:
                await send_fifo(grpc, range(PER_ROUND))
                await consumer.until(grpc, GROUPS * PER_ROUND // 2)
                held.append(len(await consumer.receive(grpc)))  # popped, never acknowledged
            finally:
                await grpc.close()
            await eventually(lambda: offsets_copied(first, other), 20, "the group's offsets copied to the slave")
            group.kill_broker(first)
            assert await eventually(lambda: master_of(group), 20, "the slave elected") == other

            # the second: the same, killed at once, before the last acknowledgements reach the slave
            # (those messages come again too, from where the copied offsets stand)
            group.start_broker(first)
            await eventually(lambda: all_in_sync(group, other), 30, "the old master back in sync")
            grpc = GrpcWire(group.endpoint(other))
            try:
                await send_fifo(grpc, range(PER_ROUND, 2 * PER_ROUND))
                await consumer.until(grpc, GROUPS * PER_ROUND * 3 // 2)
                held.append(len(await consumer.receive(grpc)))
            finally:
                await grpc.close()
            group.kill_broker(other)
            assert await eventually(lambda: master_of(group), 20, "the first broker elected again") == first

            grpc = GrpcWire(group.endpoint(first))
            try:
                await send_fifo(grpc, range(2 * PER_ROUND, 3 * PER_ROUND))
                await consumer.until(grpc, GROUPS * PER_ROUND * 3)
            finally:
                await grpc.close()

            want = [(g, i) for g in range(GROUPS) for i in range(3 * PER_ROUND)]
            assert sorted(set(consumer.acked)) == want, "every message acknowledged, none lost"
            for g in range(GROUPS):
                received = [i for gg, i in consumer.log if gg == g]
                assert in_order(received), (g, received)
                acked = [i for gg, i in consumer.acked if gg == g]
                assert list(dict.fromkeys(acked)) == list(range(3 * PER_ROUND)), (g, acked)
            redelivered = len(consumer.log) - len(set(consumer.log))
            assert all(held) and redelivered >= sum(held), "the batches out at the kills came again"
            print(f"{len(consumer.log)} deliveries, {redelivered} again, {held} held at the kills")
        asyncio.run(main())
