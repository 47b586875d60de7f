"""TimerService: delivery at any time, QMQ's two-level wheel over the CommitLog.

Two threads: the replay thread (woken by the store's dispatch listener when
SCHEDULE_TOPIC_XXXX grows, and every tick) copies parked messages into the
schedule logs, loads slots that come near into the wheel, retires finished
slots and commits; the tick thread wakes at each tick boundary, delivers what
is due and checkpoints. Their steps are public (`replay_pending`,
`deliver_due`) so tests drive them with a `ManualClock` and no threads.

``start`` recovers first: it cuts uncommitted schedule-log tails, reads the
CommitLog past the last checkpoint for deliveries the dispatch logs miss, and
loads the near slots. Files and formats: `skiff.store.timer.formats`;
guarantees: docs/timer.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.names import SCHEDULE_TOPIC
from skiff.store.config import StoreConfig
from skiff.store.dispatcher import QueueTouch
from skiff.store.message_store import MessageStore
from skiff.store.timer.cancel import Canceller
from skiff.store.timer.cut import CHECKPOINT_FILE, PROGRESS_FILE, timer_root
from skiff.store.timer.delivery import DELIVER_BATCH, Deliverer
from skiff.store.timer.dispatch_log import DispatchLogs
from skiff.store.timer.formats import Progress, decode_progress, read_small_file
from skiff.store.timer.replay import Replayer
from skiff.store.timer.results import CancelResult, SlotCount, TimerRecovery, TimerStats
from skiff.store.timer.schedule_log import ScheduleLogs
from skiff.store.timer.slots import SlotKeeper, TimerState

log = logging.getLogger(__name__)

ERROR_PAUSE_S = 1.0
"""How long a thread waits after an unexpected failure before it tries again."""


class TimerService:
    """Delivers messages parked in SCHEDULE_TOPIC_XXXX at their ``TIMER_OUT_MS``."""

    def __init__(self, store: MessageStore, config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.clock = clock
        self.root = timer_root(config.root)
        self.tick_ms = config.timer_precision_ms
        self.flush_interval_s = config.timer_flush_interval_ms / 1000
        self.state = TimerState(self.tick_ms)
        self.logs = ScheduleLogs(os.path.join(self.root, "schedule"))
        self.dispatch = DispatchLogs(os.path.join(self.root, "dispatch"))
        self.keeper = SlotKeeper(self.state, self.logs, self.dispatch, config.timer_slot_ms, config.timer_lookahead_ms)
        self.replayer = Replayer(store, self.state, self.logs, self.keeper, os.path.join(self.root, PROGRESS_FILE), clock)
        self.deliverer = Deliverer(store, self.state, self.logs, self.dispatch, os.path.join(self.root, CHECKPOINT_FILE), clock)
        self.canceller = Canceller(store, self.state, self.logs, self.dispatch, self.keeper)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._recovered = False
        self._last_commit = self._last_checkpoint = 0.0
        self.delivered_through_ms = -1
        """Every message due at or before this time has been delivered (-1: not known yet)."""

    # -- lifecycle ----------------------------------------------------------------

    def recover(self) -> TimerRecovery:
        """Open the files and repair them after a crash (see the module docstring); the store
        must be started. Raises `CorruptionError` when committed timer files are damaged."""
        if self._recovered:
            raise RuntimeError("a TimerService recovers once; make a new one to open the files again")
        began = time.perf_counter()
        os.makedirs(self.root, exist_ok=True)
        raw = read_small_file(self.replayer.progress_path)
        progress = Progress({}, {}) if raw is None else decode_progress(raw, self.replayer.progress_path)
        notes = self.logs.open(progress.slots) + self.dispatch.open() + self.replayer.start_from(progress.queues)
        recovered, scanned = self.deliverer.recover_deliveries(fresh=raw is None)
        self.replayer.commit()
        loaded = self.keeper.load_near(self.clock.now_ms())
        self._recovered = True
        self._last_commit = self._last_checkpoint = self.clock.monotonic()
        report = TimerRecovery(tuple(notes), recovered, scanned, len(self.logs.logs), loaded,
                               self._scheduled(), (time.perf_counter() - began) * 1000)
        log.info("timer %s recovered: %s", self.root, report)
        return report

    def start(self) -> TimerRecovery:
        """Recover, then follow SCHEDULE_TOPIC_XXXX and deliver on two threads until `stop`."""
        report = self.recover()
        self.store.add_dispatch_listener(self._on_dispatch)
        self._threads = [
            threading.Thread(target=self._replay_loop, name="skiff-timer-replay", daemon=True),
            threading.Thread(target=self._tick_loop, name="skiff-timer-tick", daemon=True),
        ]
        for t in self._threads:
            t.start()
        return report

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the threads, commit and checkpoint, close the files (before the store shuts down)."""
        if not self._recovered or self._stop.is_set():
            return
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout_s)
        try:
            self.replayer.commit()
            self.deliverer.checkpoint()
        finally:
            self.logs.close()

    def _on_dispatch(self, touched: Sequence[QueueTouch]) -> None:
        for topic, _, _ in touched:
            if topic == SCHEDULE_TOPIC:
                self._wake.set()
                return

    # -- the two steps ------------------------------------------------------------

    def replay_pending(self) -> int:
        """One replay pass: load near slots, replay new parked messages, retire finished
        slots, commit when due. Returns the records replayed."""
        self.keeper.load_near(self.clock.now_ms())
        replayed = self.replayer.replay()
        retiring = self.keeper.retire_done(self.clock.now_ms(), self.replayer.caught_up)
        if retiring or self.clock.monotonic() - self._last_commit >= self.flush_interval_s:
            self.replayer.commit()
            self._last_commit = self.clock.monotonic()
        return replayed

    def deliver_due(self) -> int:
        """Deliver what is due now (all of it, batch after batch), build some of what comes
        next, checkpoint when due. Returns the rows taken from the wheel."""
        taken = 0
        now = self.clock.now_ms()
        while True:
            step = self.deliverer.deliver_due(now)
            taken += step
            if step < DELIVER_BATCH:
                break
        if now >= self.deliverer.retrying_until_ms:  # nothing due is waiting for a retry
            self.delivered_through_ms = now
        self.deliverer.prepare(self.clock.now_ms())
        if self.clock.monotonic() - self._last_checkpoint >= self.flush_interval_s:
            self.deliverer.checkpoint()
            self._last_checkpoint = self.clock.monotonic()
        return taken

    def _replay_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.tick_ms / 1000)
            self._wake.clear()
            if self._stop.is_set():
                break
            self._guarded(self.replay_pending)

    def _tick_loop(self) -> None:
        while True:
            wait_ms = self.tick_ms - self.clock.now_ms() % self.tick_ms
            if self._stop.wait(wait_ms / 1000):
                break
            self._guarded(self.deliver_due)

    def _guarded(self, step: Callable[[], int]) -> None:
        try:
            step()
        except Exception:
            log.exception("timer step %s failed; trying again in %.0f s", step.__name__, ERROR_PAUSE_S)
            self._stop.wait(ERROR_PAUSE_S)

    # -- administration -----------------------------------------------------------

    def cancel(self, msg_id: str) -> CancelResult:
        """Cancel the scheduled message(s) ``msg_id`` (a UNIQ_KEY or an offsetMsgId of a parked
        record) names; see `CancelStatus` for each outcome."""
        return self.canceller.cancel(msg_id)

    def delay_offsets(self, delays_ms: Sequence[int]) -> dict[int, int]:
        """RocketMQ's delay offset table (delayOffset.json, GET_ALL_DELAY_OFFSET) for the
        levels whose delays are ``delays_ms`` (level 1 first): per level, the offset in its
        queue of SCHEDULE_TOPIC_XXXX (level - 1) below which every parked message has been
        delivered, where a RocketMQ broker taking over would resume. A level's messages are due
        a fixed delay after they were stored, so that is the first offset stored after
        `delivered_through_ms` minus the delay (never past what the replay has read). It may
        lag by what was stored in the same millisecond: a taker-over repeats, never skips."""
        through = self.delivered_through_ms
        with self.state.lock:
            progress = dict(self.state.progress)
        table = {}
        queues = set(self.store.queue_ids(SCHEDULE_TOPIC))
        for level, delay_ms in enumerate(delays_ms, start=1):
            if level - 1 not in queues:
                continue
            low = self.store.get_min_offset(SCHEDULE_TOPIC, level - 1)
            delivered = low if through < 0 else self.store.get_offset_by_time(SCHEDULE_TOPIC, level - 1,
                                                                               through - delay_ms)
            table[level] = max(low, min(delivered, progress.get(level - 1, low)))
        return table

    def scheduled_per_slot(self) -> list[SlotCount]:
        """Messages not yet delivered or cancelled, per slot on disk, earliest slot first."""
        with self.state.lock:
            loaded = {s: st.outstanding for s, st in self.state.loaded.items()}
        out = []
        for slot, f in sorted(self.logs.logs.copy().items()):
            count = loaded[slot] if slot in loaded else f.records - self.dispatch.count(slot)
            out.append(SlotCount(slot, max(count, 0), slot in loaded))
        return out

    def _scheduled(self) -> int:
        return sum(c.scheduled for c in self.scheduled_per_slot())

    def stats(self) -> TimerStats:
        lateness = self.deliverer.lateness_ms()
        p50, p99, worst = (np.percentile(lateness, [50, 99, 100]).tolist() if len(lateness) else (0.0, 0.0, 0.0))
        with self.state.lock:
            in_wheel, loaded = self.state.wheel.size, len(self.state.loaded)
            progress = dict(self.state.progress)
        lag = sum(
            self.store.get_max_offset(SCHEDULE_TOPIC, q) - progress.get(q, self.store.get_min_offset(SCHEDULE_TOPIC, q))
            for q in self.store.queue_ids(SCHEDULE_TOPIC)
        )
        return TimerStats(
            scheduled=self._scheduled(), in_wheel=in_wheel, delivered=self.deliverer.delivered,
            cancelled=self.canceller.cancelled, dropped=self.deliverer.dropped, unroutable=self.replayer.unroutable,
            replay_lag=lag, slots_on_disk=len(self.logs.logs), slots_loaded=loaded,
            lateness_p50_ms=p50, lateness_p99_ms=p99, lateness_max_ms=worst,
        )
