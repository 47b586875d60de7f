"""One chaos run (`skiff chaos`): the cluster in its namespaces, the clients, a fault every
``fault_interval_s`` (held for ``fault_hold_s``, then recovered, OpenChaos's rhythm) for
``duration_s``; then everything recovered, the sends stopped, the consumers drained, and
the checkers' verdict written next to the history and the plot:

    OUT/history           every operation and fault (`history`)
    OUT/results.json      the checkers' results (`checkers.Verdict.to_json`, plus the run's settings)
    OUT/results.txt       the same, to read
    OUT/plot.png          throughput and latency over time, faults marked
    OUT/logs/*.log        each broker's output across its restarts; with ``clients`` beyond
                          ours, each RocketMQ client process's stderr (`foreign`)
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skiff.testing.chaos.checkers import Verdict, check_all
from skiff.testing.chaos.cluster import BROKERS, ChaosCluster
from skiff.testing.chaos.faults import Fault, all_faults, runnable
from skiff.testing.chaos.foreign import GRPC_PORT, ForeignSenders, interpreter
from skiff.testing.chaos.history import HistoryWriter, Kind, Result, read_history
from skiff.testing.chaos.plot import plot
from skiff.testing.chaos.report import format_text
from skiff.testing.chaos.workers import ORDERLY_GROUP, TOPIC, Consumers, Producers, create_topic
from skiff.testing.waits import eventually

START_DEADLINE_S = 120.0
FAILURE_TEXT_MAX = 1600
"""Characters of a failed fault step's error kept in its history line: enough for the end of
a broker's output that says why it did not restart."""
RECOVERY_DEADLINE_S = 180.0
"""After the last fault: every broker back, a master whose SyncStateSet names all (slack for a loaded machine)."""
SETTLE_ACKS = 20
"""SEND_OK answers awaited after the final recovery, before the producers stop."""


@dataclass
class ChaosOptions:
    out: Path
    duration_s: float = 60.0
    fault_interval_s: float = 8.0
    fault_hold_s: float | None = None
    """How long a fault lasts before its recovery; None: half the interval."""
    mode: str = "SYNC_MASTER"
    faults: list[str] = field(default_factory=lambda: list(all_faults()))
    keys: int = 8
    rate: float = 40.0
    lease_ms: int = 10_000
    drain_s: float = 120.0
    seed: int = 1
    broker_args: tuple[str, ...] = ()
    warm_up_s: float = 3.0
    """Seconds' worth of SEND_OK answers (at the run's rate) from each client before the first fault."""
    clients: list[str] = field(default_factory=lambda: ["python"])
    """Which clients send, each with ``keys`` senders at ``rate`` (`foreign.CLIENTS`): ``python``
    (ours), ``cpp`` (RocketMQ's C++ client), ``rmq5`` (the 5.x client over gRPC)."""

    @property
    def hold_s(self) -> float:
        return self.fault_interval_s / 2 if self.fault_hold_s is None else self.fault_hold_s


