"""Timer benchmark: ``skiff bench timer`` or ``python -m skiff.bench.timer``.

A store and its timer in this process, on the wall clock, with the default
timer settings (100 ms ticks, one-hour slots, 60 s lookahead). Messages are
parked in SCHEDULE_TOPIC_XXXX as the broker parks them (batches of 256, 100 B
bodies), then delivered by the timer's own threads. Two cases:

- **spread**: ``--count`` messages due at uniformly random times over
  ``--span-s`` seconds (the issue asks for 1,000,000 over an hour);
- **burst**: ``--burst`` messages all due in the same second;
- **restart**: ``--restart-count`` messages scheduled 10 to 20 minutes ahead; once
  they are replayed, the timer is stopped and a new one recovers over its files.

Parking starts ``--lead-s`` seconds before the first due time, so the timer
replays while messages arrive and nothing is late for want of being parked.
For each case: lateness (store time of the delivered message minus its due
time) p50 / p99 / max, the early and lost counts (both must be 0), and the
delivery rate. ``--quick`` is a short smoke run; ``--json`` prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.config import build_config
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.common.stored_message import decode_records
from skiff.store import GetStatus, MessageInput, MessageStore, StoreConfig
from skiff.store.timer import TimerService

REAL_TOPIC = "BenchTimer"
REAL_QUEUES = 8
ANY_TIME_QUEUE = 18
BATCH = 256
DUE_PROPERTY = "benchDueMs"
"""A user property carrying the due time to the delivered copy (the timer strips its own)."""
STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("127.0.0.1", 50000)


@dataclass(frozen=True, slots=True)
class CaseFigures:
    case: str
    messages: int
    span_s: float
    park_s: float
    """Wall time to park them all (the timer replays meanwhile)."""
    delivered: int
    lost: int
    early: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    delivery_s: float
    """From the first due time to the last delivery."""
    delivery_rate_per_s: float
    cpu_s: float
    """CPU time of the whole process from the first park to the last delivery."""


@dataclass(frozen=True, slots=True)
class RestartFigures:
    messages: int
    park_s: float
    replayed_s: float
    """From the first park until every message is in a schedule log and in the wheel."""
    recover_ms: float
    """A new TimerService's recovery over those files: cut, CommitLog tail scan, the slot loaded."""
    in_wheel: int
    """Messages in the wheel after the recovery (all of them)."""


def _config(root: str, **extra: str) -> StoreConfig:
    return build_config(StoreConfig, {"storePathRootDir": root, "maxHashSlotNum": 1_000_000,
                                      "maxIndexNum": 4_000_000, **extra})


def _parked(seq: int, due_ms: int, body: bytes) -> MessageInput:
    uniq = f"BENCH{seq:027d}"
    props = encode_properties({
        Prop.UNIQ_KEY: uniq, Prop.DELIVER_TIME_MS: str(due_ms), Prop.REAL_TOPIC: REAL_TOPIC,
        Prop.REAL_QID: str(seq % REAL_QUEUES), Prop.TIMER_OUT_MS: str(due_ms), DUE_PROPERTY: str(due_ms),
    })
    return MessageInput(topic=SCHEDULE_TOPIC, queue_id=ANY_TIME_QUEUE, body=body, properties=props, flag=0, sys_flag=0,
                        born_timestamp=SYSTEM_CLOCK.now_ms(), born_host=BORN_HOST, uniq_key=uniq)


def _park(store: MessageStore, dues: np.ndarray, body: bytes) -> float:
    began = time.monotonic()
    for lo in range(0, len(dues), BATCH):
        batch = [_parked(lo + i, int(due), body) for i, due in enumerate(dues[lo : lo + BATCH].tolist())]
        result = store.put_messages(batch)
        if not result.ok:
            raise RuntimeError(f"the store refused a park: {result.status.name} {result.reason}")
    return time.monotonic() - began


def _delivered_count(store: MessageStore) -> int:
    return sum(store.get_max_offset(REAL_TOPIC, q) for q in range(REAL_QUEUES))


def _latenesses(store: MessageStore) -> tuple[np.ndarray, np.ndarray]:
    """(lateness ms, store time) of every delivered message."""
    late, stored = [], []
    for q in range(REAL_QUEUES):
        offset = 0
        while True:
            result = store.get_messages(REAL_TOPIC, q, offset, 1024)
            if result.status is not GetStatus.FOUND:
                break
            for m in decode_records(b"".join(bytes(b) for b in result.buffers)):
                late.append(m.store_timestamp - int(m.properties[DUE_PROPERTY]))
                stored.append(m.store_timestamp)
            offset = result.next_begin_offset
    return np.array(late, dtype=np.int64), np.array(stored, dtype=np.int64)


