"""Who is connected: a consumer group's members (their connections and subscriptions, or only
their client ids) and a producer group's connections, for remoting's
GET_CONSUMER_CONNECTION_LIST, GET_CONSUMER_LIST_BY_GROUP and GET_PRODUCER_CONNECTION_LIST.

Clients of both doors are in the one `ClientManager` (a 5.x client by its Settings), so
these lists name gRPC clients too. A group with no live member is refused with RocketMQ's
codes: CONSUMER_NOT_ONLINE for the connection list, SYSTEM_ERROR for the others.
"""

from __future__ import annotations

from skiff.broker.clients import ClientChannel, ClientManager
from skiff.broker.operations.refusal import Refusal
from skiff.protocol.bodies.consumer import Connection, ConsumerConnection, ProducerConnection
from skiff.protocol.codes import LanguageCode, ResponseCode


class ConnectionsOperation:
    def __init__(self, clients: ClientManager) -> None:
        self.clients = clients

    def consumer_connection(self, group: str) -> ConsumerConnection | Refusal:
        """The group's members, what they subscribe, and how they consume."""
        info = self.clients.consumer_group(group)
        if info is None:
            return Refusal(ResponseCode.CONSUMER_NOT_ONLINE, f"no consumer of group {group} is connected")
        return ConsumerConnection(tuple(connection(c) for c in info.channels.values()), dict(info.subscriptions),
                                  info.consume_type, info.message_model, info.consume_from_where)

    def consumer_ids(self, group: str) -> list[str] | Refusal:
        """The client ids of the group's live members, sorted (each client rebalances by this list)."""
        info = self.clients.consumer_group(group)
        if info is None or not info.channels:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"no consumer of group {group} is connected")
        return info.client_ids()

    def producer_connection(self, group: str) -> ProducerConnection | Refusal:
        channels = self.clients.producer_channels(group)
        if not channels:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"no producer of group {group} is connected")
        return ProducerConnection(tuple(connection(c) for c in channels))


def connection(channel: ClientChannel) -> Connection:
    """A client's connection as the admin bodies list it (an unknown language is OTHER)."""
    language = LanguageCode.__members__.get(channel.language, LanguageCode.OTHER)
    return Connection(channel.client_id, channel.conn.peer_addr, language, channel.version)
