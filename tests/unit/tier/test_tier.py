"""The tier's format and backends: records to Parquet and back byte for byte, checksums,
idempotent uploads, a crash between a file and its manifest, the filesystem and S3 (moto)
backends."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from skiff.columnar.schema import SOURCE_COLUMNS
from skiff.common.stored_message import decode_records
from skiff.testing.s3 import moto_s3
from skiff.tier.backends import FilesystemBackend, S3Backend, TierBackend, TierError, backend_from_url
from skiff.tier.columns import records_to_table, rows_to_records
from skiff.tier.index import offsets_of, rows_with_key
from skiff.tier.manifest import Manifest, ManifestError, manifest_file
from skiff.tier.tier import FileCache, Tier
from tests.unit.tier.records import make_records


def test_records_become_source_rows_and_rebuild_byte_for_byte():
    records = make_records("Orders", 2, 10, 50)
    table = records_to_table(records, "broker-a")
    rows = table.select(SOURCE_COLUMNS).to_pylist()
    messages = decode_records(records)
    assert len(rows) == 50
    for row, m in zip(rows, messages):
        assert (row["topic"], row["broker"], row["queue_id"], row["queue_offset"]) == ("Orders", "broker-a", 2,
                                                                                        m.queue_offset)
        assert row["msg_id"] == m.msg_id and row["body"] == m.body and row["tags"] == m.tags
        assert row["keys"] == m.get_property("KEYS")
        assert dict(row["properties"]) == {"color": m.get_property("color")}
        assert int(row["store_timestamp"].timestamp() * 1000) == m.store_timestamp
        assert row["reconsume_times"] == m.reconsume_times
    assert rows_to_records(table) == records


def _tier(backend: TierBackend) -> Tier:
    return Tier(backend, FileCache(1 << 20))


def _upload_and_read(tier: Tier) -> None:
    m = tier.manifest("Orders", "b")
    assert m.segments == ()
    m, seg1 = tier.upload(m, records_to_table(make_records("Orders", 0, 0, 300), "b"))
    m, seg2 = tier.upload(m, records_to_table(make_records("Orders", 0, 300, 200), "b"))
    assert (seg1.first_offset, seg1.last_offset, seg2.first_offset, seg2.last_offset) == (0, 299, 300, 499)
    assert tier.manifest("Orders", "b") == m and m.end_offset(0) == 500 and m.remote_bytes() == seg1.size_bytes + seg2.size_bytes
    # a read across the two files, from an offset inside the first
    got = tier.read(tier.manifest("Orders", "b"), 0, 250, 100)
    assert rows_to_records(got) == make_records("Orders", 0, 250, 100)
    assert rows_to_records(tier.read(m, 0, 450, 1000)) == make_records("Orders", 0, 450, 50)
    assert tier.read(m, 0, 500, 10).num_rows == 0 and tier.read(m, 1, 0, 10).num_rows == 0


def test_filesystem_round_trip(tmp_path):
    _upload_and_read(_tier(FilesystemBackend(str(tmp_path))))


def test_s3_round_trip_idempotence_and_crash_between_file_and_manifest():
    with moto_s3() as s3:
        bucket = s3.bucket("tier")
        backend = S3Backend(bucket, "cluster1", client=s3.client())
        _upload_and_read(_tier(backend))
        _idempotent_and_crash(_tier(S3Backend(bucket, "other", client=s3.client())))


def test_filesystem_idempotence_and_crash_between_file_and_manifest(tmp_path):
    _idempotent_and_crash(_tier(FilesystemBackend(str(tmp_path))))


class _ManifestFails:
    """A backend that dies writing the manifest: the crash between a file and its manifest."""

    def __init__(self, inner: TierBackend) -> None:
        self.inner, self.url = inner, inner.url

    def put(self, key: str, data: bytes) -> None:
        if key.endswith("manifest.json"):
            raise TierError("killed before the manifest")
        self.inner.put(key, data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _idempotent_and_crash(tier: Tier) -> None:
    table = records_to_table(make_records("T", 1, 0, 40), "b")
    m1, seg = tier.upload(tier.manifest("T", "b"), table)
    m2, again = tier.upload(m1, table)  # a retry of the same upload
    assert again == seg and m2 == m1 and len(tier.manifest("T", "b").segments) == 1
    assert seg.index is not None
    assert sorted(tier.backend.list("T/")) == sorted([seg.file, seg.index.file, manifest_file("T", "b")])
    # the next file lands, its manifest does not: the manifest still ends at 40
    with pytest.raises(TierError):
        Tier(_ManifestFails(tier.backend)).upload(m2, records_to_table(make_records("T", 1, 40, 25), "b"))
    after = tier.manifest("T", "b")
    assert after == m1 and after.end_offset(1) == 40
    assert tier.read(after, 1, 40, 10).num_rows == 0  # the unlisted file is not data
    assert len(list(tier.backend.list("T/b/1/"))) == 4  # two files, two key indexes
    assert sorted(tier.collect_orphans(after)) == ["T/b/1/00000000000000000040-00000000000000000064.keys",
                                                   "T/b/1/00000000000000000040-00000000000000000064.parquet"]
    # the retry after the restart succeeds and reads back
    m3, _ = tier.upload(after, records_to_table(make_records("T", 1, 40, 30), "b"))
    assert rows_to_records(tier.read(tier.manifest("T", "b"), 1, 0, 100)) == make_records("T", 1, 0, 70)


def test_checksum_refuses_a_replaced_file(tmp_path):
    backend = FilesystemBackend(str(tmp_path))
    tier = _tier(backend)
    m, seg = tier.upload(tier.manifest("T", "b"), records_to_table(make_records("T", 0, 0, 20), "b"))
    other, _ = Tier(FilesystemBackend(str(tmp_path / "x"))).upload(
        Manifest("T", "b"), records_to_table(make_records("T", 0, 0, 19), "b"))
    backend.put(seg.file, FilesystemBackend(str(tmp_path / "x")).get(other.segments[0].file))
    with pytest.raises(TierError, match="checksum"):
        _tier(backend).read(m, 0, 0, 5)


def test_manifest_refuses_a_gap_and_bad_json(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    m, _ = tier.upload(tier.manifest("T", "b"), records_to_table(make_records("T", 0, 0, 10), "b"))
    with pytest.raises(ManifestError, match="overlaps"):
        tier.upload(m, records_to_table(make_records("T", 0, 9, 5), "b"))
    tier.backend.put(manifest_file("T", "b"), b"{not json")
    with pytest.raises(ManifestError, match="not JSON"):
        tier.manifest("T", "b")


def test_backend_urls(tmp_path):
    assert isinstance(backend_from_url(f"file://{tmp_path}"), FilesystemBackend)
    with pytest.raises(TierError, match="write file:///"):
        backend_from_url("ftp://x/y")
    with pytest.raises(TierError, match="leaves"):
        FilesystemBackend(str(tmp_path)).put("../escape", b"x")


def test_source_columns_equal_what_the_spark_source_decodes_from_a_pull():
    from skiff.common.message import MessageQueue
    from skiff.columnar.arrow_decode import decode_run
    from skiff.columnar.schema import ARROW_SCHEMA

    records = make_records("Orders", 3, 0, 64)
    pulled = decode_run(records, None, MessageQueue("Orders", "broker-a", 3))
    tiered = records_to_table(records, "broker-a").select(SOURCE_COLUMNS)
    assert tiered.schema == ARROW_SCHEMA
    assert tiered.to_pylist() == pa.Table.from_batches([pulled]).to_pylist()


def test_expiry_drops_old_files_but_each_queues_newest(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    m = tier.manifest("T", "b")
    for first, t0 in ((0, 1_000_000), (10, 2_000_000), (20, 3_000_000)):
        m, _ = tier.upload(m, records_to_table(make_records("T", 0, first, 10, t0_ms=t0 - first), "b"))
    m, _ = tier.upload(m, records_to_table(make_records("T", 1, 0, 5, t0_ms=1_000_000), "b"))
    kept, gone = tier.expire(m, 2_500_000)
    assert [(s.queue_id, s.first_offset) for s in gone] == [(0, 0), (0, 10)]  # queue 1's only file stays
    assert tier.manifest("T", "b") == kept and kept.end_offset(0) == 30 and kept.first_offset(0) == 20
    newest = kept.queue(0)[0]
    assert newest.index is not None and sorted(tier.backend.list("T/b/0/")) == [newest.index.file, newest.file]
    assert rows_to_records(tier.read(kept, 0, 0, 100)) == make_records("T", 0, 20, 10, t0_ms=3_000_000 - 20)


def test_key_index_finds_every_key_and_unique_key_of_a_file_and_nothing_else(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    records = make_records("T", 0, 0, 50)
    m, seg = tier.upload(tier.manifest("T", "b"), records_to_table(records, "b"))
    assert seg.index is not None and seg.index.size_bytes < seg.size_bytes
    index = tier.key_index(seg)
    assert offsets_of(index, "k17") == [17]
    assert offsets_of(index, "k3") == [3, 10, 17, 24, 31, 38, 45]  # 3 is also every 7th message's second key
    assert offsets_of(index, "ID0000001F") == [31]  # UNIQ_KEY
    assert offsets_of(index, "nope") == []
    rows = rows_with_key(tier.rows_where(seg, "queue_offset", offsets_of(index, "k3")), "k3")
    assert rows.column("queue_offset").to_pylist() == [3, 10, 17, 24, 31, 38, 45]
    assert rows_to_records(rows.slice(0, 1)) == make_records("T", 0, 3, 1)
    # the index is checked as the file is, and a file without one (an older upload) is indexed from its columns
    assert tier.key_index(replace(seg, index=None)).equals(index)
    tier.backend.put(seg.index.file, b"x" * seg.index.size_bytes)
    with pytest.raises(TierError, match="checksum"):
        _tier(tier.backend).key_index(seg)


def test_manifest_keeps_the_commit_log_span_and_index_and_reads_segments_without_them(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    m, seg = tier.upload(tier.manifest("T", "b"), records_to_table(make_records("T", 0, 0, 20), "b"))
    assert (seg.min_commit_log_offset, seg.max_commit_log_offset) == (1000, 1000 + 100 * 19)
    assert seg.holds_commit_log_offset(1500) and not seg.holds_commit_log_offset(999)
    assert tier.rows_where(seg, "commit_log_offset", [1500]).column("queue_offset").to_pylist() == [5]
    assert Manifest.from_bytes(m.to_bytes()) == m
    old = Manifest.from_bytes(Manifest("T", "b", (replace(seg, index=None, min_commit_log_offset=-1,
                                                          max_commit_log_offset=-1),)).to_bytes())
    assert old.segments[0].index is None and not old.segments[0].holds_commit_log_offset(1500)


def test_files_uploaded_before_key_indexes_get_them_a_few_files_at_a_time(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    m = tier.manifest("T", "b")
    for first in (0, 20, 40):
        m, _ = tier.upload(m, records_to_table(make_records("T", 0, first, 20), "b"))
    # as a broker from before indexes left them: no index file, no CommitLog span
    old = Manifest("T", "b", tuple(replace(s, index=None, min_commit_log_offset=-1, max_commit_log_offset=-1)
                                   for s in m.segments))
    for seg in m.segments:
        assert seg.index is not None
        tier.backend.delete(seg.index.file)
    tier.write_manifest(old)
    part = tier.index_old(tier.manifest("T", "b"), 2)
    assert part.segments == m.segments[:2] + old.segments[2:] and tier.manifest("T", "b") == part
    done = tier.index_old(part, 2)
    assert done == m and tier.manifest("T", "b") == m  # the same index and span an upload now records
    assert tier.index_old(done, 2) is done  # nothing left: no write
    assert offsets_of(_tier(tier.backend).key_index(done.segments[2]), "k45") == [45]
    assert done.segments[1].holds_commit_log_offset(1000 + 100 * 25)


def test_offset_at_time_reads_a_file_only_when_the_time_falls_inside_it(tmp_path):
    tier = _tier(FilesystemBackend(str(tmp_path)))
    t0 = 1_700_000_000_000
    m, seg = tier.upload(tier.manifest("T", "b"), records_to_table(make_records("T", 0, 10, 20, t0_ms=t0), "b"))
    # store time of offset i is t0 + i + 1
    assert tier.offset_at_time(seg, 0) == (10, seg.first_store_ms) and tier.cache.size_bytes == 0  # no fetch
    assert tier.offset_at_time(seg, t0 + 31) is None and tier.offset_at_time(seg, t0 + 30) == (29, t0 + 30)
    assert tier.offset_at_time(seg, t0 + 16) == (15, t0 + 16)
    assert tier.offset_at_time(seg, t0 + 29) == (28, t0 + 29)
