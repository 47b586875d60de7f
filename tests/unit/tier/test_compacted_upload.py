"""A compacted topic with ``tiered.storage=true`` tiers its compacted segments: the uploader
takes a queue only up to its compaction's cleaned point, read from the compacted segment, so
the tier holds the latest record of every key at its offset (gaps where compaction removed
records), never dirty records a later pass would remove. A key a newer file holds is taken out
of the older files (rewritten under new keys, the manifest written last), the compacted
segment's uploaded records leave the disk once old enough, and a read through the tier serves
that view, moving past the gaps. A real store, a real compaction, a filesystem tier."""

from __future__ import annotations

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
from skiff.tier.backends import FilesystemBackend, TierError
from skiff.tier.tier import FileCache, Tier
from skiff.testing.waits import wait_for
from tests.unit.store.conftest import message

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
ATTRS = {"cleanup.policy": "COMPACTION", "tiered.storage": "true", "retention.local.ms": str(HOUR_MS)}


class Crash(Exception):
    """Raised from the tier's step hook: the process dies there."""


def make_uploader(tmp_path: Path, store: MessageStore, clock: ManualClock, delete_delay_ms: int = 0) -> TierUploader:
    """The master's uploader, as a (re)started broker makes it: the manifest read from the tier
    (replaced files deleted at once unless ``delete_delay_ms``, tierFileDeleteDelayMs, is given)."""
    topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(tmp_path), clock,
                                schedule_queue_nums=2)
    topics.put(TopicConfig("T", 1, 1, attributes=ATTRS))
    tier = Tier(FilesystemBackend(str(tmp_path / "tier")), FileCache(1 << 20), clock=clock,
                delete_delay_ms=delete_delay_ms)
    return TierUploader(store, topics, tier, "broker-a", 0, clock)


@pytest.fixture
def uploader(tmp_path: Path, store: MessageStore, clock: ManualClock) -> TierUploader:
    return make_uploader(tmp_path, store, clock)


def put(store: MessageStore, first: int, n: int, keys: int = 4) -> None:
    """Offsets first..first+n-1, key k<i % keys>, body v<i>."""
    for i in range(first, first + n):
        assert store.put_message(message(i, keys=f"k{i % keys}", body=f"v{i}".encode())).ok
    store.flush()


def compact(store: MessageStore) -> None:
    report = store.compact("T", 0, delete_retention_ms=DAY_MS, max_offset_map_size=1024 * OFFSET_MAP_BYTES_PER_ENTRY)
    assert report.passes


def upload_round(store: MessageStore, uploader: TierUploader, first: int, keys: list[str], tombstones: int = 0) -> None:
    """Offsets first.. with these keys (the first ``tombstones`` of them deleted: empty bodies),
    compacted and uploaded."""
    for n, key in enumerate(keys):
        body = b"" if n < tombstones else f"v{first + n}".encode()
        assert store.put_message(message(first + n, keys=key, body=body)).ok
    store.flush()
    compact(store)
    uploader.run()


def tiered(uploader: TierUploader) -> list[list[tuple[int, str, str]]]:
    """(offset, keys, body) of each tiered file's rows, file by file, read back from the tier."""
    out = []
    for seg in uploader.tier.manifest("T", "broker-a").queue(0):  # as the tier holds it
        rows = pa.concat_tables(uploader.tier.row_group(seg, i) for i in range(uploader.tier.open(seg).num_row_groups))
        out.append(list(zip(rows.column("queue_offset").to_pylist(), rows.column("keys").to_pylist(),
                            (b.decode() for b in rows.column("body").to_pylist()))))
    return out


def latest(end: int) -> list[tuple[int, str, str]]:
    """The last record of each of the four keys before offset ``end``."""
    return [(i, f"k{i % 4}", f"v{i}") for i in range(end - 4, end)]


def local_view(store: MessageStore) -> list[tuple[int, str, str]]:
    """(offset, keys, body) of every record a pull of the store from its first offset returns."""
    out: list[tuple[int, str, str]] = []
    offset = store.get_min_offset("T", 0)
    while offset < store.get_max_offset("T", 0):
        got = store.get_messages("T", 0, offset, 32)
        out += [(m.queue_offset, m.properties["KEYS"], m.body.decode())
                for m in decode_records(b"".join(bytes(b) for b in got.buffers))]
        offset = got.next_begin_offset
    return out


def files_in_tier(uploader: TierUploader) -> list[str]:
    return sorted(uploader.tier.backend.list("T/"))


def listed(uploader: TierUploader) -> list[str]:
    m = uploader.tier.manifest("T", "broker-a")
    return sorted(["T/broker-a/manifest.json"] + [s.file for s in m.segments] +
                  [s.index.file for s in m.segments if s.index is not None])


