"""PULL_MESSAGE (11): messages of one queue from an offset, as slices of the CommitLog.

Checks (RocketMQ's order and codes): the group (SUBSCRIPTION_GROUP_NOT_EXIST,
NO_PERMISSION when it may not consume), the broker's and the topic's read
permission (NO_PERMISSION), the topic (TOPIC_NOT_EXIST), the queue id
(SYSTEM_ERROR), the subscription (the request's ``subscription`` when the
SUBSCRIPTION flag is set, else the one the group's heartbeat registered;
SUBSCRIPTION_NOT_EXIST, SUBSCRIPTION_PARSE_FAILED; SQL92 only with
``enablePropertyFilter``).

The store's status maps to a response code as remoting-protocol.md §2.6 says.
SUCCESS always carries a non-empty body (the records, handed to the transport
as the store's slices, never copied or re-encoded). A pull with COMMIT_OFFSET
commits ``commitOffset`` for the group. A suspend-flagged pull that finds no
new message is held by the `PullHoldService`; at shutdown it is answered
SERVICE_NOT_AVAILABLE so that clients back off.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Awaitable
from typing import NamedTuple

from skiff.broker.config import BrokerConfig
from skiff.broker.clients import ClientManager
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.ha.role import Role
from skiff.broker.long_polling import PullHoldService
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import TopicConfigManager
from skiff.common.errors import DecodeError
from skiff.common.record import head_struct_for
from skiff.common.sysflag import PullSysFlag
from skiff.filter import ExpressionType, FilterError, MessageFilter, build_filter
from skiff.filter.factory import expression_type_of
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.store import GetResult, GetStatus, MessageStore
from skiff.store.reads import RecordFilter
from skiff.transport.connection import Connection, Handler

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PHYS = struct.Struct(">q")
_PHYS_AT = 28
"""Where a stored record holds its own CommitLog offset."""
_SYSFLAG_AT = 36
"""Where the sysFlag sits in a stored record (remoting-protocol.md §3.1); it says how
long the hosts, and so the fixed head, are."""
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_READ = int(Perm.READ)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)

_NOT_FOUND = ResponseCode.PULL_NOT_FOUND
_STATUS = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = frozenset({GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE})


def properties_filter(flt: MessageFilter) -> RecordFilter:
    """The store's per-record test for a filter that reads properties (SQL92)."""
    matches_raw = flt.matches_raw

    def test(record: memoryview) -> bool:
        return matches_raw(properties_of(record))
    return test


def properties_of(record: memoryview) -> memoryview:
    """The raw properties of a stored record, found from its three length fields (body,
    topic, properties) without decoding the rest: a filtered pull does this for every
    candidate, and it costs a quarter of `read_head` plus `read_tail`."""
    body_pos = head_struct_for(_I32.unpack_from(record, _SYSFLAG_AT)[0]).size
    p = body_pos + _I32.unpack_from(record, body_pos - 4)[0]
    if not body_pos <= p < len(record):
        raise DecodeError(f"a record's body length {p - body_pos} overruns it")
    p += 1 + record[p]
    end = p + 2 + _I16.unpack_from(record, p)[0] if p + 2 <= len(record) else -1
    if end != len(record):
        raise DecodeError("a record's topic and properties lengths do not add up to its size")
    return record[p + 2 : end]


class PullProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager, clients: ClientManager,
                 hold: PullHoldService, stats: BrokerStats, role: Role | None = None) -> None:
        self.config = config
        self.role = role or Role.of(config)
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.hold = hold
        self.stats = stats
        self._max_count = config.max_transfer_count_on_message_in_memory
        self._max_bytes = config.max_transfer_bytes_on_message_in_memory
        self._slave_read = config.slave_read_enable
        self._in_memory_bytes = _physical_memory() * config.access_message_in_memory_max_ratio // 100

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.PULL_MESSAGE: self.pull}

    def pull(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = PullMessageRequestHeader.from_ext(req.ext_fields)
        flt = self._check(req, h)
        if isinstance(flt, RemotingCommand):
            return flt
        response = self.run(req, h, flt)
        if h.sys_flag & _COMMIT_OFFSET and not self.role.is_slave:  # as RocketMQ: a slave never stores it
            self.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if response.code != _NOT_FOUND or not h.sys_flag & _SUSPEND:
            return response
        timeout_ms = h.suspend_timeout_millis if self.config.long_polling_enable else self.config.short_polling_time_ms
        held = self.hold.hold((h.topic, h.queue_id), h.queue_offset, lambda final: self._rerun(req, h, flt, final),
                              timeout_ms)
        if held is None:
            return self._shutting_down(req) if self.hold.closed else response
        return held

    def _rerun(self, req: RemotingCommand, h: PullMessageRequestHeader, flt: MessageFilter,
               final: bool) -> RemotingCommand | None:
        response = self.run(req, h, flt)
        if response.code != _NOT_FOUND:
            return response
        if not final:
            return None
        return self._shutting_down(req) if self.hold.closed else response

    def _shutting_down(self, req: RemotingCommand) -> RemotingCommand:
        """A held pull's answer at shutdown: an error, which makes clients wait (1 s for the
        C++ client, 3 s for Java's) instead of pulling again into a closing connection,
        where the request would go unanswered until the client's 30 s pull timeout."""
        return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                            f"the broker {self.config.broker_name} is shutting down")

    def run(self, req: RemotingCommand, h: PullMessageRequestHeader, flt: MessageFilter) -> RemotingCommand:
        """Read the queue once and answer with what is there."""
        result = self.store.get_messages(
            h.topic, h.queue_id, h.queue_offset, min(h.max_msg_nums, self._max_count),
            tag_codes=flt.tag_codes, record_filter=properties_filter(flt) if flt.needs_properties else None,
            max_bytes=self._max_bytes,
        )
        code, next_offset = _outcome(result, h.queue_offset)
        ext = {"suggestWhichBrokerId": self._suggest(h.consumer_group, result), "nextBeginOffset": str(next_offset),
               "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        if code == ResponseCode.SUCCESS:
            self.stats.pulled(result.message_count, h.topic, h.consumer_group, h.queue_id, result.total_bytes,
                              next_offset)
            return req.response(code, None, ext, body_parts=result.buffers)
        return req.response(code, _REMARKS.get(code), ext)

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
        behind = self.store.max_physical_offset - _PHYS.unpack_from(result.buffers[0], _PHYS_AT)[0]
        return str(config.which_broker_when_consume_slowly if behind > self._in_memory_bytes else config.broker_id)

    def _check(self, req: RemotingCommand, h: PullMessageRequestHeader) -> MessageFilter | RemotingCommand:
        group = self.groups.find_or_create(h.consumer_group)
        if group is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group {h.consumer_group} does not exist on this broker")
        if not group.consume_enable:
            return req.response(ResponseCode.NO_PERMISSION, f"subscription group {h.consumer_group} may not consume")
        if not self.config.broker_permission & _READ:
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker {self.config.broker_name} does not serve pulls now (brokerPermission)")
        tc = self.topics.get(h.topic)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {h.topic} does not exist on this broker")
        if not tc.perm & _READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic {h.topic} may not be read (perm {tc.perm})")
        if not 0 <= h.queue_id < tc.read_queue_nums:
            return req.response(ResponseCode.SYSTEM_ERROR, f"queue {h.queue_id} of topic {h.topic} is not readable: "
                                f"it has {tc.read_queue_nums} read queues")
        return self._filter(req, h)

    def _filter(self, req: RemotingCommand, h: PullMessageRequestHeader) -> MessageFilter | RemotingCommand:
        if h.sys_flag & _SUBSCRIPTION:
            expression, kind = h.subscription, h.expression_type
        else:
            sub = self.clients.subscription(h.consumer_group, h.topic)
            if sub is None:
                return req.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    f"consumer group {h.consumer_group} has no subscription to {h.topic} registered "
                                    f"here: send a heartbeat first, or the subscription in the pull")
            expression, kind = sub.sub_string, sub.expression_type.value
        flt = compile_subscription(expression, kind, self.config.enable_property_filter)
        return flt if not isinstance(flt, Refusal) else req.response(flt.code, flt.remark)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 34


class Refusal(NamedTuple):
    """Why a subscription is not served: the response code and the remark for the client."""

    code: ResponseCode
    remark: str


def compile_subscription(expression: str | None, kind: str | None,
                         enable_property_filter: bool) -> MessageFilter | Refusal:
    """The filter of a subscription, or why it is refused (RocketMQ's codes): a type other
    than TAG on a broker without ``enablePropertyFilter`` is SYSTEM_ERROR; an expression
    that does not parse is SUBSCRIPTION_PARSE_FAILED with the parser's message, which
    gives the position. Compiled filters are cached by `build_filter`, so a subscription
    seen on every heartbeat and every pull is parsed once."""
    try:
        expression_type = expression_type_of(kind)
        if expression_type is not ExpressionType.TAG and not enable_property_filter:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"this broker does not filter by {expression_type.value}: "
                                                      f"set enablePropertyFilter=true to allow it")
        return build_filter(expression, expression_type)
    except FilterError as exc:
        return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))


_REMARKS = {
    ResponseCode.PULL_NOT_FOUND: "no new message",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "no matched message",
    ResponseCode.PULL_OFFSET_MOVED: "the offset is out of the queue's range",
}


def _outcome(result: GetResult, offset: int) -> tuple[int, int]:
    """Response code and nextBeginOffset of a store read (remoting-protocol.md §2.6)."""
    if result.status in _EMPTY_QUEUE:
        return (ResponseCode.PULL_OFFSET_MOVED if offset else _NOT_FOUND), 0
    return _STATUS[result.status], result.next_begin_offset
