"""Files a manifest stops listing (a compacted topic's rewrite, retention.tiered.ms's expiry) stay
in the tier, retired, for the tier's delete delay (the broker's tierFileDeleteDelayMs), so a reader
holding an older manifest (a Spark job planned before the rewrite, a slave) reads every row of
them; `Tier.delete_retired` deletes them once the delay has passed, deleting a file that is
already gone is no error, a retired file is never collected as an orphan, and a deleted topic's
tier takes them with the rest. Through the filesystem and S3 (moto's server) backends."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from skiff.common.clock import ManualClock
from skiff.tier.backends import FilesystemBackend, TierBackend, TierError
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest, ManifestError, RetiredFile, manifest_file
from skiff.tier.tier import FileCache, Tier
from tests.unit.tier.records import make_records

DELAY_MS = 60_000


def keyed(first: int, n: int, keys: int) -> pa.Table:
    """Queue 0's rows first..first+n-1 of a compacted topic, offset i keyed ``k<i % keys>``."""
    table = records_to_table(make_records("T", 0, first, n), "b")
    return table.set_column(table.schema.get_field_index("keys"), "keys",
                            pa.array([f"k{i % keys}" for i in range(first, first + n)], pa.string()))


def rows(tier: Tier, manifest: Manifest) -> list[tuple[int, bytes]]:
    """(offset, body) of queue 0 as a reader holding ``manifest`` reads it."""
    t = tier.read(manifest, 0, 0, 1000)
    return list(zip(t.column("queue_offset").to_pylist(), t.column("body").to_pylist()))


def fresh(tier: Tier) -> Tier:
    """Another reader of the same tier (its own, empty cache: a Spark executor, a slave)."""
    return Tier(tier.backend, FileCache(1 << 20))


def test_a_reader_holding_the_manifest_from_before_a_rewrite_reads_every_row_until_the_delay(
        backend: TierBackend) -> None:
    clock = ManualClock()
    tier = Tier(backend, FileCache(1 << 20), clock=clock, delete_delay_ms=DELAY_MS)
    m0, old = tier.upload(tier.manifest("T", "b"), keyed(0, 8, keys=8), compacted=True)
    planned = tier.manifest("T", "b")  # what a Spark job plans from
    before = rows(fresh(tier), planned)
    assert [o for o, _ in before] == list(range(8))
    clock.advance(1000)
    m1, _ = tier.upload(m0, keyed(8, 4, keys=4), compacted=True)  # k0..k3 again: offsets 0..3 superseded
    assert tier.manifest("T", "b") == m1
    assert m1.retired == tuple(RetiredFile(f, clock.now_ms()) for f in old.files()) and old.index is not None
    assert [o for o, _ in rows(tier, m1)] == [4, 5, 6, 7, 8, 9, 10, 11]  # retired files are not segments
    assert rows(fresh(tier), planned) == before  # the old plan still reads every row of the replaced file

    backend.put("T/b/0/stray.parquet", b"an upload cut off before its manifest")
    assert tier.collect_orphans(m1) == ["T/b/0/stray.parquet"]  # the retired files are not orphans
    clock.advance(DELAY_MS - 1)
    assert tier.delete_retired(m1) is m1  # not due yet: nothing deleted, nothing written
    assert rows(fresh(tier), planned) == before

    clock.advance(1)
    m2 = tier.delete_retired(m1)
    assert m2.retired == () and m2.segments == m1.segments and tier.manifest("T", "b") == m2
    assert not any(backend.exists(f) for f in old.files())
    assert set(backend.list("T/")) == m2.listed_files() | {manifest_file("T", "b")}
    with pytest.raises(TierError):
        rows(fresh(tier), planned)  # past the delay, the old plan fails as a job longer than it does
    assert tier.delete_retired(m1) == m2  # a pass after a crash between deletion and manifest: already gone is fine


