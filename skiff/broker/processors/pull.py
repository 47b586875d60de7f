"""PULL_MESSAGE (11): messages of one queue from an offset, as slices of the CommitLog.

The remoting adapter of `skiff.broker.operations.pull`. Checks (RocketMQ's order and
codes, the gate's): the group (SUBSCRIPTION_GROUP_NOT_EXIST, NO_PERMISSION when it may
not consume), the broker's and the topic's read permission (NO_PERMISSION), the topic
(TOPIC_NOT_EXIST), the queue id (SYSTEM_ERROR), the subscription (the request's ``subscription`` when the
SUBSCRIPTION flag is set, else the one the group's heartbeat registered;
SUBSCRIPTION_NOT_EXIST, SUBSCRIPTION_PARSE_FAILED; SQL92 only with
``enablePropertyFilter``).

The store's status maps to a response code as RocketMQ's PullMessageProcessor maps it
(`_STATUS` below).
SUCCESS always carries a non-empty body (the records, handed to the transport
as the store's slices, never copied or re-encoded). A pull with COMMIT_OFFSET
commits ``commitOffset`` for the group. A suspend-flagged pull that finds no
new message is held by the `PullHoldService`; at shutdown it is answered
SERVICE_NOT_AVAILABLE so that clients back off. A pull the tier answered "retry at once"
while it fetches or rebuilds the offset's row group is held too, suspend flag or not, until
that ends (`TierReads.ready_listeners` wake it) or for `TIER_PULL_HOLD_MAX_MS` at most.
"""

from __future__ import annotations

import os
import struct

from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.ha.role import Role
from skiff.broker.long_polling import HeldPull, PullHoldService
from skiff.broker.operations import PullOperation, PullRequest, Pulled, Refusal
from skiff.common.limits import TIER_PULL_HOLD_MAX_MS
from skiff.common.record import PHYSICAL_OFFSET_AT
from skiff.common.sysflag import PullSysFlag
from skiff.filter import MessageFilter
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.store import GetResult, GetStatus, MessageStore
from skiff.transport.connection import Connection, Handler

_PHYS = struct.Struct(">q")
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)

_NOT_FOUND = int(ResponseCode.PULL_NOT_FOUND)
_SUCCESS = int(ResponseCode.SUCCESS)
_OFFSET_MOVED = int(ResponseCode.PULL_OFFSET_MOVED)
_RETRY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)
_STATUS: dict[GetStatus, int] = {  # plain ints: the response is built with them as they are
    GetStatus.FOUND: _SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: _RETRY,
    GetStatus.MESSAGE_WAS_REMOVING: _RETRY,
    GetStatus.OFFSET_FOUND_NULL: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: _OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: _OFFSET_MOVED,
}
_EMPTY_QUEUE = frozenset({GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE})


