"""Idle lite topics and stale lite subscriptions go, as RocketMQ 5.5's broker lets them go.

**Lite topics** (``AbstractLiteLifecycleManager``): every ``liteTtlCheckInterval`` (120 s), once the
broker has run ``minLiteTTl`` (15 min), a lite topic whose last message was stored more than its
parent's ``lite.topic.expiration`` minutes ago (and more than ``minLiteTTl`` ago) is deleted: its
queue, every group's offsets and POP state of it, and it leaves every subscription (the clients
are not told, as 5.5's ``cleanSubscription(lmq, false)``). Its lite name stays usable: the next
message or subscription makes it again, read from its start. As in 5.5, messages nobody consumed
do not keep it (5.5 checks only the time of the last message), a parent without the attribute or
with -1 keeps its lite topics, and a lite topic that never had a message is not looked at (5.5
makes none; Skiff makes one on a subscription: it stays until the parent goes).

**Subscriptions** (``LiteSubscriptionRegistryImpl.cleanupExpiredSubscriptions``): every
``liteSubscriptionCheckInterval`` (120 s), a client's lite subscription that it has not synced for
``liteSubscriptionCheckTimeoutMills`` (180 s) is dropped; the clients sync their whole set every
30 s, so only a client that went away without NotifyClientTermination loses its subscription.
"""

from __future__ import annotations

import logging

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.lite import LiteTopics, parent_and_lite
from skiff.broker.operations import PopOperation, TopicsOperation
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.service import Periodic
from skiff.protocol.bodies.topic_attributes import lite_topic_expiration_min

log = logging.getLogger(__name__)

MINUTE_MS = 60_000


class LiteExpiry:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, topic_ops: TopicsOperation,
                 pop: PopOperation, lite: LiteTopics, clock: Clock) -> None:
        self.config = config
        self.topics = topics
        self.topic_ops = topic_ops
        self.pop = pop
        self.lite = lite
        self.clock = clock
        self.started_ms = clock.now_ms()

    def periodics(self) -> list[Periodic]:
        """The two checks, each on its own interval (`BrokerConfig`'s keys)."""
        return [Periodic("grpc-lite-topic-expiry", self.config.lite_ttl_check_interval_ms / 1000.0, self._tick_topics),
                Periodic("grpc-lite-subscription-expiry", self.config.lite_subscription_check_interval_ms / 1000.0,
                         self._tick_subscriptions)]

    async def _tick_topics(self) -> None:
        await self.expire_topics()

    def _tick_subscriptions(self) -> None:
        self.expire_subscriptions()

    def idle(self, topic: str, now_ms: int) -> bool:
        """Whether lite topic ``topic`` has had no message for its parent's expiration time."""
        names = parent_and_lite(topic)
        parent = self.topics.get(names[0]) if names is not None else None
        minutes = lite_topic_expiration_min(parent.attributes) if parent is not None else -1
        if minutes <= 0:
            return False
        store = self.pop.service.store
        end = store.get_max_offset(topic, 0)
        last_ms = store.get_store_time(topic, 0, end - 1) if end > 0 else None
        if last_ms is None:
            return False
        idle_ms = now_ms - last_ms
        return idle_ms >= self.config.min_lite_ttl_ms and idle_ms > minutes * MINUTE_MS

    async def expire_topics(self) -> list[str]:
        """Delete the idle lite topics (none in the broker's first ``minLiteTTl``); the ones deleted."""
        now = self.clock.now_ms()
        if now - self.started_ms < self.config.min_lite_ttl_ms:
            return []
        gone = [t for t in self.topics.topics() if parent_and_lite(t) is not None and self.idle(t, now)]
        for topic in gone:
            await self._delete(topic)
        if gone:
            log.info("deleted %d idle lite topics (lite.topic.expiration): %s", len(gone), ", ".join(gone[:10]))
        return gone

    async def _delete(self, topic: str) -> None:
        refusal = await self.topic_ops.delete(topic)
        if refusal is not None:
            log.warning("idle lite topic %s not deleted: %s", topic, refusal.reason)
            return
        self.pop.service.state.forget_topic(topic)  # a lite topic made again starts at offset 0
        self.lite.left(topic)

    def expire_subscriptions(self) -> list[str]:
        """Drop the lite subscriptions not synced within ``liteSubscriptionCheckTimeoutMills``; their clients."""
        oldest = self.clock.now_ms() - self.config.lite_subscription_check_timeout_ms
        stale = [client for client, sub in self.lite.subscriptions.items() if sub.synced_ms < oldest]
        for client in stale:
            self.lite.forget(client)
        if stale:
            log.info("dropped the lite subscriptions of %d clients that stopped syncing: %s", len(stale),
                     ", ".join(stale[:10]))
        return stale
