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
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from skiff.common.compression import inflate as common_inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import BATCH_MAX_MESSAGES, COMPRESS_BODY_OVER_BYTES, FRAME_MAX_BYTES, PROPERTIES_MAX_BYTES
from skiff.common.message import Message
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties
from skiff.common.record import StoredMessage, decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.errors import MessageIllegalError

_BATCH_HEAD = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length."""
assert _BATCH_HEAD.size == 20
_PROPS_LEN = struct.Struct(">h")
assert _PROPS_LEN.size == 2
BATCH_RECORD_FIXED_BYTES = _BATCH_HEAD.size + _PROPS_LEN.size

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
    props: dict[str, str] = dict(msg.properties)
    props.setdefault(Prop.WAIT, "true")
    if uniq_key is not None:
        props.setdefault(Prop.UNIQ_KEY, uniq_key)
    text = _properties_text(props)
    size = len(text.encode())
    if size > PROPERTIES_MAX_BYTES:
        raise MessageIllegalError(f"the properties are {size} bytes, more than the {PROPERTIES_MAX_BYTES} allowed")
    return text


def _properties_text(props: Mapping[str, str]) -> str:
    parts = []
    for name, value in props.items():
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise MessageIllegalError(f"the property {name!r} holds a 0x01 or 0x02 separator byte")
        if not name:
            raise MessageIllegalError("a property has an empty name")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


def encode_batch(messages: Iterable[Message], uniq_key: Callable[[], str] | None = None) -> bytes:
    """The batch body of ``messages``; each record's properties are `send_properties`'s.

    ``uniq_key`` makes each message's UNIQ_KEY (as clients give every message
    in a batch its own id). Topics are not encoded: the header names one.
    """
    out = bytearray()
    for msg in messages:
        props = send_properties(msg, uniq_key() if uniq_key is not None else None).encode()
        body = msg.body
        total = BATCH_RECORD_FIXED_BYTES + len(body) + len(props)
        out += _BATCH_HEAD.pack(total, 0, 0, msg.flag, len(body))
        out += body
        out += _PROPS_LEN.pack(len(props))
        out += props
    return bytes(out)


class BatchRecord(NamedTuple):
    """One message of a batch body, its properties still encoded (as the store keeps them)."""

    flag: int
    body: bytes
    properties: bytes


def split_batch(
    body: bytes | bytearray | memoryview,
    *,
    compressed: bool = False,
    max_messages: int = BATCH_MAX_MESSAGES,
) -> list[BatchRecord]:
    """Split a batch body into its records; inflate it first if ``compressed``.

    Raises `MessageDecodeError` for an empty, truncated or inconsistent batch, or
    one of more than ``max_messages`` messages.
    """
    data = memoryview(inflate(body) if compressed else body)
    out: list[BatchRecord] = []
    pos, end = 0, len(data)
    while pos < end:
        if len(out) == max_messages:
            raise MessageDecodeError(f"the batch holds more than {max_messages} messages")
        record, pos = _batch_record(data, pos)
        out.append(record)
    if not out:
        raise MessageDecodeError("the batch holds no message")
    return out


def decode_batch(
    body: bytes | bytearray | memoryview,
    topic: str,
    *,
    compressed: bool = False,
    max_messages: int = BATCH_MAX_MESSAGES,
) -> list[Message]:
    """`split_batch`, as messages of ``topic`` with their properties decoded."""
    return [Message(topic, r.body, decode_properties(r.properties), r.flag)
            for r in split_batch(body, compressed=compressed, max_messages=max_messages)]


def _batch_record(data: memoryview, pos: int) -> tuple[BatchRecord, int]:
    end = len(data)
    if end - pos < BATCH_RECORD_FIXED_BYTES:
        raise MessageDecodeError(f"batch record at {pos} is cut short")
    total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
    props_at = pos + _BATCH_HEAD.size + body_len
    if body_len < 0 or props_at + _PROPS_LEN.size > end:
        raise MessageDecodeError(f"batch record at {pos}: body length {body_len} overruns the batch")
    props_len = _PROPS_LEN.unpack_from(data, props_at)[0]
    next_pos = props_at + _PROPS_LEN.size + props_len
    if props_len < 0 or next_pos > end:
        raise MessageDecodeError(f"batch record at {pos}: properties length {props_len} overruns the batch")
    if total != next_pos - pos:
        raise MessageDecodeError(f"batch record at {pos}: TOTALSIZE {total} is not its size {next_pos - pos}")
    return BatchRecord(flag, bytes(data[props_at - body_len : props_at]),
                       bytes(data[props_at + _PROPS_LEN.size : next_pos])), next_pos


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
