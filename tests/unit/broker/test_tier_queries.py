"""The tier's part of queries by key, message id and time (`skiff.broker.tier.queries`), over a
real filesystem tier of two files of one queue: what each finds, what it leaves to the local
store (hits it already answered, files whose records are all still local), its limits."""

from __future__ import annotations

from types import SimpleNamespace

from skiff.broker.tier.queries import TierQueries
from skiff.common.stored_message import decode_records
from skiff.protocol.bodies.topic import TopicConfig
from skiff.tier.backends import FilesystemBackend
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest
from skiff.tier.tier import FileCache, Tier
from tests.unit.tier.records import make_records

T0 = 1_700_000_000_000  # make_records: offset i stored at T0 + i + 1, CommitLog offset 1000 + 100 i, keys k<i> k<i % 7>


def _queries(tmp_path) -> tuple[TierQueries, Manifest]:
    tier = Tier(FilesystemBackend(str(tmp_path)), FileCache(1 << 20))
    m = tier.manifest("T", "b")
    for first in (0, 30):
        m, _ = tier.upload(m, records_to_table(make_records("T", 0, first, 30), "b"))
    topics = [TopicConfig("T", 1, 1, attributes={"tiered.storage": "true"})]
    service = SimpleNamespace(tier=tier, manifest_of=lambda topic: m if topic == "T" else None,
                              uploader=SimpleNamespace(tiered_topics=lambda: iter(topics)))
    return TierQueries(service), m  # type: ignore[arg-type]


def _offsets(records: list[bytes]) -> list[int]:
    return [decode_records(r)[0].queue_offset for r in records]


def test_by_key_finds_across_files_newest_first_within_the_range_and_the_limit(tmp_path) -> None:
    q, _ = _queries(tmp_path)
    every = [i for i in range(60) if i % 7 == 3 or i == 3]
    assert _offsets(q.by_key("T", "k3", 0, 2 * T0, 64, set(), None)) == sorted(every, reverse=True)
    assert _offsets(q.by_key("T", "k3", 0, 2 * T0, 2, set(), None)) == [59, 52]
    assert _offsets(q.by_key("T", "k3", T0 + 11, T0 + 32, 64, set(), None)) == [31, 24, 17, 10]
    assert _offsets(q.by_key("T", "ID0000002A", 0, 2 * T0, 64, set(), None)) == [42]  # a UNIQ_KEY
    assert q.by_key("T", "k99", 0, 2 * T0, 64, set(), None) == [] and q.by_key("U", "k3", 0, 2 * T0, 64, set(), None) == []


def test_by_key_leaves_out_what_the_local_store_answered(tmp_path) -> None:
    q, m = _queries(tmp_path)
    assert _offsets(q.by_key("T", "k3", 0, 2 * T0, 64, {1000 + 100 * 59, 1000 + 100 * 52}, None)) == [45, 38, 31, 24, 17, 10, 3]
    second = m.queue(0)[1]
    # the second file's records are all at or above the CommitLog's first offset: not read
    assert _offsets(q.by_key("T", "k3", 0, 2 * T0, 64, set(), second.min_commit_log_offset)) == [24, 17, 10, 3]


def test_by_commit_log_offset_finds_the_record_stored_there(tmp_path) -> None:
    q, _ = _queries(tmp_path)
    (m,) = decode_records(q.by_commit_log_offset(1000 + 100 * 41) or b"")
    assert (m.queue_offset, m.commit_log_offset, m.body) == (41, 5100, b"body-41-" * 2)
    assert q.by_commit_log_offset(1050) is None and q.by_commit_log_offset(10**9) is None


def test_offset_at_time_and_earliest_store_time_stop_at_what_is_local(tmp_path) -> None:
    q, _ = _queries(tmp_path)
    assert q.offset_at_time("T", 0, 0, 45) == (0, T0 + 1)
    assert q.offset_at_time("T", 0, T0 + 36, 45) == (35, T0 + 36)  # in the second file
    assert q.offset_at_time("T", 0, T0 + 50, 45) is None  # local from 45: the local answer stands
    assert q.offset_at_time("T", 0, T0 + 36, 30) is None  # the second file is all local
    assert q.earliest_store_time("T", 0, 45) == T0 + 1 and q.earliest_store_time("T", 0, 0) is None
