"""What an upload pass does besides uploading: a compacted queue that stopped receiving still has
its small adjacent files merged (decided from the manifest, no fetch unless a merge happens);
files uploaded before ``tombstoneMs`` existed get it recorded, a few a pass, and their tombstones
then expire as newer files' do; a topic whose ``tiered.storage`` was turned off still has its due
retired files deleted (nothing uploaded, nothing else changed). A real store, a real compaction,
a filesystem tier."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from skiff.broker.tier import uploader as uploader_module
from skiff.broker.tier.uploader import NotMasterError, TierUploader
from skiff.common.clock import ManualClock
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.tier.manifest import Manifest, manifest_file
from tests.unit.tier.test_compacted_upload import (ATTRS, DAY_MS, Crash, compact, files_in_tier, listed, local_view,
                                                   make_uploader, put, tiered, upload_round)


class Requests:
    """The uploader's tier backend's gets and puts, counted (a pass that merges nothing reads and
    writes nothing)."""

    def __init__(self, uploader: TierUploader) -> None:
        backend = uploader.tier.backend
        self.gets = self.puts = 0
        get, put_ = backend.get, backend.put

        def counted_get(key: str) -> bytes:
            self.gets += 1
            return get(key)

        def counted_put(key: str, data: bytes) -> None:
            self.puts += 1
            put_(key, data)

        backend.get = counted_get  # type: ignore[method-assign]
        backend.put = counted_put  # type: ignore[method-assign]

    def reset(self) -> tuple[int, int]:
        seen, self.gets, self.puts = (self.gets, self.puts), 0, 0
        return seen


def spans(uploader: TierUploader) -> list[tuple[int, int, int]]:
    return [(s.first_offset, s.last_offset, s.rows) for s in uploader.manifest("T").queue(0)]


def test_a_quiet_compacted_queue_is_merged_by_a_pass_that_uploads_nothing(tmp_path: Path, store: MessageStore,
                                                                           clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock)
    uploader.tier.merge_max_bytes = 1  # nothing merges while the queue receives
    for r in range(4):
        upload_round(store, uploader, 8 * r, [f"r{r}k{i}" for i in range(8)])
    assert spans(uploader) == [(0, 7, 8), (8, 15, 8), (16, 23, 8), (24, 31, 8)]
    requests = Requests(uploader)
    assert uploader.run().files == 0
    assert requests.reset() == (0, 0)  # nothing to merge: decided from the manifest, nothing fetched or written
    before = tiered(uploader)

    uploader.tier.merge_max_bytes = 1 << 20  # tierCompactedMergeMaxBytes raised; the queue stays quiet
    uploader.tier.steps = crash_at("rewrite-written")
    with pytest.raises(Crash):
        uploader.run()
    assert tiered(uploader) == before  # a crash before the manifest: the old view
    restarted = make_uploader(tmp_path, store, clock)  # collects the unlisted merged file, merges again
    restarted.tier.merge_max_bytes = 1 << 20
    assert restarted.run().files == 0
    assert spans(restarted) == [(0, 23, 24), (24, 31, 8)]  # as few files as a busy queue: the newest as uploaded
    assert restarted.manifest("T").queue(0)[-1].file.endswith("00000000000000000024-00000000000000000031.parquet")
    assert [row for f in tiered(restarted) for row in f] == local_view(store)
    assert files_in_tier(restarted) == listed(restarted)  # the merged originals deleted (no delay here)
    requests = Requests(restarted)
    restarted.run()
    assert requests.reset() == (0, 0)  # merged: the next pass fetches and writes nothing


def crash_at(step: str) -> Callable[[str], None]:
    """A tier step hook that dies at ``step``."""

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)
    return crash


def as_an_older_build_wrote_it(uploader: TierUploader) -> None:
    """The topic's manifest in the tier without ``tombstoneMs`` (uploaded before it existed)."""
    key = manifest_file("T", "broker-a")
    body = json.loads(uploader.tier.backend.get(key))
    for seg in body["segments"]:
        seg.pop("tombstoneMs", None)
    uploader.tier.backend.put(key, json.dumps(body).encode())
    assert all(s.oldest_tombstone_ms is None for s in uploader.tier.manifest("T", "broker-a").segments)