def test_only_the_compacted_segment_is_uploaded_the_latest_record_of_each_key(store: MessageStore,
                                                                              uploader: TierUploader) -> None:
    put(store, 0, 30)
    assert uploader.run().files == 0  # nothing compacted yet: nothing a later pass could remove goes up
    compact(store)
    assert uploader.run().rows == 4
    assert tiered(uploader) == [latest(30)]
    put(store, 30, 10, keys=2)  # k0 and k1 again: 38 and 39 supersede 28 and 29
    assert uploader.run().files == 0  # dirty again
    compact(store)
    assert uploader.run().rows == 2
    # the tier shows what the compacted queue shows: the first file lost the keys the second holds
    assert tiered(uploader) == [[(26, "k2", "v26"), (27, "k3", "v27")], [(38, "k0", "v38"), (39, "k1", "v39")]]
    assert [r for f in tiered(uploader) for r in f] == local_view(store)
    (first, second) = uploader.manifest("T").queue(0)
    assert (first.first_offset, first.last_offset, first.rows, second.first_offset, second.rows) == (26, 29, 2, 38, 2)
    assert files_in_tier(uploader) == listed(uploader)  # the replaced file and its index are gone
    put(store, 40, 4)  # every key again: the older files have nothing left and go
    compact(store)
    uploader.run()
    assert tiered(uploader) == [latest(44)]
    assert files_in_tier(uploader) == listed(uploader)


def read_through_the_tier(store: MessageStore, reads: TierReads) -> list[tuple[int, str]]:
    """(offset, body) of a pull of every offset from 0, as the broker answers it (the store first,
    the tier where the store answers OFFSET_TOO_SMALL), following nextBeginOffset as a client does."""
    everything = build_filter("*", ExpressionType.TAG)
    got: list[tuple[int, str]] = []
    offset = 0
    while offset < store.get_max_offset("T", 0):

        def fetched(at: int = offset) -> GetResult | None:
            local = store.get_messages("T", 0, at, 32)
            if local.status is not GetStatus.OFFSET_TOO_SMALL:
                return local
            r = reads.read(PullRequest("G", "T", 0, at, 32), everything, local)
            return None if r.status is GetStatus.MESSAGE_WAS_REMOVING else r  # "retry": being fetched

        answer = wait_for(fetched, 10, "the tier's fetch")
        # OFFSET_TOO_SMALL: below the tier's first offset too (its files lost every key), the client moves on
        assert answer.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_TOO_SMALL), answer
        got += [(m.queue_offset, m.body.decode()) for m in decode_records(b"".join(bytes(b) for b in answer.buffers))]
        assert answer.next_begin_offset > offset
        offset = answer.next_begin_offset
    return got


def test_uploaded_compacted_records_leave_the_disk_after_retention_and_reads_find_them_in_the_tier(
        store: MessageStore, uploader: TierUploader, clock: ManualClock) -> None:
    put(store, 0, 30)
    compact(store)
    uploader.run()
    put(store, 30, 10, keys=2)
    compact(store)
    uploader.run()
    assert store.get_min_offset("T", 0) == 0  # younger than retention.local.ms: kept
    clock.advance(HOUR_MS + 1)
    uploader.run()
    assert store.get_min_offset("T", 0) == 40  # everything below the tier's end is only in the tier now
    assert store.get_messages("T", 0, 0, 32).status is GetStatus.OFFSET_TOO_SMALL
    reads = TierReads(uploader.tier, uploader)
    try:
        # the first file's last offset (29) is a gap now: the read goes on to the next file
        assert read_through_the_tier(store, reads) == [(26, "v26"), (27, "v27"), (38, "v38"), (39, "v39")]
        put(store, 40, 4)  # compaction goes on from the trimmed segment; the tier loses the old keys
        compact(store)
        uploader.run()
        assert store.get_min_offset("T", 0) == 40
        assert local_view(store) == latest(44)
        assert read_through_the_tier(store, reads) == [(o, b) for o, _, b in latest(44)]
        clock.advance(HOUR_MS + 1)
        uploader.run()
        assert store.get_min_offset("T", 0) == 44
        assert read_through_the_tier(store, reads) == [(o, b) for o, _, b in latest(44)]
    finally:
        reads.close()


@pytest.mark.parametrize("step", ["file-written", "rewrite-written", "manifest-written"])
def test_a_crash_while_superseding_leaves_the_old_or_the_new_view(tmp_path: Path, store: MessageStore,
                                                                    uploader: TierUploader, clock: ManualClock,
                                                                    step: str) -> None:
    put(store, 0, 30)
    compact(store)
    uploader.run()
    put(store, 30, 10, keys=2)
    compact(store)

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    uploader.tier.steps = crash
    with pytest.raises(Crash):
        uploader.run()
    old, new = [latest(30)], [[(26, "k2", "v26"), (27, "k3", "v27")], [(38, "k0", "v38"), (39, "k1", "v39")]]
    assert tiered(uploader) == (new if step == "manifest-written" else old)
    restarted = make_uploader(tmp_path, store, clock)  # collects what no manifest lists, uploads again
    restarted.run()
    assert tiered(restarted) == new
    assert files_in_tier(restarted) == listed(restarted)


