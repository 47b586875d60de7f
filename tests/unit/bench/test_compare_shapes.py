"""The compare harness's two shapes: each shape's rows stay its own, also the durable rows a
system measured once for both modes repeats, and the bar reads the single shape's rows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from skiff.bench.compare import report, run, suite
from skiff.bench.compare.results import Mode, Row, RunResult, Shape, Workload


def test_each_shape_repeats_only_its_own_rows_as_durable(monkeypatch: pytest.MonkeyPatch) -> None:
    rates = iter([1000.0, 10.0])  # the batched run's produce rate, then the single run's

    def fake_run_all(systems: Any, opts: Any, result: RunResult) -> None:
        seconds = 1 / next(rates)
        for system in ("nats", "skiff"):
            result.rows.append(Row(system, Mode.NORMAL, Workload.PRODUCE, 100, 1, seconds, 1e-6, 1))
        suite._reuse_as_durable([SimpleNamespace(name="nats")], "one configuration", result)  # type: ignore[list-item]

    monkeypatch.setattr(run, "run_all", fake_run_all)
    result = RunResult()
    for shape in Shape:
        run.run_shape([], None, shape, result)  # type: ignore[arg-type]
    durable = [(r.shape, r.msgs_per_s) for r in result.rows if r.mode == Mode.DURABLE]
    assert durable == [(Shape.BATCHED, 1000.0), (Shape.SINGLE, 10.0)]
    lines = report.single_bar_lines(result.rows, [100])
    assert "single messages: durable produce (100 B): Skiff n/a; best peer nats 10 msg/s" in lines[2]
    assert "Skiff 10 msg/s at 1.0 µs broker CPU per message; best peer nats 10 msg/s" in lines[1]


def test_the_single_shape_sends_one_message_and_fetches_32_by_default(tmp_path: Path) -> None:
    args = run.parse_args(["--docs", str(tmp_path / "d.md"), "--json", str(tmp_path / "r.json")])
    assert args.shapes == "batched,single"
    opts = run.shape_options(args, Shape.SINGLE, (100,), tmp_path / "single")
    assert (opts.phase.batch, opts.phase.window, opts.phase.fetch, opts.queue_points) == (1, 64, 32, ())
    batched = run.shape_options(args, Shape.BATCHED, (100,), tmp_path / "batched")
    assert (batched.phase.batch, batched.phase.window, batched.phase.fetch) == (256, 8, 0)
