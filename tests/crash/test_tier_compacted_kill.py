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

import signal
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.tier.service import TierService
from skiff.store import MessageStore
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY
from skiff.tier.backends import FilesystemBackend, TierError
from skiff.tier.manifest import Manifest
from skiff.tier.tier import Tier
from tests.crash.conftest import Child
from tests.crash.store_child import STORE_HOST, emit
from tests.crash.tier_child import BROKER, OneTopic, SkewedClock, orphans, parse_child, queue_view
from tests.unit.store.conftest import make_config, message

MODULE = "tests.crash.test_tier_compacted_kill"
STEPS = ["file-written", "index-written", "rewrite-written", "manifest-written", "replaced-removed",
         "data-synced", "manifest-switched", "old-generation-removed"]  # the last three: the local trim's
TOPIC = "T"
PER_ROUND = 8
KEYS = 12
DAY_MS = 86_400_000


def _key(round_: int, i: int) -> str:
    return f"k{(round_ + i) % KEYS}"


def child_main() -> None:
    args, step = parse_child()
    root = Path(args.dir)
    store = MessageStore(make_config(root / "store", fileReservedTime=0), store_host=STORE_HOST)
    store.start()
    for i in range(PER_ROUND):
        assert store.put_message(message(i, topic=TOPIC, keys=_key(args.round, i),
                                         body=f"r{args.round}-{i}".encode())).ok
    store.flush()
    store.compact(TOPIC, 0, delete_retention_ms=DAY_MS, max_offset_map_size=1024 * OFFSET_MAP_BYTES_PER_ENTRY)
    config = BrokerConfig(broker_name="broker-a", tier_storage_url=f"file://{root / 'tier'}", tier_seal_ms=1,
                          tier_file_delete_delay_ms=args.delete_delay_ms)
    service = TierService(config, store, OneTopic(TOPIC, 1, **{"cleanup.policy": "COMPACTION"}),  # type: ignore[arg-type]
                          SkewedClock(args.skew_ms))
    service.tier.steps = step
    trim = store.compaction.trim
    store.compaction.trim = lambda topic, queue_id, below: trim(topic, queue_id, below, step)  # type: ignore[method-assign]
    service.uploader.seal_ms = 0
    service.uploader.run()
    emit({"view": queue_view(store, service, TOPIC, 0), "orphans": orphans(service, TOPIC),
          "local_min": store.get_min_offset(TOPIC, 0)})
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


DELAY_MS = 600_000  # tierFileDeleteDelayMs of the next test: far longer than it runs, passed by --skew-ms


def _rows(tier: Tier, manifest: Manifest) -> list[list]:
    """[offset, body] of every row of the queue as a reader holding ``manifest`` reads it."""
    table = tier.read(manifest, 0, 0, 10_000)
    return [[o, b.decode()] for o, b in zip(table.column("queue_offset").to_pylist(), table.column("body").to_pylist())]


def _run(tmp_path: Path, round_: int, *args: str) -> dict:
    child = Child(tmp_path, "--round", str(round_), "--delete-delay-ms", str(DELAY_MS), *args, module=MODULE)
    (result,) = child.wait_for("view")
    assert child.proc.wait(60) == 0, child.stderr()
    return result


@pytest.mark.slow  # five child processes: about 6-15 s
def test_a_kill_between_retiring_a_file_and_deleting_it_keeps_it_readable_until_its_delay(tmp_path: Path) -> None:
    """With tierFileDeleteDelayMs > 0 a file a superseding upload replaced stays, retired, for
    the delay: a reader holding the manifest from before the rewrite (a Spark job's plan) reads
    every row of it across a SIGKILL right after the retiring manifest and a restart; once the
    delay has passed a pass deletes it (a SIGKILL between the deletion and the manifest that
    forgets it is finished by the next pass), and nothing the manifest does not list is left."""
    tier = Tier(FilesystemBackend(str(tmp_path / "tier")))
    assert _run(tmp_path, 0)["view"] == _expected(1)
    planned = tier.manifest(TOPIC, BROKER)  # what a reader planned from before the rewrite
    assert _rows(tier, planned) == _expected(1)
    killed = Child(tmp_path, "--round", "1", "--delete-delay-ms", str(DELAY_MS), "--kill-at", "manifest-written",
                   module=MODULE)
    assert killed.proc.wait(60) == -signal.SIGKILL, killed.stderr()
    retiring = tier.manifest(TOPIC, BROKER)
    assert {r.file for r in retiring.retired} == planned.listed_files()  # round 1 superseded 7 of its 8 keys
    assert not planned.listed_files() & retiring.listed_files()
    assert _rows(Tier(tier.backend), planned) == _expected(1)  # a fresh reader (no cache) of the old plan

    restarted = _run(tmp_path, 2)  # a restart within the delay: no orphan collected, nothing deleted
    assert restarted["view"] == _expected(3) and restarted["orphans"] == 0
    assert _rows(Tier(tier.backend), planned) == _expected(1)

    due = Child(tmp_path, "--round", "3", "--delete-delay-ms", str(DELAY_MS), "--skew-ms", str(DELAY_MS + 1),
                "--kill-at", "retired-deleted", module=MODULE)
    assert due.proc.wait(60) == -signal.SIGKILL, due.stderr()
    assert planned.listed_files() <= {r.file for r in tier.manifest(TOPIC, BROKER).retired}  # deleted, not forgotten
    done = _run(tmp_path, 4, "--skew-ms", str(DELAY_MS + 1))
    assert done["view"] == _expected(5) and done["orphans"] == 0
    after = tier.manifest(TOPIC, BROKER)
    assert not planned.listed_files() & after.known_files()
    assert after.retired and all(r.retired_ms > retiring.retired[0].retired_ms + DELAY_MS for r in after.retired)
    on_disk = {k for k in tier.backend.list(f"{TOPIC}/") if not k.endswith("manifest.json")}
    assert on_disk == after.known_files()  # the files retired before the delay are gone, the rest accounted for
    with pytest.raises(TierError, match="does not exist"):
        _rows(Tier(tier.backend), planned)


if __name__ == "__main__":
    child_main()
