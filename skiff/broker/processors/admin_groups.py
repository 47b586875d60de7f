"""Admin requests about consumer and producer groups.

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204) and
INVOKE_BROKER_TO_RESET_OFFSET (222).

Resetting offsets moves a group's committed offsets on a topic to the first
message stored at or after a time (``-1``: the end of each queue), in the
broker's table (so a group that is offline starts there too), and tells every
live member with RESET_CONSUMER_CLIENT_OFFSET (the C++ client reads its own body
form). Without ``isForce`` an offset only ever moves back.
"""

from __future__ import annotations

from skiff.broker.clients import ClientChannel, ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager, settings_error
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.pop.service import PopService
from skiff.broker.topics import TopicConfigManager
from skiff.common.message import MessageQueue
from skiff.common.names import group_error
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.client_calls import ResetOffsetBody
from skiff.protocol.bodies.consumer import Connection as ConnectionBody
from skiff.protocol.bodies.consumer import ConsumerConnection, ConsumeStats, OffsetWrapper, ProducerConnection
from skiff.protocol.codes import LanguageCode, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ConnectionClosed
from skiff.protocol.headers import admin as h
from skiff.protocol.headers.client_calls import ResetOffsetRequestHeader
from skiff.store import MessageStore
from skiff.transport.connection import Connection, Handler

LATEST = -1
"""A reset timestamp meaning "the end of each queue"."""


class GroupAdminProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager, clients: ClientManager,
                 pop: PopService) -> None:
        """``pop``: the POP groups' cursors and in-flight messages, for their topics, pull offsets
        and real lag in the consume stats."""
        self.pop = pop
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
        }

    def create_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = SubscriptionGroupConfig.from_json(req.body)
        why = group_error(group.group_name) or settings_error(group)
        if why is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, why)
        self.groups.put(group)
        return req.response()

    def all_groups(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.groups.wrapper().to_json())

    def delete_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        d = h.DeleteSubscriptionGroupRequestHeader.from_ext(req.ext_fields)
        self.groups.delete(d.group_name)
        if d.remove_offset:
            self.offsets.remove_group(d.group_name)
        return req.response()

    def consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.GetConsumeStatsRequestHeader.from_ext(req.ext_fields)
        info = self.clients.consumer_group(q.consumer_group)
        topics = [q.topic] if q.topic else sorted(
            {*self.offsets.topics_of(q.consumer_group), *(t for g, t, _, _ in self.pop.consumed() if g == q.consumer_group)})
        table: dict[MessageQueue, OffsetWrapper] = {}
        for topic in topics:
            tc = self.topics.get(topic)
            if tc is None or (info is not None and topic not in info.subscriptions):
                continue
            committed = self.offsets.offsets(q.consumer_group, topic)
            for queue_id in range(tc.read_queue_nums):  # the queues consumers read, as Java's getConsumeStats
                table[MessageQueue(topic, self.config.broker_name, queue_id)] = self._queue_stats(
                    q.consumer_group, topic, queue_id, max(committed.get(queue_id, 0), 0))  # -1 counts as 0, as Java
        if not table and q.topic and self.topics.get(q.topic) is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {q.topic} does not exist on this broker")
        return req.response(body=ConsumeStats(table).to_json())

    def _queue_stats(self, group: str, topic: str, queue_id: int, consumed: int) -> OffsetWrapper:
        last = self.store.get_store_time(topic, queue_id, consumed - 1) if consumed > 0 else None
        popped = self.pop.progress(group, topic, queue_id)
        pulled, in_flight = popped if popped is not None else (consumed, 0)
        return OffsetWrapper(self.store.get_max_offset(topic, queue_id), consumed, last or 0, max(pulled, consumed),
                             in_flight)

    def consumer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetConsumerConnectionListRequestHeader.from_ext(req.ext_fields).consumer_group
        info = self.clients.consumer_group(group)
        if info is None:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, f"no consumer of group {group} is connected")
        body = ConsumerConnection(
            tuple(_connection(c) for c in info.channels.values()), dict(info.subscriptions),
            info.consume_type, info.message_model, info.consume_from_where)
        return req.response(body=body.to_json())

    def producer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetProducerConnectionListRequestHeader.from_ext(req.ext_fields).producer_group
        channels = self.clients.producer_channels(group)
        if not channels:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no producer of group {group} is connected")
        return req.response(body=ProducerConnection(tuple(_connection(c) for c in channels)).to_json())

    def reset_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        r = ResetOffsetRequestHeader.from_ext(req.ext_fields)
        tc = self.topics.get(r.topic)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {r.topic} does not exist on this broker")
        table = {}
        for queue_id in range(tc.write_queue_nums):
            target = self._reset_target(r.topic, queue_id, r.timestamp)
            current = self.offsets.query(r.group, r.topic, queue_id)
            if r.is_force or current is None or current < 0 or target < current:  # below 0: no offset
                self.offsets.commit(r.group, r.topic, queue_id, target)
            else:
                target = current
            table[MessageQueue(r.topic, self.config.broker_name, queue_id)] = target
        self._tell_consumers(r, ResetOffsetBody(table))
        return req.response(body=ResetOffsetBody(table).to_json())

    def _reset_target(self, topic: str, queue_id: int, timestamp: int) -> int:
        if timestamp == LATEST:
            return self.store.get_max_offset(topic, queue_id)
        return self.store.get_offset_by_time(topic, queue_id, timestamp)

    def _tell_consumers(self, r: ResetOffsetRequestHeader, body: ResetOffsetBody) -> None:
        info = self.clients.consumer_group(r.group)
        if info is None:
            return
        ext = r.to_ext()
        for channel in list(info.channels.values()):
            raw = body.to_json_for_cpp() if channel.language == LanguageCode.CPP.name else body.to_json()
            try:
                channel.conn.send_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, raw))
            except ConnectionClosed:
                pass


def _connection(channel: ClientChannel) -> ConnectionBody:
    language = LanguageCode.__members__.get(channel.language, LanguageCode.OTHER)
    return ConnectionBody(channel.client_id, channel.conn.peer_addr, language, channel.version)
