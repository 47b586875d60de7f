"""Real `skiff namesrv` processes on 127.0.0.1, driven over the wire as brokers,
clients and admin tools drive them."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.register import RegisterBrokerBody, register_broker_request
from skiff.protocol.bodies.route import ClusterInfo, TopicList, TopicRouteData
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import RegisterBrokerRequestHeader
from skiff.testing.processes import run_skiff, start_namesrv
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine

TIMEOUT_MS = 5000


def registration(name: str, addr: str, *topics: TopicConfig, broker_id: int = 0, cluster: str = "DefaultCluster",
                 compressed: bool = False, version: DataVersion = DataVersion(1, 1)) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(name, addr, cluster, addr.replace(":109", ":119"), broker_id, compressed)
    wrapper = TopicConfigSerializeWrapper({tc.topic_name: tc for tc in topics}, version)
    return register_broker_request(header, RegisterBrokerBody(wrapper))


async def call(client: RemotingClient, addr: str, code: int, body: bytes = b"", **ext: object) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), TIMEOUT_MS)


async def route_of(client: RemotingClient, addr: str, topic: str) -> TopicRouteData | None:
    resp = await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return TopicRouteData.from_json(resp.body)


async def wait_for(check, timeout_s: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.05)


def test_brokers_register_and_clients_read_routes():
    with start_namesrv() as namesrv:
        async def main():
            broker = RemotingClient()
            admin = RemotingClient()
            ns = namesrv.addr
            try:
                for cmd in (
                    registration("broker-a", "127.0.0.1:10911", TopicConfig("Orders", 4, 4, 6), TopicConfig("OnlyA")),
                    registration("broker-b", "127.0.0.1:10921", TopicConfig("Orders", 2, 2, 6), compressed=True),
                    registration("broker-a", "127.0.0.1:10912", TopicConfig("Orders"), broker_id=1, compressed=True),
                ):
                    assert (await broker.invoke(ns, cmd, TIMEOUT_MS)).code == ResponseCode.SUCCESS

                route = await route_of(admin, ns, "Orders")
                assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [
                    ("broker-a", 4, 6), ("broker-b", 2, 6)]
                assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {
                    "broker-a": {0: "127.0.0.1:10911", 1: "127.0.0.1:10912"}, "broker-b": {0: "127.0.0.1:10921"}}

                info = ClusterInfo.from_json((await call(admin, ns, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
                assert info.cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b")}
                topics = TopicList.from_json((await call(admin, ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
                assert topics.topic_list == ("OnlyA", "Orders")
                by_cluster = await call(admin, ns, RequestCode.GET_TOPICS_BY_CLUSTER, cluster="DefaultCluster")
                assert TopicList.from_json(by_cluster.body).topic_list == ("OnlyA", "Orders")

                wiped = await call(admin, ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-b")
                assert wiped.ext("wipeTopicCount") == "1"
                assert (await route_of(admin, ns, "Orders")).queue_datas[1].perm == 4

                unregister = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                              "clusterName": "DefaultCluster", "brokerId": 0}
                assert (await call(admin, ns, RequestCode.UNREGISTER_BROKER, **unregister)).code == ResponseCode.SUCCESS
                route = await route_of(admin, ns, "Orders")
                assert route.broker_datas[0].broker_addrs == {1: "127.0.0.1:10912"}
                await call(admin, ns, RequestCode.UNREGISTER_BROKER, **{**unregister, "brokerAddr": "127.0.0.1:10912",
                                                                        "brokerId": 1})
                assert await route_of(admin, ns, "OnlyA") is None
                assert [q.broker_name for q in (await route_of(admin, ns, "Orders")).queue_datas] == ["broker-b"]

                deleted = await call(admin, ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="Orders")
                assert deleted.code == ResponseCode.SUCCESS and await route_of(admin, ns, "Orders") is None
            finally:
                await broker.close()
                await admin.close()

        run_coroutine(main())
        namesrv.signal(signal.SIGINT)
        assert namesrv.wait() == 0
        assert "skiff namesrv stopped" in namesrv.output


def test_silent_brokers_expire_and_live_ones_stay():
    with start_namesrv("--scanNotActiveBrokerInterval=100", "--brokerChannelExpiredTime=800") as namesrv:
        async def main():
            alive, silent, reader = RemotingClient(), RemotingClient(), RemotingClient()
            ns = namesrv.addr
            try:
                await silent.invoke(ns, registration("broker-s", "127.0.0.1:10931", TopicConfig("T")), TIMEOUT_MS)
                started = time.monotonic()

                async def only_alive_left():
                    await alive.invoke(ns, registration("broker-l", "127.0.0.1:10941", TopicConfig("T")), TIMEOUT_MS)
                    route = await route_of(reader, ns, "T")
                    return route is not None and [b.broker_name for b in route.broker_datas] == ["broker-l"]

                await wait_for(only_alive_left, what="the silent broker's expiry")
                assert time.monotonic() - started >= 0.7


                async def silent_connection_closed():
                    conn = silent.connections.get(ns)
                    return conn is None or conn.is_closed

                await wait_for(silent_connection_closed, what="the expired broker's connection closing")
            finally:
                for c in (alive, silent, reader):
                    await c.close()

        run_coroutine(main())
    assert "broker 127.0.0.1:10931 (broker-s) expired" in namesrv.output


def test_two_namesrvs_side_by_side_keep_their_own_routes():
    with start_namesrv() as first, start_namesrv() as second:
        async def main():
            broker, reader = RemotingClient(), RemotingClient()
            try:
                for ns in (first.addr, second.addr):
                    await broker.invoke(ns, registration("broker-a", "127.0.0.1:10911", TopicConfig("T")), TIMEOUT_MS)
                await call(reader, first.addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T")
                assert await route_of(reader, first.addr, "T") is None
                assert (await route_of(reader, second.addr, "T")).queue_datas[0].broker_name == "broker-a"
            finally:
                await broker.close()
                await reader.close()

        run_coroutine(main())
        assert first.port != second.port
        assert first.stop() == 0 and second.stop() == 0


def test_a_port_in_use_exits_non_zero_with_the_reason():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_skiff(["namesrv", "--host", "127.0.0.1", "--listen-port", str(port)])
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in result.stdout


def test_bad_configs_exit_non_zero_naming_the_problem(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=abc\n")
    cases = [
        (["-c", str(conf)], "listenPort: 'abc' is not a whole number"),
        (["-c", str(tmp_path / "missing.conf")], "cannot read config file"),
        (["--noSuchKey=1"], "unknown configuration key 'noSuchKey'"),
        (["--brokerChannelExpiredTime=0"], "brokerChannelExpiredTime: must be more than 0 ms"),
    ]
    for args, words in cases:
        result = run_skiff(["namesrv", "--host", "127.0.0.1", "--listen-port", "0", *args])
        assert result.returncode == 2 and words in result.stdout, (args, result.stdout)


def test_config_file_and_kv_config_persist_across_restarts(tmp_path):
    conf = tmp_path / "namesrv.conf"
    kv_path = tmp_path / "kv" / "kvConfig.json"
    conf.write_text(f"kvConfigPath={kv_path}\nscanNotActiveBrokerInterval=5000\n")

    async def put_and_get(addr: str, put: bool) -> RemotingCommand:
        client = RemotingClient()
        try:
            if put:
                await call(client, addr, RequestCode.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="T",
                           value="broker-a:4")
            return await call(client, addr, RequestCode.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="T")
        finally:
            await client.close()

    with start_namesrv("-c", str(conf)) as namesrv:
        assert run_coroutine(put_and_get(namesrv.addr, put=True)).ext("value") == "broker-a:4"
        assert f"kv config in {kv_path}" in namesrv.output
    with start_namesrv("-c", str(conf)) as namesrv:
        assert run_coroutine(put_and_get(namesrv.addr, put=False)).ext("value") == "broker-a:4"