def run_case(directory: str, case: str, dues_from_start_ms: np.ndarray, lead_s: float, body_bytes: int) -> CaseFigures:
    """Park messages due at ``start + lead + dues_from_start_ms`` and measure their delivery."""
    root = tempfile.mkdtemp(prefix=f"timer-{case}-", dir=directory)
    config = _config(root)
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    timer = TimerService(store, config)
    try:
        timer.start()
        cpu0 = time.process_time()
        first_due = SYSTEM_CLOCK.now_ms() + int(lead_s * 1000)
        dues = first_due + dues_from_start_ms
        park_s = _park(store, dues, random.Random(1).randbytes(body_bytes))
        deadline = time.monotonic() + max(0.0, (int(dues.max()) - SYSTEM_CLOCK.now_ms()) / 1000) + 300
        while _delivered_count(store) < len(dues) and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu_s = time.process_time() - cpu0
    finally:
        timer.stop()
    try:
        late, stored = _latenesses(store)
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    p50, p99, worst = np.percentile(late, [50, 99, 100]).tolist() if len(late) else (0.0, 0.0, 0.0)
    delivery_s = (int(stored.max()) - int(dues.min())) / 1000 if len(stored) else 0.0
    return CaseFigures(
        case, len(dues), float(dues_from_start_ms.max() / 1000), round(park_s, 3), len(late), len(dues) - len(late),
        int((late < 0).sum()), p50, p99, worst, round(delivery_s, 3),
        round(len(late) / delivery_s, 1) if delivery_s > 0 else 0.0, round(cpu_s, 2),
    )


def run_restart(directory: str, count: int, body_bytes: int) -> RestartFigures:
    """Park ``count`` messages due in 10 to 20 minutes (their slots loaded: a 2-hour lookahead),
    wait until they are replayed, stop the timer and time a new one's recovery."""
    root = tempfile.mkdtemp(prefix="timer-restart-", dir=directory)
    config = _config(root, timerLookaheadMs="7200000")
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    try:
        timer = TimerService(store, config)
        timer.start()
        began = time.monotonic()
        dues = SYSTEM_CLOCK.now_ms() + 600_000 + np.random.default_rng(3).integers(0, 600_000, count)
        park_s = _park(store, dues, random.Random(1).randbytes(body_bytes))
        while timer.stats().in_wheel < count:
            time.sleep(0.05)
        replayed_s = time.monotonic() - began
        timer.stop()
        again = TimerService(store, config)
        report = again.recover()
        in_wheel = again.stats().in_wheel
        again.stop()
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return RestartFigures(count, round(park_s, 3), round(replayed_s, 3), round(report.elapsed_ms, 1), in_wheel)


def report(figures: dict) -> str:
    lines = [f"timer: {figures['python']}, {figures['cores']} cores"]
    for c in figures["cases"]:
        lines.append(
            f"{c['case']:>6}: {c['messages']:,} due over {c['span_s']:.0f} s (parked in {c['park_s']:.1f} s): "
            f"delivered {c['delivered']:,}, lost {c['lost']}, early {c['early']}; lateness p50 "
            f"{c['lateness_p50_ms']:.0f} ms, p99 {c['lateness_p99_ms']:.0f} ms, max {c['lateness_max_ms']:.0f} ms; "
            f"{c['delivery_rate_per_s']:,.0f} msg/s over {c['delivery_s']:.1f} s; CPU {c['cpu_s']:.1f} s"
        )
    r = figures.get("restart")
    if r:
        lines.append(f"restart: {r['messages']:,} scheduled (parked in {r['park_s']:.1f} s, all replayed after "
                     f"{r['replayed_s']:.1f} s); a new timer recovers in {r['recover_ms']:,.0f} ms with "
                     f"{r['in_wheel']:,} in the wheel")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench timer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="messages of the spread case")
    parser.add_argument("--span-s", type=float, default=3600.0, help="seconds the spread case's due times cover")
    parser.add_argument("--burst", type=int, default=100_000, help="messages of the burst case, due in one second")
    parser.add_argument("--lead-s", type=float, default=30.0, help="seconds from the first park to the first due time")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--restart-count", type=int, default=1_000_000,
                        help="messages scheduled when the restart case reopens the timer")
    parser.add_argument("--cases", default="spread,burst,restart", help="which cases, comma-separated")
    parser.add_argument("--dir", help="directory for the stores (default: a new temporary directory)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a short smoke run: 2,000 over 1 s, burst 2,000, lead 1 s")
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.span_s, args.burst, args.lead_s, args.restart_count = 2_000, 1.0, 2_000, 1.0, 2_000
    rng = np.random.default_rng(7)
    shapes = {
        "spread": lambda: np.sort(rng.integers(0, int(args.span_s * 1000), args.count)),
        "burst": lambda: rng.integers(0, 1000, args.burst),
    }
    directory = args.dir or tempfile.mkdtemp(prefix="skiff-bench-timer-")
    names = args.cases.split(",")
    try:
        cases = [run_case(directory, name, shapes[name](), args.lead_s, args.body_bytes)
                 for name in names if name != "restart"]
        restart = run_restart(directory, args.restart_count, args.body_bytes) if "restart" in names else None
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    figures = {"quick": args.quick, "python": sys.version.split()[0], "cores": os.cpu_count(),
               "cases": [asdict(c) for c in cases], "restart": None if restart is None else asdict(restart)}
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    whole = restart is None or restart.in_wheel == restart.messages
    return 0 if whole and all(c.lost == 0 and c.early == 0 for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
