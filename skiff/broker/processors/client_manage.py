"""HEART_BEAT (34) and UNREGISTER_CLIENT (35), and forgetting clients whose connection closes.

On a consumer's heartbeat the broker makes sure the group's subscription config
exists (``autoCreateSubscriptionGroup``) and creates its retry topic
``%RETRY%<group>`` with the group's retry queue count (1) and perm 6. The C++
client's rebalance visits that topic first and gives up on the whole group if it
is routed but unserved (RocketMQ 4.x's broker answers it only partly), so it is served fully:
readable queues, and GET_CONSUMER_LIST_BY_GROUP answers for it like for any topic.

Subscriptions are compiled when they arrive (`compile_subscription`, cached), so
a bad one is reported where the client can see it: a heartbeat still registers
everything it carries (as RocketMQ's does) but answers the first refusal
(SUBSCRIPTION_PARSE_FAILED with the error's position, or SYSTEM_ERROR when SQL92
is off); CHECK_CLIENT_CONFIG (46), which a consumer sends before it starts,
answers the same for one subscription, so the consumer's start fails with it.
"""

from __future__ import annotations

from skiff.broker.clients import ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.operations import Refusal, compile_subscription
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.common.names import retry_topic
from skiff.protocol.bodies.heartbeat import CheckClientRequestBody, ConsumerData, HeartbeatData, SubscriptionData
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import UnregisterClientRequestHeader
from skiff.transport.connection import CloseReason, Connection, Handler


class ClientManageProcessor:
    def __init__(self, config: BrokerConfig, clients: ClientManager, groups: SubscriptionGroupManager,
                 topics: TopicConfigManager) -> None:
        self.config = config
        self.clients = clients
        self.groups = groups
        self.topics = topics

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heartbeat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.from_json(req.body)
        channel = self.clients.channel(conn, data.client_id, req.language, req.version)
        for consumer in data.consumer_data_set:
            group = self.groups.find_or_create(consumer.group_name)
            if group is not None:
                self.topics.find_or_create(retry_topic(consumer.group_name), group.retry_queue_nums, READ_WRITE)
            self.clients.register_consumer(consumer, channel)
        for producer in data.producer_data_set:
            self.clients.register_producer(producer.group_name, channel)
        refusal = next(filter(None, map(self._refusal_of_group, data.consumer_data_set)), None)
        return req.response() if refusal is None else req.response(refusal.code, refusal.reason)

    def check_client_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = CheckClientRequestBody.from_json(req.body)
        refusal = self._refusal(body.group, body.subscription_data)
        return req.response() if refusal is None else req.response(refusal.code, refusal.reason)

    def _refusal_of_group(self, consumer: ConsumerData) -> Refusal | None:
        refusals = (self._refusal(consumer.group_name, s) for s in consumer.subscription_data_set)
        return next(filter(None, refusals), None)

    def _refusal(self, group: str, sub: SubscriptionData) -> Refusal | None:
        """Why this broker would refuse to filter by ``sub``, naming the group and topic."""
        compiled = compile_subscription(sub.sub_string, sub.expression_type.value, self.config.enable_property_filter)
        if not isinstance(compiled, Refusal):
            return None
        return Refusal(compiled.code, f"consumer group {group}, topic {sub.topic}: {compiled.reason}")

    def unregister(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        u = UnregisterClientRequestHeader.from_ext(req.ext_fields)
        self.clients.unregister(conn, u.producer_group, u.consumer_group)
        return req.response()

    def connection_closed(self, conn: Connection, reason: CloseReason) -> None:
        self.clients.connection_closed(conn, reason)
