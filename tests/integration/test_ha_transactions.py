"""What only a master runs moves with the role (controller mode, real etcd and
brokers): a half message replicated before the master is killed is checked back by
the broker elected after it, and once the producer's local state answers COMMIT the
message is consumable there; that broker's POP reviver brings back a popped message
left unacknowledged (docs/replication.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.client import AsyncTransactionProducer, LocalTransactionState, Message, MessageExt
from skiff.protocol.codes import RequestCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import equals, master_of, sync_set
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from tests.integration.consumer_kit import config, create_topic
from tests.integration.test_broker_pop import pop_until

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC = "TxFailover"
QUEUES = 2
BROKER_ARGS = ["--transactionTimeOut=1000", "--transactionCheckInterval=300", "--transactionCheckMax=1000",
               "--slaveTimeout=1000", "--slaveSyncInterval=500", "--reviveInterval=100",
               "--popFromRetryProbability=100"]


class LocalState:
    """The producer's local transaction store: undecided until the test commits it."""

    def __init__(self) -> None:
        self.committed = False
        self.asked: list[MessageExt] = []

    def __call__(self, msg: MessageExt) -> LocalTransactionState:
        self.asked.append(msg)
        return LocalTransactionState.COMMIT_MESSAGE if self.committed else LocalTransactionState.UNKNOW


async def consumable(addr: str) -> list[bytes]:
    wire = BrokerWire(addr)
    try:
        return [m.body for q in range(QUEUES) for m in await wire.pull_messages("G-tx-watch", TOPIC, q)]
    finally:
        await wire.close()


async def knows_topic(addr: str) -> bool:
    wire = BrokerWire(addr)
    try:
        return TOPIC.encode() in (await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    finally:
        await wire.close()


async def has(addr: str, body: bytes) -> bool:
    return body in await consumable(addr)


def test_a_promoted_master_checks_back_replicated_half_messages_and_revives_pops(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint, broker_args=BROKER_ARGS) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            await eventually(lambda: equals(sync_set(group, first), "1,2"), 30, "both in the SyncStateSet")
            await create_topic(group.namesrv_addr, TOPIC, QUEUES)
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: knows_topic(group.addr(other)), 20, "the topic synced to the slave")
            state = LocalState()

            async def undecided(msg: Message, arg: object) -> LocalTransactionState:
                return LocalTransactionState.UNKNOW
            async with AsyncTransactionProducer("PG-tx-failover", checker=state,
                                                client_config=config(group.namesrv_addr, "tx-failover")) as producer:
                result = await producer.send_in_transaction(Message.of(TOPIC, b"paid order"), undecided)
                assert result.send_status.name == "SEND_OK"  # SYNC_MASTER: the half is on both brokers
                await eventually(lambda: bool(state.asked), 20, "a check-back from the first master")
                group.kill_broker(first)
                second = await eventually(lambda: master_of(group), 20, "the other broker elected")
                assert second != first
                asked_before = len(state.asked)
                state.committed = True
                await eventually(lambda: has(group.addr(second), b"paid order"), 40,
                                 "the committed message consumable on the new master")
            assert len(state.asked) > asked_before  # the new master asked
            assert {m.msg_id for m in state.asked} == {result.msg_id}
            assert await consumable(group.addr(second)) == [b"paid order"]  # once
            wire = BrokerWire(group.addr(second))
            try:
                popped = await pop_until(wire, "G-tx-pop", TOPIC, 1, invisible_ms=300)
                assert [m.body for m, _ in popped] == [b"paid order"]
                again = await pop_until(wire, "G-tx-pop", TOPIC, 1)  # not acknowledged: revived
                assert [m.body for m, _ in again] == [b"paid order"]
            finally:
                await wire.close()
        asyncio.run(main())
