"""An append's own dispatch (`Dispatcher.dispatch_run`: a consumed batch as its one
ConsumeQueue run, no `DispatchBatch`) writes the same ConsumeQueue and index bytes as the
general path recovery takes (`Dispatcher.dispatch` of the records parsed back)."""

import os
import random
import shutil
from pathlib import Path

from skiff.common.sysflag import MessageSysFlag

from .conftest import message


def _queue_files(root: str) -> dict[str, bytes]:
    """Every ConsumeQueue file by its path under ``consumequeue/``."""
    base = os.path.join(root, "consumequeue")
    return {os.path.relpath(os.path.join(d, name), base): Path(d, name).read_bytes()
            for d, _, names in os.walk(base) for name in names}


def _index_entries(store) -> list[tuple[int, int, int]]:
    """(key hash, CommitLog offset, time) of every index entry, oldest first. Where a new file
    starts is not compared: an append starts one when its keys may not fit the current one
    (room is reserved before the write), recovery when the current one is full."""
    return [(int(e["hash"]), int(e["offset"]), f.begin_timestamp + 1000 * int(e["time_diff"]))
            for f in store.index.files for e in f.entries()]


def test_appended_entries_equal_the_rebuilt_ones(open_store):
    rng = random.Random(26)
    store = open_store()
    n = 0
    for _ in range(120):
        queue_id = rng.randrange(3)
        size = rng.choice([1, 1, 1, 2, 7])
        prepared = rng.random() < 0.1  # a transaction's half: the DispatchBatch path, no ConsumeQueue entry
        batch = []
        for _ in range(size):
            keys = rng.choice([None, f"k{n}", f"a{n} b{n}", " "])
            uniq = rng.choice([None, f"U{n}"])
            batch.append(message(n, queue_id=queue_id, tags=rng.choice([None, "t1", "t2"]), keys=keys, uniq=uniq,
                                 sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED) if prepared else 0))
            n += 1
        assert store.put_messages(batch).ok
    offsets = {q: store.get_max_offset("T", q) for q in range(3)}
    assert sum(offsets.values()) > 100
    appended_index = _index_entries(store)
    assert len(appended_index) > 100
    store.shutdown()
    appended_cq = _queue_files(store.root)
    shutil.rmtree(os.path.join(store.root, "consumequeue"))
    shutil.rmtree(os.path.join(store.root, "index"))
    os.unlink(os.path.join(store.root, "checkpoint"))  # everything is re-dispatched from the CommitLog
    again = open_store(root=store.root)
    assert open_store.last_report.records_redispatched == n
    assert {q: again.get_max_offset("T", q) for q in range(3)} == offsets
    assert _index_entries(again) == appended_index
    again.shutdown()
    assert _queue_files(store.root) == appended_cq
