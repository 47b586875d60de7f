"""Message properties as RocketMQ stores and sends them.

Encoding: ``name 0x01 value 0x02`` for each pair, with a trailing 0x02 after the
last pair (what Java and the C++ client write). Decoding accepts a missing
trailing separator and drops pairs that do not split in two, as the C++ client
does, so a foreign writer's quirks never fail a read.
"""

from __future__ import annotations

from collections.abc import Mapping

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class Prop:
    """Property names with a meaning to brokers or clients (RocketMQ's MessageConst)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    UNIQ_KEY = "UNIQ_KEY"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    MSG_REGION = "MSG_REGION"
    TRACE_ON = "TRACE_ON"
    SHARDING_KEY = "__SHARDINGKEY"
    PRIORITY = "_SYS_MSG_PRIORITY_"
    """RocketMQ 5.4's message priority (0 and up); on a PRIORITY topic it picks the queue."""
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    DELIVER_TIME_MS = "DELIVER_TIME_MS"
    """Skiff's absolute delivery time in ms since the epoch (any time up to timerMaxDelaySec)."""
    DELAY_MS = "DELAY_MS"
    """Skiff's relative delivery delay in ms."""
    TIMER_OUT_MS = "TIMER_OUT_MS"
    """When a message parked in SCHEDULE_TOPIC_XXXX is due, in ms since the epoch (set by the broker)."""
    TIMER_ID = "TIMER_ID"
    """Set by the timer on each message it delivers: ``<slot start ms>:<timer id>`` of its schedule
    record, so a restart finds deliveries in the CommitLog (reserved: producers must not set it)."""


SYSTEM_PROPERTIES = frozenset(
    v for k, v in vars(Prop).items() if not k.startswith("_") and isinstance(v, str)
)

KEY_SEPARATOR = " "


def encode_properties(props: Mapping[str, str]) -> bytes:
    """Encode a mapping in RocketMQ's property string format (UTF-8 bytes)."""
    if not props:
        return b""
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items()
    ).encode()


def decode_properties(raw: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Decode RocketMQ's property string; pairs without exactly one 0x01 are dropped."""
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        parts = item.split(NAME_VALUE_SEPARATOR)
        if len(parts) == 2 and parts[0]:
            out[parts[0]] = parts[1]
    return out


def split_keys(keys: str | None) -> list[str]:
    """The KEYS property holds several business keys separated by spaces."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
