"""SIGKILL a broker's tier at each durable step of an upload (the manifest in parts of one
segment, so that writing a part is one of them) and of the local deletion that follows it, one
crash after another: after a restart that finishes the job, every message of the queue is served
once, in offset order, from the CommitLog or from the tier, and no file the manifest does
not list is left in the tier.

The child is this module: ``python -m tests.crash.test_tier_kill --dir D --round R
[--kill-at STEP]`` opens a store under D (small CommitLog files, nothing kept for its age),
writes round R's messages to two queues of a tiered topic, runs a retention pass (which
the tier's hold must keep from everything not uploaded), the broker's uploader (a
filesystem tier under D) and a retention pass again, and kills itself (SIGKILL)
right after STEP; it prints ``{"step": STEP}`` first. Without --kill-at it prints what a
reader sees: ``{"view": {queue: [[offset, body], ...]}, "orphans": N, "unindexed": N, "local_min": {...}}``
(unindexed: tiered messages their file's key index does not find by id).
"""

from __future__ import annotations

import signal
from pathlib import Path

from skiff.broker.config import BrokerConfig
from skiff.broker.tier.service import TierService
from skiff.common.clock import SYSTEM_CLOCK
from skiff.store import MessageStore
from skiff.tier.index import offsets_of
from tests.crash.conftest import Child
from tests.crash.store_child import STORE_HOST, emit
from tests.crash.tier_child import OneTopic, orphans, parse_child, queue_view
from tests.unit.store.conftest import make_config, message

MODULE = "tests.crash.test_tier_kill"
STEPS = ["file-written", "index-written", "manifest-written", "parts-written", "hold-computed", "retention-done"]
TOPIC = "T"
QUEUES = 2
PER_ROUND = 60


def _view(store: MessageStore, service: TierService) -> dict[int, list]:
    return {q: queue_view(store, service, TOPIC, q) for q in range(QUEUES)}


def _unindexed(service: TierService) -> int:
    """Tiered messages their file's key index does not find by their id."""
    missing = 0
    for seg in service.tier.manifest(TOPIC, "broker-a").segments:
        index = service.tier.key_index(seg)
        rows = service.tier.read(service.tier.manifest(TOPIC, "broker-a"), seg.queue_id, seg.first_offset, seg.rows)
        for msg_id, offset in zip(rows.column("msg_id").to_pylist(), rows.column("queue_offset").to_pylist()):
            missing += offset not in offsets_of(index, msg_id)
    return missing


def child_main() -> None:
    args, step = parse_child()
    root = Path(args.dir)
    store = MessageStore(make_config(root / "store", fileReservedTime=0, mappedFileSizeCommitLog=8192),
                         store_host=STORE_HOST)
    store.start()
    for i in range(PER_ROUND):
        assert store.put_message(message(i, topic=TOPIC, queue_id=i % QUEUES,
                                         body=f"r{args.round}-{i}-".encode() * 10)).ok
    store.flush()
    config = BrokerConfig(broker_name="broker-a", tier_storage_url=f"file://{root / 'tier'}", tier_seal_ms=1,
                          tier_file_delete_delay_ms=0)
    service = TierService(config, store, OneTopic(TOPIC, QUEUES), SYSTEM_CLOCK)  # type: ignore[arg-type]
    service.tier.steps = step
    service.tier.part_segments = 1  # the manifest in parts from its second segment on: their steps crash too
    hold = store.retention.holds[-1]

    def held() -> int | None:
        value = hold()
        step("hold-computed")
        return value

    store.retention.holds[-1] = held
    service.uploader.seal_ms = 0
    store.run_retention(manual=True)  # before the upload: the tier's hold keeps every file
    service.uploader.run()
    store.run_retention(manual=True)
    step("retention-done")
    emit({"view": _view(store, service), "orphans": orphans(service, TOPIC), "unindexed": _unindexed(service),
          "local_min": {q: store.get_min_offset(TOPIC, q) for q in range(QUEUES)}})
    store.shutdown()


def _expected(rounds: int) -> dict[str, list]:
    out: dict[str, list] = {str(q): [] for q in range(QUEUES)}
    for r in range(rounds):
        for i in range(PER_ROUND):
            rows = out[str(i % QUEUES)]
            rows.append([len(rows), f"r{r}-{i}-" * 10])
    return out


def test_a_kill_at_any_tier_step_loses_nothing_and_serves_nothing_twice(tmp_path: Path) -> None:
    for r, kill_at in enumerate(STEPS):  # one crash after another, each at the next step
        killed = Child(tmp_path, "--round", str(r), "--kill-at", kill_at, module=MODULE)
        assert killed.proc.wait(60) == -signal.SIGKILL, killed.stderr()
        assert killed.wait_for("step")[-1] == {"step": kill_at}
    done = Child(tmp_path, "--round", str(len(STEPS)), module=MODULE)
    (result,) = done.wait_for("view")
    assert done.proc.wait(60) == 0, done.stderr()
    assert result["view"] == _expected(len(STEPS) + 1)
    assert result["orphans"] == 0 and result["unindexed"] == 0
    assert all(low > 0 for low in result["local_min"].values()), result["local_min"]  # the tier served the start


if __name__ == "__main__":
    child_main()
