"""Stored records made for tier tests: one queue's run, as a pull answer holds them."""

from __future__ import annotations

from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host, record_size, write_record


def make_records(topic: str, queue_id: int, first: int, n: int, *, t0_ms: int = 1_700_000_000_000) -> bytes:
    """``n`` records of ``topic``/``queue_id`` from queue offset ``first``, with keys, tags, a client
    id and a user property, one store time per ms."""
    out = bytearray()
    for i in range(first, first + n):
        body = f"body-{i}-".encode() * (1 + i % 5)
        props = encode_properties({Prop.KEYS: f"k{i} k{i % 7}", Prop.TAGS: f"t{i % 3}", Prop.UNIQ_KEY: f"ID{i:08X}",
                                   Prop.WAIT: "true", "color": ["red", "green"][i % 2]})
        topic_b = topic.encode()
        buf = bytearray(record_size(len(body), len(topic_b), len(props)))
        write_record(buf, 0, queue_id, i % 4, i, 1000 + 100 * i, 0, t0_ms + i, pack_host("10.0.0.1", 5000),
                     t0_ms + i + 1, pack_host("127.0.0.1", 10911), i % 2, 0, body, topic_b, props)
        out += buf
    return bytes(out)
