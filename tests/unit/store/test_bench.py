"""`skiff bench store --quick` runs every case through the real command."""

import os

from .conftest import run_quick_bench


def test_quick_bench_measures_every_case(tmp_path):
    figures = run_quick_bench("store", tmp_path)
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
