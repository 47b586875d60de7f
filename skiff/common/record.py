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
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from typing import NamedTuple

from skiff.common.compression import inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.properties import Prop, decode_properties, split_keys
from skiff.common.sysflag import MessageSysFlag

MAGIC_V1 = -626843481  # 0xDAA320A7 as a signed int32
BLANK_MAGIC = -875286124  # 0xCBD43194 as a signed int32
HOST_V4_BYTES = 8
HOST_V6_BYTES = 20
FIXED_BYTES_V4 = 91
"""Record bytes that are not body, topic or properties, with IPv4 hosts."""


def _head_struct(born_host_bytes: int, store_host_bytes: int) -> struct.Struct:
    return struct.Struct(f">iiiiiqqiq{born_host_bytes}sq{store_host_bytes}siqi")


HEAD_V4 = _head_struct(HOST_V4_BYTES, HOST_V4_BYTES)
assert HEAD_V4.size == 88, HEAD_V4.size
_HEADS = {
    (b, s): _head_struct(b, s)
    for b in (HOST_V4_BYTES, HOST_V6_BYTES)
    for s in (HOST_V4_BYTES, HOST_V6_BYTES)
}
_TOTAL_MAGIC = struct.Struct(">ii")
_SYSFLAG_AT = 36
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
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


def body_crc(body: bytes | memoryview) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(
    body_len: int,
    topic_len: int,
    props_len: int,
    born_host_len: int = HOST_V4_BYTES,
    store_host_len: int = HOST_V4_BYTES,
) -> int:
    return FIXED_BYTES_V4 - 2 * HOST_V4_BYTES + born_host_len + store_host_len + body_len + topic_len + props_len


def host_flags(born_host: bytes, store_host: bytes) -> int:
    flags = 0
    if len(born_host) == HOST_V6_BYTES:
        flags |= MessageSysFlag.BORNHOST_V6
    if len(store_host) == HOST_V6_BYTES:
        flags |= MessageSysFlag.STOREHOST_V6
    return flags


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
    """Lay one record down at ``buf[pos:]`` and return its size.

    The caller checks limits and room first; this function only writes. The
    host lengths decide the IPv6 sysFlag bits, which are set here. Arguments may
    be passed by position: the store's append loop does, as keyword passing costs
    more than packing the record.
    """
    if not isinstance(body, bytes):
        body = bytes(body)
    born_len = len(born_host)
    store_len = len(store_host)
    if born_len != HOST_V4_BYTES or store_len != HOST_V4_BYTES:
        sys_flag |= host_flags(born_host, store_host)
    body_len = len(body)
    topic_len = len(topic)
    props_len = len(properties)
    whole = _whole_record_struct(born_len, store_len, body_len, topic_len, props_len)
    whole.pack_into(
        buf, pos, whole.size, MAGIC_V1, body_crc(body) if crc is None else crc, queue_id, flag,
        queue_offset, physical_offset, sys_flag, born_timestamp, born_host, store_timestamp,
        store_host, reconsume_times, prepared_transaction_offset, body_len, body, topic_len,
        topic, props_len, properties,
    )
    return whole.size


_WHOLE_STRUCTS: dict[tuple[int, int, int, int, int], struct.Struct] = {}
_WHOLE_STRUCTS_MAX = 4096


def _whole_record_struct(born: int, store: int, body: int, topic: int, props: int) -> struct.Struct:
    """The head struct extended by body, topic and properties: one ``pack_into`` per
    record costs about a third of packing the parts one by one (the append hot path)."""
    key = (born, store, body, topic, props)
    whole = _WHOLE_STRUCTS.get(key)
    if whole is None:
        if len(_WHOLE_STRUCTS) >= _WHOLE_STRUCTS_MAX:
            _WHOLE_STRUCTS.clear()
        whole = struct.Struct(f"{_HEADS[(born, store)].format}{body}sB{topic}sh{props}s")
        _WHOLE_STRUCTS[key] = whole
    return whole


_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOST_V6)
"""Plain ints: ``&`` with an IntFlag member goes through enum code, several times slower."""


def head_struct_for(sys_flag: int) -> struct.Struct:
    born = HOST_V6_BYTES if sys_flag & _BORN_V6 else HOST_V4_BYTES
    store = HOST_V6_BYTES if sys_flag & _STORE_V6 else HOST_V4_BYTES
    return _HEADS[(born, store)]


