"""Damage the tail of a crashed store's CommitLog; recovery must cut there, say so, and go on."""

import os
import random
import shutil

import pytest

from skiff.common.record import HEAD_V4
from skiff.common.stored_message import decode_record
from skiff.store import PutStatus
from tests.crash.conftest import Child, check_survivors, open_child_store
from tests.crash.store_child import TOPIC, make

FILE = 8192


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """A store a child wrote 40 appends to and was killed holding (checkpoint never
    written after the start, so recovery checks every record)."""
    store_dir = tmp_path_factory.mktemp("crashed") / "store"
    child = Child(store_dir, "--seed", "11", "--count", "40", "--hold", "--checkpoint-ms", "600000")
    child.wait_for("done")
    child.kill()
    rows = sorted(child.acks())
    assert len(rows) >= 40
    return store_dir, rows


def _copy(crashed, tmp_path):
    store_dir, rows = crashed
    image = tmp_path / "image"
    shutil.copytree(store_dir, image)
    return image, rows


def _file_of(image, phys):
    return image / "commitlog" / f"{phys - phys % FILE:020d}"


def _recover_and_check(image, rows, cut_at):
    """Open the damaged image: records before ``cut_at`` survive, the rest are gone,
    and the store takes a new write at the cut."""
    kept = {r[0]: r for r in rows if r[0] < cut_at}
    gone = [r for r in rows if r[0] >= cut_at]
    store, report = open_child_store(image, checkpoint_ms=600000)
    try:
        assert report.truncated_from == cut_at and store.max_physical_offset == cut_at
        check_survivors(store, kept, f"cut at {cut_at}")
        for phys, *_ in gone:
            assert store.read_record(phys) is None
        assert report.consume_queue_entries_trimmed == len(gone)
        # the index holds a KEYS word and a UNIQ_KEY entry for each surviving record and none for a
        # cut one (entries past an index file's last written header are dropped, not counted as trimmed)
        offsets = [int(o) for f in store.index.files for o in f.entries()["offset"]]
        assert sorted(offsets) == sorted(2 * list(kept)) and report.index_entries_trimmed <= 2 * len(gone)
        queue_id = gone[0][2] if gone else 0
        result = store.put_message(make(10**6, queue_id, b"written after recovery", 11))
        assert result.status is PutStatus.PUT_OK and result.physical_offset == cut_at
        assert result.flushed.result(10) is PutStatus.PUT_OK
        assert result.queue_offset == store.get_max_offset(TOPIC, queue_id) - 1
        assert decode_record(store.read_record(cut_at)).body == b"written after recovery"
        return report
    finally:
        store.shutdown()


def test_last_file_truncated_mid_record(crashed, tmp_path):
    image, rows = _copy(crashed, tmp_path)
    last = rows[-1]
    os.truncate(_file_of(image, last[0]), last[0] % FILE + last[3] // 2)
    report = _recover_and_check(image, rows, last[0])
    assert f"offset {last[0]}" in report.truncated_reason
    assert any("extended" in note for note in report.notes)


def test_garbage_after_the_last_record(crashed, tmp_path):
    image, rows = _copy(crashed, tmp_path)
    end = rows[-1][0] + rows[-1][3]
    garbage = random.Random(5).randbytes(min(300, FILE - end % FILE))
    with open(_file_of(image, end), "r+b") as f:
        f.seek(end % FILE)
        f.write(garbage)
    report = _recover_and_check(image, rows, end)
    assert report.truncated_bytes == len(garbage.rstrip(b"\0"))
    assert report.truncated_reason


def test_flipped_byte_near_the_tail(crashed, tmp_path):
    image, rows = _copy(crashed, tmp_path)
    victim = next(r for r in reversed(rows[:-2]) if r[5])  # a record with a body, three from the end or so
    body_at = victim[0] + HEAD_V4.size + len(victim[5]) // 4  # the middle of the body (hex has 2 digits a byte)
    path = _file_of(image, victim[0])
    with open(path, "r+b") as f:
        f.seek(body_at % FILE)
        byte = f.read(1)
        f.seek(body_at % FILE)
        f.write(bytes([byte[0] ^ 0x5A]))
    report = _recover_and_check(image, rows, victim[0])
    assert "CRC" in report.truncated_reason
    assert report.truncated_bytes > 0
