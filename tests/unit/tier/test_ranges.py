"""A tiered file read a row group at a time (`skiff.tier.ranges`): the ranges an upload records are
pyarrow's own, a row group read through its range equals the whole file's on the filesystem and
moto S3 backends, a damaged range or footer is refused by its checksum with nothing cached, and a
manifest without ranges (an older build's) still reads the whole file."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiff.common.limits import TIER_ROW_GROUP_MESSAGES
from skiff.tier.backends import FilesystemBackend, TierBackend, TierError
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest, ManifestError, Segment
from skiff.tier.ranges import file_ranges
from skiff.tier.tier import FileCache, Tier
from tests.unit.tier.counting_backend import CountingBackend
from tests.unit.tier.records import make_records
from tests.unit.tier.test_retired_files import keyed

ROWS = 2 * TIER_ROW_GROUP_MESSAGES + 500  # three row groups, the last one short
TABLE = records_to_table(make_records("T", 0, 0, ROWS), "b")


def test_get_range_reads_the_bytes_asked_for_and_refuses_a_bad_range(backend: TierBackend) -> None:
    data = bytes(range(256)) * 40
    backend.put("T/b/x", data)
    assert backend.get_range("T/b/x", 0, 10) == data[:10]
    assert backend.get_range("T/b/x", 1000, 2000) == data[1000:3000]
    assert backend.get_range("T/b/x", len(data) - 5, 5) == data[-5:]
    assert backend.get_range("T/b/x", len(data) - 5, 50) == data[-5:]  # past the end: fewer bytes
    with pytest.raises(ValueError, match="ranged read"):
        backend.get_range("T/b/x", 0, 0)
    with pytest.raises(TierError):
        backend.get_range("T/b/missing", 0, 10)


def test_the_ranges_recorded_are_pyarrows_column_chunks_and_footer(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)))
    _, seg = tier.upload(Manifest("T", "b"), TABLE)
    data = tier.backend.get(seg.file)
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert seg.ranged() and len(seg.row_groups) == meta.num_row_groups == 3
    for i, rng in enumerate(seg.row_groups):
        rg = meta.row_group(i)
        first, last = rg.column(0), rg.column(rg.num_columns - 1)
        start = first.dictionary_page_offset if first.has_dictionary_page else first.data_page_offset
        end = (last.dictionary_page_offset if last.has_dictionary_page else last.data_page_offset) + \
            last.total_compressed_size
        assert (rng.start, rng.start + rng.length) == (start, end)
    assert seg.row_groups[0].start == 4  # right after the leading PAR1
    assert all(a.start + a.length == b.start for a, b in zip(seg.row_groups, seg.row_groups[1:]))
    assert seg.footer is not None and seg.footer.start + seg.footer.length == len(data) == seg.size_bytes
    assert seg.footer.length == meta.serialized_size + 8
    assert (seg.row_groups, seg.footer) == file_ranges(data)


def test_each_row_group_read_through_its_range_equals_the_whole_files(backend: TierBackend) -> None:
    _, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    whole = pq.ParquetFile(pa.BufferReader(backend.get(seg.file)))
    ranged = Tier(backend, FileCache(1 << 20))
    for i in range(3):
        got = ranged.row_group(seg, i)
        assert got.equals(whole.read_row_group(i))
        assert got.column("queue_offset").to_pylist() == list(range(i * TIER_ROW_GROUP_MESSAGES,
                                                                     min(ROWS, (i + 1) * TIER_ROW_GROUP_MESSAGES)))
    assert ranged.cache.get(seg.file) is None  # never fetched whole
    assert ranged.row_group_index(seg, TIER_ROW_GROUP_MESSAGES + 7) == 1 and ranged.row_group_index(seg, ROWS) is None


def test_a_first_read_fetches_the_footer_and_its_row_group_only(tmp_path) -> None:
    backend = CountingBackend(str(tmp_path))
    _, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    tier = Tier(backend)
    assert tier.row_group(seg, 2).num_rows == 500
    assert seg.footer is not None and backend.gets == []
    assert backend.ranges == [(seg.file, seg.footer.start, seg.footer.length),
                              (seg.file, seg.row_groups[2].start, seg.row_groups[2].length)]
    tier.row_group(seg, 0)  # the footer is cached: one more ranged get
    assert backend.ranges[2:] == [(seg.file, seg.row_groups[0].start, seg.row_groups[0].length)]


@pytest.mark.parametrize("where", ["row group 1", "footer"])
def test_a_damaged_range_is_refused_by_its_checksum_and_nothing_is_cached(tmp_path, where: str) -> None:
    backend = FilesystemBackend(str(tmp_path))
    _, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    assert seg.footer is not None
    rng = seg.row_groups[1] if where == "row group 1" else seg.footer
    data = bytearray(backend.get(seg.file))
    data[rng.start + rng.length // 2] ^= 0xFF
    backend.put(seg.file, bytes(data))
    tier = Tier(backend, FileCache(1 << 20))
    with pytest.raises(TierError, match=f"{where}.*checksum"):
        tier.row_group(seg, 1)
    assert tier.cache.get(seg.file) is None
    if where == "footer":
        assert tier.cached_layout(seg) is None
    else:  # the footer matched and is kept; the other row groups are whole and served
        assert tier.cached_layout(seg) is not None
        assert tier.row_group(seg, 0).column("queue_offset").to_pylist() == list(range(TIER_ROW_GROUP_MESSAGES))
        with pytest.raises(TierError, match="checksum"):
            tier.row_group(seg, 1)


def test_a_manifest_without_ranges_reads_the_whole_file(tmp_path) -> None:
    backend = CountingBackend(str(tmp_path))
    m, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    older = Segment.from_json({k: v for k, v in seg.to_json().items() if k not in ("rowGroups", "footer")})
    assert older == replace(seg, row_groups=(), footer=None) and not older.ranged()
    tier = Tier(backend)
    assert tier.row_group(older, 1).equals(Tier(backend).row_group(seg, 1))
    assert backend.gets == [seg.file] and tier.cached_layout(older) is not None


def test_the_manifest_carries_ranges_and_older_readers_ignore_them(tmp_path) -> None:
    m, seg = Tier(FilesystemBackend(str(tmp_path))).upload(Manifest("T", "b"), TABLE)
    body = json.loads(m.to_bytes())
    assert seg.footer is not None
    assert body["segments"][0]["footer"] == [seg.footer.start, seg.footer.length, seg.footer.sha256]
    assert body["segments"][0]["rowGroups"] == [[r.start, r.length, r.sha256] for r in seg.row_groups]
    assert Manifest.from_bytes(m.to_bytes()) == m
    body["segments"][0]["aFieldOfALaterBuild"] = {"x": 1}  # unknown fields are ignored
    assert Manifest.from_bytes(json.dumps(body).encode()) == m
    del body["segments"][0]["footer"]
    with pytest.raises(ManifestError, match="go together"):
        Manifest.from_bytes(json.dumps(body).encode())
    with pytest.raises(ManifestError, match="byte range"):
        Segment.from_json({**seg.to_json(), "footer": [1, -2, "x"]})


def test_a_compacted_rewrite_records_its_new_files_ranges(tmp_path) -> None:
    tier = Tier(FilesystemBackend(str(tmp_path)))
    m, old = tier.upload(Manifest("T", "b"), keyed(0, 300, keys=300), compacted=True)
    m, _ = tier.upload(m, keyed(300, 20, keys=300), compacted=True)  # k0..k19 again: old loses offsets 0..19
    rewritten = m.queue(0)[0]
    assert rewritten.file != old.file and rewritten.rows == 280 and rewritten.ranged()
    assert (rewritten.row_groups, rewritten.footer) == file_ranges(tier.backend.get(rewritten.file))
    assert rewritten.row_groups != old.row_groups
    assert tier.row_group(rewritten, 0).equals(tier.open(rewritten).read_row_group(0))


def test_reads_queries_and_searches_by_time_fetch_only_the_row_groups_they_need(tmp_path) -> None:
    backend = CountingBackend(str(tmp_path))
    m, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    whole = Tier(backend)  # the same file, read whole: what each answer must equal
    older = replace(seg, row_groups=(), footer=None)
    g = TIER_ROW_GROUP_MESSAGES
    tier = Tier(backend)
    backend.ranges.clear()

    def fetched() -> list[int]:
        """The row groups fetched since the last call (the footer left out)."""
        groups = [seg.row_groups.index(next(r for r in seg.row_groups if r.start == start))
                  for _, start, _ in backend.ranges if start != seg.footer.start]
        backend.ranges.clear()
        return groups

    assert seg.footer is not None
    got = tier.rows_where(seg, "queue_offset", [g + 7, g + 9])
    assert got.column("queue_offset").to_pylist() == [g + 7, g + 9] and fetched() == [1]
    assert got.equals(whole.rows_where(older, "queue_offset", [g + 7, g + 9]))
    assert tier.rows_where(seg, "queue_offset", [ROWS + 5]).num_rows == 0 and fetched() == []
    t0_ms = 1_700_000_000_000 + 1  # make_records: offset i stored at t0 + i + 1 ms
    at = tier.offset_at_time(seg, t0_ms + 2 * g + 3)
    assert at == (2 * g + 3, t0_ms + 2 * g + 3) and fetched() == [2]
    assert at == whole.offset_at_time(older, t0_ms + 2 * g + 3)
    rows = tier.read(m, 0, g - 5, 10)
    assert rows.column("queue_offset").to_pylist() == list(range(g - 5, g + 5)) and fetched() == [0, 1]
    assert rows.equals(whole.read(Manifest("T", "b", (older,)), 0, g - 5, 10))
    assert backend.gets == [seg.file]  # only `whole`'s read of the file without ranges


def test_adjacent_row_groups_are_fetched_in_one_get_each_checked(tmp_path) -> None:
    backend = CountingBackend(str(tmp_path))
    _, seg = Tier(backend).upload(Manifest("T", "b"), TABLE)
    tier = Tier(backend)
    footer = tier.fetch_footer(seg)
    backend.ranges.clear()
    f = tier.fetch_row_groups(seg, footer, [1, 2])
    first, last = seg.row_groups[1], seg.row_groups[2]
    assert backend.ranges == [(seg.file, first.start, last.start + last.length - first.start)]
    assert f.read_row_groups([1, 2]).column("queue_offset").to_pylist() == list(range(TIER_ROW_GROUP_MESSAGES, ROWS))
    data = bytearray(backend.get(seg.file))
    data[last.start + last.length // 2] ^= 0xFF  # row group 2 damaged, fetched together with row group 1
    backend.put(seg.file, bytes(data))
    with pytest.raises(TierError, match="row group 2.*checksum"):
        tier.fetch_row_groups(seg, footer, [1, 2])
    assert tier.fetch_row_groups(seg, footer, [0, 1]).read_row_group(1).num_rows == TIER_ROW_GROUP_MESSAGES
