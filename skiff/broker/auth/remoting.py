"""What each remoting request needs under ACL 2.0: RocketMQ 5.3's
``DefaultAuthorizationContextBuilder``, made strict — every request code the broker serves is
in the table, and a code that is not needs ``Cluster`` Update (upstream lets a request that
yields no resource through: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, UPDATE_BROKER_CONFIG, ...).

A list of actions means any one suffices. A group's retry topic ``%RETRY%g`` is the group
``Group:g`` wherever a topic is asked for (pulling or committing the retry queue needs the group).

| request (code)                                        | needs                                      |
|-------------------------------------------------------|--------------------------------------------|
| SEND_MESSAGE 10, _V2 310, SEND_BATCH_MESSAGE 320      | Topic Pub (a retry topic: its Group Sub)   |
| CONSUMER_SEND_MSG_BACK 36                             | Group Sub                                  |
| END_TRANSACTION 37                                    | Topic Pub when the header names it (5.x clients do; a 4.x client's commit passes on its signature) |
| PULL_MESSAGE 11, POP/ACK/PEEK/CHANGE_INVISIBLE 20005x, LOCK/UNLOCK_BATCH_MQ 41/42 | Group Sub + Topic Sub |
| QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33               | Topic [Sub, Get] (VIEW without a topic: Cluster Get) |
| HEART_BEAT 34                                         | each consumer's Group Sub + its topics' Sub; producers nothing |
| UNREGISTER_CLIENT 35 (a consumer's), CHECK_CLIENT_CONFIG 46 | Group Sub                             |
| GET_CONSUMER_LIST_BY_GROUP 38                         | Group [Sub, Get]                           |
| QUERY_CONSUMER_OFFSET 14 / UPDATE_CONSUMER_OFFSET 15  | Topic + Group [Sub, Get] / [Sub, Update]   |
| GET_MAX/MIN_OFFSET 30/31, SEARCH_OFFSET_BY_TIMESTAMP 29, GET_EARLIEST_MSG_STORETIME 32, GET_TOPIC_STATS_INFO 202, GET_COMPACTION_STATUS, GET_TIER_STATUS | Topic [Sub, Get] |
| UPDATE_AND_CREATE_TOPIC 17                            | Topic Create                               |
| DELETE_TOPIC_IN_BROKER 215                            | Topic Delete                               |
| COMPACT_TOPIC, TIER_UPLOAD_NOW                        | Topic Update                               |
| UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200               | Group Create                               |
| DELETE_SUBSCRIPTIONGROUP 207                          | Group Delete                               |
| GET_CONSUME_STATS 208, GET_CONSUMER_CONNECTION_LIST 203 | Group Get (and the Topic Get when named) |
| INVOKE_BROKER_TO_RESET_OFFSET 222                     | Group Update + Topic Update                |
| GET_PRODUCER_CONNECTION_LIST 204, the GET_ALL_* tables 21/43/45/201, GET_BROKER_CONFIG 26, GET_BROKER_RUNTIME_INFO 28, GET_TIMER_SLOTS | Cluster Get |
| AUTH_GET/LIST_USER, AUTH_GET/LIST_ACL 3004/3005/3009/3010 | Cluster Get                           |
| AUTH_CREATE/UPDATE/DELETE_USER/ACL 3001-3003, 3006-3008, UPDATE_BROKER_CONFIG 25, CANCEL_SCHEDULED_MESSAGE, anything else | Cluster Update |
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from skiff.broker.auth.evaluate import Need
from skiff.broker.auth.model import Action, Resource
from skiff.broker.auth.service import AuthService
from skiff.common.errors import DecodeError
from skiff.common.limits import AUTH_NEEDS_CACHED
from skiff.common.names import is_retry_topic
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.heartbeat import CheckClientRequestBody, HeartbeatData
from skiff.protocol.bodies.lock import LockBatchRequestBody
from skiff.protocol.codes import AuthRequestCode, PopRequestCode, ResponseCode, SkiffRequestCode
from skiff.protocol.codes import RequestCode as C
from skiff.protocol.command import RemotingCommand
from skiff.transport.connection import Connection, Handler, HandlerResult

if TYPE_CHECKING:
    from skiff.broker.operations.gate import Gate

Needs = Callable[[dict[str, str], RemotingCommand, str], Iterator[Need]]
"""(ext fields, the request, the cluster name) -> what it needs."""

PUB, SUB, CREATE, UPDATE, DELETE, GET = Action.PUB, Action.SUB, Action.CREATE, Action.UPDATE, Action.DELETE, Action.GET


@functools.lru_cache(maxsize=AUTH_NEEDS_CACHED)
def _topic_or_retry(name: str, *actions: Action) -> Need:
    """A topic; a group's retry topic is that group's (as upstream, which asks only the group).
    Made once per name and actions: a producer names the same topic request after request."""
    return Need.of(Resource.group(name) if is_retry_topic(name) else Resource.topic(name), *actions)


@functools.lru_cache(maxsize=AUTH_NEEDS_CACHED)
def _group_need(name: str, *actions: Action) -> Need:
    return Need.of(Resource.group(name), *actions)


def _topic(key: str, *actions: Action, optional: bool = False) -> Needs:
    def needs(ext: dict[str, str], _cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
        name = ext.get(key, "")
        if name or not optional:
            yield _topic_or_retry(name, *actions)
    return needs


def _group(key: str, *actions: Action, optional: bool = False) -> Needs:
    def needs(ext: dict[str, str], _cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
        name = ext.get(key, "")
        if name or not optional:
            yield _group_need(name, *actions)
    return needs


def _both(*parts: Needs) -> Needs:
    def needs(ext: dict[str, str], cmd: RemotingCommand, cluster: str) -> Iterator[Need]:
        for part in parts:
            yield from part(ext, cmd, cluster)
    return needs


def _cluster(*actions: Action) -> Needs:
    def needs(_ext: dict[str, str], _cmd: RemotingCommand, cluster: str) -> Iterator[Need]:
        yield Need.of(Resource.cluster(cluster), *actions)
    return needs


def _send(key: str) -> Needs:
    def needs(ext: dict[str, str], _cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
        topic = ext.get(key, "")
        yield _topic_or_retry(topic, SUB if is_retry_topic(topic) else PUB)
    return needs


def _heartbeat(_ext: dict[str, str], cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
    for consumer in HeartbeatData.from_json(cmd.body).consumer_data_set:
        yield Need.of(Resource.group(consumer.group_name), SUB)
        for sub in consumer.subscription_data_set:
            if not is_retry_topic(sub.topic):
                yield Need.of(Resource.topic(sub.topic), SUB)


def _lock(_ext: dict[str, str], cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
    body = LockBatchRequestBody.from_json(cmd.body)
    yield Need.of(Resource.group(body.consumer_group), SUB)
    for topic in sorted({mq.topic for mq in body.mq_set}):
        yield _topic_or_retry(topic, SUB)


def _check_client(_ext: dict[str, str], cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
    yield Need.of(Resource.group(CheckClientRequestBody.from_json(cmd.body).group), SUB)


def _create_group(_ext: dict[str, str], cmd: RemotingCommand, _cluster: str) -> Iterator[Need]:
    yield Need.of(Resource.group(SubscriptionGroupConfig.from_json(cmd.body).group_name), CREATE)


def _view(ext: dict[str, str], cmd: RemotingCommand, cluster: str) -> Iterator[Need]:
    yield from (_topic("topic", SUB, GET) if ext.get("topic") else _cluster(GET))(ext, cmd, cluster)


_CONSUME = _both(_group("consumerGroup", SUB), _topic("topic", SUB))
_TOPIC_READ = _topic("topic", SUB, GET)

TABLE: dict[int, Needs] = {
    C.SEND_MESSAGE: _send("topic"),
    C.SEND_MESSAGE_V2: _send("b"),
    C.SEND_BATCH_MESSAGE: _send("b"),
    C.CONSUMER_SEND_MSG_BACK: _group("group", SUB),
    C.END_TRANSACTION: _topic("topic", PUB, optional=True),
    C.PULL_MESSAGE: _CONSUME,
    C.LOCK_BATCH_MQ: _lock,
    C.UNLOCK_BATCH_MQ: _lock,
    C.QUERY_MESSAGE: _TOPIC_READ,
    C.VIEW_MESSAGE_BY_ID: _view,
    C.HEART_BEAT: _heartbeat,
    C.UNREGISTER_CLIENT: _group("consumerGroup", SUB, optional=True),
    C.CHECK_CLIENT_CONFIG: _check_client,
    C.GET_CONSUMER_LIST_BY_GROUP: _group("consumerGroup", SUB, GET),
    C.QUERY_CONSUMER_OFFSET: _both(_topic("topic", SUB, GET), _group("consumerGroup", SUB, GET)),
    C.UPDATE_CONSUMER_OFFSET: _both(_topic("topic", SUB, UPDATE), _group("consumerGroup", SUB, UPDATE)),
    C.GET_MAX_OFFSET: _TOPIC_READ,
    C.GET_MIN_OFFSET: _TOPIC_READ,
    C.SEARCH_OFFSET_BY_TIMESTAMP: _TOPIC_READ,
    C.GET_EARLIEST_MSG_STORETIME: _TOPIC_READ,
    C.GET_TOPIC_STATS_INFO: _TOPIC_READ,
    SkiffRequestCode.GET_COMPACTION_STATUS: _TOPIC_READ,
    SkiffRequestCode.GET_TIER_STATUS: _TOPIC_READ,
    SkiffRequestCode.TIER_UPLOAD_NOW: _topic("topic", UPDATE),
    C.UPDATE_AND_CREATE_TOPIC: _topic("topic", CREATE),
    C.DELETE_TOPIC_IN_BROKER: _topic("topic", DELETE),
    SkiffRequestCode.COMPACT_TOPIC: _topic("topic", UPDATE),
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _create_group,
    C.DELETE_SUBSCRIPTIONGROUP: _group("groupName", DELETE),
    C.GET_CONSUME_STATS: _both(_group("consumerGroup", GET), _topic("topic", GET, optional=True)),
    C.GET_CONSUMER_CONNECTION_LIST: _group("consumerGroup", GET),
    C.INVOKE_BROKER_TO_RESET_OFFSET: _both(_group("group", UPDATE), _topic("topic", UPDATE)),
    **{code: _CONSUME for code in PopRequestCode},
    **{code: _cluster(GET) for code in (
        C.GET_PRODUCER_CONNECTION_LIST, C.GET_ALL_TOPIC_CONFIG, C.GET_ALL_CONSUMER_OFFSET, C.GET_ALL_DELAY_OFFSET,
        C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, C.GET_BROKER_CONFIG, C.GET_BROKER_RUNTIME_INFO,
        SkiffRequestCode.GET_TIMER_SLOTS, AuthRequestCode.AUTH_GET_USER, AuthRequestCode.AUTH_LIST_USER,
        AuthRequestCode.AUTH_GET_ACL, AuthRequestCode.AUTH_LIST_ACL)},
    **{code: _cluster(UPDATE) for code in (
        C.UPDATE_BROKER_CONFIG, SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE, AuthRequestCode.AUTH_CREATE_USER,
        AuthRequestCode.AUTH_UPDATE_USER, AuthRequestCode.AUTH_DELETE_USER, AuthRequestCode.AUTH_CREATE_ACL,
        AuthRequestCode.AUTH_UPDATE_ACL, AuthRequestCode.AUTH_DELETE_ACL)},
}
_UNLISTED = _cluster(UPDATE)


def needs_of(cmd: RemotingCommand, cluster: str) -> list[Need]:
    """What ``cmd`` needs; a body that does not decode raises the codec's `DecodeError` (the
    caller refuses the request)."""
    return list(TABLE.get(cmd.code, _UNLISTED)(cmd.ext_fields or {}, cmd, cluster))


def guard(handlers: Mapping[int, Handler], auth: AuthService, gate: Gate, cluster: str) -> dict[int, Handler]:
    """Every handler behind ACL 2.0: the remoting door authenticates (`AuthService`), names what
    the request touches (`needs_of`) and asks the gate; a refusal answers NO_PERMISSION with the
    reason, before the handler sees the request."""
    def wrap(handler: Handler) -> Handler:
        def checked(conn: Connection, cmd: RemotingCommand) -> HandlerResult:
            caller = auth.authenticate_remoting(cmd, str(conn.peer[0]))
            if isinstance(caller, str):
                return cmd.response(ResponseCode.NO_PERMISSION, caller)
            try:
                needs = needs_of(cmd, cluster)
            except (DecodeError, ValueError) as exc:
                return cmd.response(ResponseCode.NO_PERMISSION, f"request code {cmd.code}: cannot tell what it "
                                                                f"touches: {exc}")
            refusal = gate.access(caller, needs, cmd.code)
            if refusal is not None:
                return cmd.response(refusal.code, refusal.reason)
            return handler(conn, cmd)
        return checked
    return {code: wrap(handler) for code, handler in handlers.items()}
