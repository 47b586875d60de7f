"""The ProduceRequest of one topic and one partition, read and answered without the schema
interpreter: what a Kafka producer sends when it has one partition's batch ready (librdkafka
sends every partition's batch in its own request), at the versions Skiff serves (3–8, none
of them flexible).

`schema.decode` and `schema.encode` walk a request's fields as data: about 40 µs of Python
for a Produce and its answer, more than the store's append of its record. `parse_produce`
reads the same bytes with a few ``struct`` reads and `produce_answer` writes a success answer
in one ``pack``; both are checked against the interpreter byte for byte
(tests/unit/protocol/kafka/test_produce_wire.py), and the compiled reader against
`parse_produce_py`. Anything else — another API or version, a
transactional id, several topics or partitions, null records, bytes left over — is not
parsed here (None), and goes the general way (`frames.decode_request`).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from skiff.common import kernels

PRODUCE_KEY = 0
FIRST_VERSION = 3
LAST_VERSION = 8
_HEAD = struct.Struct(">hhih")
"""api key, api version, correlation id, client id length."""
_FIELDS = struct.Struct(">hhiih")
"""transactional id length (-1: null), acks, timeout, topic count, topic name length."""
_PARTITION = struct.Struct(">iii")
"""partition count, partition index, records length."""
_I32 = struct.Struct(">i")


class ProduceOne(NamedTuple):
    """One partition's records of one ProduceRequest, with what its answer needs (not the
    client id: no answer carries it)."""

    correlation_id: int
    version: int
    acks: int
    topic: str
    partition: int
    records: bytes


def parse_produce(frame: bytes) -> ProduceOne | None:
    """``frame`` (without its size prefix) as a one-partition Produce, or None when it is
    anything else (then it is decoded the general way, which also says what is wrong). By the
    compiled kernel where it is built (`_records.pyx`: one call per Produce of one record), else
    `parse_produce_py`."""
    return _parse(frame, ProduceOne)


def parse_produce_py(frame: bytes, produce_one: type[ProduceOne] = ProduceOne) -> ProduceOne | None:
    """`parse_produce` in Python, a few ``struct`` reads (``produce_one``: the kernel's signature)."""
    size = len(frame)
    if size < _HEAD.size + _FIELDS.size + _PARTITION.size:
        return None
    key, version, correlation, client_len = _HEAD.unpack_from(frame, 0)
    if key != PRODUCE_KEY or not FIRST_VERSION <= version <= LAST_VERSION or client_len < -1:
        return None
    pos = _HEAD.size + max(client_len, 0)
    if pos + _FIELDS.size > size:
        return None
    txn_len, acks, _timeout, topics, name_len = _FIELDS.unpack_from(frame, pos)
    if txn_len != -1 or topics != 1 or name_len < 0:
        return None
    pos += _FIELDS.size
    name_end = pos + name_len
    if name_end + _PARTITION.size > size:
        return None
    partitions, partition, records_len = _PARTITION.unpack_from(frame, name_end)
    records_at = name_end + _PARTITION.size
    if partitions != 1 or records_len < 0 or records_at + records_len != size:
        return None
    try:
        topic = frame[pos:name_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return produce_one(correlation, version, acks, topic, partition, frame[records_at:])


_parse = kernels.select("parse_produce", parse_produce_py, "skiff.protocol.kafka._records")


_ANSWER_TAILS = {
    # version: what follows the topic name: partition count, index, error code, base offset,
    # log append time (v2+), log start offset (v5+), record errors count and a null error
    # message (v8+), throttle time (v1+)
    3: "iihqqi", 4: "iihqqi", 5: "iihqqqi", 6: "iihqqqi", 7: "iihqqqi", 8: "iihqqqihi",
}
_ANSWERS: dict[tuple[int, int], struct.Struct] = {}
"""The whole answer's layout per version and topic name length, made once."""


def produce_answer(req: ProduceOne, topic_raw: bytes, base_offset: int, log_start_offset: int) -> bytes:
    """The whole success answer frame (size prefix included) to ``req``: its partition stored
    from ``base_offset``. ``topic_raw``: the topic name's UTF-8 bytes."""
    version = req.version
    layout = _ANSWERS.get((version, len(topic_raw)))
    if layout is None:  # size, correlation id, topic count, topic name, then the version's tail
        layout = _ANSWERS[(version, len(topic_raw))] = struct.Struct(f">iiih{len(topic_raw)}s{_ANSWER_TAILS[version]}")
    size = layout.size - 4
    if version >= 8:
        return layout.pack(size, req.correlation_id, 1, len(topic_raw), topic_raw, 1, req.partition, 0, base_offset,
                           -1, log_start_offset, 0, -1, 0)
    if version >= 5:
        return layout.pack(size, req.correlation_id, 1, len(topic_raw), topic_raw, 1, req.partition, 0, base_offset,
                           -1, log_start_offset, 0)
    return layout.pack(size, req.correlation_id, 1, len(topic_raw), topic_raw, 1, req.partition, 0, base_offset, -1, 0)
