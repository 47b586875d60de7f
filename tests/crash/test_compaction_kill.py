"""SIGKILL the compactor after every durable step: the reopened store shows the old or the
new compacted state, never a mix, and the next compaction finishes the job.

The child is this module: ``python -m tests.crash.test_compaction_kill --dir D --kill-at STEP``
opens a store, writes keyed messages, compacts once, writes more, prints the consumer's
view as ``{"old": [...]}`` and compacts again, killing itself (SIGKILL) right after the
compaction reports ``STEP``; it prints ``{"step": STEP}`` first.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

import pytest

from skiff.store import MessageStore
from tests.crash.conftest import Child
from tests.crash.store_child import STORE_HOST, emit
from tests.unit.store.conftest import make_config
from tests.unit.store.test_compaction import DAY_MS, compact, put, view

MODULE = "tests.crash.test_compaction_kill"
STEPS = ["data-synced", "index-synced", "manifest-tmp-written", "manifest-switched", "old-generation-removed",
         "checkpointed", "consume-queue-trimmed"]
SWITCHED = STEPS.index("manifest-switched")
KEYS = 6


def _rows(store: MessageStore) -> list[list]:
    return [[o, k, b.hex()] for o, k, b in view(store)]


def _write(store: MessageStore, start: int, count: int) -> None:
    for i in range(start, start + count):
        put(store, f"k{i % KEYS}", b"" if i % 11 == 0 else f"v{i}".encode())


def child_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--kill-at", required=True)
    args = parser.parse_args()
    store = MessageStore(make_config(args.dir), store_host=STORE_HOST)
    store.start()
    _write(store, 0, 50)
    compact(store, map_entries=4)
    _write(store, 50, 40)
    emit({"old": _rows(store)})

    def step(name: str) -> None:
        if name == args.kill_at:
            emit({"step": name})
            os.kill(os.getpid(), signal.SIGKILL)

    store.flush()
    store.compact("T", 0, delete_retention_ms=DAY_MS, max_offset_map_size=1 << 20, step=step)
    emit({"finished": True})


def _expected_new() -> list[list]:
    latest: dict[str, list] = {}
    for i in range(90):
        latest[f"k{i % KEYS}"] = [i, f"k{i % KEYS}", (b"" if i % 11 == 0 else f"v{i}".encode()).hex()]
    return sorted(latest.values())


@pytest.mark.parametrize("kill_at", STEPS)
def test_kill_between_compaction_steps(tmp_path: Path, kill_at: str) -> None:
    child = Child(tmp_path, "--kill-at", kill_at, module=MODULE)
    code = child.finish()
    steps = child.wait_for("step")
    assert code == -signal.SIGKILL and [s["step"] for s in steps] == [kill_at], child.stderr()
    old = child.wait_for("old")[0]["old"]
    new = _expected_new()
    assert old != new
    store = MessageStore(make_config(tmp_path), store_host=STORE_HOST)
    store.start()
    try:
        expected = new if STEPS.index(kill_at) >= SWITCHED else old
        assert _rows(store) == expected, f"killed after {kill_at}"
        put(store, "k0", b"after")
        compact(store)
        assert _rows(store) == [r for r in new if r[1] != "k0"] + [[90, "k0", b"after".hex()]]
        names = sorted(p.name for p in (tmp_path / "compaction" / "T" / "0").iterdir())
        assert len(names) == 3 and names[-1] == "MANIFEST", names  # no leftovers of the killed run
    finally:
        store.shutdown()


if __name__ == "__main__":
    child_main()
