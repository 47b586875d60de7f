"""RocketMQ's stored-message record: the CommitLog's format and the pull answer's.

The store writes these records; a pull answer is a run of them copied verbatim;
clients decode them. The layout lives here because both the store (which must
not import the protocol) and the protocol/client need it.

Layout (big-endian, magic V1, IPv4 hosts; an IPv6 host takes 16+4 bytes and sets
sysFlag BORNHOST_V6 / STOREHOST_V6):

| #  | offset | size  | field                                          |
|----|--------|-------|------------------------------------------------|
| 1  | 0      | 4     | TOTALSIZE, the whole record                    |
| 2  | 4      | 4     | MAGICCODE 0xDAA320A7 (blank EOF: 0xCBD43194)   |
| 3  | 8      | 4     | BODYCRC = crc32(body) & 0x7FFFFFFF             |
| 4  | 12     | 4     | QUEUEID                                        |
| 5  | 16     | 4     | FLAG (user flag)                               |
| 6  | 20     | 8     | QUEUEOFFSET (logical offset in the queue)      |
| 7  | 28     | 8     | PHYSICALOFFSET (CommitLog byte offset)         |
| 8  | 36     | 4     | SYSFLAG                                        |
| 9  | 40     | 8     | BORNTIMESTAMP (ms)                             |
| 10 | 48     | 8     | BORNHOST: IPv4 4 + port int32 4                |
| 11 | 56     | 8     | STORETIMESTAMP (ms)                            |
| 12 | 64     | 8     | STOREHOST: IPv4 4 + port int32 4               |
| 13 | 72     | 4     | RECONSUMETIMES                                 |
| 14 | 76     | 8     | PREPARED TRANSACTION OFFSET                    |
| 15 | 84     | 4 + n | BODY length + bytes                            |
| 16 |        | 1 + n | TOPIC length (signed byte) + UTF-8             |
| 17 |        | 2 + n | PROPERTIES length (signed int16) + bytes       |

TOTALSIZE = 91 + body + topic + properties for IPv4. The blank record that
fills the tail of a CommitLog file is TOTALSIZE (the bytes left) + the blank magic.

The offsets are named below (``*_AT``), the one place the rest of the code takes
them from, beside the head's struct format and the asserts that hold the two
together. Fields 1 to 10 sit at the same offset in every record; the ones after the
born host move by 12 bytes for each IPv6 host, so their names end in ``_V4``
(`head_struct_for` gives a record's real head, whose size is where its body starts).
"""

from __future__ import annotations

import ipaddress
import itertools
import mmap
import re
import struct
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.sysflag import MessageSysFlag


MAGIC_V1 = -626843481  # 0xDAA320A7 as a signed int32
BLANK_MAGIC = -875286124  # 0xCBD43194 as a signed int32
HOST_V4_BYTES = 8
HOST_V6_BYTES = 20
FIXED_BYTES_V4 = 91
"""Record bytes that are not body, topic or properties, with IPv4 hosts."""


def _head_struct(born_host_bytes: int, store_host_bytes: int) -> struct.Struct:
    return struct.Struct(f">iiiiiqqiq{born_host_bytes}sq{store_host_bytes}siqi")


# The table's offset column (with IPv4 hosts for the _V4 ones).
TOTAL_SIZE_AT = 0
MAGIC_AT = 4
BODY_CRC_AT = 8
QUEUE_ID_AT = 12
FLAG_AT = 16
QUEUE_OFFSET_AT = 20
PHYSICAL_OFFSET_AT = 28
SYSFLAG_AT = 36
BORN_TIMESTAMP_AT = 40
BORN_HOST_AT = 48
STORE_TIMESTAMP_AT_V4 = 56
STORE_HOST_AT_V4 = 64
RECONSUME_TIMES_AT_V4 = 72
PREPARED_TRANSACTION_OFFSET_AT_V4 = 76
BODY_LENGTH_AT_V4 = 84
BODY_AT_V4 = 88
HEAD_V4 = _head_struct(HOST_V4_BYTES, HOST_V4_BYTES)
assert HEAD_V4.size == BODY_AT_V4 == 88, HEAD_V4.size
_HEAD_V4_CODES: list[str] = re.findall(r"\d*[a-z]", HEAD_V4.format[1:])
"""HEAD_V4's format by field: "i", "i", ..., "8s", ...; the sizes of the ones before a
field add up to its offset."""
assert [struct.calcsize(">" + "".join(_HEAD_V4_CODES[:n])) for n in range(len(_HEAD_V4_CODES))] == [
    TOTAL_SIZE_AT, MAGIC_AT, BODY_CRC_AT, QUEUE_ID_AT, FLAG_AT, QUEUE_OFFSET_AT, PHYSICAL_OFFSET_AT, SYSFLAG_AT,
    BORN_TIMESTAMP_AT, BORN_HOST_AT, STORE_TIMESTAMP_AT_V4, STORE_HOST_AT_V4, RECONSUME_TIMES_AT_V4,
    PREPARED_TRANSACTION_OFFSET_AT_V4, BODY_LENGTH_AT_V4,
], "the *_AT offsets are not HEAD_V4's field offsets"
assert FIXED_BYTES_V4 == BODY_AT_V4 + 1 + 2  # + TOPIC length + PROPERTIES length
_HEADS = {
    (b, s): _head_struct(b, s)
    for b in (HOST_V4_BYTES, HOST_V6_BYTES)
    for s in (HOST_V4_BYTES, HOST_V6_BYTES)
}
_TOTAL_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOST_V6)
"""Plain ints: ``&`` with an IntFlag member goes through enum code, several times slower."""
BLANK_HEAD = _TOTAL_MAGIC
"""A blank (end-of-file) record is just TOTALSIZE and the blank magic."""


