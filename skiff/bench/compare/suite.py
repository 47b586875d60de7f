"""The order of a run: per server, the normal workloads, then the durable ones.

A phase that fails becomes a row marked failed with the reason, and the run
goes on with the next one; a server that does not start is noted and skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skiff.bench.compare.drivers import driver_class
from skiff.bench.compare.drivers.base import DriverOptions
from skiff.bench.compare.phases import PhaseOptions, failed_row, first_line, run_drain, run_e2e, run_produce
from skiff.bench.compare.results import Mode, QueuesPoint, Row, RunResult, Workload
from skiff.bench.compare.servers import Server, SkiffServer
from skiff.bench.compare.systems import System, by_server

MANY_QUEUES_TOPICS = 4
QUEUES_PER_TOPIC_MAX = 1024
"""RocketMQ's (and Skiff's) range for a topic's read/write queue numbers."""


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    sizes: tuple[int, ...]
    count: int
    """Messages of an end-to-end run and of a durable produce run."""
    backlog: int
    """Messages written by the produce-only run and read back by the drain."""
    phase: PhaseOptions
    queue_points: tuple[int, ...]
    queues_batch: int
    work_root: Path
    queues_only: bool = False
    """Run only Skiff's many-queues curve (no other workload, no durable mode)."""


def _guard(result: RunResult, what: str, fallback: Callable[[BaseException], Row], fn: Callable[[], Row]) -> Row:
    """Run one phase; on failure keep a failed row and the reason, and go on."""
    try:
        row = fn()
    except Exception as exc:  # any phase failure is reported, never fatal to the run
        print(f"  {what} failed: {str(exc).strip() or traceback.format_exc(limit=3)}", flush=True)
        result.failures.append(f"{what}: {first_line(exc)}")
        row = fallback(exc)
    result.rows.append(row)
    print(f"  {what}: {row.msgs_per_s:,.0f} msg/s" + (f" ({row.note})" if row.note else ""), flush=True)
    return row


def _start(cls: type[Server], work_dir: Path, durable: bool, result: RunResult) -> Server | None:
    server = cls(work_dir, durable)
    try:
        server.start()
    except Exception as exc:  # noted in the report; its systems are skipped
        server.stop()
        result.failures.append(f"{cls.name} ({'durable' if durable else 'normal'}) did not start: {first_line(exc)}")
        print(f"{cls.name} did not start: {exc}", flush=True)
        return None
    return server


def _normal_phases(system: System, server: Server, opts: SuiteOptions, result: RunResult) -> None:
    for size in opts.sizes:
        name, ph = system.name, opts.phase
        _guard(result, f"{name} e2e {size} B", lambda e: failed_row(name, Mode.NORMAL, Workload.E2E, size, e),
               lambda: run_e2e(name, server, Mode.NORMAL, f"bench_e2e_{size}", size, opts.count, ph))
        produced = _guard(
            result, f"{name} produce {size} B", lambda e: failed_row(name, Mode.NORMAL, Workload.PRODUCE, size, e),
            lambda: run_produce(name, server, Mode.NORMAL, f"bench_backlog_{size}", size, opts.backlog, ph))
        if produced.messages == 0:
            continue
        _guard(result, f"{name} drain {size} B", lambda e: failed_row(name, Mode.NORMAL, Workload.DRAIN, size, e),
               lambda: run_drain(name, server, f"bench_backlog_{size}", size, produced.messages, ph))


def _durable_phases(system: System, server: Server, opts: SuiteOptions, result: RunResult) -> None:
    for size in opts.sizes:
        name, ph = system.name, opts.phase
        _guard(result, f"{name} durable e2e {size} B",
               lambda e: failed_row(name, Mode.DURABLE, Workload.E2E, size, e),
               lambda: run_e2e(name, server, Mode.DURABLE, f"bench_durable_e2e_{size}", size, opts.count, ph))
        _guard(result, f"{name} durable produce {size} B",
               lambda e: failed_row(name, Mode.DURABLE, Workload.PRODUCE, size, e),
               lambda: run_produce(name, server, Mode.DURABLE, f"bench_durable_{size}", size, opts.count, ph))


