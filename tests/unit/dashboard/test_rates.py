"""In/out rates from the brokers' running totals."""

from __future__ import annotations

from skiff.dashboard.rates import Rates


def rates() -> Rates:
    return Rates(admin=None, interval_s=2.0, history_points=3)  # type: ignore[arg-type] - record() needs no admin


def test_rates_are_differences_over_time_summed_over_brokers():
    r = rates()
    r.record(100.0, {"a": (1000, 10), "b": (50, 0)})
    assert r.snapshot() == {"time": [], "in_tps": [], "out_tps": []}
    r.record(102.0, {"a": (1400, 30), "b": (150, 0)})
    assert r.broker_tps("a") == (200.0, 10.0)
    assert r.broker_tps("b") == (50.0, 0.0)
    assert r.snapshot() == {"time": [102.0], "in_tps": [250.0], "out_tps": [10.0]}


def test_a_restarted_broker_counts_zero_not_a_negative_spike():
    r = rates()
    r.record(0.0, {"a": (5000, 5000)})
    r.record(1.0, {"a": (10, 4)})
    assert r.broker_tps("a") == (0.0, 0.0)
    r.record(2.0, {"a": (20, 8)})
    assert r.broker_tps("a") == (10.0, 4.0)


def test_a_silent_broker_has_no_rate_and_history_is_bounded():
    r = rates()
    for t in range(6):
        r.record(float(t), {"a": (t * 10, 0)})
    assert r.snapshot()["time"] == [3.0, 4.0, 5.0]
    r.record(6.0, {})
    assert r.broker_tps("a") == (0.0, 0.0)
