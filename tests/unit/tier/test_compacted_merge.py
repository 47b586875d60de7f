"""A compacted topic's tier merges adjacent small files of a queue (`Tier.rewrite`,
`merge_groups`), as Kafka's log cleaner groups small segments: rewrites shrink files, and
without merging a queue ends as ever more small files that each upload fetches. A merged file
serves exactly the rows of the files it replaces, through reads, queries by key and by
offsetMsgId; the queue's newest file, which says where the tier ends, is never merged. A real
store, a real compaction, a filesystem tier."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from skiff.broker.tier.queries import TierQueries
from skiff.broker.tier.uploader import TierUploader
from skiff.common.clock import ManualClock
from skiff.common.stored_message import decode_records
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.tier.columns import rows_to_records
from skiff.tier.index import key_index
from skiff.tier.manifest import Segment
from skiff.tier.tier import merge_groups
from tests.unit.store.conftest import message
from tests.unit.tier.test_compacted_upload import (DAY_MS, compact, files_in_tier, listed, local_view, make_uploader, put,
                                                   tiered, upload_round)


def _seg(first: int, last: int, rows: int, size: int) -> Segment:
    return Segment(0, first, last, 0, 0, f"f{first}", rows, size, "")


def test_merge_groups_join_adjacent_files_within_the_bytes_and_rows_and_leave_out_empty_ones() -> None:
    a, b, c, d, e = (_seg(0, 9, 10, 400), _seg(10, 19, 10, 500), _seg(20, 29, 10, 300), _seg(30, 39, 10, 900),
                     _seg(40, 49, 10, 100))
    groups = merge_groups([a, b, c, d, e], {}, max_bytes=1000, max_rows=100)
    assert groups == [[a, b], [c], [d, e]]  # a+b+c is 1200 bytes; c+d 1200
    assert merge_groups([a, b, c, d, e], {}, max_bytes=1000, max_rows=15) == [[a], [b], [c], [d], [e]]
    # b rewritten keeping 2 of its 10 rows counts 100 bytes; c left with none goes (in no group)
    assert merge_groups([a, b, c, d, e], {b: 2, c: 0}, max_bytes=1000, max_rows=100) == [[a, b], [d, e]]
    assert merge_groups([], {}) == []


def _records(store: MessageStore) -> list[bytes]:
    """Every record a pull of the queue from its first offset returns, as stored."""
    out: list[bytes] = []
    offset = store.get_min_offset("T", 0)
    while offset < store.get_max_offset("T", 0):
        got = store.get_messages("T", 0, offset, 32)
        data = b"".join(bytes(b) for b in got.buffers)
        pos = 0
        for m in decode_records(data):
            out.append(data[pos:pos + m.store_size])
            pos += m.store_size
        offset = got.next_begin_offset
    return out


def _tier_records(uploader: TierUploader) -> list[bytes]:
    """Every record the tier serves for the queue from offset 0 (`Tier.read`), rebuilt."""
    m = uploader.tier.manifest("T", "broker-a")
    rows = uploader.tier.read(m, 0, 0, 1 << 20)
    data = rows_to_records(rows)
    out, pos = [], 0
    for r in decode_records(data):
        out.append(data[pos:pos + r.store_size])
        pos += r.store_size
    return out


def test_many_rounds_of_keys_spread_over_the_history_keep_few_files_and_the_compacted_view(
        tmp_path: Path, store: MessageStore, clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock)
    rng = random.Random(25)
    rounds, per_round, keys = 14, 25, 60
    for r in range(rounds):
        for i in range(r * per_round, (r + 1) * per_round):
            assert store.put_message(message(i, keys=f"k{rng.randrange(keys)}", body=f"v{i}".encode() * (1 + i % 3),
                                             extra={"color": f"c{i % 5}"})).ok
        store.flush()
        compact(store)
        uploader.run()
        if r == 0:  # merged files of about three upload files of this test
            uploader.tier.merge_max_bytes = 3 * uploader.manifest("T").queue(0)[0].size_bytes
        clock.advance(1000)
        segs = uploader.manifest("T").queue(0)
        # the tier serves exactly what the compacted queue serves: same records, byte for byte
        assert _tier_records(uploader) == _records(store), f"round {r}"
        assert [row for f in tiered(uploader) for row in f] == local_view(store)
        assert len(segs) <= 2 * sum(s.size_bytes for s in segs) // uploader.tier.merge_max_bytes + 2, segs
        assert files_in_tier(uploader) == listed(uploader)  # merged originals deleted (no delay here)
        for seg in segs:  # each index, made from the indexes of the files it replaced, is its rows' own
            assert uploader.tier.key_index(seg).equals(key_index(uploader.tier.open(seg).read())), seg
    segs = uploader.manifest("T").queue(0)
    assert len(segs) <= 4, [(s.first_offset, s.last_offset, s.size_bytes) for s in segs]  # 14 without merging
    assert any(s.last_offset - s.first_offset + 1 > 2 * per_round for s in segs)  # spans several uploads
    assert segs[-1].last_offset + 1 == store.get_max_offset("T", 0)


def _queries(uploader: TierUploader) -> TierQueries:
    topics = [TopicConfig("T", 1, 1, attributes={"tiered.storage": "true"})]
    service = SimpleNamespace(tier=uploader.tier, manifest_of=lambda topic: uploader.manifest(topic),
                              uploader=SimpleNamespace(tiered_topics=lambda: iter(topics)))
    return TierQueries(service)  # type: ignore[arg-type]


def test_a_merge_across_a_gap_serves_the_same_rows_and_queries_and_keeps_the_newest_file(
        tmp_path: Path, store: MessageStore, clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock, delete_delay_ms=60_000)
    put(store, 0, 30)  # latest of k0..k3: 26..29
    compact(store)
    uploader.run()
    clock.advance(1000)
    put(store, 30, 10, keys=2)  # 38, 39 supersede 28, 29: the first file keeps 26, 27 of 26..29
    compact(store)
    uploader.run()
    before = uploader.manifest("T")
    first, second = before.queue(0)
    assert (first.first_offset, first.last_offset, first.rows, second.first_offset, second.last_offset) == (26, 29, 2,
                                                                                                           38, 39)
    clock.advance(1000)
    for i in (40, 41):  # new keys: nothing superseded, the two older files merge
        assert store.put_message(message(i, keys=f"n{i}", body=f"v{i}".encode())).ok
    store.flush()
    compact(store)
    uploader.run()
    after = uploader.manifest("T")
    merged, newest = after.queue(0)
    assert (merged.first_offset, merged.last_offset, merged.rows) == (26, 39, 4)  # 28..37: a gap
    assert newest.file.endswith("00000000000000000040-00000000000000000041.parquet")  # as uploaded, not rewritten
    assert after.end_offset(0) == 42 and newest.rows == 2
    assert (merged.first_store_ms, merged.last_store_ms) == (first.first_store_ms, second.last_store_ms)
    assert (merged.min_commit_log_offset, merged.max_commit_log_offset) == (first.min_commit_log_offset,
                                                                            second.max_commit_log_offset)
    assert tiered(uploader) == [[(26, "k2", "v26"), (27, "k3", "v27"), (38, "k0", "v38"), (39, "k1", "v39")],
                                [(40, "n40", "v40"), (41, "n41", "v41")]]
    assert _tier_records(uploader) == _records(store)
    assert uploader.tier.read(after, 0, 28, 1).column("queue_offset").to_pylist() == [38]  # past the gap
    # the merged originals are retired by the manifest that lists the merged file, as replaced files are
    assert {r.file for r in after.retired} >= set(first.files()) | set(second.files())
    assert uploader.tier.read(before, 0, 0, 10).column("queue_offset").to_pylist() == [26, 27, 38, 39]  # old plan
    queries = _queries(uploader)
    (hit,) = decode_records(b"".join(queries.by_key("T", "k3", 0, 1 << 62, 8, set(), None)))
    assert (hit.queue_offset, hit.body) == (27, b"v27")  # the merged file's key index
    (row,) = decode_records(queries.by_commit_log_offset(merged.max_commit_log_offset) or b"")
    assert (row.queue_offset, row.body) == (39, b"v39")
    assert queries.by_commit_log_offset(second.min_commit_log_offset) is not None


def test_a_crash_before_the_manifest_that_lists_a_merged_file_leaves_the_old_view(
        tmp_path: Path, store: MessageStore, clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock)
    put(store, 0, 30)
    compact(store)
    uploader.run()
    put(store, 30, 10, keys=2)
    compact(store)
    uploader.run()
    old = tiered(uploader)
    assert store.put_message(message(40, keys="n40", body=b"v40")).ok
    store.flush()
    compact(store)

    def crash(at: str) -> None:
        if at == "rewrite-written":
            raise RuntimeError(at)

    uploader.tier.steps = crash
    with pytest.raises(RuntimeError):
        uploader.run()
    assert tiered(uploader) == old
    restarted = make_uploader(tmp_path, store, clock)  # collects the unlisted merged file, merges again
    restarted.run()
    assert tiered(restarted) == [[(26, "k2", "v26"), (27, "k3", "v27"), (38, "k0", "v38"), (39, "k1", "v39")],
                                 [(40, "n40", "v40")]]
    assert files_in_tier(restarted) == listed(restarted)


def test_a_file_shrunk_by_tombstone_expiry_merges_with_its_neighbour(tmp_path: Path, store: MessageStore,
                                                                      clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock)

    upload_round(store, uploader, 0, [f"t{i}" for i in range(6)] + ["a0", "a1"], tombstones=6)  # 0..5 tombstones
    upload_round(store, uploader, 8, [f"b{i}" for i in range(8)])
    first, second = uploader.manifest("T").queue(0)
    uploader.tier.merge_max_bytes = first.size_bytes + second.size_bytes - 1  # the two do not fit together
    upload_round(store, uploader, 16, [f"c{i}" for i in range(8)])
    assert [(s.first_offset, s.last_offset, s.rows) for s in uploader.manifest("T").queue(0)] == [(0, 7, 8), (8, 15, 8),
                                                                                                  (16, 23, 8)]
    clock.advance(DAY_MS + 1)  # past delete.retention.ms: the first file keeps a quarter of its rows
    uploader.run()
    segs = uploader.manifest("T").queue(0)
    assert [(s.first_offset, s.last_offset, s.rows, s.oldest_tombstone_ms) for s in segs] == [(0, 15, 10, -1),
                                                                                             (16, 23, 8, -1)]
    assert segs[-1].file.endswith("00000000000000000016-00000000000000000023.parquet")  # the newest, as uploaded
    assert [[o for o, _, _ in f] for f in tiered(uploader)] == [[6, 7, *range(8, 16)], list(range(16, 24))]
    assert files_in_tier(uploader) == listed(uploader)
