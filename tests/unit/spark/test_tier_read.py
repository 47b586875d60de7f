"""The executor's read of a tiered file (`skiff.spark.tier_read.read_tier_range`), without a
Spark session: a file of three row groups read in parts, each part exactly its offsets in
order, with the source's columns and schema, in batches of at most SPARK_TIER_BATCH_ROWS rows
(two row groups here) across row groups, reading only the row groups it overlaps; a file with gaps in its offsets (a
compacted topic's) cut at offsets it lacks; a file that is not the manifest's is refused before
any row is used."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pyarrow.compute as pc

from skiff.columnar.schema import ARROW_SCHEMA, SOURCE_COLUMNS
from skiff.common.limits import TIER_ROW_GROUP_MESSAGES
from skiff.spark import tier_read
from skiff.spark.options import SourceOptions
from skiff.spark.tier_plan import TierRange
from skiff.spark.tier_read import read_tier_range
from skiff.tier.backends import FilesystemBackend, TierError
from skiff.tier.columns import records_to_table
from skiff.tier.tier import Tier, row_groups_within
from tests.unit.tier.records import make_records
from tests.unit.tier.counting_backend import CountingBackend

pytestmark = pytest.mark.spark

BATCH = 2 * TIER_ROW_GROUP_MESSAGES  # SPARK_TIER_BATCH_ROWS in these tests, so that a small file spans batches
ROWS = BATCH + 300  # more than a batch: three row groups, the last one short


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tier_read, "SPARK_TIER_BATCH_ROWS", BATCH)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table, TierRange]:
    root = tmp_path_factory.mktemp("tier")
    tier = Tier(FilesystemBackend(str(root)))
    table = records_to_table(make_records("T", 2, 100, ROWS), "b")
    _, seg = tier.upload(tier.manifest("T", "b"), table)
    whole = TierRange("T", "b", 2, seg.first_offset, seg.last_offset + 1, (seg,))
    return f"file://{root}", table, whole


def _read(url: str, part: TierRange, start: int, end: int, **options: str) -> list[pa.RecordBatch]:
    parsed = SourceOptions.parse({"namesrvAddr": "127.0.0.1:1", "topic": "T", "tierUrl": url, **options})
    return list(read_tier_range(parsed, TierRange(part.topic, part.broker, 2, start, end, part.files)))


def test_each_part_of_a_file_is_its_offsets_in_order_with_the_source_columns(tiered) -> None:
    url, table, whole = tiered
    first = whole.start
    for start, end in ((first, first + ROWS), (first + 10, first + 4500), (first + 5000, first + 5001),
                       (first + TIER_ROW_GROUP_MESSAGES, first + 2 * TIER_ROW_GROUP_MESSAGES)):
        batches = _read(url, whole, start, end)
        assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
        got = pa.Table.from_batches(batches, ARROW_SCHEMA)
        want = table.select(SOURCE_COLUMNS).slice(start - first, end - start).cast(ARROW_SCHEMA)
        assert got.column("queue_offset").to_pylist() == list(range(start, end))
        assert got.equals(want), (start, end)


def test_a_range_spanning_two_files_reads_both_in_order(tiered) -> None:
    url, table, whole = tiered
    tier = Tier(FilesystemBackend(url.removeprefix("file://")))
    m = tier.manifest("T", "b")
    after = records_to_table(make_records("T", 2, whole.end, 500), "b")
    if len(m.segments) == 1:
        m, _ = tier.upload(m, after)
    files = tuple(m.queue(2))
    both = TierRange("T", "b", 2, whole.end - 20, whole.end + 30, files)
    got = pa.Table.from_batches(list(read_tier_range(SourceOptions.parse(
        {"namesrvAddr": "127.0.0.1:1", "topic": "T", "tierUrl": url}), both)), ARROW_SCHEMA)
    assert got.column("queue_offset").to_pylist() == list(range(whole.end - 20, whole.end + 30))
    assert got.column("body").to_pylist() == (table.column("body").slice(ROWS - 20).to_pylist()
                                             + after.column("body").slice(0, 30).to_pylist())


def test_only_the_row_groups_a_range_overlaps_are_read(tiered) -> None:
    url, _, whole = tiered
    first, g = whole.start, TIER_ROW_GROUP_MESSAGES
    f = pq.ParquetFile(f"{url.removeprefix('file://')}/{whole.files[0].file}")
    assert list(row_groups_within(f, first, first + ROWS)) == [0, 1, 2]
    assert list(row_groups_within(f, first + g, first + 2 * g)) == [1]
    assert list(row_groups_within(f, first + g - 1, first + g + 1)) == [0, 1]
    assert list(row_groups_within(f, first + ROWS, first + ROWS + 5)) == []
    # batches across row groups, at most BATCH rows each
    assert [b.num_rows for b in _read(url, whole, first + 10, first + g + 5)] == [g - 5]
    assert [b.num_rows for b in _read(url, whole, first, first + ROWS)] == [BATCH, 300]
    # row groups 1 and 2 only: one batch, both ends cut
    assert [b.num_rows for b in _read(url, whole, first + g + 1, first + ROWS - 1)] == [ROWS - g - 2]


def test_a_file_with_gaps_is_cut_at_offsets_it_lacks(tiered) -> None:
    url, table, _ = tiered
    tier = Tier(FilesystemBackend(url.removeprefix("file://")))
    gapped = records_to_table(make_records("T", 5, 0, 3000), "b")
    gapped = gapped.filter(pc.not_equal(pc.bit_wise_and(gapped.column("queue_offset"), 3), 0))  # 1, 2, 3, 5, 6, 7, 9 ...
    _, seg = tier.upload(tier.manifest("T", "b"), gapped)
    files = (seg,)
    parsed = SourceOptions.parse({"namesrvAddr": "127.0.0.1:1", "topic": "T", "tierUrl": url})
    for start, end in ((0, 3000), (4, 8), (5, 1001), (1000, 1004), (2999, 3000)):
        got = pa.Table.from_batches(list(read_tier_range(parsed, TierRange("T", "b", 5, start, end, files))), ARROW_SCHEMA)
        assert got.column("queue_offset").to_pylist() == [o for o in range(start, end) if o % 4], (start, end)


def test_without_properties_the_column_is_null(tiered) -> None:
    url, table, whole = tiered
    (batch,) = _read(url, whole, whole.start, whole.start + 50, includeProperties="false")
    assert batch.schema.equals(ARROW_SCHEMA) and batch.column("properties").null_count == 50
    assert batch.column("body").to_pylist() == table.column("body").slice(0, 50).to_pylist()


def test_a_file_other_than_the_manifests_is_refused(tiered) -> None:
    url, _, whole = tiered
    (one,) = whole.files
    other = TierRange(whole.topic, whole.broker, 2, whole.start, whole.end, (dataclasses.replace(one, sha256="0" * 64),))
    with pytest.raises(TierError, match="checksum .* is not the manifest's"):
        _read(url, other, whole.start, whole.end)


def test_a_range_inside_a_file_fetches_only_its_row_groups_and_checks_them(tiered, monkeypatch) -> None:
    url, table, whole = tiered
    backend = CountingBackend(url.removeprefix("file://"))
    monkeypatch.setattr(tier_read, "tier_of", lambda options: Tier(backend))
    (seg,) = whole.files
    first, g = whole.start, TIER_ROW_GROUP_MESSAGES
    got = pa.Table.from_batches(_read(url, whole, first + g + 1, first + g + 50), ARROW_SCHEMA)
    assert got.column("queue_offset").to_pylist() == list(range(first + g + 1, first + g + 50))
    assert got.equals(table.select(SOURCE_COLUMNS).slice(g + 1, 49).cast(ARROW_SCHEMA))
    assert backend.gets == [] and backend.ranges == [
        (seg.file, seg.footer.start, seg.footer.length), (seg.file, seg.row_groups[1].start, seg.row_groups[1].length)]
    backend.ranges.clear()
    assert [b.num_rows for b in _read(url, whole, first + g + 1, first + ROWS - 1)] == [ROWS - g - 2]
    last = seg.row_groups[2]  # the footer, then row groups 1 and 2 in one get
    assert backend.ranges[1:] == [(seg.file, seg.row_groups[1].start, last.start + last.length - seg.row_groups[1].start)]
    assert backend.gets == []
    backend.ranges.clear()
    assert [b.num_rows for b in _read(url, whole, first + 1, first + ROWS - 1)] == [BATCH - 1, 299]
    assert backend.gets == [] and backend.ranges[1:] == [  # every row group: the footer, then all in one get
        (seg.file, seg.row_groups[0].start, last.start + last.length - seg.row_groups[0].start)]
    _read(url, whole, first, first + ROWS)  # the whole file: one get, one hash, no footer first
    assert backend.gets == [seg.file] and len(backend.ranges) == 2
    damaged = dataclasses.replace(seg, row_groups=(seg.row_groups[0], seg.row_groups[1]._replace(sha256="0" * 64),
                                                   seg.row_groups[2]))
    with pytest.raises(TierError, match="row group 1.*checksum"):
        _read(url, dataclasses.replace(whole, files=(damaged,)), first + g + 1, first + g + 50)
