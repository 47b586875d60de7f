"""The NameServer's whole state: which broker groups exist, where they are, which
topics they hold and when each broker last registered (RocketMQ's RouteInfoManager).

Pure and in memory: no I/O, time from an injected `Clock`, and the connection a
broker registered on kept as an opaque ``channel`` so the server can drop the
broker when that connection closes. Everything runs on one event loop, so
there is no lock.

Rules kept from RocketMQ:
- only a master (brokerId 0) creates or updates a topic's queues; a slave's
  registration answers with its master's address and HA address;
- a registration whose DataVersion equals the one last registered from that
  address leaves the topics alone (the 30-second re-registration is cheap);
- an address registered under another brokerId of the same group (a slave
  turned master) replaces the old entry;
- a broker silent longer than the expiry, unregistered, or whose connection
  closed loses its address; the last address of a group takes the group's
  queues with it, and topics left with no queues disappear.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.protocol.bodies.route import BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.topic import Perm, TopicConfig, TopicConfigSerializeWrapper

MASTER_ID = 0

DEFAULT_BROKER_EXPIRED_MS = 120_000
"""RocketMQ's BROKER_CHANNEL_EXPIRED_TIME."""


@dataclass(slots=True)
class _Group:
    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Live:
    last_update_ms: int
    data_version: DataVersion
    channel: object | None
    ha_server_addr: str


class RegisterResult(NamedTuple):
    """What a registration answers (master and HA address for a slave) and what it did."""

    ha_server_addr: str | None
    master_addr: str | None
    first_time: bool
    topics_updated: bool


class RemovedBroker(NamedTuple):
    addr: str
    broker_name: str | None
    channel: object | None