def test_files_uploaded_before_tombstone_ms_get_it_a_few_a_pass_and_their_tombstones_expire(
        tmp_path: Path, store: MessageStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    uploader = make_uploader(tmp_path, store, clock)
    uploader.tier.merge_max_bytes = 1  # three files that stay three
    upload_round(store, uploader, 0, ["t0", "t1", "a0", "a1"], tombstones=2)  # 0, 1: tombstones
    upload_round(store, uploader, 4, ["b0", "b1", "b2", "b3"])
    upload_round(store, uploader, 8, ["c0", "c1"])
    as_an_older_build_wrote_it(uploader)
    monkeypatch.setattr(uploader_module, "TIER_TOMBSTONE_LEARN_MAX_FILES", 2)
    restarted = make_uploader(tmp_path, store, clock)  # reads the older build's manifest
    restarted.tier.merge_max_bytes = 1
    clock.advance(DAY_MS + 1)  # past delete.retention.ms (a day)
    restarted.run()  # the two oldest files are looked at; the first's tombstones expire at once
    assert [s.oldest_tombstone_ms for s in restarted.manifest("T").queue(0)] == [-1, -1, None]
    assert tiered(restarted) == [[(2, "a0", "v2"), (3, "a1", "v3")], [(i, f"b{i - 4}", f"v{i}") for i in range(4, 8)],
                                 [(8, "c0", "v8"), (9, "c1", "v9")]]  # the tombstones 0 and 1 gone
    restarted.run()
    segs = restarted.manifest("T").queue(0)
    assert [s.oldest_tombstone_ms for s in segs] == [-1, -1, -1]  # recorded in the manifest in the tier
    assert [s.oldest_tombstone_ms for s in restarted.tier.manifest("T", "broker-a").queue(0)] == [-1, -1, -1]
    assert files_in_tier(restarted) == listed(restarted)
    requests = Requests(restarted)
    restarted.run()
    assert requests.reset() == (0, 0)  # every file's is known: nothing more is fetched


def test_a_manifest_records_an_unknown_oldest_tombstone_apart_from_none() -> None:
    m = Manifest.from_bytes(json.dumps({"version": 1, "topic": "T", "broker": "b", "segments": [
        {"queueId": 0, "firstOffset": 0, "lastOffset": 1, "firstStoreMs": 1, "lastStoreMs": 2, "file": "f",
         "rows": 2, "bytes": 10, "sha256": "x"},
        {"queueId": 0, "firstOffset": 2, "lastOffset": 3, "firstStoreMs": 1, "lastStoreMs": 2, "file": "g",
         "rows": 2, "bytes": 10, "sha256": "y", "tombstoneMs": -1}]}).encode())
    assert [s.oldest_tombstone_ms for s in m.segments] == [None, -1]
    assert Manifest.from_bytes(m.to_bytes()) == m  # an unknown one stays absent, a known none stays -1


@pytest.mark.parametrize("restarted", [False, True], ids=["turned-off-while-running", "turned-off-while-down"])
def test_a_topic_turned_untiered_still_has_its_due_retired_files_deleted(tmp_path: Path, store: MessageStore,
                                                                        clock: ManualClock, restarted: bool) -> None:
    uploader = make_uploader(tmp_path, store, clock, delete_delay_ms=60_000)
    put(store, 0, 30)
    compact(store)
    uploader.run()
    put(store, 30, 10, keys=2)  # the first file rewritten: the old one retired for 60 s
    compact(store)
    uploader.run()
    kept = uploader.manifest("T")
    assert kept.retired and files_in_tier(uploader) == sorted(listed(uploader) + [r.file for r in kept.retired])
    if restarted:
        uploader = make_uploader(tmp_path, store, clock, delete_delay_ms=60_000)
        uploader.tier.backend.put("T/broker-a/0/stray.parquet", b"an upload a crash cut off")  # collected too
    uploader.topics.put(TopicConfig("T", 1, 1, attributes={**ATTRS, "tiered.storage": "false"}))
    put(store, 40, 4)  # more to upload, were the topic tiered
    compact(store)
    clock.advance(59_999)
    assert uploader.run().files == 0
    assert len(files_in_tier(uploader)) == len(listed(uploader)) + len(kept.retired)  # not due yet
    clock.advance(1)
    assert uploader.run().files == 0
    after = uploader.tier.manifest("T", "broker-a")
    assert after.retired == () and after.segments == kept.segments  # only the retired files went
    assert files_in_tier(uploader) == listed(uploader)


def test_a_slave_never_uploads(tmp_path: Path, store: MessageStore, clock: ManualClock) -> None:
    uploader = make_uploader(tmp_path, store, clock)
    put(store, 0, 8)
    compact(store)
    store.replica = True  # a slave's store (or a master that stepped down)
    with pytest.raises(NotMasterError, match="broker-a: this broker is a slave; only its master uploads"):
        uploader.run("T")  # TIER_UPLOAD_NOW asked of the slave
    assert files_in_tier(uploader) == []
    store.replica = False
    assert uploader.run().rows == 4