def read_head(buf: bytes | memoryview | bytearray, pos: int = 0) -> RecordHead:
    """Unpack the fixed part of the record at ``pos`` (magic not checked)."""
    if pos + _SYSFLAG_AT + 4 > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    sys_flag = _I32.unpack_from(buf, pos + _SYSFLAG_AT)[0]
    head = head_struct_for(sys_flag)
    if pos + head.size > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    return RecordHead._make(head.unpack_from(buf, pos))


class RecordTail(NamedTuple):
    body_pos: int
    body_length: int
    topic: str
    properties_raw: bytes


def read_tail(buf: bytes | memoryview | bytearray, pos: int, head: RecordHead) -> RecordTail:
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


class StoredMessage(NamedTuple):
    """A message as stored and as consumers see it (RocketMQ's MessageExt).

    A NamedTuple rather than a frozen dataclass: consumers build one per
    message and tuple construction is several times cheaper.
    """

    topic: str
    body: bytes
    properties: dict[str, str]
    flag: int = 0
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    store_timestamp: int = 0
    store_host: str = ""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    offset_msg_id: str = ""

    @property
    def msg_id(self) -> str:
        """The client's UNIQ_KEY when it set one, else the broker's offsetMsgId."""
        return self.properties.get(Prop.UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(Prop.KEYS))

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)


_HOST_V6_FLAGS = int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_Q = struct.Struct(">q")


@functools.lru_cache(maxsize=1024)
def _host_text(packed: bytes) -> str:
    return unpack_host(packed)


def decode_record(
    buf: bytes | memoryview | bytearray,
    pos: int = 0,
    *,
    decompress: bool = True,
    max_body_bytes: int = FRAME_MAX_BYTES,
) -> StoredMessage:
    """Decode the record at ``pos`` into a `StoredMessage`.

    A compressed body is inflated (to at most ``max_body_bytes``) and the
    sysFlag keeps its COMPRESSED bit, as Java's decoder leaves it.
    """
    end = len(buf)
    if pos + HEAD_V4.size > end:
        raise DecodeError(f"record at {pos} is cut short")
    sys_flag = _I32.unpack_from(buf, pos + _SYSFLAG_AT)[0]
    head = HEAD_V4 if not sys_flag & _HOST_V6_FLAGS else head_struct_for(sys_flag)
    if pos + head.size > end:
        raise DecodeError(f"record at {pos} is cut short")
    (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host,
     store_ts, store_host, reconsume, prepared, body_len) = head.unpack_from(buf, pos)
    if magic != MAGIC_V1:
        raise DecodeError(f"record at {pos}: bad magic {magic & 0xFFFFFFFF:#x}")
    rec_end = pos + total
    if total <= 0 or rec_end > end:
        raise DecodeError(f"record at {pos}: size {total} overruns the buffer")
    p = pos + head.size
    q = p + body_len
    if body_len < 0 or q + 3 > rec_end:
        raise DecodeError(f"record at {pos}: body length {body_len} overruns the record")
    body = bytes(buf[p:q])
    topic_len = buf[q]
    t = q + 1 + topic_len
    if t + 2 > rec_end:
        raise DecodeError(f"record at {pos}: topic overruns the record")
    props_len = _I16.unpack_from(buf, t)[0]
    if props_len < 0 or t + 2 + props_len != rec_end:
        raise DecodeError(f"record at {pos}: properties length {props_len} does not fit")
    if decompress and sys_flag & _COMPRESSED:
        body = inflate(body, max_body_bytes)
    return StoredMessage(
        bytes(buf[q + 1 : t]).decode("utf-8", "replace"),
        body,
        decode_properties(bytes(buf[t + 2 : rec_end])),
        flag, queue_id, queue_offset, phys, sys_flag, born_ts, _host_text(born_host), store_ts,
        _host_text(store_host), reconsume, prepared, crc, total,
        (store_host + _Q.pack(phys)).hex().upper(),
    )


def decode_records(
    buf: bytes | memoryview | bytearray,
    *,
    decompress: bool = True,
    max_body_bytes: int = FRAME_MAX_BYTES,
) -> list[StoredMessage]:
    """Decode a run of records back to back, as in a pull answer body."""
    out: list[StoredMessage] = []
    pos = 0
    end = len(buf)
    while pos < end:
        msg = decode_record(buf, pos, decompress=decompress, max_body_bytes=max_body_bytes)
        out.append(msg)
        pos += msg.store_size
    return out
