"""`skiff.bench.tier_first_read`: it times the steps it names on the file it says, and bad
options are refused."""

from __future__ import annotations

import pytest

from skiff.bench.tier_first_read import first_read_steps, main


def test_the_steps_are_timed_on_one_file_of_the_records_asked_for() -> None:
    f = first_read_steps(300, 20, 1)
    assert (f["messages"], f["size"], f["row_groups"], f["group_rows"]) == (300, 20, 1, 300)
    assert f["file_bytes"] > 300 * 20  # the bodies are random: zstd cannot shrink them away
    assert list(f["steps"]) == ["fetch (whole file)", "sha256 (whole file)", "open (Parquet footer)",
                                "decode row group 0", "fetch footer + row group 0 (two ranged gets)",
                                "sha256 footer + row group 0", "open footer alone",
                                "decode row group 0 from its range", "rebuild: rows_to_record_list",
                                "run: rebuilt_run (what a read does)", "first read, whole file (TierReads._open)",
                                "first read, ranged (TierReads._open)", "upload: file_ranges (ranges + their sha256)"]
    assert f["file_bytes"] > f["ranged_bytes"] > 300 * 20  # one row group: all but the file's leading magic
    assert all(wall >= 0 and cpu >= 0 for wall, cpu in f["steps"].values())


def test_it_prints_each_step_per_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--messages", "50", "--size", "10", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("50 records of 10 B: one file of") and "the first: 50" in lines[0]
    assert lines[1].startswith("bytes a first read fetches:") and "ranged (footer + row group 0" in lines[1]
    assert len(lines) == 15 and all("us CPU per message of the row group" in line for line in lines[2:])


@pytest.mark.parametrize("bad", [["--messages", "0"], ["--size", "-1"], ["--repeat", "0"]])
def test_bad_options_are_refused(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(bad)
    assert "must be at least" in capsys.readouterr().err
