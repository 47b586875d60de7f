"""gRPC clients: their Settings, their Telemetry streams, and their place in the broker's
`ClientManager` (so that transaction check-backs reach them).

A client is known by its ``x-mq-client-id`` header. Its Settings (sent on its
Telemetry stream) are kept and answered with the server's side merged in, as
RocketMQ's proxy does (`ClientActivity`): ``status`` OK (the official clients
ignore a reply without it), the producer's ``max_body_size`` and backoff, the
consumer's batch size, long-polling time and retry policy (``retryMaxTimes`` + 1
attempts, backoff = the broker's delay levels from 1 s).

A producer is registered in the `ClientManager` under each of its topics (the
proxy's producer group is the topic) with a `GrpcClientConn`: when the transaction
service sends it CHECK_TRANSACTION_STATE, the conn turns it into a
``recover_orphaned_transaction_command`` on the client's Telemetry stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import NamedTuple

from skiff.broker.clients import ClientChannel, ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.groups import backoff_ms
from skiff.broker.grpc.convert import to_message
from skiff.broker.operations import GroupsOperation
from skiff.common.limits import LONG_POLL_DEFAULT_MS, POP_MAX_MSG_NUMS, TELEMETRY_QUEUED_MAX
from skiff.common.stored_message import decode_record
from skiff.protocol.bodies.admin import ExponentialRetryPolicy, GroupRetryPolicy
from skiff.protocol.bodies.heartbeat import (
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ConnectionClosed
from skiff.protocol.headers.transaction import CheckTransactionStateRequestHeader
from skiff.protocol.mq_version import V5_0_0, version_ordinal
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

log = logging.getLogger(__name__)

MAX_REMEMBERED_TRANSACTIONS = 100_000
_LANGUAGES = {"JAVA": "JAVA", "CPP": "CPP", "DOT_NET": "DOTNET", "GOLANG": "GO", "RUST": "RUST", "PYTHON": "PYTHON",
              "PHP": "PHP", "RUBY": "RUBY"}
"""A 5.x client's language (its Settings' user agent) -> the remoting LanguageCode name; others are OTHER."""


class HalfRef(NamedTuple):
    """What END_TRANSACTION needs of a half message (the gRPC request carries only ids)."""

    producer_group: str
    queue_offset: int
    commit_log_offset: int
    offset_msg_id: str


class GrpcClientConn:
    """A gRPC client as the broker's client tables see a connection: it has a peer, can be
    closed, and takes oneway commands (CHECK_TRANSACTION_STATE), which go out on its
    Telemetry stream."""

    def __init__(self, client_id: str, peer: tuple[str, int], halves: OrderedDict[str, HalfRef]) -> None:
        self.client_id = client_id
        self.peer = peer
        self.peer_addr = f"{peer[0]}:{peer[1]}"
        self.stream: asyncio.Queue[rpc.TelemetryCommand | None] | None = None
        self.is_closed = False
        self._halves = halves

    def send_oneway(self, cmd: RemotingCommand) -> None:
        if self.stream is None or self.is_closed:
            raise ConnectionClosed(self.peer_addr, "the client has no Telemetry stream open")
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        h = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        message = to_message(decode_record(bytes(cmd.body)))
        tx_id = h.transaction_id or message.system_properties.message_id
        remember(self._halves, tx_id, HalfRef(message.topic.name, h.tran_state_table_offset, h.commit_log_offset,
                                              h.offset_msg_id or ""))
        command = rpc.RecoverOrphanedTransactionCommand(message=message, transaction_id=tx_id)
        try:
            self.stream.put_nowait(rpc.TelemetryCommand(recover_orphaned_transaction_command=command))
        except asyncio.QueueFull:
            raise ConnectionClosed(self.peer_addr, f"the client has not read its Telemetry stream: "
                                                   f"{TELEMETRY_QUEUED_MAX} commands wait") from None

    def close(self, *args: object) -> None:
        self.is_closed = True
        if self.stream is not None:
            end_stream(self.stream)


def end_stream(stream: asyncio.Queue[rpc.TelemetryCommand | None]) -> None:
    """Queue the end of a Telemetry stream, making room for it in a full queue (the client is
    going away: what it did not read is moot)."""
    if stream.full():
        stream.get_nowait()
    stream.put_nowait(None)


def remember(halves: OrderedDict[str, HalfRef], tx_id: str, ref: HalfRef) -> None:
    halves[tx_id] = ref
    halves.move_to_end(tx_id)
    while len(halves) > MAX_REMEMBERED_TRANSACTIONS:
        halves.popitem(last=False)


class GrpcClients:
    def __init__(self, config: BrokerConfig, clients: ClientManager, groups: GroupsOperation,
                 max_body_bytes: int) -> None:
        """``max_body_bytes``: the store's maxMessageSize, which Settings tells publishers and
        SendMessage holds bodies to (as the remoting door's store check does); ``groups``: a
        consumer's group is made on first sight as the remoting heartbeat and Kafka's JoinGroup
        make theirs (`GroupsOperation.ensure`)."""
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.clients = clients
        self.groups = groups
        self.settings: dict[str, pb.Settings] = {}
        self.conns: dict[str, GrpcClientConn] = {}
        self.halves: OrderedDict[str, HalfRef] = OrderedDict()

    def conn(self, client_id: str, peer: tuple[str, int]) -> GrpcClientConn:
        found = self.conns.get(client_id)
        if found is None or found.is_closed:
            found = self.conns[client_id] = GrpcClientConn(client_id, peer, self.halves)
        return found

    def on_settings(self, conn: GrpcClientConn, settings: pb.Settings) -> rpc.TelemetryCommand:
        """Keep a client's Settings, register it, and the reply for its stream."""
        self.settings[conn.client_id] = settings
        self.touch(conn)
        merged = pb.Settings()
        merged.CopyFrom(settings)
        merged.metric.on = False
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                self.clients.register_producer(topic.name, self._channel(conn))
            merged.publishing.max_body_size = self.max_body_bytes
            merged.publishing.validate_message_type = True
            policy = merged.backoff_policy
            policy.max_attempts = 3
            policy.exponential_backoff.initial.FromMilliseconds(10)
            policy.exponential_backoff.max.FromMilliseconds(1000)
            policy.exponential_backoff.multiplier = 2
        else:
            sub = merged.subscription
            sub.receive_batch_size = POP_MAX_MSG_NUMS
            if not settings.subscription.HasField("long_polling_timeout"):
                sub.long_polling_timeout.FromMilliseconds(LONG_POLL_DEFAULT_MS)
            group = self.groups.ensure(settings.subscription.group.name)
            sub.fifo = group is not None and group.consume_message_orderly
            retry_max_times = self.config.max_reconsume_times if group is None else group.retry_max_times
            merged.backoff_policy.max_attempts = retry_max_times + 1
            retry = group.group_retry_policy if group is not None else GroupRetryPolicy()
            _backoff(merged.backoff_policy, backoff_ms(retry, self.config.delay_levels_ms))
        return rpc.TelemetryCommand(status=pb.Status(code=pb.OK, message="OK"), settings=merged)

    def touch(self, conn: GrpcClientConn) -> None:
        """A sign of life (Heartbeat, Settings): the client is not expired, and a consumer is a
        member of its group again (as the proxy's heartbeat: after an expiry too)."""
        settings = self.settings.get(conn.client_id)
        if settings is not None and settings.HasField("subscription") and settings.subscription.group.name:
            self._register_consumer(conn, settings)
        else:
            self._channel(conn)

    def _channel(self, conn: GrpcClientConn) -> ClientChannel:
        settings = self.settings.get(conn.client_id)
        language = pb.Language.Name(settings.user_agent.language) if settings is not None else ""
        return self.clients.channel(conn, conn.client_id, _LANGUAGES.get(language, "OTHER"), client_version(settings))

    def _register_consumer(self, conn: GrpcClientConn, settings: pb.Settings) -> None:
        """A consumer's Settings make it a member of its group in the broker's client table, as
        the proxy registers it: online for the admin tools and the dashboard, with its
        subscriptions (clustering, from the last offset; simple consumers consume actively)."""
        sub = settings.subscription
        kind = ConsumeType.CONSUME_ACTIVELY if settings.client_type == pb.SIMPLE_CONSUMER \
            else ConsumeType.CONSUME_PASSIVELY
        subscriptions = tuple(SubscriptionData(e.topic.name, e.expression.expression or SUB_ALL,
                                               expression_type=ExpressionType.SQL92 if e.expression.type == pb.SQL
                                               else ExpressionType.TAG) for e in sub.subscriptions)
        data = ConsumerData(sub.group.name, kind, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                            subscriptions)
        self.clients.register_consumer(data, self._channel(conn))

    def forget(self, client_id: str) -> GrpcClientConn | None:
        """Drop a terminating client's conn and Settings; its registrations in the client table
        are the caller's to drop (`MembershipOperation.closed`, as a closed remoting connection's)."""
        self.settings.pop(client_id, None)
        return self.conns.pop(client_id, None)


def client_version(settings: pb.Settings | None) -> int:
    """The MQVersion ordinal a 5.x client is listed with: the version its Settings' user agent says
    (``5.1.2`` is V5_1_2, as the proxy reads the client's version), else V5_0_0 (a version RocketMQ's
    enum does not have, e.g. the Node.js client's package version 1.0.8)."""
    found = version_ordinal(settings.user_agent.version) if settings is not None else None
    return V5_0_0 if found is None else found


def _backoff(policy: pb.RetryPolicy, backoff: ExponentialRetryPolicy | list[int]) -> None:
    """The group's retry policy as the Settings' backoff (the proxy's conversion)."""
    policy.ClearField("customized_backoff")
    policy.ClearField("exponential_backoff")
    if isinstance(backoff, ExponentialRetryPolicy):
        policy.exponential_backoff.initial.FromMilliseconds(backoff.initial)
        policy.exponential_backoff.max.FromMilliseconds(backoff.max)
        policy.exponential_backoff.multiplier = backoff.multiplier
        return
    for ms in backoff:
        policy.customized_backoff.next.add().FromMilliseconds(ms)
