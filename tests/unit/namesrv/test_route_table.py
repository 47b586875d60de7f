"""RouteTable: RocketMQ's RouteInfoManager rules, with a manual clock."""

from __future__ import annotations

from skiff.common.clock import ManualClock
from skiff.namesrv.route_table import RouteTable
from skiff.protocol.bodies.route import BrokerData, QueueData
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper

A0, A1, B0 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def topics(*configs: TopicConfig, version: DataVersion = DataVersion(1, 1)) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({tc.topic_name: tc for tc in configs}, version)


def table() -> tuple[RouteTable, ManualClock]:
    clock = ManualClock()
    return RouteTable(clock, broker_expired_ms=120_000), clock


def test_master_registration_creates_the_route():
    routes, _ = table()
    result = routes.register_broker("C", A0, "broker-a", 0, "10.0.0.1:10912", topics(TopicConfig("T", 4, 8, 6)))
    assert result.first_time and result.topics_updated and result.master_addr is None
    route = routes.topic_route("T")
    assert route.queue_datas == (QueueData("broker-a", 4, 8, 6, 0),)
    assert route.broker_datas == (BrokerData("C", "broker-a", {0: A0}),)
    assert routes.topic_route("missing") is None


def test_slave_gets_its_master_and_does_not_touch_queues():
    routes, _ = table()
    routes.register_broker("C", A0, "broker-a", 0, "10.0.0.1:10912", topics(TopicConfig("T", 4, 4, 6)))
    result = routes.register_broker("C", A1, "broker-a", 1, "10.0.0.2:10912", topics(TopicConfig("T", 1, 1, 2)))
    assert (result.master_addr, result.ha_server_addr, result.topics_updated) == (A0, "10.0.0.1:10912", False)
    route = routes.topic_route("T")
    assert route.queue_datas[0].read_queue_nums == 4
    assert route.broker_datas[0].broker_addrs == {0: A0, 1: A1}


def test_unchanged_data_version_skips_the_topic_rewrite():
    routes, _ = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T", 4, 4, 6)))
    again = routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T", 4, 4, 6)))
    assert not again.first_time and not again.topics_updated
    changed = routes.register_broker("C", A0, "broker-a", 0, "",
                                     topics(TopicConfig("T", 2, 2, 6), TopicConfig("U"), version=DataVersion(2, 2)))
    assert changed.topics_updated
    assert routes.topic_route("T").queue_datas[0].read_queue_nums == 2
    assert routes.all_topics().topic_list == ("T", "U")


def test_queues_sorted_by_broker_name_and_cluster_info():
    routes, _ = table()
    routes.register_broker("C", B0, "broker-b", 0, "", topics(TopicConfig("T", 2, 2, 6)))
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T", 4, 4, 6)))
    routes.register_broker("D", "10.0.0.9:1", "broker-d", 0, "", topics(TopicConfig("V")))
    route = routes.topic_route("T")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    info = routes.cluster_info()
    assert info.cluster_addr_table == {"C": ("broker-a", "broker-b"), "D": ("broker-d",)}
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: B0}
    assert routes.topics_by_cluster("D").topic_list == ("V",)
    assert routes.topics_by_cluster("nope").topic_list == ()


def test_expiry_drops_silent_brokers_and_their_topics():
    routes, clock = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T"), TopicConfig("OnlyA")))
    routes.register_broker("C", B0, "broker-b", 0, "", topics(TopicConfig("T")))
    clock.advance(100_000)
    routes.register_broker("C", B0, "broker-b", 0, "", topics(TopicConfig("T")))
    clock.advance(20_001)
    removed = routes.expire_brokers()
    assert [(r.addr, r.broker_name) for r in removed] == [(A0, "broker-a")]
    assert routes.topic_route("OnlyA") is None
    assert [q.broker_name for q in routes.topic_route("T").queue_datas] == ["broker-b"]
    assert routes.cluster_info().cluster_addr_table == {"C": ("broker-b",)}
    assert routes.expire_brokers() == []
    clock.advance(120_001)
    assert [r.addr for r in routes.expire_brokers()] == [B0]
    assert routes.all_topics().topic_list == () and routes.cluster_info().broker_addr_table == {}


def test_query_touch_keeps_a_broker_alive():
    routes, clock = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")))
    clock.advance(119_000)
    assert not routes.is_topic_config_changed(A0, DataVersion(1, 1))
    routes.touch(A0)
    clock.advance(2_000)
    assert routes.expire_brokers() == []
    assert routes.data_version(A0) == DataVersion(1, 1)


def test_master_expiry_keeps_the_group_while_a_slave_lives():
    routes, clock = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")))
    clock.advance(60_000)
    routes.register_broker("C", A1, "broker-a", 1, "", topics(TopicConfig("T")))
    clock.advance(60_001)
    assert [r.addr for r in routes.expire_brokers()] == [A0]
    route = routes.topic_route("T")
    assert route.broker_datas[0].broker_addrs == {1: A1} and route.broker_datas[0].master_addr is None


def test_unregister_and_channel_close():
    routes, _ = table()
    channel = object()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")), channel=channel)
    routes.register_broker("C", A1, "broker-a", 1, "", topics(TopicConfig("T")), channel=channel)
    routes.register_broker("C", B0, "broker-b", 0, "", topics(TopicConfig("T")), channel=object())
    assert routes.unregister_broker("C", A1, "broker-a", 1)
    assert not routes.unregister_broker("C", A1, "broker-a", 1)
    assert [r.addr for r in routes.on_channel_closed(channel)] == [A0]
    assert routes.live_broker_addrs() == (B0,)
    assert [b.broker_name for b in routes.topic_route("T").broker_datas] == ["broker-b"]


def test_slave_promoted_to_master_replaces_its_old_entry():
    routes, _ = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")))
    routes.register_broker("C", A1, "broker-a", 1, "", topics(TopicConfig("T")))
    routes.unregister_broker("C", A0, "broker-a", 0)
    result = routes.register_broker("C", A1, "broker-a", 0, "", topics(TopicConfig("T", 3, 3, 6)))
    assert result.topics_updated
    assert routes.topic_route("T").broker_datas[0].broker_addrs == {0: A1}


def test_delete_topic_everywhere_or_per_cluster_and_write_perm():
    routes, _ = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T"), TopicConfig("U")))
    routes.register_broker("D", B0, "broker-b", 0, "", topics(TopicConfig("T")))
    assert routes.delete_topic("T", "D")
    assert [q.broker_name for q in routes.topic_route("T").queue_datas] == ["broker-a"]
    assert routes.delete_topic("T") and routes.topic_route("T") is None
    assert not routes.delete_topic("T")
    assert routes.set_write_perm("broker-a", writable=False) == 1
    assert routes.topic_route("U").queue_datas[0].perm == 4
    assert routes.set_write_perm("broker-a", writable=True) == 1
    assert routes.topic_route("U").queue_datas[0].perm == 6


def test_filter_servers_and_order_conf_appear_in_the_route():
    routes, _ = table()
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")), ["10.0.0.1:30000"])
    route = routes.topic_route("T", "broker-a:4")
    assert route.filter_server_table == {A0: ("10.0.0.1:30000",)} and route.order_topic_conf == "broker-a:4"
    routes.register_broker("C", A0, "broker-a", 0, "", topics(TopicConfig("T")), [])
    assert routes.topic_route("T").filter_server_table == {}
