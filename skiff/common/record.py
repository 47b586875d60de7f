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
import itertools
import operator
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from skiff.common.compression import inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties, split_keys
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
    buf[pos : pos + size] = pack_records(
        (row,), topic, (queue_offset,), (physical_offset,), (size,), store_timestamp, store_host,
        None if crc is None else (crc,),
    )
    return size


RecordRow = tuple
"""A message to lay down: a tuple whose items 1 to 9 are queue id, body, properties, flag,
sysFlag, born timestamp, born host, reconsume times and prepared transaction offset
(item 0, the topic, is the batch's; more items may follow). That is the layout of the
store's ``MessageInput``, so a batch of those is written as it comes."""


def pack_records(
    rows: Sequence[RecordRow],
    topic: bytes,
    queue_offsets: Sequence[int],
    physical_offsets: Sequence[int],
    sizes: Sequence[int],
    store_timestamp: int,
    store_host: bytes,
    body_crcs: Sequence[int] | None = None,
) -> bytes:
    """Records of one topic, back to back, as one bytes object for a single copy into the
    CommitLog.

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
    return b"".join(parts)


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


_FIELDS = (
    "topic", "body", "properties", "flag", "queue_id", "queue_offset", "commit_log_offset", "sys_flag",
    "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "body_crc", "store_size", "offset_msg_id",
)
_FIELD_VALUES = operator.attrgetter(*_FIELDS)
_set_field = object.__setattr__


class StoredMessage:
    """A message as stored and as consumers see it (RocketMQ's MessageExt).

    Immutable, with the fields and helpers of the NamedTuple it used to be
    (``_fields``, ``_replace``, ``_asdict``, iteration and indexing in field
    order, equality by fields). Messages decoded from a pull body are the lazy
    `_DecodedMessage`: a consumer pays per message only for the fields it reads.
    """

    __slots__ = _FIELDS
    _fields = _FIELDS

    topic: str
    body: bytes
    properties: dict[str, str]
    flag: int
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    store_size: int
    offset_msg_id: str

    def __init__(
        self, topic: str, body: bytes, properties: dict[str, str], flag: int = 0, queue_id: int = 0,
        queue_offset: int = 0, commit_log_offset: int = 0, sys_flag: int = 0, born_timestamp: int = 0,
        born_host: str = "", store_timestamp: int = 0, store_host: str = "", reconsume_times: int = 0,
        prepared_transaction_offset: int = 0, body_crc: int = 0, store_size: int = 0, offset_msg_id: str = "",
    ) -> None:
        for name, value in zip(_FIELDS, (
            topic, body, properties, flag, queue_id, queue_offset, commit_log_offset, sys_flag, born_timestamp,
            born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset, body_crc,
            store_size, offset_msg_id,
        )):
            _set_field(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StoredMessage is immutable (use _replace): cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"StoredMessage is immutable: cannot delete {name}")

    @property
    def msg_id(self) -> str:
        """The client's UNIQ_KEY when it set one, else the broker's offsetMsgId."""
        return self.get_property(Prop.UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.get_property(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.get_property(Prop.KEYS))

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    @classmethod
    def _make(cls, values: Iterable[object]) -> StoredMessage:
        return StoredMessage(*values)  # type: ignore[arg-type]

    def _asdict(self) -> dict[str, object]:
        return dict(zip(_FIELDS, _FIELD_VALUES(self)))

    def _replace(self, **changes: object) -> StoredMessage:
        return StoredMessage(**{**self._asdict(), **changes})  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[object]:
        return iter(_FIELD_VALUES(self))

    def __len__(self) -> int:
        return len(_FIELDS)

    def __getitem__(self, index: int | slice) -> object:
        return _FIELD_VALUES(self)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredMessage):
            return NotImplemented
        return _FIELD_VALUES(self) == _FIELD_VALUES(other)

    __hash__ = None  # type: ignore[assignment]
    """Unhashable, as the NamedTuple was (its properties are a dict)."""

    def __repr__(self) -> str:
        return "StoredMessage(" + ", ".join(f"{n}={v!r}" for n, v in zip(_FIELDS, _FIELD_VALUES(self))) + ")"

    def __reduce__(self) -> tuple[type[StoredMessage], tuple[object, ...]]:
        return StoredMessage, _FIELD_VALUES(self)


_HOST_V6_FLAGS = int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_Q = struct.Struct(">q")


@functools.lru_cache(maxsize=1024)
def _host_text(packed: bytes) -> str:
    return unpack_host(packed)


class _Source:
    """What the messages decoded from one buffer share: the buffer, the properties
    the caller adds to each (a pull's MIN_OFFSET and MAX_OFFSET) and decoded topics."""

    __slots__ = ("buf", "extra", "topics")

    def __init__(self, buf: bytes, extra: Mapping[str, str] | None) -> None:
        self.buf = buf
        self.extra = dict(extra) if extra else None
        self.topics: dict[bytes, str] = {}

    def topic(self, raw: bytes) -> str:
        text = self.topics.get(raw)
        if text is None:
            text = self.topics[raw] = raw.decode("utf-8", "replace")
        return text


def _head_item(index: int) -> property:
    """A public field that is item ``index`` of the unpacked fixed part."""
    return property(lambda msg: msg._h[index])


class _DecodedMessage(StoredMessage):
    """A `StoredMessage` that reads its fields from the record it was decoded from: the
    fixed part is unpacked and the body copied when the pull is decoded; topic,
    properties, hosts and ids cost only when asked for.

    ``_h`` is the unpacked fixed part (`RecordHead`'s order). In ``_src.buf``, which
    the messages of one pull share (it lives as long as any of them), the topic's
    length byte is at ``_topic_at`` and the properties string runs from
    ``_props_at`` to the record's ``_end``; ``_props`` caches the properties dict.
    """

    __slots__ = ("_h", "_src", "_body", "_topic_at", "_props_at", "_end", "_props")
    __setattr__ = object.__setattr__  # the public names are read-only properties
    __delattr__ = object.__delattr__

    _h: tuple
    _src: _Source
    _body: bytes
    _topic_at: int
    _props_at: int
    _end: int
    _props: dict[str, str] | None

    store_size = _head_item(0)
    body_crc = _head_item(2)
    queue_id = _head_item(3)
    flag = _head_item(4)
    queue_offset = _head_item(5)
    commit_log_offset = _head_item(6)
    sys_flag = _head_item(7)
    born_timestamp = _head_item(8)
    store_timestamp = _head_item(10)
    reconsume_times = _head_item(12)
    prepared_transaction_offset = _head_item(13)

    @property  # type: ignore[override]
    def body(self) -> bytes:
        return self._body

    @property  # type: ignore[override]
    def topic(self) -> str:
        return self._src.topic(self._src.buf[self._topic_at + 1 : self._props_at - 2])

    @property  # type: ignore[override]
    def properties(self) -> dict[str, str]:
        props = self._props
        if props is None:
            props = self._props = decode_properties(self._src.buf[self._props_at : self._end])
            if self._src.extra:
                props.update(self._src.extra)
        return props

    @property  # type: ignore[override]
    def born_host(self) -> str:
        return _host_text(self._h[9])

    @property  # type: ignore[override]
    def store_host(self) -> str:
        return _host_text(self._h[11])

    @property  # type: ignore[override]
    def offset_msg_id(self) -> str:
        return (self._h[11] + _Q.pack(self._h[6])).hex().upper()

    def get_property(self, name: str, default: str | None = None) -> str | None:
        """One property, found in the raw string unless the dict is built (same answer)."""
        if self._props is not None:
            return self._props.get(name, default)
        src = self._src
        if src.extra and name in src.extra:
            return src.extra[name]
        value = raw_property(src.buf[self._props_at : self._end], name)
        return default if value is None else value


_PROPERTY_KEYS: dict[str, bytes] = {}
_PROPERTY_KEYS_MAX = 256


def raw_property(raw: bytes, name: str) -> str | None:
    """``decode_properties(raw).get(name)`` without building the dict (a third of the
    cost for one name): finds ``name 0x01`` at a pair's start. The dict decides when
    the pair is not the only one of that name or not well formed, and for a name
    holding U+FFFD (what ``replace`` decoding makes of bytes that are not UTF-8)."""
    key = _PROPERTY_KEYS.get(name)
    if key is None:
        if not name or NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
            return None
        if "\ufffd" in name:
            return decode_properties(raw).get(name)
        if len(_PROPERTY_KEYS) >= _PROPERTY_KEYS_MAX:
            _PROPERTY_KEYS.clear()
        key = _PROPERTY_KEYS[name] = name.encode() + b"\x01"
    at = raw.find(key)
    if at < 0:
        return None
    value_at = at + len(key)
    stop = raw.find(b"\x02", value_at)
    if stop < 0:
        stop = len(raw)
    if (at and raw[at - 1] != 2) or raw.find(b"\x01", value_at, stop) >= 0 or raw.find(key, stop) >= 0:
        return decode_properties(raw).get(name)
    return raw[value_at:stop].decode("utf-8", "replace")


def decode_record(
    buf: bytes | memoryview | bytearray,
    pos: int = 0,
    *,
    decompress: bool = True,
    max_body_bytes: int = FRAME_MAX_BYTES,
) -> StoredMessage:
    """Decode the record at ``pos`` into a `StoredMessage` (it keeps a copy of the record).

    A compressed body is inflated (to at most ``max_body_bytes``) and the
    sysFlag keeps its COMPRESSED bit, as Java's decoder leaves it.
    """
    if pos + _TOTAL_MAGIC.size > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    total = _I32.unpack_from(buf, pos)[0]
    if total <= 0 or pos + total > len(buf):
        raise DecodeError(f"record at {pos}: size {total} overruns the buffer")
    return _decode(bytes(buf[pos : pos + total]), decompress, max_body_bytes, None, pos)[0]


def decode_records(
    buf: bytes | memoryview | bytearray,
    *,
    decompress: bool = True,
    max_body_bytes: int = FRAME_MAX_BYTES,
    extra_properties: Mapping[str, str] | None = None,
) -> list[StoredMessage]:
    """Decode a run of records back to back, as in a pull answer body.

    Each record's fixed part is unpacked and its layout checked here (a bad
    record raises `DecodeError` now, not when a field is read); the rest is
    read from the buffer when asked (`_DecodedMessage`). ``extra_properties``
    are added to every message's properties.
    """
    return _decode(buf if type(buf) is bytes else bytes(buf), decompress, max_body_bytes, extra_properties, 0)


def _decode(data: bytes, decompress: bool, max_body_bytes: int, extra_properties: Mapping[str, str] | None,
            at: int) -> list[StoredMessage]:
    """`decode_records` of ``data``, which sits at ``at`` of the caller's buffer (for error messages).

    The layout checks are inlined: this loop runs once per consumed message.
    """
    src = _Source(data, extra_properties)
    out: list[StoredMessage] = []
    new = object.__new__
    unpack_v4 = HEAD_V4.unpack_from
    v4_size = HEAD_V4.size
    unpack_i16 = _I16.unpack_from
    pos = 0
    end = len(data)
    while pos < end:
        if pos + v4_size > end:
            raise DecodeError(f"record at {at + pos} is cut short")
        h = unpack_v4(data, pos)
        body_at = pos + v4_size
        if h[7] & _HOST_V6_FLAGS:
            h, body_at = _head_v6(data, pos, h[7], at)
        total, magic, body_len = h[0], h[1], h[14]
        rec_end = pos + total
        if magic != MAGIC_V1 or total <= 0 or rec_end > end:
            raise _bad_record(at + pos, magic, total)
        t = body_at + body_len
        if body_len < 0 or t + 3 > rec_end:
            raise DecodeError(f"record at {at + pos}: body length {body_len} overruns the record")
        p = t + 1 + data[t]
        if p + 2 > rec_end:
            raise DecodeError(f"record at {at + pos}: topic overruns the record")
        if p + 2 + unpack_i16(data, p)[0] != rec_end:
            raise DecodeError(f"record at {at + pos}: properties length {unpack_i16(data, p)[0]} does not fit")
        msg = new(_DecodedMessage)
        msg._h = h
        msg._src = src
        msg._body = inflate(data[body_at:t], max_body_bytes) if h[7] & _COMPRESSED and decompress else data[body_at:t]
        msg._topic_at = t
        msg._props_at = p + 2
        msg._end = rec_end
        msg._props = None
        out.append(msg)
        pos = rec_end
    return out


def _head_v6(data: bytes, pos: int, sys_flag: int, at: int) -> tuple[tuple, int]:
    """The fixed part of a record with an IPv6 host, and where its body starts."""
    head = head_struct_for(sys_flag)
    if pos + head.size > len(data):
        raise DecodeError(f"record at {at + pos} is cut short")
    return head.unpack_from(data, pos), pos + head.size


def _bad_record(pos: int, magic: int, total: int) -> DecodeError:
    if magic != MAGIC_V1:
        return DecodeError(f"record at {pos}: bad magic {magic & 0xFFFFFFFF:#x}")
    return DecodeError(f"record at {pos}: size {total} overruns the buffer")
