"""`skiff bench timer --quick` runs every case through the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def test_quick_bench_delivers_everything_on_time(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "skiff", "bench", "timer", "--quick", "--json", "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    assert figures["quick"] is True
    assert [c["case"] for c in figures["cases"]] == ["spread", "burst"]
    for c in figures["cases"]:
        assert c["messages"] == c["delivered"] == 2_000 and (c["lost"], c["early"]) == (0, 0)
        assert 0 <= c["lateness_p50_ms"] <= c["lateness_p99_ms"] <= c["lateness_max_ms"]
        assert c["delivery_rate_per_s"] > 0 and c["cpu_s"] > 0
    restart = figures["restart"]
    assert restart["messages"] == restart["in_wheel"] == 2_000 and restart["recover_ms"] > 0
    assert os.listdir(tmp_path) == []
