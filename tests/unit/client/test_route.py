"""Publish and subscribe queues from routes, the TBW102 fallback and the route
cache, against a real in-process NameServer whose route table the test fills."""

from __future__ import annotations

import pytest

from skiff.client._impl.api import MQClientAPI, NameServers
from skiff.client._impl.route import RouteCache, borrow_route, publish_queues, subscribe_queues
from skiff.client.errors import NameServerUnavailableError, NoBrokerError, NoRouteError
from skiff.common.message import MessageQueue
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine


def route(*queue_datas: QueueData, masters=("a", "b"), order: str | None = None) -> TopicRouteData:
    brokers = tuple(BrokerData("C", name, {0: f"10.0.0.{i}:10911", 1: f"10.0.1.{i}:10911"} if name in masters
                               else {1: f"10.0.1.{i}:10911"}) for i, name in enumerate(("a", "b", "c")))
    return TopicRouteData(queue_datas, brokers, {}, order)


def test_publish_queues_sort_groups_by_name_and_skip_unwritable_or_masterless_groups():
    r = route(QueueData("b", 4, 2, 6), QueueData("a", 4, 3, 6), QueueData("c", 4, 4, 6), masters=("a", "b"))
    queues, order = publish_queues("T", r)
    assert not order
    assert queues == tuple(MessageQueue("T", "a", i) for i in range(3)) + tuple(MessageQueue("T", "b", i) for i in range(2))
    read_only = route(QueueData("a", 4, 4, 4), QueueData("b", 4, 1, 2))
    assert publish_queues("T", read_only)[0] == (MessageQueue("T", "b", 0),)


def test_order_topic_conf_lists_the_publish_queues():
    r = route(QueueData("a", 8, 8, 6), QueueData("b", 8, 8, 6), order="b:2;a:1")
    queues, order = publish_queues("T", r)
    assert order
    assert queues == (MessageQueue("T", "b", 0), MessageQueue("T", "b", 1), MessageQueue("T", "a", 0))


def test_subscribe_queues_are_the_readable_ones():
    r = route(QueueData("b", 2, 8, 6), QueueData("a", 1, 8, 2), QueueData("c", 3, 0, 4))
    assert subscribe_queues("T", r) == (MessageQueue("T", "b", 0), MessageQueue("T", "b", 1),
                                        MessageQueue("T", "c", 0), MessageQueue("T", "c", 1), MessageQueue("T", "c", 2))


def test_borrowed_route_caps_queue_counts():
    template = route(QueueData("a", 8, 8, 7), QueueData("b", 2, 2, 7), order="a:8")
    borrowed = borrow_route(template, 4)
    assert [(q.read_queue_nums, q.write_queue_nums) for q in borrowed.queue_datas] == [(4, 4), (2, 2)]
    assert borrowed.order_topic_conf is None


def test_name_servers_fail_over_round_robin():
    import random

    ns = NameServers(["n1:1", "n2:2", "n3:3"], random.Random(1))
    first = ns.current
    order = ns.in_order()
    assert order[0] == first and sorted(order) == ["n1:1", "n2:2", "n3:3"]
    ns.failed("elsewhere:1")
    assert ns.current == first
    ns.failed(first)
    assert ns.current == order[1]
    with pytest.raises(ValueError):
        NameServers([])


def register(server: NamesrvServer, broker: str, addr: str, *configs: TopicConfig, broker_id: int = 0) -> None:
    wrapper = TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, DataVersion(1, len(configs)))
    server.routes.register_broker("C", addr, broker, broker_id, addr, wrapper)


def with_cache(test):
    async def main():
        server = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await server.start()
        remoting = RemotingClient()
        dead = "127.0.0.1:1"  # nothing listens on port 1: the failover must skip it
        api = MQClientAPI(remoting, NameServers([dead, f"127.0.0.1:{server.port}"]), 2000)
        try:
            await test(server, RouteCache(api))
        finally:
            await remoting.close()
            await server.stop(0.2)

    run_coroutine(main())


def test_cache_fetches_routes_and_knows_broker_addresses():
    async def test(server, cache):
        register(server, "b", "127.0.0.1:20002", TopicConfig("T", 2, 2))
        register(server, "a", "127.0.0.1:20001", TopicConfig("T", 3, 3))
        register(server, "a", "127.0.0.1:20011", broker_id=1)
        info = await cache.publish_info("T")
        assert not info.auto_create
        assert [(q.broker_name, q.queue_id) for q in info.queues] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
        assert len(await cache.subscribe_queues("T")) == 5
        assert cache.master_addr("a") == "127.0.0.1:20001"
        assert cache.find_broker_addr("a", 1) == "127.0.0.1:20011"
        assert cache.find_broker_addr("b", 1) == "127.0.0.1:20002"  # no slave: the master
        with pytest.raises(NoBrokerError):
            cache.find_broker_addr("b", 1, only_this_broker=True)
        assert sorted(cache.broker_addrs(masters_only=True)) == ["127.0.0.1:20001", "127.0.0.1:20002"]
        assert len(cache.broker_addrs(masters_only=False)) == 3
        assert cache.broker_name_of("127.0.0.1:20011") == "a"

    with_cache(test)


def test_unknown_topic_borrows_tbw102_or_raises_no_route():
    async def test(server, cache):
        with pytest.raises(NoRouteError, match="no TBW102 route"):
            await cache.publish_info("Fresh")
        with pytest.raises(NoRouteError):
            await cache.subscribe_queues("Fresh")
        register(server, "a", "127.0.0.1:20001", TopicConfig("TBW102", 8, 8, 7))
        info = await cache.publish_info("Fresh")
        assert info.auto_create
        assert info.queues == tuple(MessageQueue("Fresh", "a", i) for i in range(4))
        register(server, "a", "127.0.0.1:20001", TopicConfig("TBW102", 8, 8, 7), TopicConfig("Fresh", 2, 2))
        cache.mark_stale("Fresh")
        info = await cache.publish_info("Fresh")
        assert not info.auto_create and len(info.queues) == 2

    with_cache(test)


def test_listeners_hear_route_changes_only():
    async def test(server, cache):
        heard = []
        cache.add_listener(lambda topic, r: heard.append((topic, len(r.queue_datas))))
        register(server, "a", "127.0.0.1:20001", TopicConfig("T", 1, 1))
        await cache.route("T")
        await cache.refresh()
        assert heard == [("T", 1)]
        register(server, "b", "127.0.0.1:20002", TopicConfig("T", 1, 1))
        await cache.refresh()
        assert heard == [("T", 1), ("T", 2)]
        assert cache.topics == ["T"]

    with_cache(test)


def test_a_cached_route_outlives_the_nameservers():
    async def test(server, cache):
        register(server, "a", "127.0.0.1:20001", TopicConfig("T", 2, 2))
        before = await cache.publish_info("T")
        await server.stop(0.2)
        cache.mark_stale("T")
        assert await cache.publish_info("T") == before
        cache.mark_stale("T")
        assert await cache.route("T") == before.route
        with pytest.raises(NameServerUnavailableError):
            await cache.publish_info("Unknown")

    with_cache(test)
