"""`skiff bench store --quick` runs every case through the real command."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_quick_bench_measures_every_case(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "skiff", "bench", "store", "--quick", "--json", "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["quick"] is True and figures["ceiling_mb_per_s"] > 0
    appends = figures["appends"]
    cases = {(a["body_bytes"], a["batch"], a["flush"], a["writers"]) for a in appends}
    assert cases == {
        (body, batch, flush, writers)
        for body in (100, 1024) for batch in (1, 32) for flush in ("ASYNC_FLUSH", "SYNC_FLUSH") for writers in (1, 16)
    }
    for a in appends:
        assert a["messages"] > 0 and a["messages"] % a["batch"] == 0
        assert a["msg_per_s"] > 0 and a["mb_per_s"] > 0 and a["ceiling_ratio"] > 0
    for a in appends:
        if a["flush"] == "SYNC_FLUSH":
            assert 0 < a["fsyncs"] <= a["messages"] // a["batch"]
    assert figures["reads"]["messages"] == 20_000 and figures["reads"]["msg_per_s"] > 0
    assert os.listdir(tmp_path) == []
