"""Tables, the issue's bar lines, the docs section and the JSON file of one run."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from skiff.bench.compare.results import Mode, QueuesPoint, Row, RunResult, Shape, Workload

SECTION_TITLE = "## Side by side"
SKIFF = "skiff"
MIB = 1 << 20


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


ROW_HEADERS = ("system", "workload", "size B", "messages", "msg/s", "MB/s", "p50 ms", "p99 ms",
               "broker CPU s / M msgs", "broker peak RSS MiB", "note")
WORKLOAD_ORDER = {w: i for i, w in enumerate(Workload)}


def rows_table(rows: Sequence[Row]) -> str:
    ordered = sorted(rows, key=lambda r: (WORKLOAD_ORDER[r.workload], r.size_bytes, r.system))
    return markdown_table(ROW_HEADERS, (
        (r.system, r.workload.value, str(r.size_bytes), f"{r.messages:,}", _num(r.msgs_per_s), _num(r.mb_per_s, 1),
         _num(r.p50_ms, 2), _num(r.p99_ms, 2), _num(r.cpu_s_per_million, 1), _num(r.peak_rss_bytes / MIB),
         r.note or ("" if r.ok else "incomplete"))
        for r in ordered
    ))


def queues_table(points: Sequence[QueuesPoint]) -> str:
    base = points[0].msgs_per_s if points else 0.0
    return markdown_table(("queues", "topics", "messages", "msg/s", "vs first", "note"), (
        (f"{p.queues:,}", str(p.topics), f"{p.messages:,}", _num(p.msgs_per_s),
         f"{p.msgs_per_s / base * 100:.0f} %" if base else "–", p.note)
        for p in points
    ))


def ceilings_table(result: RunResult) -> str:
    c = result.ceilings
    if c is None:
        return "(not measured)"
    size = f"{c.disk_write_bytes // MIB} MiB"
    return markdown_table(("ceiling", "value"), (
        (f"sequential write of the data directory, {size} in 1 MiB blocks, no fsync", f"{c.disk_write_mb_per_s:,.0f} MB/s"),
        (f"the same with an fsync at the end, counted in the time", f"{c.disk_write_fsync_mb_per_s:,.0f} MB/s"),
        ("fsyncs per second (128 B append + fsync, looped)", f"{c.fsyncs_per_s:,.0f} /s"),
        ("loopback TCP, one connection, 1 MiB sends", f"{c.loopback_mb_per_s:,.0f} MB/s"),
    ))


def _ok_rows(rows: Iterable[Row], mode: Mode, workload: Workload | None = None,
             shape: Shape = Shape.BATCHED) -> list[Row]:
    return [r for r in rows if r.mode == mode and r.ok and r.shape == shape
            and (workload is None or r.workload == workload)]


def is_peer(system: str) -> bool:
    """Whether a row is another system's: skiff-kafka is Skiff through its Kafka listener, never the
    "best peer" the bar compares Skiff's own protocol against."""
    return not system.startswith(SKIFF)


def e2e_ratio(rows: Sequence[Row], size: int, shape: Shape = Shape.BATCHED) -> tuple[float | None, str]:
    """Skiff's end-to-end msg/s over the best peer's, and that peer's name."""
    e2e = [r for r in _ok_rows(rows, Mode.NORMAL, Workload.E2E, shape) if r.size_bytes == size]
    ours = [r for r in e2e if r.system == SKIFF]
    peers = [r for r in e2e if is_peer(r.system)]
    if not ours or not peers:
        return None, max(peers, key=lambda r: r.msgs_per_s).system if peers else "–"
    best = max(peers, key=lambda r: r.msgs_per_s)
    return ours[0].msgs_per_s / best.msgs_per_s, best.system


def cpu_per_million_by_system(rows: Sequence[Row], shape: Shape = Shape.BATCHED) -> dict[str, float]:
    """Broker CPU seconds over all normal-mode workloads, per million messages they moved."""
    totals: dict[str, tuple[float, int]] = {}
    for r in _ok_rows(rows, Mode.NORMAL, shape=shape):
        cpu, msgs = totals.get(r.system, (0.0, 0))
        totals[r.system] = (cpu + r.broker_cpu_s, msgs + r.messages)
    return {s: cpu / msgs * 1e6 for s, (cpu, msgs) in totals.items() if msgs}


