"""Headers of RocketMQ 5.x POP consumption, and the receipt handle ("extraInfo").

POP_MESSAGE (200050) pops up to ``maxMsgNums`` messages of a topic (one queue, or
every queue with ``queueId = -1``) for a consumer group and hides them for
``invisibleTime`` ms; ACK_MESSAGE (200051) removes one for good;
CHANGE_MESSAGE_INVISIBLETIME (200053) hides it again for a new time. The field
names are RocketMQ's (``PopMessageRequestHeader`` and its siblings).

The receipt handle, RocketMQ's ``ExtraInfoUtil`` form, is eight space-separated
fields, nine in a gRPC receipt handle (the proxy appends the CommitLog offset):

| # | field           | meaning                                                        |
|---|-----------------|----------------------------------------------------------------|
| 0 | ckQueueOffset   | the first queue offset of the pop that delivered the message   |
| 1 | popTime         | when it was popped (ms since the epoch)                        |
| 2 | invisibleTime   | ms it stays hidden; the handle expires at popTime + this       |
| 3 | reviveQid       | `ORDERLY_REVIVE_QID` (999) marks an orderly (FIFO) pop          |
| 4 | topicType       | 0 the topic itself, 1 the group's retry topic for it            |
| 5 | brokerName      | the broker that popped it                                      |
| 6 | queueId         | its queue                                                      |
| 7 | queueOffset     | its offset in that queue                                       |
| 8 | commitLogOffset | (gRPC only) where it is stored                                 |

The response's offset infos list, per queue popped, ``<topicType> <queueId> <x>``
joined by ``;``: the start offset (startOffsetInfo), the message offsets joined
by ``,`` (msgOffsetInfo), and for orderly pops each offset's delivery count as
``<offset>:<count>`` joined by ``,`` (orderCountInfo).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from skiff.common.errors import DecodeError
from skiff.protocol.headers.base import Header, Int32

ORDERLY_REVIVE_QID = 999
NORMAL_TOPIC = 0
RETRY_TOPIC = 1
_FIELDS = 8


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader(Header):
    """``initMode`` 0 starts a new group at the queue's first offset, 1 at its end (unless
    nothing was ever deleted from it); ``expType``/``exp`` are the filter (TAG or SQL92)."""

    consumer_group: str
    topic: str
    queue_id: Int32
    max_msg_nums: Int32
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: Int32
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@dataclass(frozen=True, slots=True)
class PopMessageResponseHeader(Header):
    pop_time: int
    invisible_time: int
    revive_qid: Int32
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32
    extra_info: str
    offset: int


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32
    extra_info: str
    offset: int
    invisible_time: int


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader(Header):
    pop_time: int
    invisible_time: int
    revive_qid: Int32


class ExtraInfo(NamedTuple):
    """A popped message's receipt handle (see the module docstring for the layout)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    topic_type: int
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1

    @property
    def orderly(self) -> bool:
        return self.revive_qid == ORDERLY_REVIVE_QID

    @property
    def visible_at(self) -> int:
        """When the message shows again (and this handle expires), in ms since the epoch."""
        return self.pop_time + self.invisible_time

    def encode(self) -> str:
        """The eight-field remoting form (``extraInfo``)."""
        return " ".join(map(str, self[:_FIELDS]))

    def encode_receipt(self) -> str:
        """The nine-field gRPC receipt handle (with the CommitLog offset). One f-string: made
        once per message a gRPC consumer receives, ~2x cheaper than joining nine ``str`` calls."""
        a, b, c, d, e, f, g, h, i = self
        return f"{a} {b} {c} {d} {e} {f} {g} {h} {i}"

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        """Read either form; `DecodeError` says what is wrong with a bad one."""
        parts = text.split(" ")
        if len(parts) not in (_FIELDS, _FIELDS + 1):
            raise DecodeError(f"a receipt handle has {_FIELDS} or {_FIELDS + 1} space-separated fields, "
                              f"not {len(parts)}: {text[:100]!r}")
        try:  # parsed once per acknowledged message: whole slices through map, no per-field Python
            head = tuple(map(int, parts[:5]))
            tail = tuple(map(int, parts[6:]))
        except ValueError:
            raise DecodeError(f"a receipt handle's fields other than the broker name are numbers: "
                              f"{text[:100]!r}") from None
        if parts[5] == "" or head[4] not in (NORMAL_TOPIC, RETRY_TOPIC):
            raise DecodeError(f"a receipt handle names no broker or an unknown topic type: {text[:100]!r}")
        return cls._make(head + (parts[5],) + tail if len(tail) == 3 else head + (parts[5],) + tail + (-1,))


def offset_info(entries: list[tuple[int, int, str]]) -> str:
    """An offset-info header value from (topicType, queueId, value) per queue popped."""
    return ";".join(f"{kind} {queue_id} {value}" for kind, queue_id, value in entries)