class RouteTable:
    """Broker groups, clusters, topic queues and broker liveness."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, broker_expired_ms: int = DEFAULT_BROKER_EXPIRED_MS) -> None:
        self._clock = clock
        self.broker_expired_ms = broker_expired_ms
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._groups: dict[str, _Group] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[str, _Live] = {}
        self._filter_servers: dict[str, tuple[str, ...]] = {}

    def _now_ms(self) -> int:
        return int(self._clock.monotonic() * 1000)

    # ------------------------------------------------------------ brokers

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigSerializeWrapper,
        filter_servers: Iterable[str] | None = None,
        channel: object | None = None,
    ) -> RegisterResult:
        self._clusters.setdefault(cluster_name, set()).add(broker_name)
        group = self._groups.get(broker_name)
        first_time = group is None
        if group is None:
            group = self._groups[broker_name] = _Group(cluster_name)
        for other_id in [i for i, a in group.addrs.items() if a == broker_addr and i != broker_id]:
            del group.addrs[other_id]
        first_time = group.addrs.get(broker_id) is None or first_time
        group.addrs[broker_id] = broker_addr
        topics_updated = broker_id == MASTER_ID and (
            first_time or self.is_topic_config_changed(broker_addr, topics.data_version)
        )
        if topics_updated:
            for config in topics.topic_config_table.values():
                self._put_queue_data(broker_name, config)
        self._live[broker_addr] = _Live(self._now_ms(), topics.data_version, channel, ha_server_addr)
        if filter_servers is not None:
            self._set_filter_servers(broker_addr, tuple(filter_servers))
        master_addr, master_ha = self._master_of(group) if broker_id != MASTER_ID else (None, None)
        return RegisterResult(master_ha, master_addr, first_time, topics_updated)

    def _put_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        self._topics.setdefault(config.topic_name, {})[broker_name] = QueueData(
            broker_name, config.read_queue_nums, config.write_queue_nums, int(config.perm), config.topic_sys_flag
        )

    def _set_filter_servers(self, broker_addr: str, servers: tuple[str, ...]) -> None:
        if servers:
            self._filter_servers[broker_addr] = servers
        else:
            self._filter_servers.pop(broker_addr, None)

    def _master_of(self, group: _Group) -> tuple[str | None, str | None]:
        master_addr = group.addrs.get(MASTER_ID)
        live = self._live.get(master_addr) if master_addr is not None else None
        return (master_addr, live.ha_server_addr) if live is not None else (None, None)

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> bool:
        """Forget one broker; the group goes (with its queues) when it was the last."""
        found = self._live.pop(broker_addr, None) is not None
        self._filter_servers.pop(broker_addr, None)
        group = self._groups.get(broker_name)
        if group is not None:
            found = group.addrs.pop(broker_id, None) is not None or found
            if not group.addrs:
                self._drop_group(broker_name, cluster_name)
        return found

    def _drop_group(self, broker_name: str, cluster_name: str) -> None:
        del self._groups[broker_name]
        names = self._clusters.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster_name]
        for topic in list(self._topics):
            queues = self._topics[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self._topics[topic]

    def _remove_addr(self, broker_addr: str) -> RemovedBroker:
        live = self._live.pop(broker_addr, None)
        self._filter_servers.pop(broker_addr, None)
        for name, group in self._groups.items():
            ids = [i for i, a in group.addrs.items() if a == broker_addr]
            if ids:
                for i in ids:
                    del group.addrs[i]
                if not group.addrs:
                    self._drop_group(name, group.cluster)
                return RemovedBroker(broker_addr, name, live.channel if live else None)
        return RemovedBroker(broker_addr, None, live.channel if live else None)

    def expire_brokers(self) -> list[RemovedBroker]:
        """Drop every broker that has not registered within the expiry; return them."""
        deadline = self._now_ms() - self.broker_expired_ms
        expired = [addr for addr, live in self._live.items() if live.last_update_ms < deadline]
        return [self._remove_addr(addr) for addr in expired]

    def on_channel_closed(self, channel: object) -> list[RemovedBroker]:
        """Drop the brokers that registered over ``channel``, which just closed."""
        addrs = [addr for addr, live in self._live.items() if live.channel is channel]
        return [self._remove_addr(addr) for addr in addrs]

    def is_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        live = self._live.get(broker_addr)
        return live is None or live.data_version != version

    def data_version(self, broker_addr: str) -> DataVersion | None:
        live = self._live.get(broker_addr)
        return live.data_version if live is not None else None

    def touch(self, broker_addr: str) -> None:
        """Count a broker as alive now (its QUERY_DATA_VERSION found nothing changed)."""
        live = self._live.get(broker_addr)
        if live is not None:
            live.last_update_ms = self._now_ms()

    def live_broker_addrs(self) -> tuple[str, ...]:
        return tuple(sorted(self._live))

    # ------------------------------------------------------------- topics

    def topic_route(self, topic: str, order_topic_conf: str | None = None) -> TopicRouteData | None:
        """The route of ``topic``: None unless it has queues on a known broker group."""
        queues = self._topics.get(topic)
        if not queues:
            return None
        brokers = [self._broker_data(name) for name in sorted(queues) if name in self._groups]
        if not brokers:
            return None
        filters = {
            addr: self._filter_servers[addr]
            for b in brokers for addr in b.broker_addrs.values() if addr in self._filter_servers
        }
        queue_datas = tuple(queues[name] for name in sorted(queues))
        return TopicRouteData(queue_datas, tuple(brokers), filters, order_topic_conf)

    def _broker_data(self, broker_name: str) -> BrokerData:
        group = self._groups[broker_name]
        return BrokerData(group.cluster, broker_name, dict(sorted(group.addrs.items())))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> bool:
        """Delete a topic everywhere, or only its queues on ``cluster_name``'s groups."""
        queues = self._topics.get(topic)
        if queues is None:
            return False
        if cluster_name:
            for name in self._clusters.get(cluster_name, ()):
                queues.pop(name, None)
            if queues:
                return True
        del self._topics[topic]
        return True

    def all_topics(self) -> TopicList:
        return TopicList(tuple(sorted(self._topics)))

    def topics_by_cluster(self, cluster_name: str) -> TopicList:
        names = self._clusters.get(cluster_name, set())
        return TopicList(tuple(sorted(t for t, queues in self._topics.items() if names.intersection(queues))))

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: self._broker_data(name) for name in sorted(self._groups)},
            {cluster: tuple(sorted(names)) for cluster, names in sorted(self._clusters.items())},
        )

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """Take write permission from every topic on ``broker_name`` (before it stops),
        or give read and write back; return how many topics changed."""
        count = 0
        for queues in self._topics.values():
            qd = queues.get(broker_name)
            if qd is not None:
                perm = Perm.READ | Perm.WRITE if writable else qd.perm & ~Perm.WRITE
                queues[broker_name] = dataclasses.replace(qd, perm=int(perm))
                count += 1
        return count
