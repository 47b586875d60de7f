"""The NameServer's handlers behind a real in-process server on 127.0.0.1."""

from __future__ import annotations

import orjson
import pytest

from skiff.common.errors import ConfigError
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.namesrv.kv_config import ORDER_TOPIC_CONFIG, KvConfigStore
from skiff.protocol.bodies.admin import DataVersion, KVTable
from skiff.protocol.bodies.register import RegisterBrokerBody, register_broker_request
from skiff.protocol.bodies.route import TopicRouteData
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import RegisterBrokerRequestHeader
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine
from tests.unit.transport._support import wait_until

BROKER = "127.0.0.1:10911"


def register_request(body: RegisterBrokerBody, *, compressed: bool = False, crc: int | None = None,
                     broker_id: int = 0, addr: str = BROKER) -> RemotingCommand:
    header = RegisterBrokerRequestHeader("broker-a", addr, "C", "127.0.0.1:10912", broker_id, compressed)
    cmd = register_broker_request(header, body)
    if crc is not None:
        cmd.ext_fields["bodyCrc32"] = str(crc)
    return cmd


def body_with(*configs: TopicConfig, version: DataVersion = DataVersion(5, 1)) -> RegisterBrokerBody:
    return RegisterBrokerBody(TopicConfigSerializeWrapper({tc.topic_name: tc for tc in configs}, version))


def with_namesrv(test, **config):
    async def main():
        server = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, **config))
        await server.start()
        client = RemotingClient()
        try:
            await test(server, client, f"127.0.0.1:{server.port}")
        finally:
            await client.close()
            await server.stop(0.5)

    run_coroutine(main())


def test_crc_mismatch_is_refused_and_a_good_crc_accepted():
    async def test(server, client, addr):
        resp = await client.invoke(addr, register_request(body_with(TopicConfig("T")), crc=12345), 3000)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        assert server.routes.topic_route("T") is None
        resp = await client.invoke(addr, register_request(body_with(TopicConfig("T"))), 3000)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b""
        assert server.routes.topic_route("T") is not None

    with_namesrv(test)


def test_compressed_registration_and_slave_answer():
    async def test(server, client, addr):
        resp = await client.invoke(addr, register_request(body_with(TopicConfig("T", 2, 3, 6)), compressed=True), 3000)
        assert resp.code == ResponseCode.SUCCESS
        slave = register_request(body_with(TopicConfig("T")), broker_id=1, addr="127.0.0.1:10921", compressed=True)
        resp = await client.invoke(addr, slave, 3000)
        assert resp.ext_fields == {"masterAddr": BROKER, "haServerAddr": "127.0.0.1:10912"}
        route = TopicRouteData.from_json(
            (await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
                                 3000)).body)
        assert (route.queue_datas[0].read_queue_nums, route.queue_datas[0].write_queue_nums) == (2, 3)
        assert route.broker_datas[0].broker_addrs == {0: BROKER, 1: "127.0.0.1:10921"}

    with_namesrv(test)


def test_bad_requests_get_clear_remarks():
    async def test(server, client, addr):
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), 3000)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "no topic" in resp.remark
        bad = register_request(body_with(TopicConfig("T")))
        bad.body = b"{broken"
        bad.ext_fields["bodyCrc32"] = "0"
        resp = await client.invoke(addr, bad, 3000)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody: the body is not JSON" in resp.remark
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
                                   3000)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark == "No topic route info in name server for the topic: T"

    with_namesrv(test)


def test_query_data_version_reports_changes_and_keeps_the_broker_alive():
    async def test(server, client, addr):
        await client.invoke(addr, register_request(body_with(TopicConfig("T"), version=DataVersion(5, 1))), 3000)
        header = {"brokerName": "broker-a", "brokerAddr": BROKER, "clusterName": "C", "brokerId": 0}

        async def query(version):
            return await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, header,
                                                                     version.to_json()), 3000)

        same = await query(DataVersion(5, 1))
        assert same.ext("changed") == "false" and DataVersion.from_json(same.body) == DataVersion(5, 1)
        other = await query(DataVersion(6, 2))
        assert other.ext("changed") == "true"

    with_namesrv(test)


def test_kv_config_and_order_topic_conf():
    async def test(server, client, addr):
        def kv(code, **ext):
            return client.invoke(addr, RemotingCommand.request(code, {"namespace": ORDER_TOPIC_CONFIG, **ext}), 3000)

        assert (await kv(RequestCode.GET_KV_CONFIG, key="T")).code == ResponseCode.QUERY_NOT_FOUND
        assert (await kv(RequestCode.PUT_KV_CONFIG, key="T", value="broker-a:4")).code == ResponseCode.SUCCESS
        assert (await kv(RequestCode.GET_KV_CONFIG, key="T")).ext("value") == "broker-a:4"
        assert KVTable.from_json((await kv(RequestCode.GET_KVLIST_BY_NAMESPACE)).body).table == {"T": "broker-a:4"}
        resp = await client.invoke(addr, register_request(body_with(TopicConfig("T"))), 3000)
        assert KVTable.from_json(resp.body).table == {"T": "broker-a:4"}
        route = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
                                    3000)
        assert orjson.loads(route.body)["orderTopicConf"] == "broker-a:4"
        assert (await kv(RequestCode.DELETE_KV_CONFIG, key="T")).code == ResponseCode.SUCCESS
        assert (await kv(RequestCode.GET_KVLIST_BY_NAMESPACE)).code == ResponseCode.QUERY_NOT_FOUND

    with_namesrv(test)


def test_broker_is_dropped_when_its_connection_closes():
    async def test(server, client, addr):
        await client.invoke(addr, register_request(body_with(TopicConfig("T"))), 3000)
        assert server.routes.live_broker_addrs() == (BROKER,)
        client.close_connection(addr)
        await wait_until(lambda: not server.routes.live_broker_addrs(), what="broker removed")
        assert server.routes.topic_route("T") is None

    with_namesrv(test)


def test_kv_store_persists_atomically(tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    store = KvConfigStore(path)
    store.load()
    store.put(ORDER_TOPIC_CONFIG, "T", "broker-a:4")
    store.put("NS", "k", "v")
    assert store.delete("NS", "k") and not store.delete("NS", "k")
    assert orjson.loads(path.read_bytes()) == {"configTable": {ORDER_TOPIC_CONFIG: {"T": "broker-a:4"}}}
    again = KvConfigStore(path)
    again.load()
    assert again.get(ORDER_TOPIC_CONFIG, "T") == "broker-a:4" and not list(path.parent.glob("*.tmp"))


def test_kv_store_refuses_a_damaged_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable": {"NS": {"k": 1}}}')
    with pytest.raises(ConfigError, match="kvConfigPath .*not a"):
        KvConfigStore(path).load()
    path.write_text("{oops")
    with pytest.raises(ConfigError, match="cannot load"):
        KvConfigStore(path).load()