def test_expired_files_are_retired_and_a_deleted_topic_takes_them_with_the_rest(tmp_path) -> None:
    clock = ManualClock()
    tier = Tier(FilesystemBackend(str(tmp_path)), FileCache(1 << 20), clock=clock, delete_delay_ms=DELAY_MS)
    m = tier.manifest("T", "b")
    for first, t0 in ((0, 1_000_000), (10, 2_000_000), (20, 3_000_000)):
        m, _ = tier.upload(m, records_to_table(make_records("T", 0, first, 10, t0_ms=t0 - first), "b"))
    planned = m
    kept, gone = tier.expire(m, 2_500_000)
    assert [s.first_offset for s in gone] == [0, 10]
    assert {r.file for r in kept.retired} == {f for s in gone for f in s.files()}
    assert [o for o, _ in rows(tier, kept)] == list(range(20, 30))
    assert [o for o, _ in rows(fresh(tier), planned)] == list(range(30))  # expired, still readable meanwhile
    assert tier.delete(kept) == 7  # three files and their indexes (four of them retired), the manifest
    assert list(tier.backend.list("T/")) == []


def test_a_manifest_without_retired_files_reads_as_before_and_one_with_them_round_trips() -> None:
    tier_json = {"version": 1, "topic": "T", "broker": "b", "segments": [
        {"queueId": 0, "firstOffset": 0, "lastOffset": 9, "firstStoreMs": 1, "lastStoreMs": 2,
         "file": "T/b/0/a.parquet", "rows": 10, "bytes": 100, "sha256": "00"}]}
    old = Manifest.from_bytes(json.dumps(tier_json).encode())  # written before retired files existed
    assert old.retired == () and b"retired" not in old.to_bytes()
    (seg,) = old.segments
    gone = Manifest("T", "b").with_segment(seg).without([seg])
    retired = gone.retiring([seg], 5).retiring([seg], 9)  # retired once, at the first time
    assert retired.retired == (RetiredFile("T/b/0/a.parquet", 5),)
    assert old.retiring([seg], 5) is old  # a listed file is never retired
    assert Manifest.from_bytes(retired.to_bytes()) == retired
    assert retired.due(10, 14) == [] and retired.due(10, 15) == list(retired.retired)
    with pytest.raises(ManifestError, match="retired"):
        Manifest.from_bytes(json.dumps({**tier_json, "retired": [{"file": "x"}]}).encode())
    with pytest.raises(ManifestError, match="retired"):
        Manifest.from_bytes(json.dumps({**tier_json, "retired": "x"}).encode())


def test_a_negative_delay_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="0 ms or more"):
        Tier(FilesystemBackend(str(tmp_path)), delete_delay_ms=-1)


@pytest.mark.spark  # the source's modules (no session): the driver's planning, the executor's read
def test_a_spark_read_planned_before_a_rewrite_reads_the_replaced_file_on_its_executors(tmp_path) -> None:
    from skiff.spark.options import SourceOptions
    from skiff.spark.pull import QueueRange
    from skiff.spark.tier_plan import TierRange, split
    from skiff.spark.tier_read import read_tier_range

    clock = ManualClock()
    tier = Tier(FilesystemBackend(str(tmp_path)), FileCache(1 << 20), clock=clock, delete_delay_ms=DELAY_MS)
    m0, _ = tier.upload(tier.manifest("T", "b"), keyed(0, 8, keys=8), compacted=True)
    options = SourceOptions.parse({"namesrvAddr": "127.0.0.1:1", "topic": "T", "tierUrl": f"file://{tmp_path}"})
    (part,) = split(options, [QueueRange("T", "b", 0, 0, 8, compacted=True)])  # the driver plans
    assert isinstance(part, TierRange)
    m1, _ = tier.upload(m0, keyed(8, 4, keys=4), compacted=True)  # the rewrite lands before the tasks run
    got = pa.Table.from_batches(list(read_tier_range(options, part)))  # an executor
    assert got.column("queue_offset").to_pylist() == list(range(8))
    assert got.column("body").to_pylist() == keyed(0, 8, keys=8).column("body").to_pylist()
    clock.advance(DELAY_MS)
    tier.delete_retired(m1)  # a job still running past the delay fails, as documented
    with pytest.raises(TierError, match="does not exist"):
        list(read_tier_range(options, part))
