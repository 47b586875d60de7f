"""Route bodies served by the NameServer: TopicRouteData (GET_ROUTEINFO_BY_TOPIC),
ClusterInfo (GET_BROKER_CLUSTER_INFO) and TopicList (topic listings).

TopicRouteData::

    {"brokerDatas": [{"brokerAddrs": {"0": "10.0.0.5:10911", "1": "10.0.0.6:10911"},
                      "brokerName": "broker-a", "cluster": "DefaultCluster"}],
     "filterServerTable": {},
     "orderTopicConf": "broker-a:4;broker-b:4",          (absent when there is none)
     "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                     "topicSysFlag": 0, "writeQueueNums": 4}]}

brokerAddrs is keyed by brokerId (0 = master), written as quoted strings, which
the C++ client accepts; the unquoted keys of Java NameServers up to 4.9.3
(``{0:"..."}``) are read too. QueueData's flag was spelled ``topicSynFlag``
before RocketMQ 4.9.0: both spellings are read, ``topicSysFlag`` is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from skiff.protocol.bodies.base import JsonBody

OLD_FLAG_KEY = "topicSynFlag"


@dataclass(frozen=True, slots=True)
class QueueData(JsonBody):
    """A topic's queues on one broker group."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @classmethod
    def from_obj(cls, raw: Any, path: str | None = None) -> Self:
        if isinstance(raw, Mapping) and "topicSysFlag" not in raw and OLD_FLAG_KEY in raw:
            raw = {**raw, "topicSysFlag": raw[OLD_FLAG_KEY]}
        return JsonBody.from_obj.__func__(cls, raw, path)  # type: ignore[attr-defined,no-any-return]


@dataclass(frozen=True, slots=True)
class BrokerData(JsonBody):
    """One broker group: its cluster, name and address per brokerId (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(0)


@dataclass(frozen=True, slots=True)
class TopicRouteData(JsonBody):
    """Where a topic lives: its queues per broker group and those groups' addresses."""

    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    filter_server_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo(JsonBody):
    """Every broker group by name, and the group names of each cluster."""

    broker_addr_table: Mapping[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicList(JsonBody):
    """Topic names (``brokerAddr`` is set only by the system-topic listing)."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None
