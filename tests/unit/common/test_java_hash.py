"""Java's String.hashCode and Guava's consistentHash, checked against their known values (Guava's
HashingTest golden values): RocketMQ 5.5 places lite topics with them."""

from __future__ import annotations

import pytest

from skiff.common.java_hash import consistent_hash, java_string_hash


def test_string_hash_codes_are_javas():
    assert [java_string_hash(s) for s in ("", "abc", "hello", "lite-topic-0123456789")] == [
        0, 96354, 99162322, -1813632862]


def test_consistent_hash_gives_guavas_buckets():
    assert [consistent_hash(i, 100) for i in range(20)] == [
        0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(v, 11) for v in (10863919174838991, 2016238256797177309, 1673758223894951030)] == [6, 3, 5]
    assert [consistent_hash(v, 100001) for v in (2, 2201, 2202)] == [80343, 22152, 15018]
    assert consistent_hash(java_string_hash("hello"), 1) == 0 and 0 <= consistent_hash(-7, 8) < 8
    with pytest.raises(ValueError, match="buckets must be positive"):
        consistent_hash(1, 0)
