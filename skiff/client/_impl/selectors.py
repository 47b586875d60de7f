"""Queue selectors for ordered sends: messages a selector sends to one queue are
consumed in the order they were sent.

A selector is any callable ``(queues, msg, arg) -> MessageQueue`` where
``queues`` are the topic's publish queues in route order (RocketMQ's
MessageQueueSelector). `SelectByHash` hashes ``arg`` (or a key taken from the
message) the way Java's SelectMessageQueueByHash does, with Java's hashCode for
strings and integers, so Java and Python producers put a key on the same queue.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from skiff.common.message import Message, MessageQueue

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
KeyOf = Callable[[Message, Any], object]

_INT32 = 1 << 32


def _to_int32(value: int) -> int:
    value &= _INT32 - 1
    return value - _INT32 if value >= 1 << 31 else value


def java_hash(value: object) -> int:
    """Java's hashCode of a String (UTF-16 code units), an Integer or a Long; CRC-32 of bytes;
    anything else as the String of its ``str``."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(1 << 31) <= value < 1 << 31:
            return value
        return _to_int32(value ^ ((value & (2**64 - 1)) >> 32))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _to_int32(zlib.crc32(value))
    text = value if isinstance(value, str) else str(value)
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & (_INT32 - 1)
    return _to_int32(h)


class SelectByHash:
    """The queue at ``abs(hash(key)) % len(queues)``: one key, one queue, kept in order.

    The key is ``arg``, or ``key(msg, arg)`` when a key function is given
    (``SelectByHash(lambda m, a: m.keys[0])``).
    """

    def __init__(self, key: KeyOf | None = None) -> None:
        self._key = key

    def __call__(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        key = self._key(msg, arg) if self._key is not None else arg
        if key is None:
            raise ValueError("SelectByHash needs a key: pass arg= to send, or SelectByHash(key=...)")
        return queues[abs(java_hash(key)) % len(queues)]


class SelectRandom:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def __call__(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return queues[self._rng.randrange(len(queues))]


class SelectRoundRobin:
    """Each call the next queue (one counter per selector object)."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def __call__(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return queues[next(self._counter) % len(queues)]