async def run_chaos(opts: ChaosOptions, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run, check, write OUT; the results (``ok``: nothing acknowledged lost, no order broken)."""
    if not opts.clients:
        raise ValueError("a chaos run needs at least one client to send")
    foreign = [c for c in opts.clients if c != "python"]
    for client in foreign:
        interpreter(client)  # not installed: said before any cluster starts
    broker_args = (*opts.broker_args, f"--grpcServerPort={GRPC_PORT}") if "rmq5" in foreign else opts.broker_args
    opts.out.mkdir(parents=True, exist_ok=True)
    names, skipped = runnable(opts.faults)
    history = HistoryWriter(opts.out / "history")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="skiff-chaos-") as tmp:
        cluster = ChaosCluster(Path(tmp), role=opts.mode, lease_ms=opts.lease_ms, broker_args=broker_args)
        try:
            await asyncio.to_thread(cluster.start)  # a broker that fails to start: what did start is undone
            await _run_with_clients(cluster, opts, names, history, notes, log, Path(tmp))
        except BaseException:
            await asyncio.to_thread(cluster.kill_all)
            raise
        finally:
            _write_logs(opts.out, cluster)
            history.close()
        await asyncio.to_thread(cluster.stop)
    verdict = check_all(history.events, [ORDERLY_GROUP])
    results = {**verdict.to_json(), "settings": _settings(opts), "faults_not_run": skipped, "notes": notes}
    _write_results(opts.out, results, verdict, history)
    return results


async def _run_with_clients(cluster: ChaosCluster, opts: ChaosOptions, names: list[str], history: HistoryWriter,
                            notes: list[str], log: Callable[[str], None], tmp: Path) -> None:
    await eventually(lambda: asyncio.to_thread(cluster.in_sync), START_DEADLINE_S, "a master with every broker in sync")
    await create_topic(cluster.namesrv_addr, START_DEADLINE_S)
    consumers = Consumers(cluster.namesrv_addr, history)
    producers = Producers(cluster.namesrv_addr, history, opts.keys, opts.rate) if "python" in opts.clients else None
    grpc_endpoints = ";".join(f"{cluster.node_of(i).ip}:{GRPC_PORT}" for i in range(1, BROKERS + 1))
    foreign = [ForeignSenders(c, history, namesrv=cluster.namesrv_addr, grpc_endpoints=grpc_endpoints, topic=TOPIC,
                              keys=opts.keys, rate=opts.rate, home=tmp / f"{c}-home", log=opts.out / "logs" / f"{c}.log")
               for c in opts.clients if c != "python"]

    def each_acked() -> list[int]:
        return [*([producers.acked] if producers else []), *(f.acked for f in foreign)]

    def acked() -> int:
        return sum(each_acked())
    await consumers.start()
    try:
        started: list[ForeignSenders] = []
        try:
            if producers is not None:
                await producers.start()
            for sender in foreign:
                await asyncio.to_thread(sender.start)
                started.append(sender)
            await eventually(lambda: min(each_acked()) >= opts.rate * opts.warm_up_s, START_DEADLINE_S,
                             "SEND_OK from every client before the faults")
            log(f"skiff chaos: {opts.mode}, cluster up, clients {', '.join(opts.clients)} sending; "
                f"faults {', '.join(names) or 'none'}")
            await inject_faults(cluster, opts, names, history, log)
            await recover_all(cluster, notes)
            settled = acked()
            try:
                await eventually(lambda: acked() >= settled + SETTLE_ACKS, RECOVERY_DEADLINE_S,
                                 "SEND_OK after the last recovery")
            except AssertionError as exc:  # the checkers still run: the history says how writes ended
                notes.append(f"settle: {exc}")
        finally:
            if producers is not None:
                await producers.stop()
            await asyncio.gather(*(asyncio.to_thread(s.stop) for s in started))
            notes.extend(f"{s.client}: {len(s.malformed)} lines of its output were not history lines, "
                         f"the first {s.malformed[0]!r}" for s in started if s.malformed)
        try:
            await eventually(lambda: drained(history), opts.drain_s, "every SEND_OK value delivered to each group")
        except AssertionError as exc:
            notes.append(f"drain: {exc}")
    finally:
        await consumers.stop()


async def inject_faults(cluster: ChaosCluster, opts: ChaosOptions, names: list[str], history: HistoryWriter,
                        log: Callable[[str], None]) -> None:
    """A fault every interval, each held then recovered, in a seeded shuffled cycle of ``names``."""
    if not names:
        await asyncio.sleep(opts.duration_s)
        return
    rng = random.Random(opts.seed)
    faults = all_faults()
    order: list[str] = []
    begun = time.monotonic()
    count = 0
    while time.monotonic() - begun < opts.duration_s:
        if not order:
            order = rng.sample(names, len(names))
        fault = faults[order.pop()]
        started = time.monotonic()
        await one_fault(cluster, fault, rng, opts.hold_s, history)
        count += 1
        recovered = time.monotonic()
        log(f"skiff chaos: fault {count} {fault.name} done ({recovered - begun:.0f} s of {opts.duration_s:.0f})")
        # the recovery window is the interval less the hold, also when the recovery ran long
        # (restarts at load 10 take 5-8 s): with the next fault due at once, brokers were killed
        # again before they had followed anyone (run S), which measures no recovery at all
        await asyncio.sleep(max(started + opts.fault_interval_s - recovered,
                                opts.fault_interval_s - opts.hold_s))


def _failure(step: str, exc: Exception) -> str:
    """A fault step's error for the history: its start and its end. A broker that failed to
    restart raises with its command line first and its output last, and the output's end is
    the reason (the head alone, as kept before, named only the command)."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > FAILURE_TEXT_MAX:
        text = f"{text[:FAILURE_TEXT_MAX // 4]} ... {text[-(FAILURE_TEXT_MAX * 3 // 4):]}"
    return f"{step} failed: {text}"


async def one_fault(cluster: ChaosCluster, fault: Fault, rng: random.Random, hold_s: float,
                    history: HistoryWriter) -> None:
    started = time.monotonic()
    try:
        nodes, detail = await asyncio.to_thread(fault.inject, cluster, rng)
    except Exception as exc:  # noqa: BLE001 - a fault that could not be made is recorded, then undone
        nodes, detail = [], _failure("inject", exc)
    history.fault(fault.name, Kind.START, nodes, detail)
    await asyncio.sleep(max(0.0, started + hold_s - time.monotonic()))
    try:
        detail = await asyncio.to_thread(fault.recover, cluster)
    except Exception as exc:  # noqa: BLE001 - recorded; recover_all tries again at the end
        detail = _failure("recover", exc)
    history.fault(fault.name, Kind.END, nodes, detail)


async def recover_all(cluster: ChaosCluster, notes: list[str]) -> None:
    """Everything back (healed, resumed, restarted), then a master with all in sync."""
    def restore() -> None:
        cluster.lab.heal()
        for i in list(cluster.paused):
            cluster.resume(i)
        for i in range(len(cluster.etcd)):
            cluster.restart_etcd(i)
        for i in range(1, BROKERS + 1):
            cluster.free_disk(i)
            cluster.restart(i)
    await asyncio.to_thread(restore)
    begun = time.monotonic()
    try:
        await eventually(lambda: asyncio.to_thread(cluster.in_sync), RECOVERY_DEADLINE_S,
                         "a master with every broker in sync after the last fault")
        notes.append(f"all brokers in sync {time.monotonic() - begun:.1f} s after the final recovery")
    except AssertionError as exc:
        notes.append(str(exc))


def recheck(out: Path) -> dict[str, Any]:
    """The checkers run again over OUT/history (a run's settings and notes kept from its
    results.json): results and plot rewritten, as from the run itself."""
    history = HistoryWriter(None)
    for event in read_history(out / "history"):
        history.add(event)
    previous = json.loads((out / "results.json").read_text(encoding="utf-8"))
    verdict = check_all(history.events, [ORDERLY_GROUP])
    results = {**verdict.to_json(), **{k: previous[k] for k in ("settings", "faults_not_run", "notes")}}
    _write_results(out, results, verdict, history)
    return results


def drained(history: HistoryWriter) -> bool:
    events = list(history.events)
    acked = {e.value for e in events if e.op == "enqueue" and e.result == Result.SUCCESS}
    groups: dict[str, set[str]] = {}
    for e in events:
        if e.op == "dequeue":
            groups.setdefault(e.client, set()).add(e.value)
    return len(groups) == 2 and all(acked <= seen for seen in groups.values())


def _settings(opts: ChaosOptions) -> dict[str, Any]:
    settings = asdict(opts)
    settings["out"] = str(opts.out)
    settings["fault_hold_s"] = opts.hold_s
    return settings


def _write_logs(out: Path, cluster: ChaosCluster) -> None:
    (out / "logs").mkdir(exist_ok=True)
    if cluster.group is None:
        return
    for name, text in cluster.broker_logs().items():
        (out / "logs" / f"{name}.log").write_text(text, encoding="utf-8")


def _write_results(out: Path, results: dict[str, Any], verdict: Verdict, history: HistoryWriter) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    (out / "results.txt").write_text(format_text(results), encoding="utf-8")
    plot(history.events, out / "plot.png",
         f"skiff chaos: {results['settings']['mode']}, {len(verdict.rto)} faults, lost {verdict.lost}, "
         f"order violations {verdict.order_violations}")
