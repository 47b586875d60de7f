"""A compacted topic with ``tiered.storage=true`` tiers its compacted segments: the uploader
takes a queue only up to its compaction's cleaned point, read from the compacted segment, so
each tiered file holds the latest record of every key of its range at its offset (gaps where
compaction removed records), never dirty records a later pass would remove; and a read through
the tier (a broker whose local copy is gone) serves that view, moving past the gaps. A real
store, a real compaction, a filesystem tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.operations.pull import PullRequest
from skiff.broker.tier.reads import TierReads
from skiff.broker.tier.uploader import TierUploader
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import ManualClock
from skiff.common.stored_message import decode_records
from skiff.filter import ExpressionType, build_filter
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import GetResult, GetStatus, MessageStore
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY
from skiff.tier.backends import FilesystemBackend
from skiff.tier.tier import FileCache, Tier
from skiff.testing.waits import wait_for
from tests.unit.store.conftest import StoreFactory, message

DAY_MS = 86_400_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    factory = StoreFactory(tmp_path / "store")
    yield factory()
    for s in factory.stores:
        s.shutdown()


@pytest.fixture
def uploader(tmp_path: Path, store: MessageStore) -> TierUploader:
    clock = ManualClock()
    topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(tmp_path), clock,
                                schedule_queue_nums=2)
    topics.put(TopicConfig("T", 1, 1, attributes={"cleanup.policy": "COMPACTION", "tiered.storage": "true"}))
    tier = Tier(FilesystemBackend(str(tmp_path / "tier")), FileCache(1 << 20))
    return TierUploader(store, topics, tier, "broker-a", 0, clock)


def put(store: MessageStore, first: int, n: int) -> None:
    """Offsets first..first+n-1, key k<i % 4>, body v<i>."""
    for i in range(first, first + n):
        assert store.put_message(message(i, keys=f"k{i % 4}", body=f"v{i}".encode())).ok
    store.flush()


def compact(store: MessageStore) -> None:
    report = store.compact("T", 0, delete_retention_ms=DAY_MS, max_offset_map_size=1024 * OFFSET_MAP_BYTES_PER_ENTRY)
    assert report.passes


def tiered(uploader: TierUploader) -> list[list[tuple[int, str, str]]]:
    """(offset, keys, body) of each tiered file's rows, file by file, read back from the tier."""
    out = []
    for seg in uploader.manifest("T").queue(0):
        rows = pa.concat_tables(uploader.tier.row_group(seg, i) for i in range(uploader.tier.open(seg).num_row_groups))
        out.append(list(zip(rows.column("queue_offset").to_pylist(), rows.column("keys").to_pylist(),
                            (b.decode() for b in rows.column("body").to_pylist()))))
    return out


def latest(end: int) -> list[tuple[int, str, str]]:
    """The last record of each of the four keys before offset ``end``."""
    return [(i, f"k{i % 4}", f"v{i}") for i in range(end - 4, end)]


def test_only_the_compacted_segment_is_uploaded_the_latest_record_of_each_key(store: MessageStore,
                                                                              uploader: TierUploader) -> None:
    put(store, 0, 30)
    assert uploader.run().files == 0  # nothing compacted yet: nothing a later pass could remove goes up
    compact(store)
    assert uploader.run().rows == 4
    assert tiered(uploader) == [latest(30)]
    put(store, 30, 10)
    assert uploader.run().files == 0  # dirty again
    compact(store)
    assert uploader.run().rows == 4
    # each file: the latest of each key of its range (offsets 26-29 stay: the tier's files do not change)
    assert tiered(uploader) == [latest(30), latest(40)]
    (first, second) = uploader.manifest("T").queue(0)
    assert (first.first_offset, first.last_offset, first.rows, second.first_offset, second.rows) == (26, 29, 4, 36, 4)


def test_a_read_through_the_tier_serves_the_compacted_view_past_its_gaps(store: MessageStore,
                                                                         uploader: TierUploader) -> None:
    for first, n in ((0, 30), (30, 10)):
        put(store, first, n)
        compact(store)
        uploader.run()
    reads = TierReads(uploader.tier, uploader)
    everything = build_filter("*", ExpressionType.TAG)
    try:
        got: list[tuple[int, str]] = []
        offset = 0
        while offset < 40:  # a broker whose local copy starts at 40 (a slave after retention, say)
            local = GetResult(GetStatus.OFFSET_TOO_SMALL, offset, 40, 40)

            def fetched(at: int = offset, local: GetResult = local) -> GetResult | None:
                r = reads.read(PullRequest("G", "T", 0, at, 32), everything, local)
                return None if r.status is GetStatus.MESSAGE_WAS_REMOVING else r  # "retry": being fetched

            answer = wait_for(fetched, 10, "the tier's fetch")
            assert answer.status is GetStatus.FOUND, answer
            got += [(m.queue_offset, m.body.decode()) for m in decode_records(b"".join(bytes(b) for b in answer.buffers))]
            assert answer.next_begin_offset > offset
            offset = answer.next_begin_offset
        assert got == [(o, b) for o, _, b in latest(30) + latest(40)]
    finally:
        reads.close()
