"""RocketMQ's message-trace data format (TraceDataEncoder in RocketMQ 4.9's client), so
traces Skiff writes can be read by RocketMQ's tools and the other way round.

A trace message's body is a run of records, each ended by FIELD_SPLITOR (0x02),
fields split by CONTENT_SPLITOR (0x01):

| type | fields, in order (0-based) |
|---|---|
| Pub | 0 "Pub", 1 time ms, 2 region id, 3 producer group, 4 topic, 5 msg id, 6 tags, 7 keys, 8 store host, 9 body length, 10 cost ms, 11 message type, 12 offset msg id, 13 success, 14 client host |
| SubBefore | 0 "SubBefore", 1 consume start ms, 2 region id, 3 consumer group, 4 request id, 5 msg id, 6 reconsume times, 7 keys |
| SubAfter | 0 "SubAfter", 1 request id, 2 msg id, 3 cost ms, 4 success, 5 keys, 6 context code, 7 end time ms, 8 consumer group |
| EndTransaction | 0 "EndTransaction", 1 time ms, 2 region id, 3 group, 4 topic, 5 msg id, 6 tags, 7 keys, 8 store host, 9 message type, 10 transaction id, 11 state, 12 from check |

Skiff appends fields RocketMQ's decoder does not read (it reads Pub up to 14,
SubBefore up to 7): Pub 15 broker name, 16 queue id, 17 queue offset;
SubBefore 8 topic, 9 client host. A SubBefore record thereby never ends with
an empty keys field, which Java's ``String.split`` would drop. Java writes a
missing tag or key as ``null``; it reads back as empty. Message types:
0 normal, 1 transactional half, 2 transactional commit, 3 delayed. A SubBefore
and its SubAfter share the request id; the SubAfter's cost is the listener
call's time divided by the messages in its batch, as RocketMQ computes it.

The trace message's KEYS are every traced msg id and key, so the broker's index
finds a message's traces by either (`keys_of`).
"""

from __future__ import annotations

import enum
import logging
from typing import NamedTuple, final

from skiff.common.properties import KEY_SEPARATOR

log = logging.getLogger(__name__)

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
_JAVA_NULL = "null"


