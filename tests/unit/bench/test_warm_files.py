"""`skiff.bench.warm_files`: the files it compares are what it says, and its loop writes where it syncs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skiff.bench.warm_files import KINDS, main, make_file, syncs

SIZE = 1 << 20


@pytest.mark.parametrize("kind", KINDS)
def test_a_made_file_is_its_size_and_reads_as_zeros(tmp_path: Path, kind: str) -> None:
    path = str(tmp_path / kind)
    os.close(make_file(path, SIZE, kind))
    with open(path, "rb") as f:
        assert f.read() == bytes(SIZE)


def test_the_zero_written_file_has_every_block_and_the_sparse_one_none(tmp_path: Path) -> None:
    for kind in ("zeros", "sparse"):
        os.close(make_file(str(tmp_path / kind), SIZE, kind))
    assert os.stat(tmp_path / "zeros").st_blocks * 512 >= SIZE
    assert os.stat(tmp_path / "sparse").st_blocks == 0


def test_the_loop_measures_every_kind_and_leaves_no_file(tmp_path: Path) -> None:
    result = syncs(str(tmp_path), 20, 10, 128, "msync", SIZE)
    assert set(result) == set(KINDS)
    assert all(r["syncs_per_s"] > 0 for r in result.values())
    assert os.listdir(tmp_path) == []


def test_a_loop_that_does_not_fit_its_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["syncs", "--dir", str(tmp_path), "--syncs", "1000", "--block", "30"])
    assert "multiple of --block" in capsys.readouterr().err
    with pytest.raises(ValueError, match="do not fit"):
        syncs(str(tmp_path), 100, 10, 1 << 20, "msync", SIZE)
