"""A long history's manifest in parts (`skiff.tier.manifest_parts`), here with parts of 4 segments:
the manifest lists fewer than 8 segments of its own however many files are uploaded, a fresh
reader gets every segment back (and reads every row through them), a part is never rewritten,
a part whose segment expired is dissolved and its object retired then deleted after the delay,
a part no manifest names (a crash before the manifest) is an orphan and a named one never is,
a damaged part is refused, deleting the topic deletes its parts, and a deletion that fails after
the manifest is written never leads to a manifest naming a deleted part."""

from __future__ import annotations

import json

import pytest

from skiff.common.clock import ManualClock
from skiff.tier.backends import FilesystemBackend, TierBackend
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest, ManifestError
from skiff.tier.manifest_parts import PART_SUFFIX, parted
from skiff.tier.tier import Tier
from skiff.common.errors import SkiffError
from tests.unit.tier.records import make_records

PART = 4
ROWS = 10  # rows per file


def _upload(tier: Tier, m: Manifest, files: int, queues: int = 2) -> Manifest:
    """``files`` more files, alternating between the queues, each ROWS rows from the queue's tier end."""
    for i in range(files):
        q = i % queues
        m, _ = tier.upload(m, records_to_table(make_records("T", q, m.end_offset(q), ROWS,
                                                            t0_ms=1_700_000_000_000 + 1000 * len(m.segments)), "b"))
    return m


def _parts_in(backend: TierBackend) -> list[str]:
    return sorted(k for k in backend.list("T/b/") if k.endswith(PART_SUFFIX))


def test_the_manifest_lists_few_segments_of_its_own_and_a_reader_gets_them_all(backend: TierBackend) -> None:
    tier = Tier(backend, part_segments=PART)
    m = Manifest("T", "b")
    written_parts: dict[str, bytes] = {}
    for _ in range(10):
        m = _upload(tier, m, 3)
        body = json.loads(backend.get("T/b/manifest.json"))
        assert len(body["segments"]) < 2 * PART
        for name in _parts_in(backend):  # a part is written once and never changes
            assert written_parts.setdefault(name, backend.get(name)) == backend.get(name)
    assert len(m.segments) == 30 and len(m.parts) == 30 // PART - 1 and body["version"] == 2
    assert len(body["parts"]) == len(m.parts) and sum(p["segments"] for p in body["parts"]) + len(body["segments"]) == 30
    fresh = Tier(backend).manifest("T", "b")
    assert fresh == m
    for q in (0, 1):
        rows = Tier(backend).read(fresh, q, 0, 1000)
        assert rows.column("queue_offset").to_pylist() == list(range(m.end_offset(q))) and m.end_offset(q) >= 10 * ROWS


def test_a_manifest_without_parts_is_the_format_older_builds_read(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)), part_segments=PART)
    m = _upload(tier, Manifest("T", "b"), 2 * PART - 1)
    body = json.loads(tier.backend.get("T/b/manifest.json"))
    assert body["version"] == 1 and "parts" not in body and not m.parts
    assert Manifest.from_bytes(tier.backend.get("T/b/manifest.json")) == m
    m = _upload(tier, m, 1)
    assert m.parts and json.loads(tier.backend.get("T/b/manifest.json"))["version"] == 2
    with pytest.raises(ManifestError, match="read it through its tier"):
        Manifest.from_bytes(tier.backend.get("T/b/manifest.json"))


def test_an_expired_segment_dissolves_its_part_which_is_retired_then_deleted(tmp_path) -> None:
    clock = ManualClock()
    tier = Tier(FilesystemBackend(str(tmp_path)), clock=clock, delete_delay_ms=60_000, part_segments=PART)
    m = _upload(tier, Manifest("T", "b"), 12)
    first_part = m.parts[0]
    oldest = min(m.segments, key=lambda s: s.last_store_ms)
    assert oldest in first_part.segments
    m, gone = tier.expire(m, oldest.last_store_ms + 1)
    assert gone == [oldest] and first_part not in m.parts and oldest not in m.segments
    assert len(m.segments) == 11 and {s for p in m.parts for s in p.segments} <= set(m.segments)
    assert first_part.file in {r.file for r in m.retired}
    assert first_part.file in _parts_in(tier.backend)  # a reader of the older manifest still finds it
    assert Tier(FilesystemBackend(str(tmp_path))).manifest("T", "b") == m
    clock.advance(60_000)
    m = tier.delete_retired(m)
    assert first_part.file not in _parts_in(tier.backend) and not m.retired
    assert Tier(FilesystemBackend(str(tmp_path))).manifest("T", "b") == m
    assert sorted(p.file for p in m.parts) == _parts_in(tier.backend)