def queues_drop_percent(points: Sequence[QueuesPoint]) -> float | None:
    done = [p for p in points if p.ok]
    if len(done) < 2 or done[0].msgs_per_s <= 0:
        return None
    return (done[0].msgs_per_s - done[-1].msgs_per_s) / done[0].msgs_per_s * 100


def bar_lines(result: RunResult, sizes: Sequence[int]) -> list[str]:
    lines = []
    for size in sizes:
        ratio, peer = e2e_ratio(result.rows, size)
        label = "100 B" if size == 100 else ("1 KiB" if size == 1024 else f"{size} B")
        shown = f"{ratio:.2f} (best peer: {peer})" if ratio is not None else f"n/a (no complete Skiff/peer e2e row; best peer: {peer})"
        lines.append(f"end-to-end ratio Skiff / best peer ({label}): {shown}")  # the batched shape
    cpu = cpu_per_million_by_system(result.rows)
    if cpu:
        lowest = min(cpu, key=cpu.__getitem__)
        each = ", ".join(f"{s} {v:.1f}" for s, v in sorted(cpu.items(), key=lambda kv: kv[1]))
        lines.append(f"broker CPU per million: lowest = {lowest} ({each} CPU s / M msgs)")
    else:
        lines.append("broker CPU per million: lowest = n/a (no complete rows)")
    lines.append(_queues_line(result.many_queues))
    if any(r.shape == Shape.SINGLE for r in result.rows):
        lines += single_bar_lines(result.rows, sizes)
    return lines


def _label(size: int) -> str:
    return "100 B" if size == 100 else ("1 KiB" if size == 1024 else f"{size} B")


def single_bar_lines(rows: Sequence[Row], sizes: Sequence[int]) -> list[str]:
    """The single-message shape's lines: e2e ratio, and produce (normal and durable) of Skiff
    against the best peer, each with msg/s and broker CPU µs per message."""
    lines = []
    for size in sizes:
        ratio, peer = e2e_ratio(rows, size, Shape.SINGLE)
        shown = f"{ratio:.2f} (best peer: {peer})" if ratio is not None else f"n/a (best peer: {peer})"
        lines.append(f"single messages: end-to-end ratio Skiff / best peer ({_label(size)}): {shown}")
        for mode in Mode:
            produced = [r for r in _ok_rows(rows, mode, Workload.PRODUCE, Shape.SINGLE) if r.size_bytes == size]
            ours = [r for r in produced if r.system == SKIFF]
            peers = [r for r in produced if is_peer(r.system)]
            best = max(peers, key=lambda r: r.msgs_per_s) if peers else None
            lines.append(f"single messages: {mode.value} produce ({_label(size)}): Skiff "
                         f"{_produce_text(ours[0] if ours else None)}; best peer "
                         + (f"{best.system} {_produce_text(best)}" if best is not None else "n/a"))
    return lines


def _produce_text(row: Row | None) -> str:
    if row is None:
        return "n/a"
    return f"{row.msgs_per_s:,.0f} msg/s at {row.cpu_s_per_million:.1f} µs broker CPU per message"


def _queues_line(points: Sequence[QueuesPoint]) -> str:
    """The drop between the first and the last measured point, naming the points that failed."""
    done = [p for p in points if p.ok]
    drop = queues_drop_percent(points)
    if drop is None:
        return "many-queues drop 8→16384: n/a (not measured)"
    failed = [f"{p.queues}" for p in points if not p.ok]
    tail = f" ({', '.join(failed)} queues: failed)" if failed else ""
    return f"many-queues drop {done[0].queues}→{done[-1].queues}: {drop:.1f} %{tail}"


