"""The timer's settings in StoreConfig: defaults and refusals that name the key."""

from __future__ import annotations

import pytest

from skiff.common.config import build_config
from skiff.common.errors import ConfigError
from skiff.store import StoreConfig


def test_defaults() -> None:
    config = build_config(StoreConfig, {})
    assert (config.timer_precision_ms, config.timer_slot_ms, config.timer_lookahead_ms,
            config.timer_flush_interval_ms) == (100, 3_600_000, 60_000, 1000)


@pytest.mark.parametrize(("props", "message"), [
    ({"timerPrecisionMs": "0"}, "timerPrecisionMs: 0 must be a positive"),
    ({"timerPrecisionMs": "5000"}, "timerPrecisionMs: 5000 must be at most 1000"),
    ({"timerSlotMs": "150"}, "timerSlotMs: 150 must be a multiple of timerPrecisionMs=100"),
    ({"timerLookaheadMs": "-1"}, "timerLookaheadMs: -1 must not be negative"),
    ({"timerFlushIntervalMs": "x"}, "timerFlushIntervalMs: 'x' is not a whole number"),
])
def test_bad_values_are_refused_by_name(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(StoreConfig, props)