def test_a_part_no_manifest_names_is_an_orphan_and_a_named_one_never_is(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)), part_segments=PART)
    m = _upload(tier, Manifest("T", "b"), 2 * PART - 1)

    class Crash(Exception):
        pass

    def crash(step: str) -> None:
        if step == "parts-written":
            raise Crash(step)

    tier.steps = crash
    with pytest.raises(Crash):
        _upload(tier, m, 1)
    (orphan,) = _parts_in(tier.backend)
    reader = Tier(FilesystemBackend(str(tmp_path)), part_segments=PART)
    before = reader.manifest("T", "b")
    assert not before.parts and len(before.segments) == 2 * PART - 1
    assert orphan in reader.collect_orphans(before)
    after = _upload(reader, reader.manifest("T", "b"), 1)  # the retry parts the same segments again
    assert _parts_in(tier.backend) == [orphan] and [p.file for p in after.parts] == [orphan]
    assert reader.collect_orphans(after) == [] and _parts_in(tier.backend) == [orphan]


def test_a_damaged_part_is_refused(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)), part_segments=PART)
    m = _upload(tier, Manifest("T", "b"), 2 * PART)
    (part,) = m.parts
    data = bytearray(tier.backend.get(part.file))
    data[len(data) // 2] ^= 0x01
    tier.backend.put(part.file, bytes(data))
    with pytest.raises(SkiffError, match="checksum"):
        Tier(tier.backend).manifest("T", "b")


def test_deleting_the_topic_deletes_its_parts(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)), part_segments=PART)
    m = _upload(tier, Manifest("T", "b"), 3 * PART)
    assert _parts_in(tier.backend)
    tier.delete(m)
    assert list(tier.backend.list("T/b/")) == []


def test_parted_keeps_whole_parts_and_parts_the_oldest_segments_first(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)), part_segments=1_000)
    m = _upload(tier, Manifest("T", "b"), 9)
    one = parted(m, 4)
    assert [p.segments for p, _ in one.written] == [m.segments[:4]] and not one.dropped
    assert one.manifest.segments == m.segments and one.manifest.parts == (one.written[0][0],)
    again = parted(one.manifest, 4)
    assert again.written == [] and again.dropped == [] and again.manifest == one.manifest
    without_first = parted(one.manifest.without([m.segments[0]]), 4)
    assert without_first.dropped == [one.written[0][0]]  # dissolved; its three others parted anew
    assert [p.segments for p, _ in without_first.written] == [m.segments[1:5]]
    assert without_first.manifest.segments == m.segments[1:]
    with pytest.raises(ValueError):
        parted(m, 0)


class _DeletesThenFails(FilesystemBackend):
    """A tier whose deletions remove the object and then answer with an error (a timeout)."""

    failing = False

    def delete(self, key: str) -> None:
        super().delete(key)
        if self.failing:
            raise OSError(f"timed out deleting {key}")


def test_a_deletion_that_fails_after_the_manifest_is_written_never_leaves_a_manifest_naming_it(tmp_path) -> None:
    """Without a delete delay the parts and files a written manifest dropped are deleted after it;
    if one deletion fails, the write still returns the manifest written: the writer goes on from
    it, not from the one before, which names what is already deleted (its next write would name a
    missing part again, and no reader could read the manifest)."""
    backend = _DeletesThenFails(str(tmp_path))
    tier = Tier(backend, part_segments=2)
    m = _upload(tier, Manifest("T", "b"), 8, queues=1)
    first_part = m.parts[0]
    backend.failing = True
    m, gone = tier.expire(m, min(s.last_store_ms for s in m.segments) + 1)
    backend.failing = False
    assert gone and first_part.file not in {p.file for p in m.parts}
    assert first_part.file not in _parts_in(backend) and not any(backend.exists(f) for s in gone for f in s.files())
    m = _upload(tier, m, 1, queues=1)  # the next write, from the manifest returned
    fresh = Tier(FilesystemBackend(str(tmp_path))).manifest("T", "b")
    assert fresh == m and all(backend.exists(f) for f in m.listed_files())
    assert Tier(backend).read(fresh, 0, 0, 1000).column("queue_offset").to_pylist() == list(range(ROWS, 9 * ROWS))
