"""skiff.broker.grpc.routes: which host a gRPC route names for each broker group, a slave's own
group included (it names its master, as the NameServers know it, so a client whose access point
reaches a slave first sends where sends are taken)."""

import asyncio
from pathlib import Path

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.routes import Routes
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import ManualClock
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.bodies.topic import TopicConfig

ROUTE = TopicRouteData(queue_datas=(QueueData("broker-a", 4, 4, 6), QueueData("broker-b", 2, 2, 6)),
                       broker_datas=(BrokerData("c", "broker-a", {0: "127.0.0.2:10911", 1: "127.0.0.1:10911"}),
                                     BrokerData("c", "broker-b", {0: "127.0.0.3:10911"})))


def hosts(tmp_path: Path, slave: bool, route: TopicRouteData | None) -> list[tuple[str, str]]:
    topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(tmp_path), ManualClock(),
                                schedule_queue_nums=19)
    topics.load()
    topics.put(TopicConfig("T", 4, 4, 6))

    async def lookup(topic: str) -> TopicRouteData | None:
        return route
    routes = Routes(topics, "broker-a", "127.0.0.1", lookup, lambda: slave)
    return [(b.broker_name, b.host) for b in asyncio.run(routes.brokers("T"))]


def test_a_master_names_itself_and_the_other_groups_masters(tmp_path: Path) -> None:
    assert hosts(tmp_path, False, ROUTE) == [("broker-a", "127.0.0.1"), ("broker-b", "127.0.0.3")]


def test_a_slave_names_its_master(tmp_path: Path) -> None:
    assert hosts(tmp_path, True, ROUTE) == [("broker-a", "127.0.0.2"), ("broker-b", "127.0.0.3")]


def test_a_slave_whose_master_is_unknown_names_itself(tmp_path: Path) -> None:
    masterless = TopicRouteData(queue_datas=ROUTE.queue_datas[:1],
                                broker_datas=(BrokerData("c", "broker-a", {1: "127.0.0.1:10911"}),))
    assert hosts(tmp_path, True, masterless) == [("broker-a", "127.0.0.1")]
    assert hosts(tmp_path, True, None) == [("broker-a", "127.0.0.1")]


def test_each_master_is_named_at_the_grpc_endpoint_it_advertises(tmp_path: Path) -> None:
    """Brokers of one host serve gRPC on different ports: a master's advertised endpoint names it,
    one without an entry is named at this broker's port, and a master the table lacks makes the
    next route read the table again (a broker that just joined), not after the cache time."""
    topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(tmp_path), ManualClock(),
                                schedule_queue_nums=19)
    topics.load()
    topics.put(TopicConfig("T", 4, 4, 6))
    route = TopicRouteData(queue_datas=ROUTE.queue_datas,
                           broker_datas=(BrokerData("c", "broker-a", {0: "127.0.0.1:10911"}),
                                         BrokerData("c", "broker-b", {0: "127.0.0.1:10921"})))
    tables = [{"127.0.0.1:10911": "127.0.0.1:8081"}, {"127.0.0.1:10911": "127.0.0.1:8081",
                                                      "127.0.0.1:10921": "127.0.0.1:8091"}]
    reads = []

    async def lookup(topic: str) -> TopicRouteData | None:
        return route

    async def endpoints() -> dict[str, str] | None:
        reads.append(len(reads))
        return tables[min(len(reads), len(tables)) - 1]
    routes = Routes(topics, "broker-a", "127.0.0.1", lookup, lambda: False, endpoints, ManualClock())
    routes.grpc_port = 8081

    def named() -> list[tuple[str, str, int]]:
        return [(b.broker_name, b.host, b.grpc_port) for b in asyncio.run(routes.brokers("T"))]
    # broker-b has not advertised yet: named at this broker's port (the one-port convention)
    assert named() == [("broker-a", "127.0.0.1", 8081), ("broker-b", "127.0.0.1", 8081)]
    # its entry is looked for again at once, not after the cache time, and then reused
    assert named() == [("broker-a", "127.0.0.1", 8081), ("broker-b", "127.0.0.1", 8091)]
    assert named() == [("broker-a", "127.0.0.1", 8081), ("broker-b", "127.0.0.1", 8091)]
    assert len(reads) == 2
