"""ACL 2.0 at the gRPC door: each call's ``authorization`` and ``x-mq-date-time`` headers are
authenticated (`skiff.broker.auth.signature`), what the request touches is named, and the
operations' gate decides, as for a remoting request.

| request                                                   | needs                          |
|-----------------------------------------------------------|--------------------------------|
| QueryRoute                                                | Topic [Pub, Sub]               |
| SendMessage (every message's topic), EndTransaction, RecallMessage | Topic Pub             |
| QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, PullMessage | Group Sub + Topic Sub |
| Heartbeat, NotifyClientTermination (with a group)         | Group Sub                      |
| QueryOffset                                               | Topic [Sub, Get]               |
| GetOffset / UpdateOffset                                  | Group + Topic [Sub, Get] / [Sub, Update] |
| Telemetry settings                                        | publishing topics Pub; the subscription's group and topics Sub |

An authentication failure answers UNAUTHORIZED; an authorization refusal the gate's
NO_PERMISSION, which the proxy's table makes FORBIDDEN (RocketMQ answers UNAUTHORIZED for both;
a client tells them apart here). Both carry the reason; neither is sent with a secret.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from skiff.broker.auth import AuthService, Caller, Need
from skiff.broker.auth.model import Action, Resource
from skiff.broker.auth.signature import AUTHORIZATION, DATE_TIME, GrpcCredential, SignatureError, \
    parse_authorization
from skiff.broker.grpc.status import refused, status
from skiff.broker.operations import Gate
from skiff.common.names import is_retry_topic
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

PUB, SUB, GET, UPDATE = Action.PUB, Action.SUB, Action.GET, Action.UPDATE
TELEMETRY = rpc.TelemetryCommand.DESCRIPTOR.full_name
"""What a Telemetry stream's checks are named by (whitelists, logs)."""


def _topic(name: str, *actions: Action) -> Need:
    return Need.of(Resource.group(name), SUB) if is_retry_topic(name) else Need.of(Resource.topic(name), *actions)


def _consume(group: str, topic: str) -> Iterator[Need]:
    yield Need.of(Resource.group(group), SUB)
    yield _topic(topic, SUB)


def _send(r: rpc.SendMessageRequest) -> Iterator[Need]:
    for topic in sorted({m.topic.name for m in r.messages}):
        yield _topic(topic, PUB)


def _group_only(group: str) -> Iterator[Need]:
    if group:
        yield Need.of(Resource.group(group), SUB)


def _heartbeat(r: rpc.HeartbeatRequest) -> Iterator[Need]:
    if r.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER):
        yield from _group_only(r.group.name)


def _offset(r: Any, action: Action) -> Iterator[Need]:
    yield Need.of(Resource.group(r.group.name), SUB, action)
    yield _topic(r.message_queue.topic.name, SUB, action)


NEEDS: dict[type, Callable[[Any], Iterator[Need]]] = {
    rpc.QueryRouteRequest: lambda r: iter([_topic(r.topic.name, PUB, SUB)]),
    rpc.SendMessageRequest: _send,
    rpc.EndTransactionRequest: lambda r: iter([_topic(r.topic.name, PUB)]),
    rpc.RecallMessageRequest: lambda r: iter([_topic(r.topic.name, PUB)]),
    rpc.QueryAssignmentRequest: lambda r: _consume(r.group.name, r.topic.name),
    rpc.ReceiveMessageRequest: lambda r: _consume(r.group.name, r.message_queue.topic.name),
    rpc.PullMessageRequest: lambda r: _consume(r.group.name, r.message_queue.topic.name),
    rpc.AckMessageRequest: lambda r: _consume(r.group.name, r.topic.name),
    rpc.ChangeInvisibleDurationRequest: lambda r: _consume(r.group.name, r.topic.name),
    rpc.ForwardMessageToDeadLetterQueueRequest: lambda r: _consume(r.group.name, r.topic.name),
    rpc.SyncLiteSubscriptionRequest: lambda r: _consume(r.group.name, r.topic.name),  # 5.5: group + bind topic Sub
    rpc.HeartbeatRequest: _heartbeat,
    rpc.NotifyClientTerminationRequest: lambda r: _group_only(r.group.name),
    rpc.QueryOffsetRequest: lambda r: iter([_topic(r.message_queue.topic.name, SUB, GET)]),
    rpc.GetOffsetRequest: lambda r: _offset(r, GET),
    rpc.UpdateOffsetRequest: lambda r: _offset(r, UPDATE),
}


def settings_needs(settings: pb.Settings) -> Iterator[Need]:
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            yield _topic(topic.name, PUB)
    if settings.HasField("subscription"):
        yield Need.of(Resource.group(settings.subscription.group.name), SUB)
        for sub in settings.subscription.subscriptions:
            yield _topic(sub.topic.name, SUB)


class GrpcAuth:
    """The gRPC door's half of ACL 2.0: authenticate a call, then ask the gate."""

    def __init__(self, auth: AuthService, gate: Gate) -> None:
        self.auth = auth
        self.gate = gate

    def caller(self, metadata: Mapping[str, str], rpc_name: str, host: str) -> Caller | pb.Status:
        credential: GrpcCredential | SignatureError | None = None
        if metadata.get(AUTHORIZATION):
            try:
                credential = parse_authorization(metadata.get(AUTHORIZATION), metadata.get(DATE_TIME))
            except SignatureError as exc:
                credential = exc
        who = self.auth.authenticate_grpc(credential, rpc_name, host)
        return status(pb.UNAUTHORIZED, who) if isinstance(who, str) else who

    def check(self, metadata: Mapping[str, str], host: str, request: Any) -> pb.Status | None:
        """None when the call may go on, else the status to answer."""
        name = TELEMETRY if request is None else type(request).DESCRIPTOR.full_name
        caller = self.caller(metadata, name, host)
        if isinstance(caller, pb.Status):
            return caller
        needs = NEEDS.get(type(request))
        return self.allowed(caller, list(needs(request)) if needs is not None else [], name)

    def allowed(self, caller: Caller, needs: list[Need], name: str) -> pb.Status | None:
        refusal = self.gate.access(caller, needs, name)
        return None if refusal is None else refused(refusal)
