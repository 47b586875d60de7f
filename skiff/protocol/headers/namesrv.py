"""Custom headers of the NameServer's requests (RocketMQ's ``header/namesrv``).

Brokers send REGISTER_BROKER / UNREGISTER_BROKER / QUERY_DATA_VERSION; clients
send GET_ROUTEINFO_BY_TOPIC; admin tools send the rest. ``brokerId`` is a Java
Long (0 = master); ``bodyCrc32`` is CRC-32 of the body masked to 31 bits, as
RocketMQ's ``UtilAll.crc32`` computes it, and 0 means "not checked".
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: Int32 = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(Header):
    """Filled in for a slave: its master's address and HA address."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerIdentityHeader(Header):
    """Which broker asks: UNREGISTER_BROKER's and QUERY_DATA_VERSION's header."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


UnregisterBrokerRequestHeader = BrokerIdentityHeader
QueryDataVersionRequestHeader = BrokerIdentityHeader


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(Header):
    changed: bool | None = None


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class KVConfigKeyHeader(Header):
    """One KV config key: GET_KV_CONFIG's and DELETE_KV_CONFIG's header."""

    namespace: str
    key: str


GetKVConfigRequestHeader = KVConfigKeyHeader
DeleteKVConfigRequestHeader = KVConfigKeyHeader


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


@dataclass(frozen=True, slots=True)
class BrokerNameHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER's and ADD_WRITE_PERM_OF_BROKER's header."""

    broker_name: str


WipeWritePermOfBrokerRequestHeader = BrokerNameHeader
AddWritePermOfBrokerRequestHeader = BrokerNameHeader


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: Int32


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: Int32
