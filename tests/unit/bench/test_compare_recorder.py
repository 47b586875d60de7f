"""`Recorder` of the compare's consumers: a delivery counted in numpy passes gives the figures the
body-by-body count gives (sequence numbers seen, out-of-range ones, every body's latency)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from skiff.bench.compare.drivers.base import BODY_HEAD, VECTOR_MIN_BODIES, BodyFactory, Recorder


def _deliveries() -> list[list[bytes]]:
    bodies = BodyFactory(40)
    big = bodies.batch(0, VECTOR_MIN_BODIES * 2)
    sent_ns = time.monotonic_ns() - 5_000_000
    stale = [BODY_HEAD.pack(sent_ns, seq) + bytes(24) for seq in range(200, 200 + VECTOR_MIN_BODIES)]
    out_of_range = [BODY_HEAD.pack(1, 10_000 + i) + bytes(24) for i in range(3)]
    return [big, bodies.batch(150, 5), stale + out_of_range, big[:VECTOR_MIN_BODIES]]


@pytest.mark.parametrize("expected", [300, 150])
def test_a_delivery_counted_at_once_gives_what_counting_each_body_gives(monkeypatch: pytest.MonkeyPatch,
                                                                        expected: int) -> None:
    monkeypatch.setattr(time, "monotonic_ns", lambda: 10**18)  # one reading for both recorders
    deliveries = _deliveries()
    batched, each = Recorder(expected), Recorder(expected)
    for bodies in deliveries:
        batched.add(iter(bodies))
        each._add_each(10**18, bodies)
        each.set_expected(expected)
    assert batched.received == each.received > 0
    assert batched.out_of_range == each.out_of_range == (3 if expected == 300 else 3 + VECTOR_MIN_BODIES + 5)
    assert np.array_equal(batched._seen, each._seen)
    assert batched._n_latency == each._n_latency
    assert np.array_equal(batched._latency_ns[: batched._n_latency], each._latency_ns[: each._n_latency])
    assert batched.summary()["distinct"] == int(np.count_nonzero(each._seen))


def test_a_delivery_of_memoryviews_is_counted_and_a_short_body_refused() -> None:
    recorder = Recorder(100)
    bodies = [memoryview(b) for b in BodyFactory(16).batch(0, VECTOR_MIN_BODIES)]
    recorder.add(bodies)
    assert recorder.received == VECTOR_MIN_BODIES and recorder.summary()["distinct"] == VECTOR_MIN_BODIES
    with pytest.raises(ValueError, match="shorter than its 16-byte head"):
        recorder.add([*bodies[:-1], b"short"])