def _reuse_as_durable(systems: Sequence[System], why: str, result: RunResult) -> None:
    """The same configuration is not measured twice: copy its rows into the durable table."""
    names = {s.name for s in systems}
    for row in [r for r in result.rows if r.system in names and r.mode == Mode.NORMAL
                and r.workload in (Workload.E2E, Workload.PRODUCE)]:
        note = "same configuration as normal mode: " + why
        result.rows.append(dataclasses.replace(row, mode=Mode.DURABLE, note="; ".join(filter(None, [row.note, note]))))


def many_queues(server: Server, opts: SuiteOptions, result: RunResult) -> None:
    """Skiff's produce rate with the same traffic spread over more and more queues."""
    size = opts.sizes[0]
    for queues in opts.queue_points:
        n_topics = max(MANY_QUEUES_TOPICS, -(-queues // QUEUES_PER_TOPIC_MAX))
        topics = ",".join(f"bench_q{queues}_t{i}" for i in range(n_topics))
        messages = max(opts.count, queues * opts.queues_batch)
        ph = dataclasses.replace(opts.phase, batch=opts.queues_batch, queues=max(1, queues // n_topics))
        try:
            row = run_produce("skiff", server, Mode.NORMAL, topics, size, messages, ph)
            point = QueuesPoint(queues, n_topics, row.messages, row.seconds, ok=row.ok, note=row.note)
        except Exception as exc:  # reported as a failed point; the curve goes on
            print(f"  skiff {queues} queues failed: {exc}", flush=True)
            result.failures.append(f"skiff {queues} queues: {first_line(exc)}")
            point = QueuesPoint(queues, n_topics, 0, 0.0, ok=False, note="failed")
        result.many_queues.append(point)
        print(f"  skiff {queues} queues: {point.msgs_per_s:,.0f} msg/s {point.note}", flush=True)
        _delete_topics(server, topics.split(","))


def _delete_topics(server: Server, topics: Sequence[str]) -> None:
    """Delete a point's topics before the next (not measured): every queue written holds
    a descriptor in the broker, and with the earlier points' queues the 16,384 point
    passed a 20,000-descriptor limit. Peers delete their streams between workloads too."""
    async def delete() -> None:
        driver = driver_class("skiff")(server.endpoint(), DriverOptions(batch=1, size_bytes=1, queues=1))
        await driver.connect()
        try:
            for topic in topics:
                await driver.delete(topic)
        finally:
            await driver.close()

    try:
        asyncio.run(delete())
    except Exception as exc:  # the next point still runs, with more descriptors in use
        print(f"  skiff: deleting {len(topics)} topics failed: {first_line(exc)}", flush=True)


def run_all(systems: Sequence[System], opts: SuiteOptions, result: RunResult) -> None:
    for cls, members in by_server(list(systems)):
        result.settings[f"{cls.name} server"] = _settings(cls)
        for system in members:
            result.settings[f"{system.name} client"] = driver_class(system.name).how
        print(f"== {cls.name}: normal mode", flush=True)
        server = _start(cls, opts.work_root / f"{cls.name}-normal", False, result)
        if server is not None:
            try:
                for system in members:
                    if not opts.queues_only:
                        _normal_phases(system, server, opts, result)
                if cls is SkiffServer and opts.queue_points:
                    many_queues(server, opts, result)
            finally:
                server.stop()
        if opts.queues_only:
            continue
        why = cls.same_when_durable()
        if why:
            _reuse_as_durable(members, why, result)
            continue
        print(f"== {cls.name}: durable mode", flush=True)
        server = _start(cls, opts.work_root / f"{cls.name}-durable", True, result)
        if server is None:
            continue
        try:
            for system in members:
                _durable_phases(system, server, opts, result)
        finally:
            server.stop()


def _settings(cls: type[Server]) -> str:
    normal, durable = cls(Path("."), False).settings(), cls(Path("."), True).settings()
    why = cls.same_when_durable()
    if why:
        return f"{normal} (durable table: {why})"
    return normal if normal == durable else f"{normal}; durable table: {durable}"
