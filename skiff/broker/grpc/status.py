"""gRPC ``Status`` values: how the gRPC door encodes an operation's `Refusal`.

The code table is the proxy's (RocketMQ 5's ``ResponseCode`` → ``apache.rocketmq.v2.Code``):
a refusal the gate makes once reads the same over remoting (its 4.x code and remark) and
over gRPC (this code and the same text).
"""

from __future__ import annotations

from typing import cast

from skiff.broker.operations import Refusal
from skiff.protocol.codes import PopResponseCode, ResponseCode
from skiff.protocol.v5 import definition_pb2 as pb

CODES: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    PopResponseCode.POLLING_FULL: pb.TOO_MANY_REQUESTS,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
}
"""4.x response code → gRPC code, as the proxy maps them; anything else is INTERNAL_SERVER_ERROR."""


def status(code: int, message: str = "") -> pb.Status:
    value = cast(pb.Code, code)  # the generated stubs type each code as a Code, a subclass of int
    return pb.Status(code=value, message=message or pb.Code.Name(value))


def refused(refusal: Refusal) -> pb.Status:
    if refusal.bad_request:
        return status(pb.BAD_REQUEST, refusal.reason)
    return status(CODES.get(refusal.code, pb.INTERNAL_SERVER_ERROR), refusal.reason)


def from_code(code: int, reason: str) -> pb.Status:
    """The status of a 4.x outcome code (a store status's, an end of transaction's)."""
    return refused(Refusal(code, reason))
