"""ClientInstance: client ids, sharing, lifecycle, heartbeats, and the requests a
broker sends to clients. A real in-process NameServer routes to an in-process
remoting server that plays the broker's side of these exchanges and records
what the client sent."""

from __future__ import annotations

import asyncio
import os

import pytest

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.instance import ClientInstance, build_client_id
from skiff.client.errors import ClientConfigError, ClientStateError
from skiff.common.message import MessageQueue
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo, ResetOffsetBody
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumerData, ConsumeType, HeartbeatData, MessageModel, SubscriptionData
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.client_calls import (
    GetConsumerRunningInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from skiff.protocol.headers.consumer import UnregisterClientRequestHeader
from skiff.transport import RemotingServer
from skiff.transport.loop import run_coroutine
from tests.unit.transport._support import wait_until


class FakeConsumer:
    def __init__(self, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.rebalances = 0
        self.resets: list[tuple[str, dict]] = []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, (SubscriptionData(self.topic),))

    async def rebalance(self) -> None:
        self.rebalances += 1

    async def persist_offsets(self) -> None:
        pass

    async def reset_offset(self, topic, offsets) -> None:
        self.resets.append((topic, offsets))

    def running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo({"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"})


def test_client_id_is_ip_at_pid_for_the_default_name():
    config = ClientConfig("127.0.0.1:9876", client_ip="10.1.2.3")
    assert build_client_id(config) == f"10.1.2.3@{os.getpid()}"
    assert build_client_id(config, {f"10.1.2.3@{os.getpid()}"}) == f"10.1.2.3@{os.getpid()}#1"
    named = ClientConfig("127.0.0.1:9876", instance_name="orders", client_ip="10.1.2.3")
    assert build_client_id(named) == "10.1.2.3@orders"


def test_config_errors_name_the_setting(monkeypatch):
    monkeypatch.delenv("SKIFF_NAMESRV", raising=False)
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(ClientConfigError, match="no NameServer address"):
        ClientConfig()
    with pytest.raises(ClientConfigError, match="not a host:port"):
        ClientConfig("localhost")
    with pytest.raises(ClientConfigError, match="request_timeout_ms"):
        ClientConfig("h:1", request_timeout_ms=0)
    monkeypatch.setenv("SKIFF_NAMESRV", "a:1; b:2;a:1")
    assert ClientConfig().namesrv_addrs == ("a:1", "b:2")


class Broker:
    """The broker side of client management: records heartbeats and unregistrations."""

    def __init__(self) -> None:
        self.heartbeats: list[HeartbeatData] = []
        self.unregistered: list[UnregisterClientRequestHeader] = []
        self.server = RemotingServer("127.0.0.1", 0, {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister,
        })

    def heartbeat(self, conn, req: RemotingCommand) -> RemotingCommand:
        self.heartbeats.append(HeartbeatData.from_json(req.body))
        self.conn = conn
        return req.response()

    def unregister(self, conn, req: RemotingCommand) -> RemotingCommand:
        self.unregistered.append(UnregisterClientRequestHeader.from_ext(req.ext_fields))
        return req.response()


def with_cluster(test):
    async def main():
        namesrv = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        broker = Broker()
        await broker.server.start()
        addr = f"127.0.0.1:{broker.server.port}"
        wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", 2, 2)}, DataVersion(1, 1))
        namesrv.routes.register_broker("C", addr, "broker-a", 0, addr, wrapper)
        config = ClientConfig(f"127.0.0.1:{namesrv.port}", instance_name="unit", client_ip="127.0.0.1")
        try:
            await test(config, broker)
        finally:
            await broker.server.stop(0.2)
            await namesrv.stop(0.2)

    run_coroutine(main())


def test_instances_are_shared_and_counted():
    async def test(config, broker):
        inst = ClientInstance.get(config)
        assert ClientInstance.get(config) is inst
        other = ClientInstance.get(ClientConfig(config.namesrv_addr, instance_name="other", client_ip="127.0.0.1"))
        assert other is not inst and other.client_id == "127.0.0.1@other"
        await inst.start()
        await inst.start()
        await inst.shutdown()
        assert inst.started
        await inst.shutdown()
        assert not inst.started
        assert ClientInstance.get(config) is not inst
        with pytest.raises(ClientStateError):
            await inst.start()

    with_cluster(test)


def test_heartbeat_carries_groups_and_shutdown_unregisters_them():
    async def test(config, broker):
        inst = ClientInstance.get(config)
        consumer = FakeConsumer("CG", "T")
        inst.register_producer("PG", object())
        inst.register_consumer("CG", consumer)
        with pytest.raises(ClientStateError, match="already runs"):
            inst.register_consumer("CG", consumer)
        with pytest.raises(ClientStateError, match="characters"):
            inst.register_producer("bad group", object())
        await inst.start()
        await inst.refresh_routes()  # learns broker-a from the consumer's subscription
        await wait_until(lambda: broker.heartbeats, what="the greeting heartbeat")
        await inst.heartbeat_all_brokers()
        hb = broker.heartbeats[-1]
        assert hb.client_id == "127.0.0.1@unit"
        assert [p.group_name for p in hb.producer_data_set] == ["PG"]
        assert [c.group_name for c in hb.consumer_data_set] == ["CG"]
        assert hb.consumer_data_set[0].subscription_data_set[0].topic == "T"
        await inst.shutdown()
        got = {(u.producer_group, u.consumer_group) for u in broker.unregistered}
        assert got == {("PG", None), (None, "CG")}
        assert all(u.client_id == "127.0.0.1@unit" for u in broker.unregistered)

    with_cluster(test)


def test_broker_requests_reach_the_consumer():
    async def test(config, broker):
        inst = ClientInstance.get(config)
        consumer = FakeConsumer("CG", "T")
        inst.register_consumer("CG", consumer)
        await inst.start()
        await inst.refresh_routes()
        await wait_until(lambda: broker.heartbeats, what="a heartbeat")
        conn = broker.conn
        before = consumer.rebalances
        conn.send_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                 NotifyConsumerIdsChangedRequestHeader("CG").to_ext()))
        await wait_until(lambda: consumer.rebalances > before, what="a rebalance")
        offsets = {MessageQueue("T", "broker-a", 1): 7}
        conn.send_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                                 ResetOffsetRequestHeader("T", "CG", 0, True).to_ext(),
                                                 ResetOffsetBody(offsets).to_json()))
        await wait_until(lambda: consumer.resets, what="a reset")
        assert consumer.resets == [("T", offsets)]
        resp = await conn.request(RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader("CG", inst.client_id).to_ext()), 2000)
        assert resp.code == ResponseCode.SUCCESS
        info = ConsumerRunningInfo.from_json(resp.body)
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert "PROP_CLIENT_VERSION" in info.properties
        resp = await conn.request(RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader("nobody", inst.client_id).to_ext()), 2000)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "nobody" in resp.remark
        await inst.shutdown()

    with_cluster(test)


def test_rebalance_now_wakes_the_service():
    async def test(config, broker):
        config = ClientConfig(config.namesrv_addr, instance_name="fast", client_ip="127.0.0.1",
                              rebalance_interval_ms=60_000)
        inst = ClientInstance.get(config)
        consumer = FakeConsumer("CG2", "T")
        inst.register_consumer("CG2", consumer)
        await inst.start()
        inst.rebalance_now()
        await wait_until(lambda: consumer.rebalances == 1, what="the triggered rebalance")
        await asyncio.sleep(0.05)
        assert consumer.rebalances == 1
        await inst.shutdown()

    with_cluster(test)