class RecordHead(NamedTuple):
    """The fixed part of a record, as `struct` unpacks it."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int


def pack_host(host: str, port: int) -> bytes:
    """Pack ``host:port`` as a record stores it: IP bytes then a 4-byte port."""
    ip = ipaddress.ip_address(host)
    return ip.packed + port.to_bytes(4, "big", signed=True)


def unpack_host(packed: bytes) -> str:
    """``ip:port`` text of a packed host."""
    ip = ipaddress.ip_address(bytes(packed[:-4]))
    return f"{ip}:{int.from_bytes(packed[-4:], 'big', signed=True)}"


def parse_host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def body_crc(body: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(
    body_len: int,
    topic_len: int,
    props_len: int,
    born_host_len: int = HOST_V4_BYTES,
    store_host_len: int = HOST_V4_BYTES,
) -> int:
    return FIXED_BYTES_V4 - 2 * HOST_V4_BYTES + born_host_len + store_host_len + body_len + topic_len + props_len


def write_record(
    buf: bytearray | memoryview,
    pos: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes | memoryview,
    topic: bytes,
    properties: bytes,
    crc: int | None = None,
) -> int:
    """Lay one record down at ``buf[pos:]`` and return its size (`pack_records` for one).

    The caller checks limits and room first; this function only writes. The
    host lengths decide the IPv6 sysFlag bits, which are set here.
    """
    size = record_size(len(body), len(topic), len(properties), len(born_host), len(store_host))
    row = (None, queue_id, body, properties, flag, sys_flag, born_timestamp, born_host, reconsume_times,
           prepared_transaction_offset)
    pack_records((row,), topic, (queue_offset,), (physical_offset,), (size,), store_timestamp, store_host,
                 None if crc is None else (crc,), buf, pos)
    return size


RecordRow = tuple[Any, ...]
"""A message to lay down: a tuple whose items 1 to 9 are queue id, body, properties, flag,
sysFlag, born timestamp, born host, reconsume times and prepared transaction offset
(item 0, the topic, is the batch's; more items may follow). That is the layout of the
store's ``MessageInput`` (`skiff.common.kernels.ROW_LAYOUTS`, checked when it is
defined), so a batch of those is written as it comes."""


def pack_records_py(
    rows: Sequence[RecordRow],
    topic: bytes,
    queue_offsets: Sequence[int],
    physical_offsets: Sequence[int],
    sizes: Sequence[int],
    store_timestamp: int,
    store_host: bytes,
    body_crcs: Sequence[int] | None = None,
    out: bytearray | mmap.mmap | memoryview | None = None,
    at: int = 0,
) -> bytes | None:
    """Records of one topic, back to back: one bytes object, or, given ``out``, written into
    it at ``at`` (the CommitLog's mapping: the compiled kernel then lays them down there
    without a copy in between; ValueError, and nothing written, when they do not fit).

    This loop is the store's append hot path: per record one ``Struct.pack`` of the
    fixed part and one list extend; the join copies the bodies once. (Feeding
    ``map(head.pack, ...)`` with column iterators, or filling the heads as a numpy
    structured array, measured no faster for batches of 32 to 64, and slower for
    one record.) ``sizes`` are the `record_size`s, which the caller needed first to
    find room. The body CRC is computed unless ``body_crcs`` gives it.
    """
    heads = _HEADS_BY_STORE_HOST[len(store_host)]
    middles = _middles_of(topic)
    parts: list[bytes | memoryview] = []
    crc32 = zlib.crc32
    for row, size, crc, queue_offset, phys in zip(rows, sizes, body_crcs or _NO_CRCS, queue_offsets,
                                                  physical_offsets):
        queue_id, body, props, flag, sys_flag, born_ts, born_host, reconsume, prepared = row[1:10]
        head, host_bits = heads[len(born_host)]
        parts += (
            head.pack(size, MAGIC_V1, (crc32(body) if crc is None else crc) & _CRC_MASK, queue_id, flag,
                      queue_offset, phys, sys_flag | host_bits, born_ts, born_host, store_timestamp, store_host,
                      reconsume, prepared, len(body)),
            body, middles[len(props)], props,
        )
    data = b"".join(parts)
    if out is None:
        return data
    if at < 0 or at + len(data) > len(out):
        raise ValueError(f"{len(data)} bytes of records do not fit at {at} in a buffer of {len(out)}")
    out[at : at + len(data)] = data
    return None


pack_records = kernels.select("pack_records", pack_records_py)
"""`pack_records_py`, compiled where built (`skiff.common.kernels`)."""
_NO_CRCS = itertools.repeat(None)
_CRC_MASK = 0x7FFFFFFF
_HEADS_BY_STORE_HOST = {
    store: {
        born: (_HEADS[(born, store)],
               (_STORE_V6 if store == HOST_V6_BYTES else 0) | (_BORN_V6 if born == HOST_V6_BYTES else 0))
        for born in (HOST_V4_BYTES, HOST_V6_BYTES)
    }
    for store in (HOST_V4_BYTES, HOST_V6_BYTES)
}
"""Head struct and IPv6 sysFlag bits, by store-host then born-host length."""
_MIDDLES: dict[bytes, _Middles] = {}
_MIDDLES_MAX = 4096


class _Middles(dict[int, bytes]):
    """The record bytes between body and properties (TOPIC length + TOPIC + PROPERTIES
    length) of one topic, by properties length: made once, not per record."""

    def __init__(self, topic: bytes) -> None:
        super().__init__()
        self.topic_block = bytes((len(topic),)) + topic

    def __missing__(self, props_len: int) -> bytes:
        if len(self) >= _MIDDLES_MAX:
            self.clear()
        middle = self[props_len] = self.topic_block + _I16.pack(props_len)
        return middle


def _middles_of(topic: bytes) -> _Middles:
    middles = _MIDDLES.get(topic)
    if middles is None:
        if len(_MIDDLES) >= _MIDDLES_MAX:
            _MIDDLES.clear()
        middles = _MIDDLES[topic] = _Middles(topic)
    return middles


def head_struct_for(sys_flag: int) -> struct.Struct:
    born = HOST_V6_BYTES if sys_flag & _BORN_V6 else HOST_V4_BYTES
    store = HOST_V6_BYTES if sys_flag & _STORE_V6 else HOST_V4_BYTES
    return _HEADS[(born, store)]


def read_head(buf: bytes | memoryview | bytearray | mmap.mmap, pos: int = 0) -> RecordHead:
    """Unpack the fixed part of the record at ``pos`` (magic not checked)."""
    if pos + SYSFLAG_AT + 4 > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_AT)[0]
    head = head_struct_for(sys_flag)
    if pos + head.size > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    return RecordHead._make(head.unpack_from(buf, pos))


class RecordTail(NamedTuple):
    body_pos: int
    body_length: int
    topic: str
    properties_raw: bytes


def read_tail(buf: bytes | memoryview | bytearray | mmap.mmap, pos: int, head: RecordHead) -> RecordTail:
    """Locate the body and decode topic and raw properties of the record at ``pos``."""
    body_pos = pos + head_struct_for(head.sys_flag).size
    p = body_pos + head.body_length
    end = pos + head.total_size
    if head.body_length < 0 or p + 1 > end:
        raise DecodeError(f"record at {pos}: body length {head.body_length} overruns the record")
    topic_len = buf[p]
    if p + 1 + topic_len + 2 > end:
        raise DecodeError(f"record at {pos}: topic overruns the record")
    topic = bytes(buf[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
    p += 1 + topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    if props_len < 0 or p + 2 + props_len != end:
        raise DecodeError(f"record at {pos}: properties length {props_len} does not fit")
    return RecordTail(body_pos, head.body_length, topic, bytes(buf[p + 2 : p + 2 + props_len]))
