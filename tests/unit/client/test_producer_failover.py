"""A failover as the producer sees it: a topic whose broker group has no master for now
(the NameServer lists only its slave) is said to be so, not to be missing; a send waits
for the new master within its timeout, and retries a master that refused it as a slave
once the route names another. An in-process NameServer whose route table the test
changes, and scripted brokers (tests/unit/client/test_producer.py); the same with real
processes and a kill -9: tests/integration/test_ha_producer_failover.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from skiff.client import Message, MessageQueue, Producer
from skiff.client._impl.api import MQClientAPI, NameServers
from skiff.client._impl.config import ClientConfig
from skiff.client._impl.route import RouteCache, masterless_groups
from skiff.client.errors import NoBrokerError, NoMasterError, NoRouteError, SendFailedError
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import ResponseCode
from skiff.protocol.errors import MessageIllegalError
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine
from tests.unit.client.test_producer import ScriptedBroker, producer

SLAVE = "127.0.0.1:20911"  # listed, never dialled: a send goes to masters only


def wrapper(*configs: TopicConfig) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, DataVersion(1, len(configs)))


def register(namesrv: NamesrvServer, addr: str, broker_id: int = 0, name: str = "broker-a") -> None:
    namesrv.routes.register_broker("C", addr, name, broker_id, addr,
                                   wrapper(TopicConfig("T", 4, 4), TopicConfig("TBW102", 8, 8, 7)))


def drop_master(namesrv: NamesrvServer, addr: str, name: str = "broker-a") -> None:
    """What the NameServer does when the master's connection closes (kill -9)."""
    namesrv.routes.unregister_broker("C", addr, name, 0)


# ------------------------------------------------------------- the route decision


def test_masterless_groups_names_writable_groups_without_a_master():
    route = TopicRouteData(
        (QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6), QueueData("c", 4, 4, 4), QueueData("d", 4, 4, 6)),
        (BrokerData("C", "a", {0: "m:1", 1: "s:1"}), BrokerData("C", "b", {1: "s:2"}),
         BrokerData("C", "c", {1: "s:3"})), {}, None)
    # a has its master; c is read-only (nothing to send there anyway); d has no broker at all
    assert masterless_groups(route) == {"b": "slaves only", "d": "no broker"}


def with_namesrv(test):
    async def main():
        namesrv = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        remoting = RemotingClient()
        try:
            await test(namesrv, RouteCache(MQClientAPI(remoting, NameServers([f"127.0.0.1:{namesrv.port}"]), 2000)))
        finally:
            await remoting.close()
            await namesrv.stop(0.2)

    run_coroutine(main())


def test_a_topic_whose_group_has_only_a_slave_is_said_to_exist_without_a_master():
    async def test(namesrv, cache):
        register(namesrv, "127.0.0.1:20901")
        register(namesrv, SLAVE, broker_id=1)
        assert len((await cache.publish_info("T")).queues) == 4
        drop_master(namesrv, "127.0.0.1:20901")
        cache.mark_stale("T")
        with pytest.raises(NoMasterError) as caught:
            await cache.publish_info("T")
        message = str(caught.value)
        assert "topic 'T' exists but none of its broker groups has a master now (broker-a: slaves only)" in message
        assert "failover" in message and "does not exist" not in message and "TBW102" not in message
        assert isinstance(caught.value, NoRouteError) and isinstance(caught.value, NoBrokerError)
        assert caught.value.retriable and caught.value.groups == {"broker-a": "slaves only"}

        with pytest.raises(NoMasterError, match=r"does not exist yet .*TBW102.*\(broker-a: slaves only\)"):
            await cache.publish_info("Fresh")  # no route: TBW102's group, which would create it, has no master
        with pytest.raises(NoMasterError, match="broker group broker-a has no master now"):
            cache.require_master("broker-a")
        with pytest.raises(NoBrokerError, match="no master address is known for broker 'nowhere'"):
            cache.require_master("nowhere")

    with_namesrv(test)


def test_waiting_for_a_master_ends_when_the_route_names_one_or_at_the_timeout():
    async def test(namesrv, cache):
        register(namesrv, SLAVE, broker_id=1)
        register(namesrv, "127.0.0.1:20901")
        drop_master(namesrv, "127.0.0.1:20901")
        loop = asyncio.get_running_loop()

        started = loop.time()
        with pytest.raises(NoMasterError, match=r"slaves only.*the send waited \d+ ms for one"):
            await cache.writable_publish_info("T", 0.3)
        assert 0.3 <= loop.time() - started < 1.5

        loop.call_later(0.3, register, namesrv, "127.0.0.1:20902")  # elected and registered
        started = loop.time()
        info = await cache.writable_publish_info("T", 5.0)
        assert [q.queue_id for q in info.queues] == [0, 1, 2, 3]
        assert cache.master_addr("broker-a") == "127.0.0.1:20902"
        assert 0.25 <= loop.time() - started < 1.5  # backoff: at most 500 ms between two fetches

    with_namesrv(test)


# ------------------------------------------------------------ what a send does


def with_failover(test):
    """broker-a: the scripted ``old`` master (registered) and ``new`` one (not yet), a slave listed."""
    async def main():
        namesrv = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        old, new = ScriptedBroker("old"), ScriptedBroker("new")
        for b in (old, new):
            await b.server.start()
        register(namesrv, old.addr)
        register(namesrv, SLAVE, broker_id=1)
        try:
            await test(namesrv, old, new, f"127.0.0.1:{namesrv.port}")
        finally:
            for b in (old, new):
                await b.server.stop(0.2)
            await namesrv.stop(0.2)

    run_coroutine(main())


