"""The timer's own threads on the wall clock: woken by the store, ticking, stopping cleanly."""

from __future__ import annotations

import random
import time
from pathlib import Path

from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.properties import Prop
from skiff.store import MessageStore
from skiff.store.timer import TimerService
from skiff.testing.waits import wait_for
from tests.unit.store.conftest import STORE_HOST, make_config
from tests.unit.store.timer.conftest import REAL, TIMER, messages_in, parked

COUNT = 100


def test_threads_deliver_on_time_and_stop(tmp_path: Path) -> None:
    config = make_config(tmp_path / "store", **TIMER)
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    timer = TimerService(store, config)
    try:
        timer.start()
        rng = random.Random(7)
        now = SYSTEM_CLOCK.now_ms()
        dues = {f"t{i}": now + 300 + rng.randrange(1_200) for i in range(COUNT)}
        for uniq, due in dues.items():
            assert store.put_message(parked(uniq, due, queue_id=rng.randrange(2))).ok
        wait_for(lambda: len(messages_in(store, REAL)) >= COUNT, timeout_s=30, what=f"{COUNT} deliveries")
        delivered = messages_in(store, REAL)
        keys = [m.properties[Prop.UNIQ_KEY] for m in delivered]
        assert sorted(keys) == sorted(dues)
        assert [k for m, k in zip(delivered, keys) if m.store_timestamp < dues[k]] == []
        # The delivery thread settles its counters just after its puts become visible.
        wait_for(lambda: timer.stats().delivered >= COUNT, timeout_s=30, what="the delivery counters settled")
        stats = timer.stats()
        assert stats.delivered == COUNT and stats.scheduled == 0
        assert stats.lateness_p50_ms <= 1_500  # loose: the machine is shared; docs/performance.md has the figures
    finally:
        began = time.monotonic()
        timer.stop()
        assert time.monotonic() - began < 5
        store.shutdown()
