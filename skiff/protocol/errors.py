"""What a failed request raises: one class per RocketMQ response code, and one map.

A broker or NameServer that answers with an error code makes the caller raise
the class registered for that code (`raise_for_response`); each carries
``code``, ``remark`` (the server's explanation) and ``retriable`` (whether the
same request may succeed if sent again, to this or another broker). The
transport raises `RequestTimeout` and `ConnectionClosed`, both retriable.

    RemotingError
    ├── ResponseError            the peer answered with an error code
    │   └── SystemBusyError, NoPermissionError, ... (one per code)
    ├── RequestTimeout           no answer in time
    └── ConnectionClosed         the connection went away first
"""

from __future__ import annotations

from collections.abc import Iterable

from skiff.common.errors import SkiffError
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand


class RemotingError(SkiffError):
    """A request did not get the answer it expected."""


_BY_CODE: dict[int, type[ResponseError]] = {}


class ResponseError(RemotingError):
    """The peer answered with an error code; ``remark`` says why.

    Each subclass names its code in the class line
    (``class SystemBusyError(ResponseError, code=..., retriable=True)``), which maps
    the code to it.
    """

    code: int = ResponseCode.SYSTEM_ERROR

    def __init_subclass__(cls, *, code: ResponseCode, retriable: bool = False, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code in _BY_CODE:
            raise TypeError(f"response code {code!r} is mapped twice")
        cls.code = code
        cls.retriable = retriable
        _BY_CODE[code] = cls

    def __init__(self, remark: str | None = None, *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        self.remark = remark or ""
        try:
            name = ResponseCode(self.code).name
        except ValueError:
            name = "UNKNOWN"
        super().__init__(f"{name} ({self.code}): {self.remark or 'no remark'}")


class BrokerSystemError(ResponseError, code=ResponseCode.SYSTEM_ERROR, retriable=True):
    """The server failed for a reason it explains in the remark (Java's clients retry it)."""


class SystemBusyError(ResponseError, code=ResponseCode.SYSTEM_BUSY, retriable=True):
    """The server sheds load (full queues, page cache busy); try again shortly."""


class RequestCodeNotSupportedError(ResponseError, code=ResponseCode.REQUEST_CODE_NOT_SUPPORTED):
    pass


class TransactionFailedError(ResponseError, code=ResponseCode.TRANSACTION_FAILED):
    pass


class FlushDiskTimeoutError(ResponseError, code=ResponseCode.FLUSH_DISK_TIMEOUT, retriable=True):
    """Stored but not flushed in time; a send may treat it as a result (it is stored)."""


class SlaveNotAvailableError(ResponseError, code=ResponseCode.SLAVE_NOT_AVAILABLE, retriable=True):
    pass


class FlushSlaveTimeoutError(ResponseError, code=ResponseCode.FLUSH_SLAVE_TIMEOUT, retriable=True):
    pass


class MessageIllegalError(ResponseError, code=ResponseCode.MESSAGE_ILLEGAL):
    """Too large, a bad topic name, bad properties: sending it again fails again."""


class ServiceNotAvailableError(ResponseError, code=ResponseCode.SERVICE_NOT_AVAILABLE, retriable=True):
    """The server cannot take the request now (shutting down, disk full, a slave)."""


class VersionNotSupportedError(ResponseError, code=ResponseCode.VERSION_NOT_SUPPORTED):
    pass


class NoPermissionError(ResponseError, code=ResponseCode.NO_PERMISSION):
    """The topic or broker refuses this operation (perm bits)."""


class TopicNotExistError(ResponseError, code=ResponseCode.TOPIC_NOT_EXIST):
    pass


class TopicExistAlreadyError(ResponseError, code=ResponseCode.TOPIC_EXIST_ALREADY):
    pass


class PullNotFoundError(ResponseError, code=ResponseCode.PULL_NOT_FOUND, retriable=True):
    """No new message; pull processing reads this code as a status, not an error."""


class PullRetryImmediatelyError(ResponseError, code=ResponseCode.PULL_RETRY_IMMEDIATELY, retriable=True):
    pass


class PullOffsetMovedError(ResponseError, code=ResponseCode.PULL_OFFSET_MOVED):
    pass


class QueryNotFoundError(ResponseError, code=ResponseCode.QUERY_NOT_FOUND):
    pass


class SubscriptionParseFailedError(ResponseError, code=ResponseCode.SUBSCRIPTION_PARSE_FAILED):
    pass


class SubscriptionNotExistError(ResponseError, code=ResponseCode.SUBSCRIPTION_NOT_EXIST, retriable=True):
    """The broker has not had this consumer's heartbeat yet."""


class SubscriptionNotLatestError(ResponseError, code=ResponseCode.SUBSCRIPTION_NOT_LATEST, retriable=True):
    pass


class SubscriptionGroupNotExistError(ResponseError, code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
    pass


class FilterDataNotExistError(ResponseError, code=ResponseCode.FILTER_DATA_NOT_EXIST):
    pass


class FilterDataNotLatestError(ResponseError, code=ResponseCode.FILTER_DATA_NOT_LATEST, retriable=True):
    pass


class TransactionShouldCommitError(ResponseError, code=ResponseCode.TRANSACTION_SHOULD_COMMIT):
    pass


class TransactionShouldRollbackError(ResponseError, code=ResponseCode.TRANSACTION_SHOULD_ROLLBACK):
    pass


class TransactionStateUnknownError(ResponseError, code=ResponseCode.TRANSACTION_STATE_UNKNOW):
    pass


class TransactionStateGroupWrongError(ResponseError, code=ResponseCode.TRANSACTION_STATE_GROUP_WRONG):
    pass


class NoBuyerIdError(ResponseError, code=ResponseCode.NO_BUYER_ID):
    pass


class NotInCurrentUnitError(ResponseError, code=ResponseCode.NOT_IN_CURRENT_UNIT):
    pass


class ConsumerNotOnlineError(ResponseError, code=ResponseCode.CONSUMER_NOT_ONLINE):
    pass


class ConsumeMsgTimeoutError(ResponseError, code=ResponseCode.CONSUME_MSG_TIMEOUT, retriable=True):
    pass


class NoMessageError(ResponseError, code=ResponseCode.NO_MESSAGE):
    pass


class UpdateAclConfigFailedError(ResponseError, code=ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED):
    pass


class DeleteAclConfigFailedError(ResponseError, code=ResponseCode.DELETE_ACL_CONFIG_FAILED):
    pass


class UpdateGlobalWhiteAddrsConfigFailedError(ResponseError, code=ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED):
    pass


class FlowControlError(ResponseError, code=ResponseCode.FLOW_CONTROL, retriable=True):
    pass


class RequestTimeout(RemotingError):
    """No answer arrived within the request's timeout."""

    retriable = True

    def __init__(self, code: int, addr: str, timeout_ms: int) -> None:
        self.code = code
        self.addr = addr
        self.timeout_ms = timeout_ms
        super().__init__(f"request {code} to {addr} got no answer in {timeout_ms} ms")


class ConnectionClosed(RemotingError):
    """The connection closed before the answer arrived; ``reason`` says why."""

    retriable = True

    def __init__(self, addr: str, reason: str) -> None:
        self.addr = addr
        self.reason = reason
        super().__init__(f"connection to {addr} closed: {reason}")


def error_class(code: int) -> type[ResponseError]:
    """The class raised for a response code (`ResponseError` itself for unknown codes)."""
    return _BY_CODE.get(code, ResponseError)


def error_for(code: int, remark: str | None = None) -> ResponseError:
    cls = _BY_CODE.get(code)
    return cls(remark) if cls is not None else ResponseError(remark, code=code)


def raise_for_response(
    cmd: RemotingCommand, expected: Iterable[int] = (ResponseCode.SUCCESS,)
) -> RemotingCommand:
    """Return ``cmd`` when its code is one of ``expected``, else raise the code's error."""
    if cmd.code in expected:
        return cmd
    raise error_for(cmd.code, cmd.remark)


MAPPED_CODES: frozenset[int] = frozenset(_BY_CODE)
"""Every response code with its own class (all of `ResponseCode` but SUCCESS)."""

RETRIABLE_CODES: frozenset[int] = frozenset(c for c, cls in _BY_CODE.items() if cls.retriable)
"""Response codes whose request may succeed if sent again."""