def failover_later(namesrv: NamesrvServer, old: ScriptedBroker, new: ScriptedBroker, after_s: float) -> None:
    """The old master gone from the route now; the new one registered ``after_s`` later."""
    drop_master(namesrv, old.addr)
    asyncio.get_running_loop().call_later(after_s, register, namesrv, new.addr)


def test_a_send_during_an_election_waits_for_the_new_master():
    async def test(namesrv, old, new, namesrv_addr):
        async with producer(namesrv_addr, send_timeout_ms=5000, trace=False) as p:
            assert (await p.send(Message.of("T", b"before"))).message_queue.broker_name == "broker-a"
            failover_later(namesrv, old, new, 0.4)
            p._core.instance.routes.mark_stale("T")  # as a failed send or the periodic refresh would
            started = time.monotonic()
            waited = [await p.send(Message.of("T", b"during")),
                      await p.send(Message.of("T", b"pinned"), queue=MessageQueue("T", "broker-a", 2))]
            assert 0.35 <= time.monotonic() - started < 3.0
        assert [body for _, _, body in old.sends] == [b"before"]
        assert [body for _, _, body in new.sends] == [b"during", b"pinned"]
        assert waited[1].message_queue.queue_id == 2

    with_failover(test)


def test_a_send_refused_by_a_demoted_master_is_retried_on_the_next_one():
    async def test(namesrv, old, new, namesrv_addr):
        def demoted(header):
            if len(old.sends) == 1:  # the route changes a little after the refusal
                failover_later(namesrv, old, new, 0.3)
            return ResponseCode.SERVICE_NOT_AVAILABLE

        old.answer = demoted
        async with producer(namesrv_addr, send_timeout_ms=5000, trace=False) as p:
            result = await p.send(Message.of("T", b"x"))
        assert len(old.sends) == 1 and [body for _, _, body in new.sends] == [b"x"]
        assert result.message_queue.broker_name == "broker-a"

    with_failover(test)


def test_a_retry_to_the_master_that_just_refused_backs_off_until_the_route_changes():
    """The NameServer still names the refusing master for a while, then names the new one
    directly: the retries back off (100 ms, then 200 ms) so the attempts outlast that."""
    async def test(namesrv, old, new, namesrv_addr):
        def switch():
            drop_master(namesrv, old.addr)
            register(namesrv, new.addr)

        def demoted(header):
            if len(old.sends) == 1:
                asyncio.get_running_loop().call_later(0.25, switch)
            return ResponseCode.SERVICE_NOT_AVAILABLE

        old.answer = demoted
        async with producer(namesrv_addr, send_timeout_ms=5000, trace=False) as p:
            started = time.monotonic()
            result = await p.send(Message.of("T", b"x"))
            assert time.monotonic() - started >= 0.25
        assert len(old.sends) == 2 and [body for _, _, body in new.sends] == [b"x"]  # 3 attempts, the default
        assert result.message_queue.broker_name == "broker-a"

    with_failover(test)


def test_with_no_master_until_the_timeout_the_error_says_so():
    async def test(namesrv, old, new, namesrv_addr):
        async with producer(namesrv_addr, send_timeout_ms=500, trace=False) as p:
            await p.send(Message.of("T", b"before"))
            drop_master(namesrv, old.addr)
            p._core.instance.routes.mark_stale("T")
            started = time.monotonic()
            with pytest.raises(NoMasterError, match="exists but .*slaves only.*failover.*waited") as waited:
                await p.send(Message.of("T", b"never sent"))
            assert 0.45 <= time.monotonic() - started < 2.0
            assert isinstance(waited.value, NoRouteError)

            register(namesrv, old.addr)
            old.answer = lambda header: (drop_master(namesrv, old.addr), ResponseCode.SERVICE_NOT_AVAILABLE)[1]
            with pytest.raises(SendFailedError, match="SERVICE_NOT_AVAILABLE|says no") as failed:
                await p.send(Message.of("T", b"refused, then no master"))
            assert isinstance(failed.value.attempts[-1][1], NoMasterError) and failed.value.retriable
            assert "slaves only" in str(failed.value)

    with_failover(test)


def test_errors_another_master_would_repeat_are_not_retried_or_waited_on():
    async def test(namesrv, old, new, namesrv_addr):
        old.answer = lambda header: ResponseCode.MESSAGE_ILLEGAL
        async with producer(namesrv_addr, send_timeout_ms=5000, trace=False) as p:
            started = time.monotonic()
            with pytest.raises(MessageIllegalError):
                await p.send(Message.of("T", b"x"))
            assert time.monotonic() - started < 1.0
        assert len(old.sends) == 1

    with_failover(test)


def test_the_blocking_producer_waits_for_the_new_master_too():
    async def test(namesrv, old, new, namesrv_addr):
        config = ClientConfig(namesrv_addr, instance_name="unit-blocking", client_ip="127.0.0.1")
        blocking = Producer("PG-blocking", client_config=config, send_timeout_ms=5000, trace=False)
        await asyncio.to_thread(blocking.start)
        try:
            await asyncio.to_thread(blocking.send, Message.of("T", b"before"))
            failover_later(namesrv, old, new, 0.4)
            old.answer = lambda header: ResponseCode.SERVICE_NOT_AVAILABLE  # and refuses, should it be asked
            result = await asyncio.to_thread(blocking.send, Message.of("T", b"during"))
        finally:
            await asyncio.to_thread(blocking.shutdown)
        assert result.message_queue.broker_name == "broker-a"
        assert [body for _, _, body in new.sends] == [b"during"]

    with_failover(test)
