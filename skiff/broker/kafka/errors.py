"""RocketMQ's refusals and store statuses in Kafka's error codes, so a Kafka client
reacts as it would with a Kafka broker (retry, refresh metadata, give up)."""

from __future__ import annotations

from skiff.broker.operations import Refusal
from skiff.protocol.codes import ResponseCode
from skiff.protocol.kafka.errors import ErrorCode
from skiff.store import PutStatus

_REFUSALS: dict[int, ErrorCode] = {
    ResponseCode.TOPIC_NOT_EXIST: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ResponseCode.SERVICE_NOT_AVAILABLE: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ResponseCode.NO_PERMISSION: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResponseCode.MESSAGE_ILLEGAL: ErrorCode.INVALID_RECORD,
}
_PUT = {
    PutStatus.PUT_OK: ErrorCode.NONE,
    PutStatus.MESSAGE_ILLEGAL: ErrorCode.INVALID_RECORD,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ErrorCode.INVALID_RECORD,
    PutStatus.FLUSH_DISK_TIMEOUT: ErrorCode.REQUEST_TIMED_OUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ErrorCode.REQUEST_TIMED_OUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    PutStatus.SERVICE_NOT_AVAILABLE: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


def refusal_error(refusal: Refusal) -> ErrorCode:
    """A queue id past the topic's queues is a partition Kafka does not know."""
    if refusal.bad_request:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return _REFUSALS.get(refusal.code, ErrorCode.UNKNOWN_SERVER_ERROR)


def put_error(status: PutStatus, acks: int) -> ErrorCode:
    """With acks=1 a message the master stored is acknowledged whatever its slave did."""
    if acks == 1 and status in (PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE):
        return ErrorCode.NONE
    return _PUT.get(status, ErrorCode.UNKNOWN_SERVER_ERROR)
