"""Skiff side by side with RabbitMQ, Redis and NATS on this machine, in one run.

    skiff bench compare --systems skiff,redis --sizes 100
    make bench-compare BENCH_ARGS="--systems skiff,redis --sizes 100"
    skiff bench compare --help

Installs the peers from Debian's packages if missing, starts every broker on
127.0.0.1 with its data in a temporary directory, runs the workloads with
each system's Python client, stops everything, prints the tables and the
issue's bar, and writes the "## Side by side" section of a Markdown file and a
JSON file: by default docs/performance.md and
skiff/bench/compare/results/latest.json under the current directory (the
repository's own, when run from its root as `make bench-compare` does), or
where --docs and --json say. See docs/benchmarks.md for what each workload means.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from skiff.bench.compare import ceilings, report
from skiff.bench.compare.install import ensure_installed
from skiff.bench.compare.phases import PhaseOptions
from skiff.bench.compare.procs import CHILDREN, install_cleanup, raise_open_files
from skiff.bench.compare.results import RunResult, Shape
from skiff.bench.compare.servers import IMPORT_ROOT, SkiffServer, command_output
from skiff.bench.compare.suite import SuiteOptions, run_all
from skiff.bench.compare.systems import SYSTEMS, System, parse_systems

PROG = "skiff bench compare"
DEFAULT_DOCS = Path("docs") / "performance.md"
"""Relative to the current directory, as is DEFAULT_JSON."""
DEFAULT_JSON = Path("skiff") / "bench" / "compare" / "results" / "latest.json"
QUEUE_POINTS = (8, 256, 4096, 16384)
SMOKE_QUEUE_POINTS = (8, 64)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma list; 'rabbitmq' means stream and quorum")
    p.add_argument("--sizes", default="100,1024", help="message sizes in bytes, comma list")
    p.add_argument("--count", type=int, default=200_000, help="messages of an e2e and of a durable produce run")
    p.add_argument("--backlog", type=int, default=1_000_000, help="messages produced, then drained")
    p.add_argument("--duration-s", type=float, default=60.0, help="time bound of every producer")
    p.add_argument("--batch", type=int, default=256, help="messages per publish/pipeline/fetch")
    p.add_argument("--window", type=int, default=8, help="batches in flight per producer")
    p.add_argument("--queues", type=int, default=8, help="queues per Skiff topic in the main workloads")
    p.add_argument("--shapes", default=",".join(Shape),
                   help="batched (--batch per request), single (one message per request, as RocketMQ "
                        "applications send; consumers fetch --single-fetch), or both (default)")
    p.add_argument("--single-window", type=int, default=64, help="single shape: messages in flight per producer")
    p.add_argument("--single-fetch", type=int, default=32,
                   help="single shape: messages per consumer fetch (RocketMQ's pullBatchSize)")
    p.add_argument("--single-count", type=int, default=50_000,
                   help="single shape: messages of an e2e and of a durable produce run")
    p.add_argument("--single-backlog", type=int, default=100_000, help="single shape: the backlog produced, then drained")
    p.add_argument("--queue-points", default=",".join(map(str, QUEUE_POINTS)),
                   help="Skiff many-queues curve ('' to skip)")
    p.add_argument("--queues-batch", type=int, default=16, help="messages per send in the many-queues curve")
    p.add_argument("--queues-only", action="store_true", help="only Skiff's many-queues curve (no ceilings, "
                   "no other workload)")
    p.add_argument("--smoke", action="store_true", help="tiny counts, one size, small ceilings; writes no docs "
                   "or JSON unless --docs/--json are given")
    p.add_argument("--json", type=Path, help=f"where the JSON results go (default {DEFAULT_JSON}, "
                   "relative to the current directory)")
    p.add_argument("--docs", type=Path, help=f"the Markdown file whose '## Side by side' section is rewritten "
                   f"(default {DEFAULT_DOCS}, relative to the current directory)")
    p.add_argument("--no-install", action="store_true", help="never call apt-get; skip missing peers")
    p.add_argument("--keep-dir", action="store_true", help="keep the temporary directory (logs, data)")
    args = p.parse_args(argv)
    if args.smoke:
        args.sizes, args.count, args.backlog = args.sizes.split(",")[0], min(args.count, 2000), min(args.backlog, 2000)
        args.single_count, args.single_backlog = min(args.single_count, 2000), min(args.single_backlog, 2000)
        args.duration_s = min(args.duration_s, 15.0)
        args.queue_points = ",".join(map(str, SMOKE_QUEUE_POINTS)) if args.queue_points else ""
    elif args.json is None or args.docs is None:
        args.json, args.docs = args.json or DEFAULT_JSON, args.docs or DEFAULT_DOCS
    return args


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(w) for w in text.split(",") if w.strip())


def machine_facts() -> dict[str, object]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    mem_kib = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal")), 0)
    return {"cores": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_kib / (1 << 20)),
            "python": f"Python {platform.python_version()}", "kernel": platform.release()}


def versions(systems: Sequence[System]) -> dict[str, str]:
    out = {"skiff": _skiff_version()} if any(s.server is SkiffServer for s in systems) else {}
    for system in systems:
        if system.package and system.package not in out:
            out[system.package] = system.server.version()
    return out


def _skiff_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        pkg = version("skiffmq")
    except PackageNotFoundError:
        pkg = "unknown"
    commit = command_output(["git", "-C", str(IMPORT_ROOT), "rev-parse", "--short", "HEAD"])
    return f"{pkg} (git {commit or 'unknown'})"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def select_installed(systems: list[System], allow_install: bool) -> tuple[list[System], list[str]]:
    """The systems whose server package and client module are present; the others, with why."""
    packages = sorted({s.package for s in systems if s.package})
    missing = set(ensure_installed(packages, allow_install))
    skipped = [f"{s.name}: Debian package {s.package} is not installed" for s in systems if s.package in missing]
    no_client = {s.name for s in systems if s.client_module and importlib.util.find_spec(s.client_module) is None}
    skipped += [f"{s.name}: Python module {s.client_module} is not importable" for s in systems if s.name in no_client]
    for line in skipped:
        print(f"skipped {line}", flush=True)
    return [s for s in systems if s.package not in missing and s.name not in no_client], skipped


def shape_options(args: argparse.Namespace, shape: Shape, sizes: tuple[int, ...], work: Path) -> SuiteOptions:
    """The workloads of one shape: batched as --batch/--window say (with the many-queues curve),
    single as one message per request, --single-window in flight, consumers fetching --single-fetch."""
    work.mkdir(parents=True, exist_ok=True)
    if shape is Shape.SINGLE:
        phase = PhaseOptions(batch=1, window=args.single_window, queues=args.queues, duration_s=args.duration_s,
                             work_dir=work, fetch=args.single_fetch)
        return SuiteOptions(sizes=sizes, count=args.single_count, backlog=args.single_backlog, phase=phase,
                            queue_points=(), queues_batch=args.queues_batch, work_root=work)
    phase = PhaseOptions(batch=args.batch, window=args.window, queues=args.queues,
                         duration_s=args.duration_s, work_dir=work)
    return SuiteOptions(sizes=sizes, count=args.count, backlog=args.backlog, phase=phase,
                        queue_points=_ints(args.queue_points), queues_batch=args.queues_batch, work_root=work,
                        queues_only=args.queues_only)


def run_shape(systems: Sequence[System], opts: SuiteOptions, shape: Shape, result: RunResult) -> None:
    """Run every workload of one shape into a result of its own (so a system measured once for
    both modes repeats only this shape's rows as durable), then add its rows, marked with it."""
    own = RunResult()
    try:
        run_all(systems, opts, own)
    finally:
        result.rows += [dataclasses.replace(r, shape=shape) for r in own.rows]
        result.many_queues += own.many_queues
        result.failures += [f"{shape.value}: {f}" if shape is Shape.SINGLE else f for f in own.failures]
        result.settings.update(own.settings)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    install_cleanup()
    open_files = raise_open_files()
    systems, skipped = select_installed(parse_systems(args.systems), not args.no_install)
    sizes = _ints(args.sizes)
    shapes = [Shape(s.strip()) for s in args.shapes.split(",") if s.strip()]
    result = RunResult(failures=list(skipped))
    started = time.monotonic()
    command = shlex.join([*PROG.split(), *(sys.argv[1:] if argv is None else argv)])
    result.meta = {**machine_facts(), "command": command,
                   "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": _load(),
                   "versions": versions(systems), "systems": [s.name for s in systems],
                   "smoke": args.smoke, "batch": args.batch,
                   "window": args.window, "count": args.count, "backlog": args.backlog, "shapes": list(shapes),
                   "single": {"window": args.single_window, "fetch": args.single_fetch, "count": args.single_count,
                              "backlog": args.single_backlog},
                   "duration_s": args.duration_s, "queues": args.queues, "open_files": open_files}
    print(f"load average at start: {result.meta['load_start']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as tmp:
        work = Path(tmp)
        try:
            print("measuring the ceilings", flush=True)
            sizes_c = ceilings.CeilingSizes.smoke() if args.smoke else ceilings.CeilingSizes.full()
            if not args.queues_only:
                result.ceilings = ceilings.measure(work / "ceilings", sizes_c)
            for shape in shapes if not args.queues_only else [Shape.BATCHED]:
                print(f"== shape: {shape.value}", flush=True)
                run_shape(systems, shape_options(args, shape, sizes, work / shape.value), shape, result)
        finally:
            CHILDREN.stop_all()
            if args.keep_dir:
                kept = Path(tempfile.mkdtemp(prefix="skiff-bench-kept-"))
                os.rename(work, kept / "run")
                os.mkdir(work)
                print(f"kept logs and data in {kept / 'run'}", flush=True)
    result.meta.update(load_end=_load(), wall_s=time.monotonic() - started)
    print(f"load average at end: {result.meta['load_end']}", flush=True)
    text = report.render(result, sizes)
    print(text)
    if args.docs:
        report.write_docs(args.docs, text)
    if args.json:
        report.write_json(args.json, result)
    print("\n".join(report.bar_lines(result, sizes)))
    return 0 if not result.failures and all(r.ok for r in result.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
