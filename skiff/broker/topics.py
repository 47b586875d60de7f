"""TopicConfigManager: the broker's topics, their queue counts and permissions.

The table starts with RocketMQ's system topics (TBW102 when auto-creation is on,
SCHEDULE_TOPIC_XXXX, the self-test topic, topics named after the broker and its
cluster) and grows by admin requests, by producers sending to a new topic
(auto-created from the template they name, TBW102), and by retry and DLQ topics
made for consumer groups. Every change bumps the DataVersion, is written to
``config/topics.json`` at once (atomically) and calls ``on_change``, which
registers the new table with the NameServers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from skiff.broker.config import BrokerConfig
from skiff.broker.persist import VersionedTable
from skiff.common.clock import Clock
from skiff.common.names import (
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TBW102,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.topic import Perm, TopicConfig, TopicConfigSerializeWrapper

READ_WRITE = int(Perm.READ | Perm.WRITE)
INHERIT_READ_WRITE = int(Perm.INHERIT | Perm.READ | Perm.WRITE)
FILE_NAME = "topics.json"


def _plain(tc: TopicConfig) -> TopicConfig:
    """``tc`` with its perm a plain int: the send and pull paths test it on every request,
    and ``int & IntFlag`` goes through enum code, ten times slower."""
    return tc if type(tc.perm) is int else dataclasses.replace(tc, perm=int(tc.perm))


class TopicConfigManager(VersionedTable):
    def __init__(self, config: BrokerConfig, store_root: str, clock: Clock, *, schedule_queue_nums: int) -> None:
        super().__init__(store_root, FILE_NAME, clock)
        self.config = config
        self._table: dict[str, TopicConfig] = {}
        self.on_change: Callable[[], None] = lambda: None
        self._schedule_queue_nums = schedule_queue_nums

    # -- lifecycle ----------------------------------------------------------------

    def load(self) -> None:
        """Read ``topics.json`` (if any) over the system topics."""
        raw = self.file.load()
        if raw is not None:
            wrapper = TopicConfigSerializeWrapper.from_obj(raw, FILE_NAME)
            self._table.update({name: _plain(tc) for name, tc in wrapper.topic_config_table.items()})
            self.data_version = wrapper.data_version
        for tc in self._system_topics():
            self._table.setdefault(tc.topic_name, _plain(tc))
        if TBW102 in self._table and not self.config.auto_create_topic_enable:
            del self._table[TBW102]
        if raw is None:
            self.file.save(self.document())

    def replace(self, table: Mapping[str, TopicConfig], version: DataVersion) -> bool:
        return super().replace({name: _plain(tc) for name, tc in table.items()}, version)

    def _system_topics(self) -> list[TopicConfig]:
        name, cluster = self.config.broker_name, self.config.broker_cluster_name
        topics = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, self._schedule_queue_nums, self._schedule_queue_nums),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(name, 1, 1, INHERIT_READ_WRITE),
            TopicConfig(cluster, 16, 16, INHERIT_READ_WRITE),
            TopicConfig(TRANS_HALF_TOPIC, 1, 1),
            TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
        ]
        if self.config.auto_create_topic_enable:
            nums = self.config.default_topic_queue_nums
            topics.append(TopicConfig(TBW102, nums, nums, INHERIT_READ_WRITE))
        return topics

    def document(self) -> bytes:
        return self.wrapper().to_json()

    # -- reads --------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self._table

    def topics(self) -> list[str]:
        return sorted(self._table)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dict(self._table), self.data_version)

    # -- changes ------------------------------------------------------------------

    def put(self, tc: TopicConfig) -> None:
        """Create or replace a topic; persisted and registered at once."""
        tc = _plain(tc)
        if self._table.get(tc.topic_name) == tc:
            return
        self._table[tc.topic_name] = tc
        self._changed(f"topic {tc.topic_name} set to {tc.read_queue_nums} read / {tc.write_queue_nums} write "
                      f"queues, perm {int(tc.perm)}")

    def delete(self, topic: str) -> bool:
        if self._table.pop(topic, None) is None:
            return False
        self._changed(f"topic {topic} deleted")
        return True

    def create_from_template(self, topic: str, template: str, client_queue_nums: int, sys_flag: int) -> TopicConfig | None:
        """RocketMQ's createTopicInSendMessageMethod: a topic a producer sends to for the
        first time, shaped like ``template`` if that template lets topics inherit it."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        base = self._table.get(template)
        if base is None or not base.perm & Perm.INHERIT:
            return None
        nums = max(0, min(client_queue_nums, base.write_queue_nums))
        tc = TopicConfig(topic, nums, nums, int(base.perm & ~Perm.INHERIT), topic_sys_flag=sys_flag)
        self.put(tc)
        return tc

    def find_or_create(self, topic: str, queue_nums: int, perm: int = READ_WRITE) -> TopicConfig:
        """A topic the broker makes itself (retry, DLQ): created with these counts if missing."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.put(tc)
        return tc

    def _changed(self, what: str) -> None:
        self.changed(what)
        self.on_change()
