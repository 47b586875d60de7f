"""BrokerStats: the counters GET_BROKER_RUNTIME_INFO reports, with RocketMQ's key names
where RocketMQ has one."""

from __future__ import annotations

from collections.abc import Callable

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.common.clock import Clock
from skiff.protocol.codes import SKIFF_VERSION
from skiff.store import MessageStore

VERSION_DESC = "V4_9_7"
"""The RocketMQ version whose protocol Skiff speaks (SKIFF_VERSION's name)."""


class BrokerStats:
    """Counters updated once per request (a batch, a pull answer), never per message:
    ``stored``/``pulled`` are a dict lookup and a few integer adds on the hot path, and
    the Prometheus collector (`skiff.broker.metrics`) reads them at scrape time."""

    def __init__(self, config: BrokerConfig, store: MessageStore, clock: Clock, role: Role) -> None:
        """``role``: the broker's live role (a failover changes it), never a copy of broker.conf's."""
        self.config = config
        self.role = role
        self.store = store
        self.clock = clock
        self.boot_ms = clock.now_ms()
        self.pull_requests = 0
        self.messages_pulled = 0
        self.replication: Callable[[], dict[str, str]] | None = None
        self.held_pulls: Callable[[], int] = lambda: 0
        """How many long-polling pulls wait now (the broker's `PullHoldService`)."""
        """The HA service's keys for the table (role, slaves, acknowledged offsets)."""
        self.in_by_topic: dict[str, list[int]] = {}
        """topic → [messages, body bytes] stored from sends (send-backs and DLQ moves included)."""
        self.pulls: dict[tuple[str, str, int], list[int]] = {}
        """(group, topic, queue id) → [messages, bytes answered, next offset of the last pull]: one
        entry per queue a group reads, summed by topic and group only when metrics are scraped."""

    def stored(self, topic: str, messages: int, body_bytes: int) -> None:
        counts = self.in_by_topic.get(topic)
        if counts is None:
            self.in_by_topic[topic] = [messages, body_bytes]
        else:
            counts[0] += messages
            counts[1] += body_bytes

    def pulled(self, messages: int, topic: str = "", group: str = "", queue_id: int = 0, total_bytes: int = 0,
               next_offset: int = 0) -> None:
        self.pull_requests += 1
        self.messages_pulled += messages
        key = (group, topic, queue_id)
        entry = self.pulls.get(key)
        if entry is None:
            self.pulls[key] = [messages, total_bytes, next_offset]
        else:
            entry[0] += messages
            entry[1] += total_bytes
            entry[2] = next_offset

    def runtime_table(self) -> dict[str, str]:
        s = self.store.stats()
        up_s = (self.clock.now_ms() - self.boot_ms) // 1000
        table = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(SKIFF_VERSION),
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {up_s // 86400} days, {up_s % 86400 // 3600} hours, {up_s % 3600 // 60} minutes, "
                       f"{up_s % 60} seconds ]",
            "msgPutTotalTodayNow": str(s.put_messages),
            "msgGetTotalTodayNow": str(self.messages_pulled),
            "pullRequestsTotal": str(self.pull_requests),
            "putBytesTotal": str(s.put_bytes),
            "putFailuresTotal": str(s.put_failures),
            "commitLogMinOffset": str(s.min_physical_offset),
            "commitLogMaxOffset": str(s.max_physical_offset),
            "commitLogFlushedOffset": str(s.flushed_offset),
            "dispatchBehindBytes": str(s.max_physical_offset - s.dispatched_offset),
            "commitLogDiskRatio": f"{s.disk_used_percent / 100:.4f}",
            "fsyncTotal": str(s.fsync_count),
            "consumeQueues": str(s.consume_queues),
            "writable": "true" if s.writable else "false",
            "brokerName": self.config.broker_name,
            "brokerCluster": self.config.broker_cluster_name,
            "brokerId": str(self.role.broker_id),
            "brokerRole": self.role.role.name,
            "pullsHeld": str(self.held_pulls()),
        }
        if self.replication is not None:
            table.update(self.replication())
        return table
