"""`python -m skiff.bench.tier_upkeep` at a small size: its figures are of what it says it did
(a quiet queue merged by the one pass, every file's tombstoneMs learnt, idle passes timed)."""

from __future__ import annotations

from pathlib import Path

from skiff.bench.tier_upkeep import build_parser, run


def test_the_bench_merges_the_quiet_queue_and_learns_every_files_tombstones(tmp_path: Path) -> None:
    f = run(build_parser().parse_args(["--rounds", "3", "--messages", "200", "--passes", "2"]), tmp_path)
    assert f["files"] == 3
    assert (f["learn"]["files"], f["learn"]["passes"]) == (3, 1) and f["learn"]["fetched_mb"] > 0
    assert (f["merge"]["files_after"], f["merge"]["rows"]) == (2, 400) and f["merge"]["fetched_mb"] > 0
    assert f["idle_before"]["median_us"] > 0 and f["idle_after"]["median_us"] > 0
