"""The side-by-side harness (`skiff bench compare`) end to end in --smoke mode against a real Redis.

Starts the harness as a user would (`python -m skiff bench compare`), in a directory
outside the checkout, so it relies on its own package for everything it runs; it
starts its own redis-server on a free loopback port, runs every workload with real
worker processes, and writes the docs section and the JSON file to temporary paths.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

REDIS = shutil.which("redis-server", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))

pytestmark = pytest.mark.skipif(
    REDIS is None, reason="redis-server is not installed (make bench-compare installs it from Debian's packages)"
)

DOC_BEFORE = "# Performance\n\n## Before\n\nkeep me\n\n## Side by side\n\nstale table\n\n## After\n\nkeep me too\n"
EXPECTED_ROWS = {("normal", "e2e"), ("normal", "produce"), ("normal", "drain"), ("durable", "e2e"), ("durable", "produce")}


def _bench_children(temp_root: Path) -> list[psutil.Process]:
    """Processes still running from this run: the harness's temp dirs live under
    ``temp_root`` (its TMPDIR), and every server it starts names its data dir."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(temp_root) in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


def test_smoke_run_against_redis_fills_rows_docs_and_json(tmp_path: Path) -> None:
    docs, out = tmp_path / "performance.md", tmp_path / "result.json"
    docs.write_text(DOC_BEFORE)
    argv = [sys.executable, "-m", "skiff", "bench", "compare", "--smoke", "--systems", "redis", "--no-install",
            "--json", str(out), "--docs", str(docs)]
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    env = {**os.environ, "TMPDIR": str(temp_root)}
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    data = json.loads(out.read_text())
    rows = data["rows"]
    assert {(r["mode"], r["workload"]) for r in rows} == EXPECTED_ROWS
    # both shapes by default: batched, and one message per request with consumers fetching 32
    assert {(r["shape"], r["mode"], r["workload"]) for r in rows} == \
        {(shape, mode, workload) for shape in ("batched", "single") for mode, workload in EXPECTED_ROWS}
    assert data["meta"]["single"]["fetch"] == 32 and data["meta"]["single"]["window"] == 64
    for row in rows:
        assert row["system"] == "redis" and row["ok"], row
        assert row["messages"] == 2000, row
        assert row["msgs_per_s"] > 0 and row["peak_rss_bytes"] > 0, row
    for row in (r for r in rows if r["workload"] == "e2e"):
        assert 0 < row["p50_ms"] <= row["p99_ms"], row
    assert all(v > 0 for v in data["ceilings"].values())
    assert "appendfsync everysec" in data["settings"]["redis server"]
    assert "appendfsync always" in data["settings"]["redis server"]
    assert data["meta"]["versions"]["redis-server"] != "unknown"

    text = docs.read_text()
    assert "keep me\n" in text and "keep me too" in text and "stale table" not in text
    assert text.count("## Side by side") == 1
    assert text.index("## Before") < text.index("## Side by side") < text.index("## After")
    assert "| redis | e2e | 100 | 2,000 |" in text
    assert "end-to-end ratio Skiff / best peer (100 B): n/a" in proc.stdout
    assert "broker CPU per million: lowest = redis" in proc.stdout
    assert "### Single messages: one per request, normal mode" in text
    assert "single messages: normal produce (100 B): Skiff n/a; best peer redis " in proc.stdout
    assert _bench_children(temp_root) == [], "the harness left a child process running"
