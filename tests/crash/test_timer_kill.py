"""SIGKILL a process that schedules and delivers timed messages: after recovery every
parked message is delivered exactly once, never before its time.

The child is this module: ``python -m tests.crash.test_timer_kill --dir D [...]`` opens a
store and starts its timer (threads, wall clock), parks ``--count`` messages due within
``--span-ms``, printing ``{"parked": [uniq, due]}`` after each put is fsynced, and then
``{"delivered": n}`` whenever the real topic grows, until it is killed. The seed is
random per run and printed in every failure; rerun one with SKIFF_CRASH_SEED=<seed>.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from pathlib import Path

from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.config import build_config
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop
from skiff.store import MessageStore, StoreConfig
from skiff.store.timer import TimerService
from skiff.testing.waits import wait_for
from tests.crash.conftest import Child
from tests.crash.store_child import STORE_HOST, emit
from tests.unit.store.timer.conftest import REAL, messages_in, parked

MODULE = "tests.crash.test_timer_kill"


def timer_config(root: str, flush_ms: int) -> StoreConfig:
    return build_config(StoreConfig, {
        "storePathRootDir": root, "mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 1024,
        "maxHashSlotNum": 1024, "maxIndexNum": 8192, "flushDiskType": "SYNC_FLUSH",
        "timerSlotMs": 60_000, "timerLookaheadMs": 10_000, "timerFlushIntervalMs": flush_ms,
        "diskMaxUsedSpaceRatio": 100, "diskSpaceCleanForciblyRatio": 100, "diskSpaceWarningLevelRatio": 100,
    })


def child_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--span-ms", type=int, default=1000)
    parser.add_argument("--flush-ms", type=int, default=1000)
    args = parser.parse_args()
    config = timer_config(args.dir, args.flush_ms)
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    report = TimerService(store, config).start()
    emit({"ready": True, "recovered": report.deliveries_recovered})
    rng = random.Random(args.seed)
    for i in range(args.count):
        uniq, due = f"s{args.seed}-{i}", SYSTEM_CLOCK.now_ms() + rng.randrange(args.span_ms)
        result = store.put_message(parked(uniq, due, queue_id=rng.randrange(2), schedule_queue=rng.choice((0, 18))))
        assert result.ok and result.flushed is not None and result.flushed.result(30).name == "PUT_OK"
        emit({"parked": [uniq, due]})
    seen = -1
    while True:  # until killed
        count = len(messages_in(store, REAL))
        if count != seen:
            emit({"delivered": count})
            seen = count
        time.sleep(0.01)


def delivered_so_far(child: Child) -> int:
    return max((line["delivered"] for line in child.lines if "delivered" in line), default=0)


def wait_delivered(child: Child, count: int, after_ms: int = 0) -> None:
    """Until the child reports ``count`` deliveries (and the wall clock is past ``after_ms``)."""
    wait_for(lambda: delivered_so_far(child) >= count and SYSTEM_CLOCK.now_ms() > after_ms, 30,
             f"{count} deliveries reported by the child")


def open_and_settle(store_dir: Path) -> tuple[MessageStore, TimerService, int]:
    """Open the killed child's files, recover the timer, let it deliver what is due."""
    config = timer_config(str(store_dir), 1000)
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    timer = TimerService(store, config)
    recovered = timer.recover().deliveries_recovered
    timer.replay_pending()
    timer.deliver_due()
    return store, timer, recovered


def parked_in_store(store: MessageStore) -> dict[str, int]:
    """Due time by UNIQ_KEY of every message parked in SCHEDULE_TOPIC_XXXX that survived the kills."""
    return {m.properties[Prop.UNIQ_KEY]: int(m.properties[Prop.TIMER_OUT_MS]) for m in messages_in(store, SCHEDULE_TOPIC)}


def settled(timer: TimerService) -> bool:
    """One replay and delivery step; True once nothing is left scheduled."""
    timer.replay_pending()
    timer.deliver_due()
    return timer.stats().scheduled == 0


def check(store: MessageStore, acked: dict[str, int], where: str) -> None:
    got = messages_in(store, REAL)
    counts = Counter(m.properties[Prop.UNIQ_KEY] for m in got)
    assert [k for k, n in counts.items() if n > 1] == [], f"delivered twice; {where}"
    assert sorted(acked.keys() - counts.keys()) == [], f"acknowledged but never delivered; {where}"
    early = [m.properties[Prop.UNIQ_KEY] for m in got if m.store_timestamp < acked.get(m.properties[Prop.UNIQ_KEY], 0)]
    assert early == [], f"delivered early; {where}"


def test_a_kill_between_the_put_and_the_dispatch_log(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    child = Child(store_dir, "--count", "40", "--span-ms", "600", "--flush-ms", "600000", module=MODULE)
    child.wait_for("ready")
    acked = dict(line["parked"] for line in child.wait_for("parked", 40))
    wait_delivered(child, 40)
    child.kill()
    store, timer, recovered = open_and_settle(store_dir)
    try:
        assert recovered == 40  # all in the CommitLog, none in a dispatch log
        check(store, acked, "after one kill")
        assert timer.stats().scheduled == 0 and timer.stats().delivered == 0
    finally:
        timer.stop()
        store.shutdown()


def test_kills_at_random_moments(tmp_path: Path) -> None:
    seed = int(os.environ.get("SKIFF_CRASH_SEED") or random.SystemRandom().randrange(2**32))
    rng = random.Random(seed)
    store_dir = tmp_path / "store"
    acked: dict[str, int] = {}
    for round_no in range(4):
        flush_ms = rng.choice(["50", "300", "600000"])
        child = Child(store_dir, "--seed", str(round_no), "--count", "30", "--span-ms", "1500",
                      "--flush-ms", flush_ms, module=MODULE)
        child.wait_for("ready")
        if rng.random() < 0.5:
            child.wait_for("parked", rng.randint(1, 30))
        else:
            child.wait_for("parked", 30)
            wait_delivered(child, rng.randint(1, len(acked) + 30))
        child.kill()
        acked.update(dict(line["parked"] for line in child.lines if "parked" in line))
    child = Child(store_dir, "--flush-ms", "300", module=MODULE)
    wait_delivered(child, len(acked), after_ms=max(acked.values()) + 500)
    child.kill()
    store, timer, _ = open_and_settle(store_dir)
    where = f"seed {seed} (rerun with SKIFF_CRASH_SEED={seed})"
    try:
        check(store, acked, where)
        # A kill can land after a put was fsynced and before its "parked" line: that send is
        # stored, unacknowledged, and may fall due after the acknowledged ones. The timer owes it
        # delivery too, so wait (every due time is within --span-ms of its put) until nothing is
        # scheduled, then hold every stored message to the promise, not only the acknowledged.
        stored = parked_in_store(store)
        assert acked.items() <= stored.items(), f"acknowledged but not parked; {where}"
        wait_for(lambda: settled(timer), 30, f"every parked message delivered; {where}")
        check(store, stored, where)
    finally:
        timer.stop()
        store.shutdown()


if __name__ == "__main__":
    child_main()
