"""What the broker says of itself to the admin tools: its runtime info (GET_BROKER_RUNTIME_INFO,
``mqadmin brokerStatus``) and its configuration (GET_BROKER_CONFIG, ``mqadmin getBrokerConfig``).

Reads only: they refuse nothing. The configuration is broker.conf's keys of both the broker's
and the store's settings, with TLS secrets masked, and the topic table's data version, which
RocketMQ's tools read beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.config import BrokerConfig, config_properties
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import TopicConfigManager
from skiff.protocol.bodies.admin import DataVersion, KVTable
from skiff.store import StoreConfig


@dataclass(frozen=True, slots=True)
class BrokerProperties:
    """The broker's configuration as broker.conf's ``key=value`` pairs, and the topic table's version."""

    properties: dict[str, str]
    version: DataVersion

    def text(self) -> str:
        """The pairs as RocketMQ's answer spells them: one ``key=value`` line each, sorted."""
        return "".join(f"{k}={v}\n" for k, v in sorted(self.properties.items()))


class BrokerInfoOperation:
    def __init__(self, config: BrokerConfig, store_config: StoreConfig, topics: TopicConfigManager,
                 stats: BrokerStats) -> None:
        self.config = config
        self.store_config = store_config
        self.topics = topics
        self.stats = stats

    def runtime(self) -> KVTable:
        """The store's and the broker's figures as RocketMQ's runtime table names them."""
        return KVTable(self.stats.runtime_table())

    def properties(self) -> BrokerProperties:
        return BrokerProperties(config_properties(self.config, self.store_config), self.topics.data_version)
