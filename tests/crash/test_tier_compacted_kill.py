"""SIGKILL a compacted topic's tier at each durable step of an upload that supersedes keys of
older files (the new file, its index, a rewritten older file, the manifest, the removal of the
replaced files) and of the local trim that follows it (the new generation's data, the switch of
its manifest, the removal of the old generation), one crash after another: after a restart that finishes the job, the tier and
the trimmed local queue together serve the latest record of every key once, in offset order,
and no file the manifest does not list is left.

The child is this module: ``python -m tests.crash.test_tier_compacted_kill --dir D --round R
[--kill-at STEP]`` opens a store under D, writes round R's eight messages (keys k<(R + i) % 12>:
each round supersedes seven keys of the round before and leaves older ones), compacts the
queue, and runs the broker's uploader (a filesystem tier under D; retention.local.ms and
fileReservedTime 0, so it trims what it uploaded), killing itself (SIGKILL) right after STEP;
it prints ``{"step": STEP}`` first. Without --kill-at it prints ``{"view": [[offset, body],
...], "orphans": N, "local_min": M}``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.tier.service import TierService
from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.stored_message import decode_records
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY
from skiff.tier.columns import rows_to_records
from tests.crash.conftest import Child
from tests.crash.store_child import STORE_HOST
from tests.unit.store.conftest import make_config, message

MODULE = "tests.crash.test_tier_compacted_kill"
STEPS = ["file-written", "index-written", "rewrite-written", "manifest-written", "replaced-removed",
         "data-synced", "manifest-switched", "old-generation-removed"]  # the last three: the local trim's
TOPIC = "T"
PER_ROUND = 8
KEYS = 12
DAY_MS = 86_400_000


class _Topics:
    """The one compacted tiered topic, as the broker's topic manager would answer."""

    def topics(self) -> list[str]:
        return [TOPIC]

    def get(self, name: str) -> TopicConfig | None:
        attributes = {"cleanup.policy": "COMPACTION", "tiered.storage": "true"}
        return TopicConfig(TOPIC, 1, 1, attributes=attributes) if name == TOPIC else None


def _emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def _key(round_: int, i: int) -> str:
    return f"k{(round_ + i) % KEYS}"


def _view(store: MessageStore, service: TierService) -> list:
    """What a reader from offset 0 gets: the tier below the queue's local first offset, then the disk."""
    low = store.get_min_offset(TOPIC, 0)
    manifest = service.tier.manifest(TOPIC, "broker-a")
    rows = [[m.queue_offset, m.body.decode()]
            for m in decode_records(rows_to_records(service.tier.read(manifest, 0, 0, 10_000)))
            if m.queue_offset < low]
    offset = low
    while offset < store.get_max_offset(TOPIC, 0):
        r = store.get_messages(TOPIC, 0, offset, 100)
        rows += [[m.queue_offset, m.body.decode()] for m in decode_records(b"".join(bytes(b) for b in r.buffers))]
        assert r.next_begin_offset > offset, r
        offset = r.next_begin_offset
    return rows


def child_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--kill-at")
    args = parser.parse_args()

    def step(name: str) -> None:
        _emit({"step": name})
        if name == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    root = Path(args.dir)
    store = MessageStore(make_config(root / "store", fileReservedTime=0), store_host=STORE_HOST)
    store.start()
    for i in range(PER_ROUND):
        assert store.put_message(message(i, topic=TOPIC, keys=_key(args.round, i),
                                         body=f"r{args.round}-{i}".encode())).ok
    store.flush()
    store.compact(TOPIC, 0, delete_retention_ms=DAY_MS, max_offset_map_size=1024 * OFFSET_MAP_BYTES_PER_ENTRY)
    config = BrokerConfig(broker_name="broker-a", tier_storage_url=f"file://{root / 'tier'}", tier_seal_ms=1)
    service = TierService(config, store, _Topics(), SYSTEM_CLOCK)  # type: ignore[arg-type]
    service.tier.steps = step
    trim = store.compaction.trim
    store.compaction.trim = lambda topic, queue_id, below: trim(topic, queue_id, below, step)  # type: ignore[method-assign]
    service.uploader.seal_ms = 0
    service.uploader.run()
    listed = service.tier.manifest(TOPIC, "broker-a").segments
    orphans = [k for k in service.tier.backend.list(f"{TOPIC}/")
               if k.endswith((".parquet", ".keys")) and k not in {s.file for s in listed} | {s.index.file for s in listed if s.index}]
    _emit({"view": _view(store, service), "orphans": len(orphans), "local_min": store.get_min_offset(TOPIC, 0)})
    store.shutdown()


def _expected(rounds: int) -> list:
    latest: dict[str, list] = {}
    for r in range(rounds):
        for i in range(PER_ROUND):
            latest[_key(r, i)] = [r * PER_ROUND + i, f"r{r}-{i}"]
    return sorted(latest.values())


@pytest.mark.slow  # ten child processes: about 20-30 s
def test_a_kill_at_any_step_of_a_superseding_upload_leaves_the_compacted_view(tmp_path: Path) -> None:
    first = Child(tmp_path, "--round", "0", module=MODULE)  # a file for the next uploads to supersede
    assert first.wait_for("view")[0]["view"] == _expected(1)
    assert first.proc.wait(60) == 0, first.stderr()
    for r, kill_at in enumerate(STEPS, 1):  # one crash after another, each at the next step
        killed = Child(tmp_path, "--round", str(r), "--kill-at", kill_at, module=MODULE)
        assert killed.proc.wait(60) == -signal.SIGKILL, killed.stderr()
        assert killed.wait_for("step")[-1] == {"step": kill_at}
    done = Child(tmp_path, "--round", str(len(STEPS) + 1), module=MODULE)
    (result,) = done.wait_for("view")
    assert done.proc.wait(60) == 0, done.stderr()
    assert result["view"] == _expected(len(STEPS) + 2)
    assert result["orphans"] == 0
    assert result["local_min"] == (len(STEPS) + 2) * PER_ROUND  # the disk keeps nothing the tier has


if __name__ == "__main__":
    child_main()
