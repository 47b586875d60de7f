"""The first read of a tiered file (`TierReads._open`): one job fetches the file's footer and the
row group the pull asked for (ranged, when the manifest records ranges), or the whole file while
its SHA-256 is checked (an older build's manifest); the run and the footer or file are cached
only when the checksums matched, and a damaged file fails with the checksum's error whatever the
Parquet decoder made of it. Pure: a ``file://`` tier in a temporary directory, no broker."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from skiff.broker.operations.pull import PullRequest
from skiff.broker.operations.subscription import compile_subscription
from skiff.broker.tier.reads import TierReads
from skiff.filter import MessageFilter
from skiff.store import GetResult
from skiff.store.results import GetStatus
from skiff.common.limits import TIER_ROW_GROUP_MESSAGES
from skiff.tier.backends import FilesystemBackend, TierError
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier
from tests.unit.tier.records import make_records

ROWS = TIER_ROW_GROUP_MESSAGES + 300  # two row groups: the second is 300 rows from offset 4096
RECORDS = make_records("T", 0, 0, ROWS)


@pytest.fixture(scope="module")
def uploaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Segment]:
    root = tmp_path_factory.mktemp("tier")
    _, seg = Tier(FilesystemBackend(str(root))).upload(Manifest("T", "b"), records_to_table(RECORDS, "b"))
    assert seg.ranged()
    return root, seg


def _whole(seg: Segment) -> Segment:
    """``seg`` as an older build's manifest lists it: no byte ranges, so the file is read whole."""
    return replace(seg, row_groups=(), footer=None)


def _reads(root: Path) -> TierReads:
    return TierReads(Tier(FilesystemBackend(str(root))), cast(Any, None))  # _open uses no uploader


@pytest.mark.parametrize("ranges", [True, False], ids=["ranged", "whole-file"])
def test_one_job_caches_the_row_group_asked_for_and_what_finds_the_others(uploaded, ranges):
    root, seg = uploaded
    seg = seg if ranges else _whole(seg)
    reads = _reads(root)
    try:
        reads._open(seg, TIER_ROW_GROUP_MESSAGES + 10)
        run = reads.runs.get((seg.file, 1))
        assert run is not None and reads.runs.get((seg.file, 0)) is None
        assert run.offsets.tolist() == list(range(TIER_ROW_GROUP_MESSAGES, ROWS))
        assert run.records == make_records("T", 0, TIER_ROW_GROUP_MESSAGES, 300)
        assert reads.tier.cached_layout(seg) is not None
        assert (reads.tier.cache.get(seg.file) is not None) == (not ranges)  # a ranged file is never fetched whole
        reads._rebuild(seg, 0)  # the next row group: its range alone (or the cached file)
        first = reads.runs.get((seg.file, 0))
        assert first is not None and first.records == make_records("T", 0, 0, TIER_ROW_GROUP_MESSAGES)
    finally:
        reads.close()


@pytest.mark.parametrize("ranges", [True, False], ids=["ranged", "whole-file"])
@pytest.mark.parametrize("where", ["a data page", "the footer"])
def test_a_damaged_file_is_refused_by_its_checksum_and_nothing_is_cached(uploaded, tmp_path, where, ranges):
    root, seg = uploaded
    seg = seg if ranges else _whole(seg)
    copy = tmp_path / "tier"
    (copy / seg.file).parent.mkdir(parents=True)
    data = bytearray((root / seg.file).read_bytes())
    data[len(data) // 3 if where == "a data page" else len(data) - 100] ^= 0xFF  # row group 0, or the footer
    (copy / seg.file).write_bytes(bytes(data))
    reads = _reads(copy)
    try:
        with pytest.raises(TierError, match="checksum"):
            reads._open(seg, 0)
        assert reads.runs.get((seg.file, 0)) is None and reads.tier.cache.get(seg.file) is None
        assert reads.tier.cached_layout(seg) is None
    finally:
        reads.close()


class _Uploader:
    """What `TierReads.read` asks of the uploader: the topic is tiered, its manifest kept."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifests = {"T": manifest}
        self.broker_name = "b"

    def is_tiered(self, topic: str) -> bool:
        return topic == "T"


def test_a_pull_told_to_retry_leaves_its_queue_waiting_until_the_work_ends_and_is_told(uploaded):
    root, seg = uploaded
    reads = TierReads(Tier(FilesystemBackend(str(root))), cast(Any, _Uploader(Manifest("T", "b", segments=(seg,)))))
    told: list[list[tuple[str, int]]] = []
    ready = threading.Event()
    reads.ready_listeners.append(lambda queues: (told.append(queues), ready.set()))
    local = GetResult(GetStatus.OFFSET_TOO_SMALL, 0, ROWS, ROWS)
    flt = compile_subscription("*", "TAG", False)
    assert isinstance(flt, MessageFilter)
    try:
        first = reads.read(PullRequest("G", "T", 0, 10, 32), flt, local)
        assert (first.status, first.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 10)
        assert ready.wait(60), "the tier's fetch never ended"
        assert told == [[("T", 0)]] and not reads.waiting("T", 0)
        found = reads.read(PullRequest("G", "T", 0, 10, 32), flt, local)
        assert found.status is GetStatus.FOUND and found.queue_offsets == list(range(10, 42))
        assert told == [[("T", 0)]]  # nothing pending, nobody told again
    finally:
        reads.close()


@pytest.mark.parametrize("gone", [
    GetResult(GetStatus.MESSAGE_WAS_REMOVING, 42, 0, ROWS),  # its CommitLog file deleted, the ConsumeQueue not yet
    GetResult(GetStatus.OFFSET_FOUND_NULL, 1000, 0, ROWS),  # its ConsumeQueue file deleted
], ids=["commitlog-file-gone", "consumequeue-file-gone"])
def test_an_offset_whose_local_files_went_above_the_queues_minimum_is_read_from_the_tier(uploaded, gone):
    """The store steps past such offsets (its answer's next offset); a tiered topic's pull must get
    them from the tier instead, or a consumer would never see them (a slave's pull did skip 32)."""
    root, seg = uploaded
    reads = TierReads(Tier(FilesystemBackend(str(root))), cast(Any, _Uploader(Manifest("T", "b", segments=(seg,)))))
    ready = threading.Event()
    reads.ready_listeners.append(lambda queues: ready.set())
    flt = compile_subscription("*", "TAG", False)
    assert isinstance(flt, MessageFilter)
    try:
        first = reads.read(PullRequest("G", "T", 0, 10, 32), flt, gone)
        assert (first.status, first.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 10)  # not past 10
        assert ready.wait(60), "the tier's fetch never ended"
        found = reads.read(PullRequest("G", "T", 0, 10, 32), flt, gone)
        assert found.status is GetStatus.FOUND and found.queue_offsets == list(range(10, 42))
        assert reads.read(PullRequest("G", "U", 0, 10, 32), flt, gone) is gone  # not tiered: the store's answer
    finally:
        reads.close()
