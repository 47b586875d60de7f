"""Parked records (messages waiting in SCHEDULE_TOPIC_XXXX) and the messages they become.

The broker parks a delayed message with its target in ``REAL_TOPIC`` /
``REAL_QID`` and its due time in ``TIMER_OUT_MS``. When it is due, the timer
puts it back as it was sent: same body and flag (a compressed body stays
compressed, with its sysFlag bit), same properties but the scheduling ones
(UNIQ_KEY, KEYS, TAGS and user properties kept), same born time and host,
same reconsume count, plus ``TIMER_ID`` naming its schedule record.
"""

from __future__ import annotations

from typing import NamedTuple

from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop, decode_properties, encode_properties
from skiff.common.record import read_head, read_tail
from skiff.store.results import MessageInput

SCHEDULING_PROPERTIES = frozenset({
    Prop.DELAY, Prop.DELIVER_TIME_MS, Prop.DELAY_MS, Prop.TIMER_DELIVER_MS, Prop.TIMER_DELAY_MS,
    Prop.TIMER_DELAY_SEC, Prop.TIMER_OUT_MS, Prop.REAL_TOPIC, Prop.REAL_QID, Prop.TIMER_ID,
})
"""Properties that asked for the delay or parked the message; a delivered message has none of them."""

TIMER_ID_MARK = (Prop.TIMER_ID + "\x01").encode()
"""How ``TIMER_ID`` starts in encoded properties: a cheap test before decoding them."""


class Parked(NamedTuple):
    """What the timer needs to know of a parked record to schedule it."""

    timer_id: int
    """The record's CommitLog offset."""
    due_ms: int
    queue_id: int
    queue_offset: int
    uniq_key: str | None


def parse_parked(record: bytes | memoryview) -> Parked | str:
    """The schedule of a parked record, or why it cannot be delivered. A missing or bad
    ``TIMER_OUT_MS`` makes the message due at once (its store time): late beats lost."""
    head = read_head(record)
    props = decode_properties(read_tail(record, 0, head).properties_raw)
    real_topic, real_qid = props.get(Prop.REAL_TOPIC), props.get(Prop.REAL_QID, "")
    if not real_topic or real_topic == SCHEDULE_TOPIC:
        return f"the parked record at {head.physical_offset} names no real topic (REAL_TOPIC={real_topic!r})"
    if not real_qid.isdigit():
        return f"the parked record at {head.physical_offset} has no queue id (REAL_QID={real_qid!r})"
    due_text = props.get(Prop.TIMER_OUT_MS, "")
    due = int(due_text) if due_text.isdigit() else head.store_timestamp
    return Parked(head.physical_offset, due, head.queue_id, head.queue_offset, props.get(Prop.UNIQ_KEY))


def marker(slot_ms: int, timer_id: int) -> str:
    """The ``TIMER_ID`` value of a delivery."""
    return f"{slot_ms}:{timer_id}"


def parse_marker(value: str | None) -> tuple[int, int] | None:
    """(slot start ms, timer id) of a ``TIMER_ID`` value, or None when it is not one."""
    slot, sep, timer_id = (value or "").partition(":")
    if not sep or not slot.isdigit() or not timer_id.isdigit():
        return None
    return int(slot), int(timer_id)


def delivery_input(record: bytes, slot_ms: int) -> MessageInput:
    """The message a parked record becomes when it is due."""
    head = read_head(record)
    tail = read_tail(record, 0, head)
    props = decode_properties(tail.properties_raw)
    topic, queue_id = props[Prop.REAL_TOPIC], int(props[Prop.REAL_QID])
    kept = {k: v for k, v in props.items() if k not in SCHEDULING_PROPERTIES}
    kept[Prop.TIMER_ID] = marker(slot_ms, head.physical_offset)
    # Positional: one per delivered message, and keywords would add ~0.5 µs (7 %) to it; the
    # field order is checked at import (skiff.common.kernels.ROW_LAYOUTS).
    return MessageInput(
        topic, queue_id, record[tail.body_pos : tail.body_pos + tail.body_length], encode_properties(kept),
        head.flag, head.sys_flag, head.born_timestamp, head.born_host, head.reconsume_times, 0,
        kept.get(Prop.TAGS), kept.get(Prop.KEYS), kept.get(Prop.UNIQ_KEY),
    )
