"""The three workloads, each run as worker processes against a started server.

The broker's CPU and peak memory are measured from the moment every worker
is connected (the parent says GO) until the last one reports, so process
start-up and imports of the clients are outside the figures.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skiff.bench.compare.procs import CHILDREN, Child, TreeMeter
from skiff.bench.compare.results import Mode, Row, Workload
from skiff.bench.compare.servers import IMPORT_ROOT, Server

CONNECT_TIMEOUT_S = 60.0
"""Worker start-up: interpreter, client import, connect and topic creation."""


@dataclass(frozen=True, slots=True)
class PhaseOptions:
    batch: int
    window: int
    queues: int
    duration_s: float
    work_dir: Path
    fetch: int = 0
    """Messages per consumer fetch; 0: ``batch``."""

    @property
    def consume_timeout_s(self) -> float:
        """A consumer gets the producer's time bound plus slack to catch up."""
        return self.duration_s + 60.0


def _log_name(topics: str) -> str:
    """A file name for a worker's topic list: many topics would pass the file system's 255 bytes."""
    names = topics.split(",")
    return names[0] if len(names) == 1 else f"{names[0]}-and-{len(names) - 1}-more"


class Worker:
    """A `skiff.bench.compare.worker` child and the lines it prints."""

    def __init__(self, system: str, server: Server, role: str, topic: str, size: int, count: int,
                 opts: PhaseOptions, *, delete_after: bool = False) -> None:
        argv = [sys.executable, "-m", "skiff.bench.compare.worker", "--system", system, "--role", role,
                "--endpoint", json.dumps(server.endpoint()), "--topic", topic, "--count", str(count),
                "--size", str(size), "--batch", str(opts.batch), "--window", str(opts.window), "--fetch", str(opts.fetch),
                "--queues", str(opts.queues), "--duration-s", str(opts.duration_s),
                "--timeout-s", str(opts.consume_timeout_s)]
        if delete_after:
            argv.append("--delete-after")
        log = opts.work_dir / f"worker-{system}-{role}-{_log_name(topic)}.log"
        self.child: Child = CHILDREN.spawn(f"{system} {role}", argv, log, cwd=IMPORT_ROOT,
                                           stdin=subprocess.PIPE, stdout_pipe=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"{role}-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.child.popen.stdout is not None
        for raw in self.child.popen.stdout:
            self._lines.put(raw.decode(errors="replace").rstrip("\n"))
        self._lines.put(None)

    def wait_for(self, prefix: str, timeout_s: float) -> str:
        """The next line that starts with ``prefix``; fails if the worker dies or is late."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self.child.failure(f"no {prefix} within {timeout_s:.0f} s") from None
            if line is None:
                self.child.popen.wait(timeout=10)
                raise self.child.failure(f"exited with {self.child.popen.returncode} before {prefix}")
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        """Write a line; a consumer that already got everything may have exited, which is fine."""
        stdin = self.child.popen.stdin
        assert stdin is not None
        try:
            stdin.write((line + "\n").encode())
            stdin.flush()
        except BrokenPipeError:
            pass

    def result(self, timeout_s: float) -> dict[str, Any]:
        line = self.wait_for("RESULT ", timeout_s)
        self.child.popen.wait(timeout=30)
        CHILDREN.stop(self.child)
        return json.loads(line.removeprefix("RESULT "))

    def stop(self) -> None:
        CHILDREN.stop(self.child, grace_s=2.0)


def _result_timeout(opts: PhaseOptions) -> float:
    return opts.consume_timeout_s + 90.0


def _producer_note(res: dict[str, Any]) -> str:
    if res["errors"]:
        return "producer errors: " + "; ".join(res["errors"])
    return "producer hit --duration-s" if res["timed_out"] else ""


def _consumer_note(res: dict[str, Any]) -> str:
    notes = []
    if res["timed_out"]:
        notes.append(f"consumer timed out at {res['distinct']} of {res['expected']}")
    if res["received"] > res["distinct"]:
        notes.append(f"{res['received'] - res['distinct']} redelivered")
    if res["out_of_range"]:
        notes.append(f"{res['out_of_range']} foreign messages")
    return "; ".join(notes)


def _consumer_ok(res: dict[str, Any]) -> bool:
    return not res["timed_out"] and res["distinct"] == res["expected"]


def _run_alone(worker: Worker, server: Server, opts: PhaseOptions) -> tuple[dict[str, Any], TreeMeter]:
    """One worker on its own: the broker is measured from GO to its result."""
    try:
        worker.wait_for("READY", CONNECT_TIMEOUT_S)
        with TreeMeter(server.pids) as meter:
            worker.send("GO")
            res = worker.result(_result_timeout(opts))
    finally:
        worker.stop()
    return res, meter


def run_produce(system: str, server: Server, mode: Mode, topic: str, size: int, count: int,
                opts: PhaseOptions) -> Row:
    res, meter = _run_alone(Worker(system, server, "produce", topic, size, count, opts), server, opts)
    seconds = (res["t1_ns"] - res["t0_ns"]) / 1e9
    return Row(system, mode, Workload.PRODUCE, size, res["sent"], seconds, meter.cpu_s, meter.peak_rss_bytes,
               ok=not res["errors"] and res["sent"] == res["attempted"], note=_producer_note(res))


def run_drain(system: str, server: Server, topic: str, size: int, count: int, opts: PhaseOptions) -> Row:
    consumer = Worker(system, server, "consume", topic, size, count, opts, delete_after=True)
    res, meter = _run_alone(consumer, server, opts)
    seconds = (res["t_last_ns"] - res["t0_ns"]) / 1e9 if res["t_last_ns"] else 0.0
    return Row(system, Mode.NORMAL, Workload.DRAIN, size, res["distinct"], seconds, meter.cpu_s,
               meter.peak_rss_bytes, ok=_consumer_ok(res), note=_consumer_note(res))


def run_e2e(system: str, server: Server, mode: Mode, topic: str, size: int, count: int,
            opts: PhaseOptions) -> Row:
    consumer = Worker(system, server, "consume", topic, size, count, opts, delete_after=True)
    producer = Worker(system, server, "produce", topic, size, count, opts)
    try:
        consumer.wait_for("READY", CONNECT_TIMEOUT_S)
        producer.wait_for("READY", CONNECT_TIMEOUT_S)
        with TreeMeter(server.pids) as meter:
            consumer.send("GO")
            consumer.wait_for("SUBSCRIBED", CONNECT_TIMEOUT_S)
            producer.send("GO")
            sent = producer.result(_result_timeout(opts))
            consumer.send(f"EXPECT {sent['sent']}")
            got = consumer.result(_result_timeout(opts))
    finally:
        producer.stop()
        consumer.stop()
    seconds = (got["t_last_ns"] - sent["t0_ns"]) / 1e9 if got["t_last_ns"] else 0.0
    note = "; ".join(n for n in (_producer_note(sent), _consumer_note(got)) if n)
    return Row(system, mode, Workload.E2E, size, got["distinct"], seconds, meter.cpu_s, meter.peak_rss_bytes,
               p50_ms=got["p50_ms"], p99_ms=got["p99_ms"], ok=_consumer_ok(got) and not sent["errors"], note=note)


def first_line(exc: BaseException) -> str:
    """The reason without the log tail (logs name temporary paths; the terminal shows them whole)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def failed_row(system: str, mode: Mode, workload: Workload, size: int, exc: BaseException) -> Row:
    """A row that says the phase did not complete, and why."""
    return Row(system, mode, workload, size, 0, 0.0, 0.0, 0, ok=False, note=f"failed: {first_line(exc)}")

