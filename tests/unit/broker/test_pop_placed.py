"""A popped record's CommitLog offset and reconsume times (`_placed`, read at fixed offsets for
IPv4 hosts) are the ones its whole head holds, with IPv4 and IPv6 hosts."""

from __future__ import annotations

import pytest

from skiff.broker.pop.service import _placed
from skiff.common.record import pack_host, read_head, write_record


@pytest.mark.parametrize(("born", "store"), [("10.0.0.1", "10.0.0.2"), ("::1", "10.0.0.2"), ("10.0.0.1", "::2")])
def test_a_popped_records_place_and_reconsume_times_are_its_heads(born: str, store: str):
    buf = bytearray(1024)
    size = write_record(buf, 0, 3, 0, 12_345, 987_654_321_012, 0, 1_800_000_000_000, pack_host(born, 5555),
                        1_800_000_000_100, pack_host(store, 10911), 7, 0, b"body", b"T", b"")
    record = memoryview(bytes(buf[:size]))
    head = read_head(record)
    assert _placed(record) == (head.physical_offset, head.reconsume_times) == (987_654_321_012, 7)
