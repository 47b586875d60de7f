"""A slave's metadata from its master, consumer offsets committed to a slave while the
master is down given back to it, and suggestWhichBrokerId (docs/replication.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.consumer import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = pytest.mark.timeout(120)


async def commit(wire: BrokerWire, queue_id: int, offset: int) -> None:
    header = UpdateConsumerOffsetRequestHeader("G", "T", queue_id, offset)
    resp = await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def committed(wire: BrokerWire, queue_id: int) -> int | None:
    return await committed_for(wire, "G", "T", queue_id)


def test_offsets_committed_to_a_slave_survive_the_masters_return(tmp_path: Path) -> None:
    with HAGroup(tmp_path, broker_args=["--slaveSyncInterval=300"]) as group:
        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                for i in range(30):
                    assert (await master.send(Message("T", f"m{i}".encode()), queue_id=i % 2)).code == 0
                group_config = SubscriptionGroupConfig("G", broker_id=1)
                created = await master.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                            group_config.to_json())
                assert created.code == ResponseCode.SUCCESS, created.remark
                await commit(master, 0, 5)
                await commit(master, 1, 7)

                async def slave_has(q: int, offset: int) -> bool:
                    return await committed(slave, q) == offset
                await eventually(lambda: slave_has(0, 5), 15, "the slave copying the master's offsets")
                pulled = await slave.pull("G", "T", 0, 0)  # the topic and group came over too
                assert pulled.code == ResponseCode.SUCCESS and pulled.ext("suggestWhichBrokerId") == "0"
                group.stop_broker(0)  # persists its offsets (a kill -9 loses the last flushConsumerOffsetInterval)
                await commit(slave, 0, 15)  # a consumer reading the slave while the master is down
                await asyncio.sleep(0)
                group.start_master()
                master2 = BrokerWire(group.master_addr)
                try:
                    async def master_has(q: int, offset: int) -> bool:
                        return await committed(master2, q) == offset
                    await eventually(lambda: master_has(0, 15), 15, "the slave giving its offset back")
                    assert await committed(master2, 1) == 7
                    await commit(master2, 1, 9)  # the master's newer offsets still reach the slave
                    await eventually(lambda: slave_has(1, 9), 15, "the slave taking the master's new offset")
                    assert await committed(slave, 0) == 15
                finally:
                    await master2.close()
            finally:
                await master.close()
                await slave.close()
        asyncio.run(main())


def test_a_master_with_slave_read_enable_suggests_the_groups_broker(tmp_path: Path) -> None:
    with HAGroup(tmp_path, slaves=0, master_args=["--slaveReadEnable=true"]) as group:
        async def main() -> None:
            master = BrokerWire(group.master_addr)
            try:
                assert (await master.send(Message("T", b"x"))).code == ResponseCode.SUCCESS
                first = await master.pull("G", "T", 0, 0)
                assert first.code == ResponseCode.SUCCESS and first.ext("suggestWhichBrokerId") == "0"
                config = SubscriptionGroupConfig("G", broker_id=1)
                assert (await master.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                          config.to_json())).code == ResponseCode.SUCCESS
                again = await master.pull("G", "T", 0, 0)
                assert again.ext("suggestWhichBrokerId") == "1"
            finally:
                await master.close()
        asyncio.run(main())


def test_our_consumer_reads_the_slave_while_the_master_is_dead(tmp_path: Path) -> None:
    """Skiff's push consumer, started with the master killed: it reads every message from the
    slave and commits its offsets there (no master routed); our producer has nowhere to send."""
    from skiff.client import AsyncProducer
    from skiff.client.errors import NoRouteError
    from tests.integration.consumer_kit import Recorder, config
    from tests.integration.test_client_consumer import consumer

    with HAGroup(tmp_path, broker_args=["--slaveSyncInterval=300"]) as group:
        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                for i in range(20):
                    assert (await master.send(Message("F", f"f{i}".encode()), queue_id=i % 4)).code == 0

                async def copied() -> bool:
                    return all([(await slave.pull("G-probe", "F", q, 0)).ext("maxOffset") == "5" for q in range(4)])
                await eventually(copied, 20, "the slave holding every queue")
                group.kill_broker(0)
                async with AsyncProducer("PG-ha", client_config=config(group.namesrv_addr, "p-ha")) as producer:
                    with pytest.raises(NoRouteError):
                        await producer.send(Message.of("F", b"nowhere to go"))
                rec = Recorder()
                c = consumer(group.namesrv_addr, "CG-ours", "ours", rec, "F")
                await c.start()
                try:
                    await eventually(lambda: rec.distinct() == 20, 30, "all 20 messages from the slave")

                    async def committed_on_slave() -> bool:
                        offsets = [await committed_for(slave, "CG-ours", "F", q) for q in range(4)]
                        return offsets == [5, 5, 5, 5]
                    await eventually(committed_on_slave, 30, "offsets committed to the slave")
                finally:
                    await c.shutdown()
            finally:
                await master.close()
                await slave.close()
        asyncio.run(main())


async def committed_for(wire: BrokerWire, group: str, topic: str, queue_id: int) -> int | None:
    resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                           QueryConsumerOffsetRequestHeader(group, topic, queue_id).to_ext())
    return int(resp.ext("offset") or -1) if resp.code == ResponseCode.SUCCESS else None
