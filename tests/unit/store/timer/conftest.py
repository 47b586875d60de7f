"""A real store and its timer on a ManualClock, driven step by step (no timer threads)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.common.clock import ManualClock
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop, encode_properties
from skiff.common.stored_message import StoredMessage
from skiff.store import GetStatus, MessageInput, MessageStore, PutResult
from skiff.store.timer import TimerRecovery, TimerService
from tests.unit.store.conftest import BORN_HOST, STORE_HOST, make_config, records_of

T0 = 1_700_000_040_000
"""A slot boundary (timerSlotMs below) to start the clock at."""
SLOT_MS = 60_000
TICK_MS = 100
LOOKAHEAD_MS = 10_000
TIMER = {
    "timerPrecisionMs": TICK_MS,
    "timerSlotMs": SLOT_MS,
    "timerLookaheadMs": LOOKAHEAD_MS,
    "timerFlushIntervalMs": 1000,
    "mappedFileSizeCommitLog": 1 << 20,
    "mappedFileSizeConsumeQueue": 20 * 4096,
    "maxHashSlotNum": 1024,
    "maxIndexNum": 4096,
}
REAL = "Real"


def parked(uniq: str, due_ms: int, *, topic: str = REAL, queue_id: int = 0, body: bytes | None = None,
           extra: dict[str, str] | None = None, schedule_queue: int = 18, flag: int = 3, sys_flag: int = 0,
           reconsume_times: int = 0) -> MessageInput:
    """A message as the broker parks it in SCHEDULE_TOPIC_XXXX."""
    props = {Prop.UNIQ_KEY: uniq, Prop.KEYS: f"k-{uniq}", Prop.TAGS: "TagA", "color": "red",
             Prop.DELIVER_TIME_MS: str(due_ms), Prop.REAL_TOPIC: topic, Prop.REAL_QID: str(queue_id),
             Prop.TIMER_OUT_MS: str(due_ms), **(extra or {})}
    return MessageInput(
        topic=SCHEDULE_TOPIC, queue_id=schedule_queue, body=body if body is not None else f"body of {uniq}".encode(),
        properties=encode_properties(props), flag=flag, sys_flag=sys_flag, born_timestamp=1_234, born_host=BORN_HOST,
        reconsume_times=reconsume_times, tags="TagA", keys=f"k-{uniq}", uniq_key=uniq,
    )


def messages_in(store: MessageStore, topic: str) -> list[StoredMessage]:
    """Every message of every queue of ``topic``."""
    out = []
    for q in store.queue_ids(topic):
        offset = 0
        while True:
            result = store.get_messages(topic, q, offset, 1024)
            if result.status is not GetStatus.FOUND:
                break
            out += records_of(result)
            offset = result.next_begin_offset
    return out


class Rig:
    """One store directory with a store and a timer on ``clock``; reopen after stop or crash."""

    def __init__(self, root: Path, clock: ManualClock, **overrides: Any) -> None:
        self.root = root
        self.clock = clock
        self.overrides = {**TIMER, **overrides}
        self.config = make_config(root, **self.overrides)
        self.store: MessageStore
        self.timer: TimerService
        self.report: TimerRecovery
        self.open()

    def open(self) -> TimerRecovery:
        self.store = MessageStore(self.config, store_host=STORE_HOST, clock=self.clock)
        self.store.start()
        self.timer = TimerService(self.store, self.config, clock=self.clock)
        self.report = self.timer.recover()
        return self.report

    def park(self, uniq: str, due_ms: int, **kwargs: Any) -> PutResult:
        result = self.store.put_message(parked(uniq, due_ms, **kwargs))
        assert result.ok, result
        return result

    def step(self) -> None:
        self.timer.replay_pending()
        self.timer.deliver_due()

    def advance_to(self, when_ms: int) -> None:
        """Move the clock to ``when_ms`` one tick at a time, stepping the timer at each tick."""
        while self.clock.now_ms() < when_ms:
            self.clock.advance(min(TICK_MS, when_ms - self.clock.now_ms()))
            self.step()

    def delivered(self, topic: str = REAL) -> list[StoredMessage]:
        return messages_in(self.store, topic)

    def delivered_keys(self, topic: str = REAL) -> list[str]:
        return sorted(m.properties[Prop.UNIQ_KEY] for m in self.delivered(topic))

    def close(self) -> None:
        self.timer.stop()
        self.store.shutdown()

    def crash_and_reopen(self) -> TimerRecovery:
        """Copy the files as they are now (what SIGKILL leaves), abandon this process's
        store, and open the copy."""
        image = self.root.parent / f"{self.root.name}-crash"
        shutil.copytree(self.root, image, ignore=shutil.ignore_patterns("lock"))
        self.close()
        self.root = image
        self.config = make_config(image, **self.overrides)
        return self.open()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def rig(tmp_path: Path, clock: ManualClock) -> Iterator[Rig]:
    made = Rig(tmp_path / "store", clock)
    yield made
    made.close()
