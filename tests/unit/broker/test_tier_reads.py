"""Pulls answered from a rebuilt tier row group: the offsets asked, at most the count asked,
stopping at the row group's end, and the pull's tag and SQL92 filters applied as to local
records (the same records a local read would return, byte for byte)."""

from __future__ import annotations

from skiff.broker.operations.pull import PullRequest
from skiff.broker.operations.subscription import compile_subscription
import numpy as np
import pyarrow as pa

from skiff.broker.tier.reads import TierReads, rebuilt_run
from skiff.common.hashing import tag_hash
from skiff.common.stored_message import decode_records
from skiff.filter import MessageFilter
from skiff.store.results import GetStatus
from skiff.tier.columns import records_to_table, rows_to_record_list
from tests.unit.tier.records import make_records

RECORDS = make_records("T", 0, 100, 40)  # offsets 100..139, tags t0/t1/t2 by offset % 3, property color


def _run():
    return rebuilt_run(records_to_table(RECORDS, "broker-a"))


def test_a_rebuilt_run_holds_each_record_its_offset_and_its_tag_code():
    table = records_to_table(RECORDS, "broker-a")
    tags = ["t1", None, "", "t1"] + table.column("tags").to_pylist()[4:]
    run = rebuilt_run(table.set_column(table.schema.get_field_index("tags"), "tags", pa.array(tags, pa.string())))
    records = rows_to_record_list(table)
    assert run.records == RECORDS and run.ends.tolist() == np.cumsum([len(r) for r in records]).tolist()
    assert run.offsets.tolist() == list(range(100, 140))
    assert run.tag_codes.tolist() == [tag_hash(t) for t in tags] and run.tag_codes[1] == run.tag_codes[2] == 0


def _filter(expression: str, kind: str = "TAG") -> MessageFilter:
    flt = compile_subscription(expression, kind, True)
    assert isinstance(flt, MessageFilter), flt
    return flt


def _answer(offset: int, count: int, flt: MessageFilter):
    reads = TierReads.__new__(TierReads)  # _answer uses no state but the counter
    reads.served = 0
    return reads._answer(_run(), PullRequest("G", "T", 0, offset, count), flt, 100, 500)


def _offsets(result) -> list[int]:
    return [m.queue_offset for m in decode_records(b"".join(result.buffers))]


def test_an_unfiltered_answer_is_the_records_themselves() -> None:
    r = _answer(110, 8, _filter("*"))
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.FOUND, 118, 100, 500)
    assert b"".join(r.buffers) == b"".join(RECORDS_BY_OFFSET[o] for o in range(110, 118))
    assert _offsets(r) == r.queue_offsets == list(range(110, 118))


def test_an_answer_stops_at_the_row_groups_end() -> None:
    r = _answer(135, 32, _filter("*"))
    assert (_offsets(r), r.next_begin_offset) == (list(range(135, 140)), 140)


def test_tag_and_sql_filters_keep_what_a_local_read_keeps() -> None:
    r = _answer(100, 12, _filter("t1 || t2"))
    assert _offsets(r) == [o for o in range(100, 112) if o % 3 in (1, 2)] and r.next_begin_offset == 112
    r = _answer(100, 12, _filter("color = 'red'", "SQL92"))
    assert _offsets(r) == [o for o in range(100, 112) if o % 2 == 0]
    r = _answer(101, 1, _filter("t0"))
    assert (r.status, r.next_begin_offset, r.buffers) == (GetStatus.NO_MATCHED_MESSAGE, 102, [])


def _by_offset() -> dict[int, bytes]:
    out, pos = {}, 0
    for m in decode_records(RECORDS):
        out[m.queue_offset] = RECORDS[pos:pos + m.store_size]
        pos += m.store_size
    return out


RECORDS_BY_OFFSET = _by_offset()
