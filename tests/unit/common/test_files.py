"""replace_atomically: the content lands, no temporary file stays, and the new file is
fsynced before the rename and its directory after it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skiff.common import files
from skiff.common.files import replace_atomically


def test_writes_the_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    replace_atomically(path, b"first")
    replace_atomically(str(path), b"second, longer than the first")
    assert path.read_bytes() == b"second, longer than the first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_stale_temporary_file_is_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    (tmp_path / "checkpoint.tmp").write_bytes(b"torn leftover of a crash" * 10)
    replace_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert not (tmp_path / "checkpoint.tmp").exists()


def test_file_fsynced_before_the_rename_and_directory_after(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "MANIFEST"
    path.write_bytes(b"old")
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            events.append(("fsync-dir", os.path.realpath(f"/proc/self/fd/{fd}")))
        else:
            # what the file holds when it is fsynced: the new content, not yet renamed
            events.append(("fsync-file", os.readlink(f"/proc/self/fd/{fd}")))
            assert path.read_bytes() == b"old"
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(("rename", f"{os.path.basename(src)}->{os.path.basename(dst)}"))
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "fsync", fsync)
    monkeypatch.setattr(files.os, "replace", replace)
    replace_atomically(path, b"new", before_rename=lambda: events.append(("before-rename", "")))

    assert events == [
        ("fsync-file", str(tmp_path / "MANIFEST.tmp")),
        ("before-rename", ""),
        ("rename", "MANIFEST.tmp->MANIFEST"),
        ("fsync-dir", os.path.realpath(tmp_path)),
    ]
    assert path.read_bytes() == b"new"


def test_a_failing_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "topics.json"
    path.write_bytes(b"old")

    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", fsync)
    with pytest.raises(OSError):
        replace_atomically(path, b"new")
    assert path.read_bytes() == b"old"
