"""MQClientAPI against a real in-process NameServer: NameServer failover, error
codes raised with the server's remark, and the answers that are not errors."""

from __future__ import annotations

import pytest

from skiff.client._impl.admin_api import AdminAPI
from skiff.client._impl.api import NameServers
from skiff.client.errors import NameServerUnavailableError
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.errors import ConnectionClosed
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine

DEAD = ["127.0.0.1:1", "127.0.0.1:2"]  # nothing listens on ports 1 and 2


def with_api(test, *, dead_first: bool = True):
    async def main():
        server = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await server.start()
        live = f"127.0.0.1:{server.port}"
        remoting = RemotingClient()
        try:
            await test(server, AdminAPI(remoting, NameServers([*DEAD, live] if dead_first else [live]), 2000), live)
        finally:
            await remoting.close()
            await server.stop(0.2)

    run_coroutine(main())


def test_the_live_nameserver_answers_and_stays_current():
    async def test(server, api, live):
        wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", 2, 2)}, DataVersion(1, 1))
        server.routes.register_broker("C", "127.0.0.1:30001", "broker-a", 0, "127.0.0.1:30002", wrapper)
        route = await api.get_topic_route("T")
        assert route is not None and route.broker_datas[0].master_addr == "127.0.0.1:30001"
        assert api.namesrvs.current == live
        assert await api.get_topic_route("Missing") is None  # TOPIC_NOT_EXIST is an answer, not an error
        info = await api.get_cluster_info()
        assert info.cluster_addr_table == {"C": ("broker-a",)}
        assert "T" in await api.get_topic_list()
        assert await api.get_topics_by_cluster("C") == ["T"]
        await api.put_kv_config(live, "ORDER_TOPIC_CONFIG", "T", "broker-a:2")
        assert (await api.get_topic_route("T")).order_topic_conf == "broker-a:2"
        await api.delete_kv_config(live, "ORDER_TOPIC_CONFIG", "T")
        await api.delete_topic_in_namesrv(live, "T")
        assert await api.get_topic_route("T") is None

    with_api(test)


def test_every_nameserver_down_names_each_failure():
    async def test(server, api, live):
        api.namesrvs = NameServers(DEAD)
        with pytest.raises(NameServerUnavailableError) as info:
            await api.get_topic_route("T")
        assert set(info.value.errors) == set(DEAD) and info.value.retriable
        assert all(isinstance(e, ConnectionClosed) for e in info.value.errors.values())

    with_api(test, dead_first=False)
