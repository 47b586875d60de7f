"""What each request needs: RocketMQ's PlainAccessResource.parse, as a table by request code.

| request                              | needs                                             |
|--------------------------------------|---------------------------------------------------|
| SEND_MESSAGE (10), _V2 (310), BATCH (320) | topic PUB; to a retry topic: that group SUB  |
| CONSUMER_SEND_MSG_BACK (36)          | group SUB, originTopic PUB                        |
| PULL_MESSAGE (11)                    | topic SUB, consumerGroup SUB                      |
| QUERY_MESSAGE (12)                   | topic SUB                                         |
| HEART_BEAT (34)                      | each consumer group SUB, each subscribed topic SUB|
| UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38) | consumerGroup SUB              |
| UPDATE_CONSUMER_OFFSET (15), QUERY_CONSUMER_OFFSET (14) | consumerGroup SUB, topic SUB   |
| POP_MESSAGE, PEEK_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME (200050-200053) | the same |
| `ADMIN_CODES`                        | an admin account                                  |
| anything else                        | a valid signature only                            |

Groups are named by their retry topic (``%RETRY%group``), as in plain_acl.yml's
parsed table. Skiff adds SEND_BATCH_MESSAGE and QUERY_CONSUMER_OFFSET (RocketMQ
4.9 checks neither: a batch would skip the topic's perms), the POP requests, and
reset-offset, scheduled-message cancelling and topic compaction to the admin codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from skiff.broker.acl.plain_config import PUB, SUB
from skiff.common.names import is_retry_topic, retry_topic
from skiff.protocol.bodies.heartbeat import HeartbeatData
from skiff.protocol.codes import PopRequestCode, RequestCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand

Need = tuple[str, int]
"""A resource (topic or a group's retry topic) and the perm bit it needs."""

ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE,
    SkiffRequestCode.COMPACT_TOPIC,
})
"""RocketMQ's Permission.ADMIN_CODE, plus Skiff's own writes an operator makes."""


def _send(topic_key: str) -> Callable[[dict[str, str], RemotingCommand], Iterator[Need]]:
    def needs(ext: dict[str, str], _cmd: RemotingCommand) -> Iterator[Need]:
        topic = ext.get(topic_key, "")
        yield (topic, SUB) if is_retry_topic(topic) else (topic, PUB)
    return needs


def _send_back(ext: dict[str, str], _cmd: RemotingCommand) -> Iterator[Need]:
    yield retry_topic(ext.get("group", "")), SUB
    yield ext.get("originTopic", ""), PUB


def _pull(ext: dict[str, str], _cmd: RemotingCommand) -> Iterator[Need]:
    yield ext.get("topic", ""), SUB
    yield retry_topic(ext.get("consumerGroup", "")), SUB


def _topic_sub(ext: dict[str, str], _cmd: RemotingCommand) -> Iterator[Need]:
    yield ext.get("topic", ""), SUB


def _group_sub(ext: dict[str, str], _cmd: RemotingCommand) -> Iterator[Need]:
    group = ext.get("consumerGroup")
    if group:
        yield retry_topic(group), SUB


def _heartbeat(_ext: dict[str, str], cmd: RemotingCommand) -> Iterator[Need]:
    for consumer in HeartbeatData.from_json(cmd.body).consumer_data_set:
        yield retry_topic(consumer.group_name), SUB
        for sub in consumer.subscription_data_set:
            yield sub.topic, SUB


_NEEDS: dict[int, Callable[[dict[str, str], RemotingCommand], Iterable[Need]]] = {
    RequestCode.SEND_MESSAGE: _send("topic"),
    RequestCode.SEND_MESSAGE_V2: _send("b"),
    RequestCode.SEND_BATCH_MESSAGE: _send("b"),
    RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
    RequestCode.PULL_MESSAGE: _pull,
    RequestCode.QUERY_MESSAGE: _topic_sub,
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _group_sub,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _group_sub,
}
for _code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET, *PopRequestCode):
    _NEEDS[_code] = lambda ext, cmd: (*_group_sub(ext, cmd), *_topic_sub(ext, cmd))


def needs_of(cmd: RemotingCommand) -> list[Need]:
    """The resources ``cmd`` touches with the perm each needs (empty: only the signature counts).

    A body that does not decode raises the codec's `DecodeError`; the caller refuses the request.
    """
    parse = _NEEDS.get(cmd.code)
    return [] if parse is None else list(parse(cmd.ext_fields or {}, cmd))
