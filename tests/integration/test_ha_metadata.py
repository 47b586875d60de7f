"""A slave's metadata from its master, consumer offsets committed to a slave while the
master is down given back to it, and suggestWhichBrokerId (docs/replication.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import GetConsumerConnectionListRequestHeader
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


def test_offsets_committed_to_a_slave_survive_its_restart_and_the_masters_return(tmp_path: Path) -> None:
    # a slave started while its master is down learns of its return at its next registration
    with HAGroup(tmp_path, broker_args=["--slaveSyncInterval=300", "--registerNameServerPeriod=1000"]) as group:
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
                no_timer = await slave.call(RequestCode.GET_ALL_DELAY_OFFSET)  # a slave runs no timer
                assert (no_timer.code, no_timer.remark) == (ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
                group.stop_broker(0)  # persists its offsets (a kill -9 loses the last flushConsumerOffsetInterval)
                await commit(slave, 0, 15)  # a consumer reading the slave while the master is down
                await slave.close()
                group.stop_broker(1)  # the slave restarts while the master is still down: it kept 15 on disk
                group.start_slave(1)
                slave = BrokerWire(group.slave_addr(1))
                assert await committed(slave, 0) == 15
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


def test_our_consumer_reads_the_slave_while_the_master_is_dead_and_returns_to_it(tmp_path: Path) -> None:
    """Our push consumer, started with the master dead, reads the slave and commits its
    offsets there; the master back, it pulls from the master again (the slave serves none of
    the later messages), nothing is delivered twice, and a new member of the group starts
    where the first left off: the offsets committed on the slave were not lost."""
    from skiff.client import AsyncProducer
    from skiff.client.errors import NoRouteError
    from skiff.testing.failover import info
    from tests.integration.consumer_kit import Recorder, config
    from tests.integration.test_client_consumer import consumer

    with HAGroup(tmp_path, broker_args=["--slaveSyncInterval=300"]) as group:
        async def send(wire: BrokerWire, prefix: str, count: int) -> list[str]:
            bodies = [f"{prefix}{i}" for i in range(count)]
            for i, body in enumerate(bodies):
                assert (await wire.send(Message("F", body.encode()), queue_id=i % 4)).code == ResponseCode.SUCCESS
            return bodies

        async def committed_on(wire: BrokerWire) -> list[int | None]:
            return [await committed_for(wire, "CG-ours", "F", q) for q in range(4)]

        async def pulled(broker_id: int) -> int:
            return int((await info(group.addr(broker_id)) or {})["msgGetTotalTodayNow"])

        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                sent = await send(master, "f", 20)

                async def copied() -> bool:
                    return all([(await slave.pull("G-probe", "F", q, 0)).ext("maxOffset") == "5" for q in range(4)])
                await eventually(copied, 20, "the slave holding every queue")
                await master.close()
                group.kill_broker(0)
                async with AsyncProducer("PG-ha", client_config=config(group.namesrv_addr, "p-ha")) as producer:
                    with pytest.raises(NoRouteError):
                        await producer.send(Message.of("F", b"nowhere to go"))
                rec = Recorder()
                c = consumer(group.namesrv_addr, "CG-ours", "ours", rec, "F")
                await c.start()
                try:
                    await eventually(lambda: rec.distinct() == 20, 30, "all 20 messages from the slave")
                    await eventually(lambda: equals(committed_on(slave), [5, 5, 5, 5]), 30,
                                     "offsets committed to the slave")

                    group.start_master()
                    master = BrokerWire(group.master_addr)
                    await eventually(lambda: equals(committed_on(master), [5, 5, 5, 5]), 30,
                                     "the master taking the slave's offsets")

                    async def knows_the_master() -> bool:  # it heartbeats to the brokers its route names
                        header = GetConsumerConnectionListRequestHeader("CG-ours").to_ext()
                        return (await master.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, header)).code == 0
                    await eventually(knows_the_master, 30, "the consumer's route naming the returned master")
                    sent += await send(master, "g", 4)  # one per queue: each queue's answer suggests the master
                    await eventually(lambda: rec.distinct() == 24, 30, "the messages sent to the returned master")
                    from_slave, from_master = await pulled(1), await pulled(0)
                    assert from_slave >= 20  # the slave counts what it serves: it served the first 20
                    sent += await send(master, "h", 20)
                    await eventually(lambda: rec.distinct() == 44, 30, "the next messages")
                    assert await pulled(1) == from_slave, "the consumer still pulls from the slave"
                    assert await pulled(0) >= from_master + 20
                    await eventually(lambda: equals(committed_on(master), [11, 11, 11, 11]), 30, "offsets on the master")
                finally:
                    await c.shutdown()
                assert sorted(rec.bodies().elements()) == sorted(sent), "a message delivered twice or lost"

                later = Recorder()
                c2 = consumer(group.namesrv_addr, "CG-ours", "later", later, "F")
                await c2.start()
                try:
                    last = await send(master, "i", 4)
                    await eventually(lambda: later.distinct() == 4, 30, "the new member's first messages")
                finally:
                    await c2.shutdown()
                assert sorted(later.bodies().elements()) == sorted(last), "re-delivered to a new member"
            finally:
                await master.close()
                await slave.close()
        asyncio.run(main())


async def equals(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


async def committed_for(wire: BrokerWire, group: str, topic: str, queue_id: int) -> int | None:
    resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                           QueryConsumerOffsetRequestHeader(group, topic, queue_id).to_ext())
    return int(resp.ext("offset") or -1) if resp.code == ResponseCode.SUCCESS else None
