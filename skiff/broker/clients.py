"""ClientManager: the producers and consumers connected to this broker.

Clients announce themselves with HEART_BEAT every 30 s: a client id, the
producer groups and the consumer groups (with their subscriptions) it runs.
Each group maps its connections to what the last heartbeat said. A client
leaves by UNREGISTER_CLIENT, by closing its connection, or by falling silent
for ``clientChannelExpiredTime`` (its connection is then closed).

Whenever the members of a consumer group change, every member is told with a
oneway NOTIFY_CONSUMER_IDS_CHANGED so it rebalances at once instead of at its
next 10-20 s rebalance tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from skiff.common.clock import Clock
from skiff.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ConnectionClosed
from skiff.protocol.headers.client_calls import NotifyConsumerIdsChangedRequestHeader
from skiff.transport.connection import CloseReason

log = logging.getLogger(__name__)


class ClientConn(Protocol):
    """What the client tables need of a client's connection: a remoting `Connection`, or a
    gRPC client (`skiff.broker.grpc.clients.GrpcClientConn`, its Telemetry stream)."""

    @property
    def peer_addr(self) -> str: ...

    @property
    def is_closed(self) -> bool: ...

    def send_oneway(self, cmd: RemotingCommand) -> None: ...

    def close(self, reason: CloseReason, detail: str, /) -> None: ...


@dataclass(slots=True)
class ClientChannel:
    """One client connection as its last heartbeat described it."""

    conn: ClientConn
    client_id: str
    language: str
    version: int
    last_update_ms: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[ClientConn, ClientChannel] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


class ClientManager:
    def __init__(self, clock: Clock, channel_expired_ms: int,
                 notify_enabled: Callable[[str], bool] = lambda group: True) -> None:
        """``notify_enabled(group)``: whether the group's members are told of changes (its
        subscription group's notifyConsumerIdsChangedEnable)."""
        self.clock = clock
        self.channel_expired_ms = channel_expired_ms
        self.notify_enabled = notify_enabled
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[ClientConn, ClientChannel]] = {}
        self._seen: dict[ClientConn, ClientChannel] = {}
        """The last heartbeat of each connection: any heartbeat keeps all its groups alive."""

    # -- registration ---------------------------------------------------------

    def channel(self, conn: ClientConn, client_id: str, language: str, version: int) -> ClientChannel:
        """A heartbeat arrived on ``conn``: its description, now the connection's latest."""
        channel = self._seen[conn] = ClientChannel(conn, client_id, language, version, self.clock.now_ms())
        return channel

    def register_producer(self, group: str, channel: ClientChannel) -> None:
        members = self.producers.setdefault(group, {})
        if channel.conn not in members:
            # DEBUG: producers (every `skiff send`) come and go with nothing to act on; consumers
            # joining and leaving move queues between members, so those stay INFO
            log.debug("producer %s of group %s joined from %s", channel.client_id, group, channel.conn.peer_addr)
        members[channel.conn] = channel

    def register_consumer(self, data: ConsumerData, channel: ClientChannel) -> bool:
        """Record a consumer's heartbeat; True (and the group told) when it is a new member."""
        info = self.consumers.get(data.group_name)
        if info is None:
            info = self.consumers[data.group_name] = ConsumerGroupInfo(
                data.group_name, data.consume_type, data.message_model, data.consume_from_where)
        info.consume_type, info.message_model = data.consume_type, data.message_model
        info.consume_from_where = data.consume_from_where
        info.subscriptions = {s.topic: s for s in data.subscription_data_set}
        joined = channel.conn not in info.channels
        info.channels[channel.conn] = channel
        if joined:
            log.info("consumer %s of group %s joined from %s", channel.client_id, data.group_name,
                     channel.conn.peer_addr)
            self._notify_changed(info)
        return joined

    def unregister(self, conn: ClientConn, producer_group: str | None, consumer_group: str | None) -> None:
        if producer_group:
            self._drop_producer(producer_group, conn)
        if consumer_group:
            self._drop_consumer(consumer_group, conn, "unregistered")

    def connection_closed(self, conn: ClientConn, reason: CloseReason | str = "") -> None:
        """Forget everything this connection registered."""
        self._seen.pop(conn, None)
        for group in [g for g, members in self.producers.items() if conn in members]:
            self._drop_producer(group, conn)
        for group in [g for g, info in self.consumers.items() if conn in info.channels]:
            self._drop_consumer(group, conn, f"connection closed: {getattr(reason, 'value', reason)}")

    def expire(self) -> list[ClientChannel]:
        """Drop clients silent for longer than clientChannelExpiredTime and close their connections."""
        limit = self.clock.now_ms() - self.channel_expired_ms
        stale = [c for c in self._seen.values() if c.last_update_ms < limit]
        for channel in stale:
            log.warning("client %s at %s expired: no heartbeat for %d ms", channel.client_id,
                        channel.conn.peer_addr, self.channel_expired_ms)
            self.connection_closed(channel.conn, "heartbeat expired")
            channel.conn.close(CloseReason.LOCAL_CLOSE, "no heartbeat within clientChannelExpiredTime")
        return stale

    def _drop_producer(self, group: str, conn: ClientConn) -> None:
        members = self.producers.get(group)
        if members is not None and members.pop(conn, None) is not None and not members:
            del self.producers[group]

    def _drop_consumer(self, group: str, conn: ClientConn, why: str) -> None:
        info = self.consumers.get(group)
        if info is None:
            return
        channel = info.channels.pop(conn, None)
        if channel is None:
            return
        log.info("consumer %s of group %s left (%s)", channel.client_id, group, why)
        if not info.channels:
            del self.consumers[group]
        else:
            self._notify_changed(info)

    # -- queries --------------------------------------------------------------

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def producer_channels(self, group: str) -> list[ClientChannel]:
        return list(self.producers.get(group, {}).values())

    # -- notification ---------------------------------------------------------

    def _notify_changed(self, info: ConsumerGroupInfo) -> None:
        if not self.notify_enabled(info.group):
            return
        header = NotifyConsumerIdsChangedRequestHeader(info.group).to_ext()
        for conn in list(info.channels):
            try:
                conn.send_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header))
            except ConnectionClosed:
                pass