def test_a_read_through_the_tier_serves_the_compacted_view_past_its_gaps(store: MessageStore,
                                                                         uploader: TierUploader) -> None:
    for first, n, keys in ((0, 30, 4), (30, 10, 2)):
        put(store, first, n, keys)
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
            assert answer.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE), answer  # a gap: move on
            got += [(m.queue_offset, m.body.decode()) for m in decode_records(b"".join(bytes(b) for b in answer.buffers))]
            assert answer.next_begin_offset > offset
            offset = answer.next_begin_offset
        assert got == [(26, "v26"), (27, "v27"), (38, "v38"), (39, "v39")]  # 28 and 29 superseded by 38 and 39
    finally:
        reads.close()


def test_tombstones_leave_the_tier_after_delete_retention_as_they_leave_the_queue(store: MessageStore,
                                                                                 uploader: TierUploader,
                                                                                 clock: ManualClock) -> None:
    put(store, 0, 8)  # latest: 4..7
    assert store.put_message(message(8, keys="k3", body=b"")).ok  # k3 deleted
    store.flush()
    compact(store)
    uploader.run()
    assert tiered(uploader) == [[(4, "k0", "v4"), (5, "k1", "v5"), (6, "k2", "v6"), (8, "k3", "")]]
    (seg,) = uploader.manifest("T").queue(0)
    assert seg.oldest_tombstone_ms == clock.now_ms()  # the manifest says which file holds one, and since when
    clock.advance(DAY_MS + 1)  # past delete.retention.ms (a day by default)
    compact(store)  # the queue drops the tombstone ...
    local = local_view(store)
    assert local == [(4, "k0", "v4"), (5, "k1", "v5"), (6, "k2", "v6")]
    uploader.run()  # ... and so does the tier
    assert tiered(uploader) == [local]
    assert uploader.manifest("T").queue(0)[0].oldest_tombstone_ms == -1
    for i in range(9, 12):  # every key left deleted: the older file loses every row and goes
        assert store.put_message(message(i, keys=f"k{i - 9}", body=b"")).ok
    store.flush()
    compact(store)
    uploader.run()
    assert tiered(uploader) == [[(9, "k0", ""), (10, "k1", ""), (11, "k2", "")]]
    clock.advance(DAY_MS + 1)
    uploader.run()
    (newest,) = uploader.manifest("T").queue(0)  # the newest file stays, empty: the tier ends at 12
    assert (newest.rows, uploader.manifest("T").end_offset(0), tiered(uploader)) == (0, 12, [[]])
    assert files_in_tier(uploader) == listed(uploader)
    reads = TierReads(uploader.tier, uploader)
    try:
        assert read_through_the_tier(store, reads) == []
        put(store, 12, 1)  # the queue goes on after the empty file
        compact(store)
        uploader.run()
        assert read_through_the_tier(store, reads) == [(12, "v12")]
    finally:
        reads.close()


def test_replaced_files_stay_for_the_delete_delay_and_a_later_pass_deletes_them(tmp_path: Path, store: MessageStore,
                                                                               clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock, delete_delay_ms=60_000)
    put(store, 0, 30)
    compact(store)
    uploader.run()
    planned = uploader.tier.manifest("T", "broker-a")  # a reader's plan before the rewrite
    put(store, 30, 10, keys=2)
    compact(store)
    uploader.run()
    assert tiered(uploader) == [[(26, "k2", "v26"), (27, "k3", "v27")], [(38, "k0", "v38"), (39, "k1", "v39")]]
    retired = sorted(r.file for r in uploader.manifest("T").retired)
    assert retired == sorted(planned.listed_files())
    assert files_in_tier(uploader) == sorted(listed(uploader) + retired)

    def old_plan() -> list[int]:
        return Tier(uploader.tier.backend).read(planned, 0, 0, 100).column("queue_offset").to_pylist()

    restarted = make_uploader(tmp_path, store, clock, delete_delay_ms=60_000)  # collects orphans: not these
    clock.advance(59_999)
    restarted.run()
    assert old_plan() == [26, 27, 28, 29] and files_in_tier(restarted) == sorted(listed(restarted) + retired)
    clock.advance(1)
    restarted.run()  # the delay has passed: this pass deletes them
    assert restarted.manifest("T").retired == () and files_in_tier(restarted) == listed(restarted)
    with pytest.raises(TierError, match="does not exist"):
        old_plan()
