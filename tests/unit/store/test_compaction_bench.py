"""`skiff bench compaction --quick` runs through the real command and reports sane figures."""

import os

from .conftest import run_quick_bench


def test_quick_compaction_bench(tmp_path):
    f = run_quick_bench("compaction", tmp_path)
    assert (f["messages"], f["keys"]) == (4000, 500)
    full, quarter = f["full_map"], f["quarter_map"]
    assert full["passes"] == 1 and full["records_read"] == 4000 and 0 < full["records_kept"] <= 500
    assert quarter["passes"] > 1 and quarter["records_kept"] == full["records_kept"]
    assert full["mb_per_s"] > 0 and full["mb_written"] < full["mb_read"]
    assert 16 <= f["map_bytes_per_key"] < 10_000
    assert os.listdir(tmp_path) == []
