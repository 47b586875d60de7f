"""Message bytes inside frames: the batch body, zlib bodies, stored-record bodies
and the properties string of a send.

Batch body (SEND_BATCH_MESSAGE, and SEND_MESSAGE(_V2) with ``batch`` set): one
record per message, back to back, big-endian; the topic is the header's.

| field             | size | struct | notes                                   |
|-------------------|------|--------|-----------------------------------------|
| TOTALSIZE         | 4    | >i     | 20 + bodyLen + 2 + propsLen             |
| MAGICCODE         | 4    | >i     | written 0, not read                     |
| BODYCRC           | 4    | >i     | written 0, not read                     |
| FLAG              | 4    | >i     | the message's user flag                 |
| BODY length       | 4    | >i     |                                         |
| BODY              | n    |        |                                         |
| PROPERTIES length | 2    | >h     | signed, so at most 32767 bytes          |
| PROPERTIES        | m    |        | ``name 0x01 value 0x02`` pairs          |

Compression: clients zlib-compress (RFC 1950) a body of at least
`COMPRESS_BODY_OVER_BYTES` and set sysFlag bit 0. The C++ client may compress a
whole batch body; it is inflated before it is split. Inflating stops at a
bound (the frame limit by default), so a small zip bomb cannot exhaust memory.

Pull, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE and CHECK_TRANSACTION_STATE bodies are
runs of stored records, whose layout lives in `skiff.common.record`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import NamedTuple

from skiff.common import kernels
from skiff.common.compression import inflate as common_inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import BATCH_MAX_MESSAGES, COMPRESS_BODY_OVER_BYTES, FRAME_MAX_BYTES, PROPERTIES_MAX_BYTES
from skiff.common.message import Message
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties
from skiff.common.stored_message import StoredMessage, decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.errors import MessageIllegalError

_BATCH_HEAD = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length."""
assert _BATCH_HEAD.size == 20
_PROPS_LEN = struct.Struct(">h")
assert _PROPS_LEN.size == 2
BATCH_RECORD_FIXED_BYTES = _BATCH_HEAD.size + _PROPS_LEN.size

_SEP = PROPERTY_SEPARATOR.encode()
_NV_SEP = NAME_VALUE_SEPARATOR.encode()
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
"""As a plain int: IntFlag arithmetic costs a microsecond per message."""

ZLIB_LEVEL = 5
"""The level RocketMQ's Java and C++ clients compress with."""


class MessageDecodeError(DecodeError):
    """A batch, compressed or stored-record body that does not decode."""


def send_properties(msg: Message, uniq_key: str | None = None) -> str:
    """The ``properties`` string a send carries for ``msg``.

    Adds ``WAIT=true`` (wait for the store, every client's default) unless the
    message sets WAIT, and ``UNIQ_KEY`` when given and not set. Raises
    `MessageIllegalError` when a name or value holds a separator byte or the
    whole string outgrows the stored record's 16-bit length.
    """
    own = msg.properties
    if not own:  # nothing of the sender's to check: the common case of a bare message
        return _WAIT_TRUE if uniq_key is None else f"{_BARE_HEAD}{uniq_key}{PROPERTY_SEPARATOR}"
    props: dict[str, str] = dict(own)
    props.setdefault(Prop.WAIT, "true")
    if uniq_key is not None:
        props.setdefault(Prop.UNIQ_KEY, uniq_key)
    text = _properties_text(props)
    if len(text) * 4 > PROPERTIES_MAX_BYTES:  # UTF-8 takes at most 4 bytes a character
        size = len(text.encode())
        if size > PROPERTIES_MAX_BYTES:
            raise MessageIllegalError(f"the properties are {size} bytes, more than the {PROPERTIES_MAX_BYTES} allowed")
    return text