class TraceType(enum.Enum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class MessageType(enum.IntEnum):
    """RocketMQ's MessageType ordinals."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3


class ConsumeReturnType(enum.IntEnum):
    """RocketMQ's ConsumeReturnType ordinals: a SubAfter's context code."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@final
class PubTrace(NamedTuple):
    """A send (RocketMQ's Pub trace). NamedTuples, not dataclasses: a traced producer makes
    one per message, and tuple construction costs a fraction of a frozen dataclass's."""

    time_ms: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str
    keys: str
    store_host: str
    body_length: int
    cost_ms: int
    msg_type: MessageType
    offset_msg_id: str
    success: bool
    client_host: str = ""
    broker_name: str = ""
    queue_id: int = -1
    queue_offset: int = -1


@final
class SubBeforeTrace(NamedTuple):
    """A message handed to a consumer's listener."""

    time_ms: int
    region_id: str
    group: str
    request_id: str
    msg_id: str
    reconsume_times: int
    keys: str
    topic: str = ""
    client_host: str = ""


@final
class SubAfterTrace(NamedTuple):
    """What the listener answered for it, and how long it took."""

    request_id: str
    msg_id: str
    cost_ms: int
    success: bool
    keys: str
    context_code: int
    time_ms: int
    group: str


@final
class EndTransactionTrace(NamedTuple):
    """A transaction's end, as RocketMQ's transactional producers trace it (read only here)."""

    time_ms: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str
    keys: str
    store_host: str
    msg_type: MessageType
    transaction_id: str
    state: str
    from_check: bool


TraceRecord = PubTrace | SubBeforeTrace | SubAfterTrace | EndTransactionTrace


def encode(r: TraceRecord) -> str:
    """One record in RocketMQ's layout, FIELD_SPLITOR included. Fields hold no splitor:
    names and ids are validated, and properties (tags, keys) may not contain 0x01 or 0x02."""
    # Exact type tests (the record classes are @final, so mypy narrows on them, the last
    # branch included): cheaper than isinstance on this per-message path.
    if type(r) is PubTrace:
        return (f"Pub\x01{r.time_ms}\x01{r.region_id}\x01{r.group}\x01{r.topic}\x01{r.msg_id}\x01{r.tags}\x01"
                f"{r.keys}\x01{r.store_host}\x01{r.body_length}\x01{r.cost_ms}\x01{int(r.msg_type)}\x01"
                f"{r.offset_msg_id}\x01{_java_bool(r.success)}\x01{r.client_host}\x01{r.broker_name}\x01"
                f"{r.queue_id}\x01{r.queue_offset}\x02")
    if type(r) is SubBeforeTrace:
        return (f"SubBefore\x01{r.time_ms}\x01{r.region_id}\x01{r.group}\x01{r.request_id}\x01{r.msg_id}\x01"
                f"{r.reconsume_times}\x01{r.keys}\x01{r.topic}\x01{r.client_host}\x02")
    if type(r) is SubAfterTrace:
        return (f"SubAfter\x01{r.request_id}\x01{r.msg_id}\x01{r.cost_ms}\x01{_java_bool(r.success)}\x01{r.keys}\x01"
                f"{r.context_code}\x01{r.time_ms}\x01{r.group}\x02")
    return (f"EndTransaction\x01{r.time_ms}\x01{r.region_id}\x01{r.group}\x01{r.topic}\x01{r.msg_id}\x01{r.tags}\x01"
            f"{r.keys}\x01{r.store_host}\x01{int(r.msg_type)}\x01{r.transaction_id}\x01{r.state}\x01"
            f"{_java_bool(r.from_check)}\x02")


def _java_bool(value: bool) -> str:
    """Java's StringBuilder.append(boolean)."""
    return "true" if value else "false"


def keys_of(record: TraceRecord) -> list[str]:
    """What the trace message is indexed under for this record: its msg id and its keys."""
    if not record.keys:
        return [record.msg_id]
    return [record.msg_id, *(k for k in record.keys.split(KEY_SEPARATOR) if k)]


def decode(data: str) -> list[TraceRecord]:
    """Every record of a trace message's body; a record that does not parse is logged and skipped."""
    out: list[TraceRecord] = []
    for text in data.split(FIELD_SPLITOR):
        if not text:
            continue
        try:
            record = _decode_one(text.split(CONTENT_SPLITOR))
        except (ValueError, IndexError) as exc:
            log.info("skipping a trace record that does not parse (%s): %r", exc, text[:200])
            continue
        if record is not None:
            out.append(record)
    return out


def _decode_one(f: list[str]) -> TraceRecord | None:
    f = ["" if v == _JAVA_NULL else v for v in f]
    kind = f[0]
    if kind == TraceType.PUB.value:
        offset_msg_id, success = (f[12], f[13]) if len(f) > 13 else ("", f[12])
        return PubTrace(int(f[1]), f[2], f[3], f[4], f[5], f[6], f[7], f[8], int(f[9]), int(f[10]),
                        MessageType(int(f[11])), offset_msg_id, _bool(success), _at(f, 14),
                        _at(f, 15), int(_at(f, 16) or -1), int(_at(f, 17) or -1))
    if kind == TraceType.SUB_BEFORE.value:
        return SubBeforeTrace(int(f[1]), f[2], f[3], f[4], f[5], int(f[6]), _at(f, 7), _at(f, 8), _at(f, 9))
    if kind == TraceType.SUB_AFTER.value:
        return SubAfterTrace(f[1], f[2], int(f[3]), _bool(f[4]), _at(f, 5), int(_at(f, 6) or 0),
                             int(_at(f, 7) or 0), _at(f, 8))
    if kind == TraceType.END_TRANSACTION.value:
        return EndTransactionTrace(int(f[1]), f[2], f[3], f[4], f[5], f[6], f[7], f[8], MessageType(int(f[9])),
                                   f[10], f[11], _bool(f[12]))
    return None


def _at(fields: list[str], i: int) -> str:
    return fields[i] if i < len(fields) else ""


def _bool(text: str) -> bool:
    """Java's Boolean.parseBoolean."""
    return text.strip().lower() == "true"
