"""HEART_BEAT (34) and UNREGISTER_CLIENT (35), and forgetting clients whose connection closes.

On a consumer's heartbeat the broker makes sure the group's subscription config
exists (``autoCreateSubscriptionGroup``) and creates its retry topic
``%RETRY%<group>`` with the group's retry queue count (1) and perm 6. The C++
client's rebalance visits that topic first and gives up on the whole group if it
is routed but unserved (remoting-protocol.md pitfall 5), so it is served fully:
readable queues, and GET_CONSUMER_LIST_BY_GROUP answers for it like for any topic.
"""

from __future__ import annotations

from skiff.broker.clients import ClientManager
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.common.names import retry_topic
from skiff.protocol.bodies.heartbeat import HeartbeatData
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import UnregisterClientRequestHeader
from skiff.transport.connection import CloseReason, Connection, Handler


class ClientManageProcessor:
    def __init__(self, clients: ClientManager, groups: SubscriptionGroupManager, topics: TopicConfigManager) -> None:
        self.clients = clients
        self.groups = groups
        self.topics = topics

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister,
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
        return req.response()

    def unregister(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        u = UnregisterClientRequestHeader.from_ext(req.ext_fields)
        self.clients.unregister(conn, u.producer_group, u.consumer_group)
        return req.response()

    def connection_closed(self, conn: Connection, reason: CloseReason) -> None:
        self.clients.connection_closed(conn, reason)
