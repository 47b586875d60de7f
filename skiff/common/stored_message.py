"""The consumer's view of a stored record (RocketMQ's MessageExt), and the decoding
of a run of records (a pull answer) into it.

A pull answer is a run of records in `skiff.common.record`'s layout. Decoding is
the consume path's per-message cost, so it does the least it can per record:
one ``unpack`` of the fixed part, the layout checks, a copy of the body and one
tuple. Topic, properties, hosts and the offset message id are read from the
record only when asked for (`_DecodedMessage`); one property (a message's id,
its tags) is found in the raw properties string without building the dict.

Decoded messages keep the pull's buffer alive as long as any of them lives.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

from skiff.common import kernels
from skiff.common.compression import inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    Prop,
    decode_properties,
    split_keys,
)
from skiff.common.record import HEAD_V4, MAGIC_V1, head_struct_for, read_head, read_tail, unpack_host
from skiff.common.sysflag import MessageSysFlag


class StoredMessage(NamedTuple):
    """A message as stored and as consumers see it (RocketMQ's MessageExt).

    A NamedTuple rather than a frozen dataclass: consumers get one per message
    and tuples are the cheapest immutable objects to make. Decoded messages are
    the lazy subclass `_DecodedMessage`, which behaves as this tuple.
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
        return self.get_property(Prop.UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.get_property(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.get_property(Prop.KEYS))

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)


_Storage = namedtuple(
    "_Storage",
    ["topic", "body", "properties", "flag", "queue_id", "queue_offset", "commit_log_offset", "sys_flag",
     "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset",
     "body_crc", "store_size", "offset_msg_id",
     "source", "born_host_packed", "store_host_packed", "topic_at", "props_at", "end"])
"""A decoded message's tuple: StoredMessage's fields (None where read lazily), then
where the rest of the record is. Its item getters read the extra items. (The names are
spelled out, not built from ``StoredMessage._fields``, so that a type checker sees them.)"""
assert _Storage._fields[: len(StoredMessage._fields)] == StoredMessage._fields

_PUBLIC = operator.attrgetter(*StoredMessage._fields)
"""A message's fields as a tuple (the public view of a decoded one)."""
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_HOST_V6_FLAGS = int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
_Q = struct.Struct(">q")
_I16 = struct.Struct(">h")

T = TypeVar("T")


class _Lazy(Generic[T]):
    """A field computed on first access and kept in the instance's ``__dict__``, which
    then answers every later access (a non-data descriptor)."""

    __slots__ = ("_compute", "_name")

    def __init__(self, compute: Callable[[_DecodedMessage], T]) -> None:
        self._compute = compute
        self._name = compute.__name__

    def __get__(self, msg: _DecodedMessage | None, owner: type | None = None) -> Any:
        if msg is None:
            return self
        value = msg.__dict__[self._name] = self._compute(msg)
        return value


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


@functools.lru_cache(maxsize=1024)
def _host_text(packed: bytes) -> str:
    return unpack_host(packed)


class _DecodedMessage(StoredMessage):
    """A `StoredMessage` decoded from a record: the fixed fields and the body are tuple
    items (C-level reads), topic, properties, hosts and the offset message id are
    `_Lazy`. As a sequence (iteration, indexing, ``len``, comparisons, ``repr``,
    pickling, ``_replace``) it is the tuple of its fields, like an eager one; its
    storage (`_Storage`) holds None for the lazy fields and the record's whereabouts.
    """

    _src: _Source = _Storage.source
    _born_host_packed: bytes = _Storage.born_host_packed
    _store_host_packed: bytes = _Storage.store_host_packed
    _topic_at: int = _Storage.topic_at
    _props_at: int = _Storage.props_at
    _end: int = _Storage.end

    @_Lazy
    def topic(self) -> str:
        src = self._src
        return src.topic(src.buf[self._topic_at + 1 : self._props_at - 2])

    @_Lazy
    def properties(self) -> dict[str, str]:
        src = self._src
        props = decode_properties(src.buf[self._props_at : self._end])
        if src.extra:
            props.update(src.extra)
        return props

    @_Lazy
    def born_host(self) -> str:
        return _host_text(self._born_host_packed)

    @_Lazy
    def store_host(self) -> str:
        return _host_text(self._store_host_packed)

    @_Lazy
    def offset_msg_id(self) -> str:
        return (self._store_host_packed + _Q.pack(self.commit_log_offset)).hex().upper()

    def get_property(self, name: str, default: str | None = None) -> str | None:
        """One property, found in the raw string unless the dict is built (same answer)."""
        props: dict[str, str] | None = self.__dict__.get("properties")
        if props is not None:
            return props.get(name, default)
        src = self._src
        if src.extra and name in src.extra:
            return src.extra[name]
        value = raw_property(src.buf[self._props_at : self._end], name)
        return default if value is None else value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a StoredMessage is immutable (use _replace): cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a StoredMessage is immutable: cannot delete {name}")

    # A decoded message's copies are eager StoredMessages, not decoded ones (there is no
    # record behind them): the narrower return of the NamedTuple's methods does not hold.
    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> StoredMessage:  # type: ignore[override]
        return StoredMessage._make(iterable)

    def _replace(self, **changes: Any) -> StoredMessage:  # type: ignore[override]
        return StoredMessage._make(_PUBLIC(self))._replace(**changes)

    def __iter__(self) -> Any:
        return iter(_PUBLIC(self))

    def __len__(self) -> int:
        return len(StoredMessage._fields)

    def __getitem__(self, index: Any) -> Any:
        return _PUBLIC(self)[index]

    def __contains__(self, value: object) -> bool:
        return value in _PUBLIC(self)

    def __hash__(self) -> int:
        return hash(_PUBLIC(self))

    def __eq__(self, other: object) -> bool:
        return _PUBLIC(self) == _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        return _PUBLIC(self) != _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __lt__(self, other: object) -> bool:
        return _PUBLIC(self) < _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __le__(self, other: object) -> bool:
        return _PUBLIC(self) <= _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return _PUBLIC(self) > _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return _PUBLIC(self) >= _fields_of(other) if isinstance(other, tuple) else NotImplemented

    def __repr__(self) -> str:
        return repr(StoredMessage._make(_PUBLIC(self)))

    def __reduce__(self) -> tuple[type[StoredMessage], tuple[Any, ...]]:
        return StoredMessage, _PUBLIC(self)


def _fields_of(other: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a decoded message compares with: another one's fields, or the tuple itself
    (comparing with anything else is NotImplemented, as for a tuple, and cheap: a
    list's ``count(None)`` must not decode properties)."""
    return _PUBLIC(other) if isinstance(other, _DecodedMessage) else other


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
    if pos + 4 > len(buf):
        raise DecodeError(f"record at {pos} is cut short")
    total = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
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
    record raises `DecodeError` now, not when a field is read). ``extra_properties``
    join every message's properties (and win over its own).
    """
    return _decode(buf if type(buf) is bytes else bytes(buf), decompress, max_body_bytes, extra_properties, 0)


def _decode(data: bytes, decompress: bool, max_body_bytes: int, extra_properties: Mapping[str, str] | None,
            at: int) -> list[StoredMessage]:
    """`decode_records` of ``data``, which sits at ``at`` of the caller's buffer (for error
    messages). The layout checks are inlined: this loop runs once per consumed message."""
    out, bad = decode_run(data, _DecodedMessage, _Source(data, extra_properties), inflate if decompress else None,
                          max_body_bytes)
    if bad >= 0:
        raise _bad_record(data, bad, at)
    return out


def decode_run_py(data: bytes, cls: type, src: object, inflate: Callable[[bytes, int], bytes] | None,
                  max_body_bytes: int) -> tuple[list[Any], int]:
    """The records of ``data`` as ``cls`` tuples (`_DecodedMessage`'s fields, sharing
    ``src``), bodies inflated by ``inflate`` when compressed and it is given; and where the
    first record that fails the layout checks starts (-1: none). The checks are inlined:
    this loop runs once per consumed message."""
    out: list[Any] = []
    append = out.append
    new = tuple.__new__
    unpack_v4 = HEAD_V4.unpack_from
    head_size = HEAD_V4.size
    unpack_i16 = _I16.unpack_from
    pos = 0
    end = len(data)
    try:
        while pos < end:
            (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host, store_ts,
             store_host, reconsume, prepared, body_len) = unpack_v4(data, pos)
            body_at = pos + head_size
            if sys_flag & _HOST_V6_FLAGS:
                (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host, store_ts,
                 store_host, reconsume, prepared, body_len), body_at = _head_v6(data, pos, sys_flag)
            rec_end = pos + total
            t = body_at + body_len
            p = t + 3 + data[t]
            if magic != MAGIC_V1 or total <= 0 or rec_end > end or body_len < 0 or p > rec_end or \
                    p + unpack_i16(data, p - 2)[0] != rec_end:
                return out, pos
            body = data[body_at:t]
            if sys_flag & _COMPRESSED and inflate is not None:
                body = inflate(body, max_body_bytes)
            append(new(cls, (
                None, body, None, flag, queue_id, queue_offset, phys, sys_flag, born_ts, None, store_ts, None,
                reconsume, prepared, crc, total, None, src, born_host, store_host, t, p, rec_end)))
            pos = rec_end
    except (struct.error, IndexError):
        return out, pos
    return out, -1


decode_run = kernels.select("decode_run", decode_run_py)


def _head_v6(data: bytes, pos: int, sys_flag: int) -> tuple[tuple[Any, ...], int]:
    """The fixed part of a record with an IPv6 host, and where its body starts."""
    head = head_struct_for(sys_flag)
    return head.unpack_from(data, pos), pos + head.size


def _bad_record(data: bytes, pos: int, at: int) -> DecodeError:
    """What is wrong with the record at ``pos`` that `_decode` refused (it checks all at once)."""
    where = f"record at {at + pos}"
    try:
        head = read_head(data, pos)
    except DecodeError:
        return DecodeError(f"{where} is cut short")
    if head.magic != MAGIC_V1:
        return DecodeError(f"{where}: bad magic {head.magic & 0xFFFFFFFF:#x}")
    if head.total_size <= 0 or pos + head.total_size > len(data):
        return DecodeError(f"{where}: size {head.total_size} overruns the buffer")
    try:
        read_tail(data, pos, head)
    except DecodeError as exc:
        return DecodeError(f"{where}: {str(exc).partition(': ')[2]}")
    return DecodeError(f"{where} does not decode")
