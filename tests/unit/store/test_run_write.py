"""The one-call append of a run (`skiff.store.run_write`): the compiled `write_run` writes the
same bytes and returns the same as its reference, refuses before writing anything, and a
store that appends through it keeps CommitLog, ConsumeQueue and index files byte for byte
equal to a store that takes the general path (`CommitLog.append`, `Dispatcher.dispatch_run`)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.clock import ManualClock
from skiff.common.record import record_size
from skiff.common.sysflag import MessageSysFlag
from skiff.store.index_service import KeyPrefixes
from skiff.store.results import PutResult
from skiff.store.run_write import write_run_py
from tests.unit.kernel_twins import compiled_kernels

from .conftest import STORE_HOST, message

compiled = compiled_kernels("skiff.store._kernels")

KEYS = st.one_of(st.none(), st.sampled_from(["", " ", "a", "a b", "  x  y ", "ключ", "k1 k2 k3"]))
ROW = st.tuples(st.binary(max_size=40), st.sampled_from([None, "t1", "t2"]), KEYS,
                st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)),
                st.sampled_from([0, 0, 0x8, 0xC, 0x1]))


def _rows(specs: list[tuple[Any, ...]], topic: str) -> list[Any]:
    return [message(i, topic=topic, queue_id=1, body=body, tags=tags, keys=keys, uniq=uniq, sys_flag=sys_flag)
            for i, (body, tags, keys, uniq, sys_flag) in enumerate(specs)]


def _run(fn: Any, tmp: Path, name: str, rows: list[Any], base: int, phys: int, file_pos: int, cq_pos: int,
         index: bool, prefill: bytes, number: int, room: int) -> tuple[Any, bytes, bytes, bytes]:
    """``fn`` (kernel or reference) on its own file, ConsumeQueue and index buffers."""
    topic_raw = rows[0].topic.encode()
    sizes = [record_size(len(r.body), len(topic_raw), len(r.properties), len(r.born_host), len(STORE_HOST))
             for r in rows]
    path = tmp / name
    path.write_bytes(b"\0" * 64)
    cq = bytearray(20 * (len(rows) + 3))
    slots = 8
    ix = bytearray(prefill) if index else None
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            out: Any = fn(rows, topic_raw, base, sizes, sum(sizes), 1_700_000_000_123, STORE_HOST,
                          bytearray(sum(sizes) + 5), fd, file_pos, phys, cq, cq_pos, [7 * i for i in range(len(rows))],
                          ix, slots, 40 + 4 * slots + 20 * number, number, 1_699_999_000_000, KeyPrefixes(), room)
        except ValueError as exc:
            out = ("refused", str(exc).split(":")[0])
    finally:
        os.close(fd)
    return out, path.read_bytes(), bytes(cq), bytes(ix or b"")


@settings(max_examples=80, deadline=None)
@given(specs=st.lists(ROW, min_size=1, max_size=6), base=st.integers(0, 2**40), phys=st.integers(0, 2**50),
       file_pos=st.integers(0, 300), cq_pos=st.sampled_from([0, 20, 40, 60, 70]), index=st.booleans(),
       number=st.integers(1, 6), room=st.integers(0, 40), topic=st.sampled_from(["T", "Topic-é"]),
       prefill=st.binary(min_size=40 + 32 + 20 * 60, max_size=40 + 32 + 20 * 60))
def test_write_run_equals_its_reference(tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[Any, ...]],
                                        base: int, phys: int, file_pos: int, cq_pos: int, index: bool, number: int,
                                        room: int, topic: str, prefill: bytes) -> None:
    kernel = compiled("write_run")
    tmp = tmp_path_factory.mktemp("run")
    rows = _rows(specs, topic)
    args = (rows, base, phys, file_pos, cq_pos, index, prefill, number, room)
    mine = _run(kernel, tmp, "kernel", *args)
    ref = _run(write_run_py, tmp, "reference", *args)
    assert mine == ref
    if mine[0][0] != "refused":  # the records were written where asked, and the index slots moved
        assert len(mine[1]) >= file_pos + 1


def test_write_run_refuses_entries_that_do_not_fit_before_writing_a_byte(tmp_path: Path) -> None:
    rows = _rows([(b"body", None, "a b c", "u", 0)], "T")
    for fn in (write_run_py, compiled("write_run")):
        # three keys and a UNIQ_KEY, room for two: nothing written anywhere
        out, data, cq, ix = _run(fn, tmp_path, fn.__name__, rows, 0, 0, 0, 0, True, bytes(40 + 32 + 20 * 60), 1, 2)
        assert out == ("refused", "the index entries do not fit in the file")
        assert data == b"\0" * 64 and not any(cq) and not any(ix)
        out, data, cq, ix = _run(fn, tmp_path, fn.__name__, rows, 0, 0, 0, 80, True, bytes(40 + 32 + 20 * 60), 1, 9)
        assert out == ("refused", "the ConsumeQueue entries do not fit in the file")
        assert data == b"\0" * 64 and not any(cq) and not any(ix)


def _files(root: str) -> dict[str, bytes]:
    """Every file of a store but its checkpoint, lock and abort marker, by relative path."""
    out = {}
    for d, _, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(d, name), root)
            if rel.split(os.sep)[0] in ("commitlog", "consumequeue", "index"):
                out[rel] = Path(d, name).read_bytes()
    return out


def _fields(result: PutResult) -> tuple[Any, ...]:
    return result._replace(flushed=None)


def test_a_store_writing_runs_in_one_call_keeps_the_general_paths_bytes(open_store: Any, tmp_path: Path) -> None:
    """Random single and batched appends over three queues, with keys, unique keys, tags and a
    transaction's halves, in small files (a ConsumeQueue file holds 16 entries, an index file 256
    keys, a CommitLog file 4 KiB): every result and every file is the same as the general path's,
    and both the one-call path and its fallbacks were taken."""
    general = open_store(clock=ManualClock(), root=tmp_path / "general")
    one_call = open_store(clock=ManualClock(), root=tmp_path / "one_call")
    general._runs.write = lambda *args: None  # always the general path
    taken = {"written": 0, "general": 0}
    write = one_call._runs.write

    def counted(*args: Any) -> Any:
        out = write(*args)
        taken["written" if out is not None else "general"] += 1
        return out
    one_call._runs.write = counted
    rng = random.Random(26)
    n = 0
    for _ in range(400):
        queue_id = rng.randrange(3)
        prepared = rng.random() < 0.05
        batch = []
        for _ in range(rng.choice([1, 1, 1, 2, 5])):
            batch.append(message(n, queue_id=queue_id, tags=rng.choice([None, "t1", "t2"]),
                                 keys=rng.choice([None, f"k{n}", f"a{n} b{n}", " ", "x y z w"]),
                                 uniq=rng.choice([None, f"U{n}"]), body=os.urandom(rng.randrange(1, 200)),
                                 sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED) if prepared else 0))
            n += 1
        a, b = general.put_messages(batch), one_call.put_messages(batch)
        assert a.ok and _fields(a) == _fields(b)
    assert taken["written"] > 250 and taken["general"] > 5, taken
    assert len(general.commitlog.files.files) > 10
    general.shutdown()
    one_call.shutdown()
    expected = _files(str(tmp_path / "general"))
    assert len([p for p in expected if p.startswith("index")]) > 1
    assert _files(str(tmp_path / "one_call")) == expected
