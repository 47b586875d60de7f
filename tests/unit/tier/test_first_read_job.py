"""The callgrind bench's job (`skiff.bench.tier_first_read_job`) runs each mode on a small file, and
its ``whole`` mode really reads the file whole and ``ranged`` only the footer and a row group."""

from __future__ import annotations

import pytest

from skiff.bench import tier_first_read_job as job
from skiff.tier.backends import FilesystemBackend


def test_setup_then_each_mode_reads_as_it_says(tmp_path, monkeypatch) -> None:
    seg = job.setup(str(tmp_path), 5000, 64)
    assert seg.ranged() and len(seg.row_groups) == 2
    fetched: list[tuple[str, int]] = []
    get, get_range = FilesystemBackend.get, FilesystemBackend.get_range
    monkeypatch.setattr(FilesystemBackend, "get", lambda self, key: fetched.append(("get", len(get(self, key))))
                        or get(self, key))
    monkeypatch.setattr(FilesystemBackend, "get_range", lambda self, key, start, n: fetched.append(("range", n))
                        or get_range(self, key, start, n))
    job.first_read(str(tmp_path), "none")
    assert fetched == []
    job.first_read(str(tmp_path), "whole")
    assert fetched == [("get", seg.size_bytes)]
    fetched.clear()
    job.first_read(str(tmp_path), "ranged")
    assert seg.footer is not None and fetched == [("range", seg.footer.length), ("range", seg.row_groups[0].length)]


def test_a_mode_without_setup_is_refused(tmp_path) -> None:
    with pytest.raises(SystemExit):
        job.main(["ranged", str(tmp_path)])
