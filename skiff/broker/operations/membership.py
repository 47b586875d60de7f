"""Clients joining and leaving: a heartbeat's registration of a connection's consumers and
producers, a client's check of a subscription before it starts, an unregistration, and
forgetting a connection that closed, for remoting's HEART_BEAT, CHECK_CLIENT_CONFIG and
UNREGISTER_CLIENT.

On a consumer's heartbeat the broker makes sure the group exists
(``autoCreateSubscriptionGroup``, `GroupsOperation.ensure`) and creates its retry topic
``%RETRY%<group>`` with the group's retry queue count and perm 6. The C++ client's
rebalance visits that topic first and gives up on the whole group if it is routed but
unserved (RocketMQ 4.x's broker answers it only partly), so it is served fully.

Subscriptions are compiled when they arrive (`compile_subscription`, cached), so a bad one
is reported where the client can see it: a heartbeat still registers everything it carries
(as RocketMQ's does) but answers the first refusal (SUBSCRIPTION_PARSE_FAILED with the
error's position, or SYSTEM_ERROR when SQL92 is off); the check before a start answers the
same for one subscription, so the consumer's start fails with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.clients import ClientConn, ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.operations.groups import GroupsOperation
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.subscription import compile_subscription
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.common.names import retry_topic
from skiff.protocol.bodies.heartbeat import ConsumerData, SubscriptionData
from skiff.transport.connection import CloseReason


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one connection's client says it runs."""

    conn: ClientConn
    client_id: str
    language: str
    """The remoting LanguageCode's name (JAVA, CPP, ...)."""
    version: int
    consumers: tuple[ConsumerData, ...] = ()
    producer_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Leaving:
    """A client's groups it stops using on one connection (None: not that kind)."""

    conn: ClientConn
    producer_group: str | None = None
    consumer_group: str | None = None


class MembershipOperation:
    def __init__(self, config: BrokerConfig, clients: ClientManager, groups: GroupsOperation,
                 topics: TopicConfigManager) -> None:
        self.config = config
        self.clients = clients
        self.groups = groups
        self.topics = topics

    def heartbeat(self, beat: Heartbeat) -> Refusal | None:
        """Register every consumer and producer the heartbeat carries; the first subscription
        this broker cannot filter by is the refusal (the registration stands)."""
        channel = self.clients.channel(beat.conn, beat.client_id, beat.language, beat.version)
        for consumer in beat.consumers:
            group = self.groups.ensure(consumer.group_name)
            if group is not None:
                self.topics.find_or_create(retry_topic(consumer.group_name), group.retry_queue_nums, READ_WRITE)
            self.clients.register_consumer(consumer, channel)
        for producer_group in beat.producer_groups:
            self.clients.register_producer(producer_group, channel)
        return next(filter(None, map(self._refusal_of_consumer, beat.consumers)), None)

    def check(self, group: str, subscription: SubscriptionData) -> Refusal | None:
        """Why this broker would refuse to filter by ``subscription``, naming the group and topic."""
        compiled = compile_subscription(subscription.sub_string, subscription.expression_type.value,
                                        self.config.enable_property_filter)
        if not isinstance(compiled, Refusal):
            return None
        return Refusal(compiled.code, f"consumer group {group}, topic {subscription.topic}: {compiled.reason}")

    def leave(self, leaving: Leaving) -> None:
        self.clients.unregister(leaving.conn, leaving.producer_group, leaving.consumer_group)

    def closed(self, conn: ClientConn, reason: CloseReason | str) -> None:
        """Forget everything the connection registered: a remoting connection that closed, a
        5.x client's NotifyClientTermination (``reason`` says which)."""
        self.clients.connection_closed(conn, reason)

    def _refusal_of_consumer(self, consumer: ConsumerData) -> Refusal | None:
        refusals = (self.check(consumer.group_name, s) for s in consumer.subscription_data_set)
        return next(filter(None, refusals), None)
