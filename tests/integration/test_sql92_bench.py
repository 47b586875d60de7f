"""`skiff bench filter_pull --quick` runs end to end: its own broker, the backlog read
with each subscription, and exactly the selected messages delivered."""

from __future__ import annotations

import orjson

from skiff.bench.filter_pull import CASES, make_messages, matches
from skiff.testing.processes import run_skiff


def test_filter_pull_bench_quick() -> None:
    done = run_skiff(["bench", "filter_pull", "--quick", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = orjson.loads(done.stdout[done.stdout.index("{"):])
    msgs = make_messages(figures["messages"], figures["body_bytes"])
    by_case = {c["case"]: c for c in figures["cases"]}
    assert set(by_case) == set(CASES)
    for case, row in by_case.items():
        assert row["backlog"] == len(msgs) and row["backlog_per_s"] > 0
        assert row["delivered"] == sum(1 for m in msgs if matches(case, m)), case
    assert by_case["sql"]["wire_bytes"] < by_case["tag"]["wire_bytes"] < by_case["none"]["wire_bytes"]
