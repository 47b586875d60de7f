"""Queue selectors for ordered sends."""

from __future__ import annotations

import random

import pytest

from skiff.client._impl.selectors import SelectByHash, SelectRandom, SelectRoundRobin, java_hash
from skiff.common.message import Message, MessageQueue

QUEUES = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(4)]
MSG = Message.of("T", b"x", keys="k1 k2")


@pytest.mark.parametrize(("value", "expected"), [
    # values printed by a JVM (String/Long/Boolean.hashCode)
    ("hello", 99162322), ("order-17", 1234255109), ("\U0001F600x", 54959989), ("Zürich", -1482116162),
    (1 << 40, 256), (-(1 << 40), -256), (123456789012, -1097262584), (True, 1231), (7, 7), (-7, -7), ("", 0),
])
def test_java_hash_matches_the_jvm(value, expected):
    assert java_hash(value) == expected


def test_select_by_hash_pins_a_key_to_one_queue():
    select = SelectByHash()
    assert select(QUEUES, MSG, "order-17") == QUEUES[1234255109 % 8]
    assert select(QUEUES, MSG, -7) == QUEUES[7]
    assert len({select(QUEUES, MSG, f"k{i}") for i in range(200)}) == 8
    by_key = SelectByHash(lambda m, arg: m.keys[0])
    assert by_key(QUEUES, MSG, None) == select(QUEUES, MSG, "k1")
    with pytest.raises(ValueError, match="needs a key"):
        select(QUEUES, MSG, None)


def test_round_robin_and_random():
    rr = SelectRoundRobin()
    assert [rr(QUEUES, MSG, None) for _ in range(10)] == QUEUES + QUEUES[:2]
    rnd = SelectRandom(random.Random(3))
    picks = [rnd(QUEUES, MSG, None) for _ in range(200)]
    assert set(picks) == set(QUEUES)