def render(result: RunResult, sizes: Sequence[int]) -> str:
    """The whole report as Markdown: printed to the terminal and written into the docs."""
    meta = result.meta
    parts = [
        f"Command: `{meta.get('command', '')}`",
        "",
        f"Machine: {meta.get('cores')} cores ({meta.get('cpu_model')}), {meta.get('memory_gib')} GiB, "
        f"{meta.get('python')}, load average {meta.get('load_start')} at the start and "
        f"{meta.get('load_end')} at the end; run of {meta.get('started')} ({meta.get('wall_s', 0):.0f} s).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items()) + ".",
        "",
        "Systems: " + ", ".join(meta.get("systems", [])) + "."
        + ("" if SKIFF in meta.get("systems", []) else " Skiff is not in this run, so its bar lines read n/a."),
        "",
        f"Load: every producer sends batches of {meta.get('batch')} messages with up to {meta.get('window')} "
        f"batches unacknowledged, every consumer reads {meta.get('batch')} at a time; an e2e run and a durable "
        f"produce run move {meta.get('count', 0):,} messages, the produce-only run writes a backlog of "
        f"{meta.get('backlog', 0):,} that the drain reads back; producers stop after {meta.get('duration_s')} s. "
        f"Skiff topics have {meta.get('queues')} queues; each peer uses one stream or queue. MB = 10^6 bytes "
        "of message bodies; broker CPU and RSS are the broker's whole process tree."
        + (f" Open files allowed to every process: {meta['open_files']} (RocketMQ's docs ask for 655,350)."
           if meta.get("open_files") else ""),
        "",
        "### The bar",
        "",
        *[f"    {line}" for line in bar_lines(result, sizes)],
        "",
        "### Normal mode (acknowledged by the broker, each peer's default flushing)",
        "",
        rows_table([r for r in result.rows if r.mode == Mode.NORMAL and r.shape == Shape.BATCHED]),
        "",
        "### Durable mode (acknowledged after fsync where the system offers it)",
        "",
        rows_table([r for r in result.rows if r.mode == Mode.DURABLE and r.shape == Shape.BATCHED]),
        "",
        *_single_sections(result),
        "### Many queues (Skiff, produce only)",
        "",
        queues_table(result.many_queues) if result.many_queues else "(not measured in this run)",
        "",
        "### Ceilings of this machine (same run)",
        "",
        ceilings_table(result),
        "",
        "### Settings and how each client was driven",
        "",
        *[f"- **{name}**: {text}" for name, text in result.settings.items()],
    ]
    if result.failures:
        parts += ["", "### Failures", "", *[f"- {f}" for f in result.failures]]
    return "\n".join(parts) + "\n"


def _single_sections(result: RunResult) -> list[str]:
    """The single-message shape's tables, when the run measured it."""
    single = [r for r in result.rows if r.shape == Shape.SINGLE]
    if not single:
        return []
    s = result.meta.get("single", {})
    return [
        "### Single messages: one per request, normal mode",
        "",
        f"Every producer sends one message per request (Skiff: `AsyncProducer.send`, SEND_MESSAGE_V2; each peer "
        f"its one-message publish) with up to {s.get('window')} unacknowledged; every consumer fetches "
        f"{s.get('fetch')} at a time (RocketMQ's pullBatchSize); an e2e run and a durable produce run move "
        f"{s.get('count', 0):,} messages, the backlog is {s.get('backlog', 0):,}. Broker CPU s / M msgs is µs "
        "per message.",
        "",
        rows_table([r for r in single if r.mode == Mode.NORMAL]),
        "",
        "### Single messages: one per request, durable mode",
        "",
        rows_table([r for r in single if r.mode == Mode.DURABLE]),
        "",
    ]


def replace_section(document: str, body: str, title: str = SECTION_TITLE) -> str:
    """Put ``body`` under ``title``, replacing only that section (up to the next `## `)."""
    section = f"{title}\n\n{body.rstrip()}\n"
    lines = document.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == title), None)
    if start is None:
        sep = "" if not document or document.endswith("\n\n") else ("\n" if document.endswith("\n") else "\n\n")
        return document + sep + section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + tail if tail else "")


def write_docs(path: Path, body: str) -> None:
    current = path.read_text() if path.exists() else "# Performance\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(replace_section(current, body))


def write_json(path: Path, result: RunResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json(), indent=2, default=str) + "\n")