class PullProcessor:
    """The remoting adapter of `PullOperation`: the header in, the records' slices out, and
    the long polling of a pull that found nothing."""

    def __init__(self, config: BrokerConfig, role: Role, operation: PullOperation, store: MessageStore,
                 groups: SubscriptionGroupManager, hold: PullHoldService) -> None:
        self.config = config
        self.role = role
        self.operation = operation
        self.store = store
        self.groups = groups
        self.hold = hold
        self._slave_read = config.slave_read_enable
        self._in_memory_bytes = _physical_memory() * config.access_message_in_memory_max_ratio // 100

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.PULL_MESSAGE: self.pull}

    def pull(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | HeldPull:
        h = PullMessageRequestHeader.from_ext(req.ext_fields)
        request = pull_request(h)
        pulled = self.operation.pull(request)
        if isinstance(pulled, Refusal):
            return req.response(pulled.code, pulled.reason)
        response = self.answer(req, request, pulled)
        if pulled.result.status is GetStatus.MESSAGE_WAS_REMOVING and \
                self.operation.tier_waiting(request.topic, request.queue_id):
            return self._hold_for_tier(req, request, pulled.filter) or response
        if response.code != _NOT_FOUND or not h.sys_flag & _SUSPEND:
            return response
        timeout_ms = h.suspend_timeout_millis if self.config.long_polling_enable else self.config.short_polling_time_ms
        flt = pulled.filter
        held = self.hold.hold((h.topic, h.queue_id), h.queue_offset,
                              lambda final: self._rerun(req, request, flt, final), timeout_ms, h.max_msg_nums)
        if held is None:
            return self._shutting_down(req) if self.hold.closed else response
        return held

    def _rerun(self, req: RemotingCommand, request: PullRequest, flt: MessageFilter,
               final: bool) -> RemotingCommand | None:
        response = self.answer(req, request, self.operation.read(request, flt))
        if response.code != _NOT_FOUND:
            return response
        if not final:
            return None
        return self._shutting_down(req) if self.hold.closed else response

    def _hold_for_tier(self, req: RemotingCommand, request: PullRequest, flt: MessageFilter) -> HeldPull | None:
        """Hold a pull the tier is fetching for; run again when the tier's work on its queue ends
        (`TierReads.ready_listeners` → `PullHoldService.wake`), answered "retry at once" at the limit."""

        def rerun(final: bool) -> RemotingCommand | None:
            response = self.answer(req, request, self.operation.read(request, flt))
            if response.code == _RETRY and not final and not self.hold.closed:
                return None
            return self._shutting_down(req) if self.hold.closed else response

        return self.hold.hold((request.topic, request.queue_id), request.offset, rerun, TIER_PULL_HOLD_MAX_MS)

    def _shutting_down(self, req: RemotingCommand) -> RemotingCommand:
        """A held pull's answer at shutdown: an error, which makes clients wait (1 s for the
        C++ client, 3 s for Java's) instead of pulling again into a closing connection,
        where the request would go unanswered until the client's 30 s pull timeout."""
        return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                            f"the broker {self.config.broker_name} is shutting down")

    def answer(self, req: RemotingCommand, request: PullRequest, pulled: Pulled) -> RemotingCommand:
        """The response to what one read found."""
        result = pulled.result
        code, next_offset = _outcome(result, request.offset)
        ext = {"suggestWhichBrokerId": self._suggest(request.group, result), "nextBeginOffset": str(next_offset),
               "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        # Built directly, not by `req.response`: every value is a string already, and the
        # generic path's per-value conversion was a tenth of a pull's broker CPU at 32 per pull.
        if code == _SUCCESS:
            return RemotingCommand(code, req.opaque, RPC_TYPE_RESPONSE, ext, None,
                                   serialize_type=req.serialize_type, body_parts=result.buffers)
        return RemotingCommand(code, req.opaque, RPC_TYPE_RESPONSE, ext, _REMARKS.get(code),
                               serialize_type=req.serialize_type)

    def _suggest(self, group: str, result: GetResult) -> str:
        """suggestWhichBrokerId as RocketMQ's: 0 (the master) unless this master has
        slaveReadEnable; then the group's whichBrokerWhenConsumeSlowly (1) for a consumer
        further behind than accessMessageInMemoryMaxRatio % of RAM, else its brokerId (0).
        A slave always suggests the master."""
        if not self._slave_read or self.role.is_slave or not result.buffers:
            return "0"
        config = self.groups.get(group)
        if config is None:
            return "0"
        behind = self.store.max_physical_offset - _PHYS.unpack_from(result.buffers[0], PHYSICAL_OFFSET_AT)[0]
        return str(config.which_broker_when_consume_slowly if behind > self._in_memory_bytes else config.broker_id)


def pull_request(h: PullMessageRequestHeader) -> PullRequest:
    """The operation's request from a PULL_MESSAGE header: the subscription only when the
    SUBSCRIPTION flag says the header carries it, the offset to commit only with COMMIT_OFFSET."""
    flags = h.sys_flag
    expression: str | None = None
    kind: str | None = None
    if flags & _SUBSCRIPTION:
        expression, kind = (h.subscription or "*"), h.expression_type
    # positional: one per PULL_MESSAGE, and keywords cost a NamedTuple twice its construction
    return PullRequest(h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, expression, kind,
                       h.commit_offset if flags & _COMMIT_OFFSET else None)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 34


_REMARKS: dict[int, str] = {
    ResponseCode.PULL_NOT_FOUND: "no new message",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "no matched message",
    ResponseCode.PULL_OFFSET_MOVED: "the offset is out of the queue's range",
}


def _outcome(result: GetResult, offset: int) -> tuple[int, int]:
    """Response code and nextBeginOffset of a store read (as RocketMQ's PullMessageProcessor)."""
    if result.status in _EMPTY_QUEUE:
        return (_OFFSET_MOVED if offset else _NOT_FOUND), 0
    return _STATUS[result.status], result.next_begin_offset
