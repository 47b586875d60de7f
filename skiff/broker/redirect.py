"""Messages that are not stored where they are sent: delayed and half messages.

**Delayed.** A message with a delay level (``DELAY`` = 1..18, clamped to the
last level) or a delivery time (``DELIVER_TIME_MS`` / ``TIMER_DELIVER_MS``
absolute ms since the epoch; ``DELAY_MS`` / ``TIMER_DELAY_MS`` relative ms;
``TIMER_DELAY_SEC`` relative seconds) is stored in ``SCHEDULE_TOPIC_XXXX``
with its target saved in ``REAL_TOPIC`` / ``REAL_QID`` and its due time (ms
since the epoch) in ``TIMER_OUT_MS``. Queue ``level - 1`` holds delay level
``level``; queue ``len(levels)`` (18 by default) holds messages with an
arbitrary delivery time. The timer (`skiff.store.timer`) reads that topic and
puts each message back to its real topic and queue when it is due. A level of
0 or less, or a delivery time already past, means no delay. A due time more
than ``timerMaxDelaySec`` ahead is refused.

**Half (transactional prepared).** A message with ``TRAN_MSG=true`` is stored
in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, invisible to consumers of its real
topic, with ``REAL_TOPIC`` / ``REAL_QID`` saved and its sysFlag set to the NOT
transaction type (so the half topic's own queue indexes it, as RocketMQ
does). `skiff.broker.transactions` commits, rolls back and checks it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from skiff.common.names import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from skiff.common.properties import Prop
from skiff.common.sysflag import TRANSACTION_NOT_TYPE, with_transaction_type

DELAY_PROPERTIES = frozenset({
    Prop.DELAY, Prop.DELIVER_TIME_MS, Prop.TIMER_DELIVER_MS, Prop.DELAY_MS, Prop.TIMER_DELAY_MS,
    Prop.TIMER_DELAY_SEC,
})
"""Properties that may make a message a delayed one."""
REDIRECT_PROPERTIES = DELAY_PROPERTIES | {Prop.TRAN_MSG}
"""Properties that may send a message elsewhere than its topic."""

_ABSOLUTE = ((Prop.DELIVER_TIME_MS, 1), (Prop.TIMER_DELIVER_MS, 1))
_RELATIVE = ((Prop.DELAY_MS, 1), (Prop.TIMER_DELAY_MS, 1), (Prop.TIMER_DELAY_SEC, 1000))


class Schedule(NamedTuple):
    """Where a delayed message waits (a SCHEDULE_TOPIC_XXXX queue) and when it is due."""

    queue_id: int
    due_ms: int


class Redirected(NamedTuple):
    topic: str
    queue_id: int
    properties: dict[str, str]
    sys_flag: int


@dataclass(frozen=True, slots=True)
class DelayPolicy:
    levels_ms: tuple[int, ...]
    max_delay_ms: int

    @property
    def any_time_queue(self) -> int:
        """The SCHEDULE_TOPIC_XXXX queue of messages with a delivery time rather than a level."""
        return len(self.levels_ms)

    @property
    def queue_nums(self) -> int:
        return len(self.levels_ms) + 1

    def schedule(self, props: Mapping[str, str], now_ms: int) -> Schedule | str | None:
        """When a message with ``props`` is due: a `Schedule`, None when it is not
        delayed, or the reason it is refused."""
        level_text = props.get(Prop.DELAY)
        if level_text:
            return self._level(level_text, now_ms)
        due = _due_ms(props, now_ms)
        if isinstance(due, str) or due is None or due <= now_ms:
            return None if not isinstance(due, str) else due
        if due - now_ms > self.max_delay_ms:
            return (f"the message is due in {(due - now_ms) // 1000} s, more than "
                    f"timerMaxDelaySec={self.max_delay_ms // 1000} allows")
        return Schedule(self.any_time_queue, due)

    def _level(self, text: str, now_ms: int) -> Schedule | str | None:
        try:
            level = int(text)
        except ValueError:
            return f"the DELAY property {text!r} is not a delay level (1 to {len(self.levels_ms)})"
        if level <= 0:
            return None
        level = min(level, len(self.levels_ms))
        return Schedule(level - 1, now_ms + self.levels_ms[level - 1])


def _due_ms(props: Mapping[str, str], now_ms: int) -> int | str | None:
    for name, scale in _ABSOLUTE + _RELATIVE:
        text = props.get(name)
        if not text:
            continue
        try:
            value = int(text) * scale
        except ValueError:
            return f"the {name} property {text!r} is not a whole number"
        return value if (name, scale) in _ABSOLUTE else now_ms + value
    return None


def park_delayed(props: Mapping[str, str], topic: str, queue_id: int, sys_flag: int, when: Schedule) -> Redirected:
    parked = {**props, Prop.REAL_TOPIC: topic, Prop.REAL_QID: str(queue_id), Prop.TIMER_OUT_MS: str(when.due_ms)}
    return Redirected(SCHEDULE_TOPIC, when.queue_id, parked, sys_flag)


def park_half(props: Mapping[str, str], topic: str, queue_id: int, sys_flag: int) -> Redirected:
    parked = {**props, Prop.REAL_TOPIC: topic, Prop.REAL_QID: str(queue_id)}
    return Redirected(TRANS_HALF_TOPIC, 0, parked, with_transaction_type(sys_flag, TRANSACTION_NOT_TYPE))


def is_half(props: Mapping[str, str]) -> bool:
    return props.get(Prop.TRAN_MSG, "").lower() == "true"