_WAIT_TRUE = f"{Prop.WAIT}{NAME_VALUE_SEPARATOR}true{PROPERTY_SEPARATOR}"
_BARE_HEAD = f"{_WAIT_TRUE}{Prop.UNIQ_KEY}{NAME_VALUE_SEPARATOR}"
"""A bare message's properties up to its UNIQ_KEY's value."""


def encode_bare_batch(messages: Sequence[Message], id_prefix: str, counters: Sequence[int]) -> tuple[bytes, str]:
    """The batch body of ``messages``, none with properties of its own (the usual batch), each
    given the UNIQ_KEY ``id_prefix`` + its counter's 4 hex digits (`UniqIdGenerator.take`), and
    those ids joined by commas: one compiled pass, no properties or id string made per message.
    Each record's properties are `send_properties`'s for a bare message."""
    return pack_bare_batch(messages, _BARE_HEAD, id_prefix, counters)


def _properties_text(props: Mapping[str, str]) -> str:
    """The pairs joined; checked as a whole (one separator of each kind per pair, no empty
    name), and pair by pair only to say which one is wrong."""
    text = "".join([f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}" for name, value in props.items()])
    n = len(props)
    if text.count(NAME_VALUE_SEPARATOR) == n and text.count(PROPERTY_SEPARATOR) == n and "" not in props:
        return text
    for name, value in props.items():
        for part in (name, value):
            if NAME_VALUE_SEPARATOR in part or PROPERTY_SEPARATOR in part:
                raise MessageIllegalError(f"the property {name!r} holds a 0x01 or 0x02 separator byte")
    raise MessageIllegalError("a property has an empty name")


def encode_batch(messages: Iterable[Message], uniq_key: Callable[[], str] | None = None) -> bytes:
    """The batch body of ``messages``; each record's properties are `send_properties`'s.

    ``uniq_key`` makes each message's UNIQ_KEY (as clients give every message
    in a batch its own id). Topics are not encoded: the header names one.
    """
    messages = list(messages)
    if uniq_key is None:
        props = [send_properties(msg).encode() for msg in messages]
    else:
        props = [send_properties(msg, uniq_key()).encode() for msg in messages]
    return pack_batch(messages, props)


def pack_batch_py(messages: Sequence[Message], properties: Sequence[bytes]) -> bytes:
    """The batch records of ``messages`` (their bodies and flags) with ``properties``, the
    encoded properties strings, one each: TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODY
    length and bytes, PROPERTIES length (int16) and bytes."""
    parts: list[bytes] = []
    add = parts.extend
    head, props_len, fixed = _BATCH_HEAD.pack, _PROPS_LEN.pack, BATCH_RECORD_FIXED_BYTES
    for msg, props in zip(messages, properties):
        body = msg.body
        add((head(fixed + len(body) + len(props), 0, 0, msg.flag, len(body)), body, props_len(len(props)), props))
    return b"".join(parts)


pack_batch = kernels.select("pack_batch", pack_batch_py, "skiff.protocol._frames")


def pack_bare_batch_py(messages: Sequence[Message], props_head: str, id_prefix: str,
                       counters: Sequence[int]) -> tuple[bytes, str]:
    """`encode_bare_batch`'s records, each with the properties ``props_head`` + its id + 0x02."""
    ids = [f"{id_prefix}{counter & 0xFFFF:04X}" for counter in counters]
    sep = PROPERTY_SEPARATOR
    return pack_batch_py(messages, [f"{props_head}{key}{sep}".encode() for key in ids]), ",".join(ids)


pack_bare_batch = kernels.select("pack_bare_batch", pack_bare_batch_py, "skiff.protocol._frames")


class BatchColumns(NamedTuple):
    """A batch body split into columns, one entry per message: the broker works on a batch
    as a whole (`property_columns`), never message by message."""

    flags: list[int]
    bodies: list[bytes]
    properties: list[bytes]


def split_batch_columns(
    body: bytes | bytearray | memoryview,
    *,
    compressed: bool = False,
    max_messages: int = BATCH_MAX_MESSAGES,
) -> BatchColumns:
    """Split a batch body into its records, as columns; inflate it first if ``compressed``.

    Raises `MessageDecodeError` for an empty, truncated or inconsistent batch, or
    one of more than ``max_messages`` messages. One short step per record: its checks
    are one test (TOTALSIZE must be the sum of its parts, the parts in bounds: a read
    past the end raises struct.error), and `_record_error` says what is wrong with a
    record that fails it."""
    data = inflate(body) if compressed else body if type(body) is bytes else bytes(body)
    flags, bodies, props, pos, bad = split_batch(data, max_messages)
    if bad:
        raise _record_error(data, pos)
    if pos < len(data):
        raise MessageDecodeError(f"the batch holds more than {max_messages} messages")
    if not flags:
        raise MessageDecodeError("the batch holds no message")
    return BatchColumns(flags, bodies, props)


def split_batch_py(data: bytes, max_messages: int) -> tuple[list[int], list[bytes], list[bytes], int, bool]:
    """The flags, bodies and properties of the records of ``data`` (at most ``max_messages``),
    the position where splitting stopped, and whether the record there failed the test."""
    flags: list[int] = []
    bodies: list[bytes] = []
    props: list[bytes] = []
    head, props_len = _BATCH_HEAD.unpack_from, _PROPS_LEN.unpack_from
    pos, end, fixed = 0, len(data), BATCH_RECORD_FIXED_BYTES
    try:
        for _ in range(max_messages):
            if pos >= end:
                break
            total, _magic, _crc, flag, body_len = head(data, pos)
            props_at, next_pos = pos + _BATCH_HEAD.size + body_len, pos + total
            if (body_len < 0 or next_pos > end or props_at + _PROPS_LEN.size > next_pos
                    or props_len(data, props_at)[0] != total - fixed - body_len):
                return flags, bodies, props, pos, True
            flags.append(flag)
            bodies.append(data[pos + _BATCH_HEAD.size : props_at])
            props.append(data[props_at + _PROPS_LEN.size : next_pos])
            pos = next_pos
    except struct.error:
        return flags, bodies, props, pos, True
    return flags, bodies, props, pos, False


split_batch = kernels.select("split_batch", split_batch_py, "skiff.protocol._frames")


class PropertyColumns:
    """The properties strings of a batch whose messages all have the same property names
    in the same order (what producers send), read by name as columns.

    A batch is then read with a few C-level joins, splits and counts per name, without a
    Python step per message or pair; `property_columns` says whether a batch is one.
    """

    __slots__ = ("names", "_items", "_stride")

    def __init__(self, names: list[str], items: list[bytes], stride: int) -> None:
        self.names = names
        """Every message's property names, in order."""
        self._items = items
        self._stride = stride

    def values(self, name: str) -> list[str] | list[None]:
        """Each message's value of ``name``, as `decode_properties` finds it (the last of
        repeated names wins), or None for each message when the name is not there."""
        at = next((j for j in reversed(range(len(self.names))) if self.names[j] == name), None)
        count = len(self._items) // (self._stride + 1)
        if at is None:
            return [None] * count
        column = _SEP + _SEP.join(self._items[at :: self._stride + 1])
        return column.decode("utf-8", "replace").split(f"{PROPERTY_SEPARATOR}{name}{NAME_VALUE_SEPARATOR}")[1:]


def property_columns(properties: Sequence[bytes]) -> PropertyColumns | None:
    """``properties`` as `PropertyColumns`, or None unless every string ends with 0x02
    and holds the first string's names in its order, each pair well formed (one 0x01,
    a name); the caller decodes such a batch message by message."""
    n = len(properties)
    first = properties[0].split(_SEP)
    stride = len(first) - 1
    flat = _SEP.join(properties)
    items = flat.split(_SEP)
    # Each string ends with 0x02 and no other item is empty, so the empty items end the
    # strings; one sits after every ``stride`` pairs, so every string has ``stride``.
    if (not all(map(bytes.endswith, properties, repeat(_SEP))) or len(items) != n * (stride + 1)
            or items.count(b"") != n or any(items[stride :: stride + 1]) or flat.count(_NV_SEP) != n * stride):
        return None
    names = []
    for j, pair in enumerate(first[:stride]):
        name = pair.partition(_NV_SEP)[0]
        # Every item of the column starts with the name (one 0x02 per item, and 0x01 once per pair).
        if not name or (_SEP + _SEP.join(items[j :: stride + 1])).count(_SEP + name + _NV_SEP) != n:
            return None
        names.append(name.decode("utf-8", "replace"))
    return PropertyColumns(names, items, stride)


def decode_batch(
    body: bytes | bytearray | memoryview,
    topic: str,
    *,
    compressed: bool = False,
    max_messages: int = BATCH_MAX_MESSAGES,
) -> list[Message]:
    """`split_batch_columns`, as messages of ``topic`` with their properties decoded."""
    flags, bodies, raw = split_batch_columns(body, compressed=compressed, max_messages=max_messages)
    return [Message(topic, b, decode_properties(p), f) for f, b, p in zip(flags, bodies, raw)]


def _record_error(data: bytes, pos: int) -> MessageDecodeError:
    """What is wrong with the batch record at ``pos`` (one that failed `split_batch_columns`'s test)."""
    end = len(data)
    if end - pos < BATCH_RECORD_FIXED_BYTES:
        return MessageDecodeError(f"batch record at {pos} is cut short")
    total, _magic, _crc, _flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
    props_at = pos + _BATCH_HEAD.size + body_len
    if body_len < 0 or props_at + _PROPS_LEN.size > end:
        return MessageDecodeError(f"batch record at {pos}: body length {body_len} overruns the batch")
    props_len = _PROPS_LEN.unpack_from(data, props_at)[0]
    next_pos = props_at + _PROPS_LEN.size + props_len
    if props_len < 0 or next_pos > end:
        return MessageDecodeError(f"batch record at {pos}: properties length {props_len} overruns the batch")
    return MessageDecodeError(f"batch record at {pos}: TOTALSIZE {total} is not its size {next_pos - pos}")


def compress_body(
    body: bytes, sys_flag: int, *, over_bytes: int = COMPRESS_BODY_OVER_BYTES
) -> tuple[bytes, int]:
    """Compress a body of at least ``over_bytes`` and set sysFlag COMPRESSED, as clients do."""
    if len(body) < over_bytes:
        return body, sys_flag
    return zlib.compress(body, ZLIB_LEVEL), sys_flag | _COMPRESSED


def inflate(data: bytes | bytearray | memoryview, max_bytes: int = FRAME_MAX_BYTES) -> bytes:
    """Inflate a zlib stream of at most ``max_bytes`` output; `MessageDecodeError` otherwise."""
    try:
        return common_inflate(data, max_bytes)
    except DecodeError as exc:
        raise MessageDecodeError(str(exc)) from None


def decode_stored_messages(
    body: bytes | bytearray | memoryview,
    *,
    max_body_bytes: int = FRAME_MAX_BYTES,
    extra_properties: Mapping[str, str] | None = None,
) -> list[StoredMessage]:
    """Decode a run of stored records (a pull, view, query or check body), bodies inflated.

    Each compressed body inflates to at most ``max_body_bytes``; the sysFlag
    keeps its COMPRESSED bit, as Java's decoder leaves it. ``extra_properties``
    join every message's properties (a pull's queue bounds), without a dict
    per message until one is asked for.
    """
    try:
        return decode_records(body, max_body_bytes=max_body_bytes, extra_properties=extra_properties)
    except MessageDecodeError:
        raise
    except DecodeError as exc:
        raise MessageDecodeError(str(exc)) from None
