"""The client's value types: what a send or a pull returns, what a listener
answers, and how a subscription selects messages. RocketMQ's names and fields,
so code written against RocketMQ's clients reads the same."""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.heartbeat import SUB_ALL, ExpressionType


class SendStatus(enum.Enum):
    """SEND_OK, or stored with a caveat the broker reported (the message IS stored)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """RocketMQ's SendResult.

    ``msg_id`` is the client's UNIQ_KEY (comma-joined for a batch, as Java's
    client gives it), ``offset_msg_id`` the broker's id that encodes where it is
    stored (comma-joined for a batch); ``queue_offset`` is the (first) message's
    offset in ``message_queue``.
    """

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def msg_ids(self) -> list[str]:
        """The UNIQ_KEY of each message (one for a single send)."""
        return self.msg_id.split(",") if self.msg_id else []

    @property
    def offset_msg_ids(self) -> list[str]:
        return self.offset_msg_id.split(",") if self.offset_msg_id else []


T = TypeVar("T")


def _slot_maker(cls: type[T]) -> Callable[..., T]:
    """``cls(*values)`` of a frozen slotted dataclass, every field given in order, made without its
    ``__init__``: a frozen one sets each field through ``object.__setattr__``, which made a send's
    `SendResult` cost three times what setting its slots directly does (the header classes'
    ``from_ext`` sets slots so too). The object is the one ``cls(*values)`` makes: equal, hashed and
    frozen alike. A class with a ``__post_init__`` or a field its ``__init__`` leaves out is refused."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        raise TypeError(f"{cls.__name__}: its __init__ does more than set its fields")
    names = [f.name for f in fields]
    setters = {}
    for name in names:
        slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if not isinstance(slot, types.MemberDescriptorType):
            raise TypeError(f"{cls.__name__} must be a slotted dataclass (field {name})")
        setters[f"set_{name}"] = slot.__set__
    source = [f"def make({', '.join(names)}):", "    made = new(cls)",
              *(f"    set_{name}(made, {name})" for name in names), "    return made"]
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls, **setters}
    exec("\n".join(source), namespace)  # noqa: S102 - generated from the class's own field names
    make: Callable[..., T] = namespace["make"]
    make.__qualname__ = f"{cls.__name__}.make"
    return make


make_send_result = _slot_maker(SendResult)
"""``SendResult(status, msg_id, offset_msg_id, queue, queue_offset, transaction_id, region_id, trace_on)``,
all eight given: how the producer makes one per send."""


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's answer: continue from ``next_begin_offset`` whatever the status.

    ``messages`` may be empty with FOUND when the broker's candidates all failed
    the client's exact tag check (tag codes can collide).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[StoredMessage] = field(default_factory=list)
    suggest_which_broker_id: int = 0


@dataclass(frozen=True, slots=True)
class RawPullResult:
    """One pull's answer with its records left as the broker sent them: for readers that decode
    a run of records column-wise (the Spark source) instead of into a message object each.

    ``body`` is the run of stored records (`skiff.common.record`'s layout; empty unless
    FOUND). The broker filters tags by hash code, which can collide: when ``recheck_tags``
    is not None, keep only the records whose TAGS property is in it (`PullResult`'s
    messages are checked so already). The queue's bounds are not added to any record.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    recheck_tags: frozenset[str] | None = None
    suggest_which_broker_id: int = 0


class ConsumeStatus(enum.Enum):
    """A concurrent listener's answer for a batch of messages."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """An orderly listener's answer (Java's deprecated ROLLBACK/COMMIT are not offered)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """Which messages of a topic a subscription takes: a tag expression or SQL92."""

    expression_type: ExpressionType = ExpressionType.TAG
    expression: str = SUB_ALL

    @classmethod
    def by_tag(cls, expression: str | None = SUB_ALL) -> MessageSelector:
        """``"*"`` (everything), ``"TagA"`` or ``"TagA || TagB"``."""
        return cls(ExpressionType.TAG, (expression or SUB_ALL).strip() or SUB_ALL)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 condition on user properties, e.g. ``"a > 5 AND region = 'eu'"``."""
        return cls(ExpressionType.SQL92, expression)
