"""A Kafka record as a RocketMQ message and back: one store, two protocols.

- value ↔ body (a null value, a tombstone, is an empty body with ``KAFKA_NULL_VALUE``);
- key ↔ ``KEYS`` when it is text a property can hold, so RocketMQ consumers, the key index
  and compaction see it; other bytes are kept in ``KAFKA_KEY`` (base64) and KEYS holds
  ``base64:`` and the same text, so a compacted topic keys on them too;
- headers ↔ user properties: a header whose name and value are text a property can hold
  is that property; another is kept under ``KAFKA_HB64.<name>`` (base64), a null value
  under ``KAFKA_HNULL.<name>``, so every header comes back as it was sent;
- timestamp ↔ born time (a Kafka consumer reads CreateTime).

A RocketMQ message read by a Kafka consumer gets its ``KEYS`` as the key, its tag as a
``TAGS`` header, and its user properties as headers; the broker's own properties
(UNIQ_KEY, WAIT, …) and the idempotent batch's record (``KAFKA_PRODUCER``) stay out.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY
from skiff.common.properties import SYSTEM_PROPERTIES, Prop, decode_properties
from skiff.common.stored_message import StoredMessage
from skiff.protocol.kafka.records import Record

KEY_B64 = "KAFKA_KEY"
KEY_B64_PREFIX = "base64:"
"""How KEYS spells a key that is not text (its raw bytes are in ``KAFKA_KEY``)."""
NULL_VALUE = "KAFKA_NULL_VALUE"
HEADER_B64 = "KAFKA_HB64."
HEADER_NULL = "KAFKA_HNULL."
_INTERNAL = frozenset({KEY_B64, NULL_VALUE, PRODUCER_PROPERTY})
_HEADER_OUT_EXCLUDED = SYSTEM_PROPERTIES - {Prop.TAGS}
_FORBIDDEN = ("\x01", "\x02")


def _holdable(text: str) -> bool:
    return not any(c in text for c in _FORBIDDEN)


def _text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if _holdable(text) else None


def record_properties(rec: Record) -> dict[str, str]:
    """The message properties that carry ``rec``'s key, headers and null value."""
    props: dict[str, str] = {}
    for name, value in rec.headers:
        if value is None:
            props[HEADER_NULL + name] = ""
            continue
        text = _text(value) if _holdable(name) and not name.startswith("KAFKA_") else None
        if text is None:
            props[HEADER_B64 + name.replace("\x01", "").replace("\x02", "")] = base64.b64encode(value).decode()
        else:
            props[name] = text
    if rec.key is not None:
        key_text = _text(rec.key)
        if key_text is not None and key_text:
            props[Prop.KEYS] = key_text
        else:  # KEYS still names it (compaction and the key index key on KEYS), as base64 text
            props[KEY_B64] = base64.b64encode(rec.key).decode()
            if rec.key:
                props[Prop.KEYS] = KEY_B64_PREFIX + props[KEY_B64]
    if rec.value is None:
        props[NULL_VALUE] = "1"
    return props


def message_record(msg: StoredMessage, offset_delta: int) -> Record:
    """The Kafka record of a stored message (its offset given as a delta to its batch's base)."""
    return stored_record(offset_delta, msg.born_timestamp, msg.body, msg.properties)


def stored_record(offset_delta: int, born_timestamp: int, body: bytes, props: dict[str, str]) -> Record:
    """The Kafka record of a stored message's parts: what a Fetch builds per message it serves
    straight from the pulled records (`skiff.broker.kafka.fetch`), without a `StoredMessage`."""
    if not props:  # a keyless record without headers, as Kafka producers mostly send
        return Record(offset_delta, born_timestamp, None, body, ())
    key: bytes | None = None
    raw_key = props.get(KEY_B64)
    if raw_key is not None:
        key = _b64(raw_key)
    elif Prop.KEYS in props:
        key = props[Prop.KEYS].encode("utf-8")
    headers = list(_headers(props.items()))
    value = None if NULL_VALUE in props else body
    return Record(offset_delta, born_timestamp, key, value, tuple(headers))


def raw_record(offset_delta: int, born_timestamp: int, body: bytes, raw_properties: bytes) -> Record:
    """`stored_record` of a stored message's raw properties string: the mapping a Fetch hands
    `skiff.protocol.kafka.stored_batch` for the messages that have properties."""
    return stored_record(offset_delta, born_timestamp, body, decode_properties(raw_properties))


def _headers(items: Iterable[tuple[str, str]]) -> Iterable[tuple[str, bytes | None]]:
    for name, value in items:
        if name in _INTERNAL or name in _HEADER_OUT_EXCLUDED:
            continue
        if name.startswith(HEADER_NULL):
            yield name[len(HEADER_NULL):], None
        elif name.startswith(HEADER_B64):
            yield name[len(HEADER_B64):], _b64(value)
        else:
            yield name, value.encode("utf-8")


def _b64(text: str) -> bytes:
    """A property's base64 bytes; text that is not base64 (a RocketMQ producer's own
    ``KAFKA_*`` property, non-ASCII text included) is its UTF-8 bytes, never a failed Fetch."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return text.encode("utf-8")

