"""JSON as Java's fastjson writes it: standard JSON plus maps with non-string keys.

A Java broker serialises ``Map<Long, String>`` as ``{0:"ip:port"}`` and
``Map<MessageQueue, ...>`` (ConsumeStats, TopicStatsTable, ResetOffsetBody) with
whole objects as keys::

    {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5}}}

`loads` reads standard JSON with orjson and falls back to a small lenient
parser that also takes unquoted numeric keys (read as ``int``) and object keys
(read as `ObjectKey`, a hashable tuple of name/value pairs). `dumps` writes
standard JSON with orjson, or, when a map has ``int`` or `ObjectKey` keys,
fastjson's form, so Java admin tools read Skiff's bodies and Skiff reads a
Java broker's. Malformed input raises `JsonDecodeError` and nothing else.
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from skiff.common.errors import DecodeError

MAX_DEPTH = 256
"""Deepest nesting the lenient parser follows (bodies nest a handful of levels)."""

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = (("true", True), ("false", False), ("null", None))
_scanstring: Callable[[str, int, bool], tuple[str, int]] = (
    json.decoder.scanstring  # type: ignore[attr-defined]  # there (C or Python), but not in typeshed's json.decoder
)
"""The standard library's string scanner: a string literal's text and where it ends."""


class JsonDecodeError(DecodeError):
    """Bytes that are not JSON, not even fastjson's dialect of it."""


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A JSON object used as a map key: its (name, value) pairs in source order.

    Nested objects become ObjectKeys and arrays tuples, so the key is hashable.
    Two keys with the same pairs in another order are different keys; body
    codecs turn them into typed values (`MessageQueue`) straight away.
    """

    __slots__ = ()

    @classmethod
    def of(cls, mapping: Mapping[str, Any]) -> ObjectKey:
        return cls((k, _hashable(v)) for k, v in mapping.items())

    def as_dict(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in self}


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ObjectKey.of(value)
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.as_dict()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON quickly, or fastjson's non-string keys leniently."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_lenient(data)


def parse_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """The lenient parser alone (`loads` tries orjson first)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonDecodeError(f"JSON is not UTF-8: {exc}") from None
    value, pos = _Parser(text).value(_WS.match(text, 0).end(), 0)  # type: ignore[union-attr]
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if pos != len(text):
        raise JsonDecodeError(f"unexpected text after the JSON value at {pos}")
    return value


class _Parser:
    """Recursive descent over a str; every method returns (value, next position)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, pos: int, what: str) -> JsonDecodeError:
        return JsonDecodeError(f"{what} at {pos}")

    def skip(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()  # type: ignore[union-attr]

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        if pos >= len(text):
            raise self.fail(pos, "JSON ends where a value should be")
        ch = text[pos]
        if ch == '"':
            return self.string(pos)
        if ch == "{":
            return self.container(pos, depth, "}")
        if ch == "[":
            return self.container(pos, depth, "]")
        for word, literal in _LITERALS:
            if text.startswith(word, pos):
                return literal, pos + len(word)
        return self.number(pos)

    def string(self, pos: int) -> tuple[str, int]:
        try:
            return _scanstring(self.text, pos + 1, True)
        except ValueError as exc:
            raise self.fail(pos, f"bad string ({exc})") from None

    def number(self, pos: int) -> tuple[int | float, int]:
        m = _NUMBER.match(self.text, pos)
        if m is None or m.end() == pos:
            raise self.fail(pos, "unexpected character")
        raw = m.group(0)
        return (float(raw) if m.group(1) or m.group(2) else int(raw)), m.end()

    def key(self, pos: int, depth: int) -> tuple[Any, int]:
        """A map key: a string, or fastjson's number or object key."""
        ch = self.text[pos] if pos < len(self.text) else ""
        if ch == '"':
            return self.string(pos)
        if ch == "{":
            obj, end = self.container(pos, depth, "}")
            return ObjectKey.of(obj), end
        if ch == "-" or ch.isdigit():
            return self.number(pos)
        raise self.fail(pos, "expected a map key")

    def container(self, pos: int, depth: int, close: str) -> tuple[Any, int]:
        if depth >= MAX_DEPTH:
            raise self.fail(pos, f"JSON nested deeper than {MAX_DEPTH}")
        is_map = close == "}"
        out: Any = {} if is_map else []
        pos = self.skip(pos + 1)
        if self.text.startswith(close, pos):
            return out, pos + 1
        while True:
            if is_map:
                key, pos = self.key(pos, depth + 1)
                pos = self.skip(pos)
                if not self.text.startswith(":", pos):
                    raise self.fail(pos, "expected ':'")
                item, pos = self.value(self.skip(pos + 1), depth + 1)
                out[key] = item
            else:
                item, pos = self.value(pos, depth + 1)
                out.append(item)
            pos = self.skip(pos)
            if self.text.startswith(close, pos):
                return out, pos + 1
            if not self.text.startswith(",", pos):
                raise self.fail(pos, f"expected ',' or '{close}'")
            pos = self.skip(pos + 1)


def dumps(obj: Any) -> bytes:
    """Standard JSON when possible; fastjson's form for maps with int or `ObjectKey` keys."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        out: list[bytes] = []
        _write(obj, out)
        return b"".join(out)


def _write(obj: Any, out: list[bytes]) -> None:
    if isinstance(obj, Mapping):
        out.append(b"{")
        for i, (k, v) in enumerate(obj.items()):
            if i:
                out.append(b",")
            out.append(_key_bytes(k))
            out.append(b":")
            _write(v, out)
        out.append(b"}")
    elif isinstance(obj, ObjectKey):
        _write(obj.as_dict(), out)
    elif isinstance(obj, (list, tuple)):
        out.append(b"[")
        for i, v in enumerate(obj):
            if i:
                out.append(b",")
            _write(v, out)
        out.append(b"]")
    elif isinstance(obj, int) and not isinstance(obj, bool):
        out.append(str(int(obj)).encode())
    else:
        out.append(orjson.dumps(obj))


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        return orjson.dumps(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key)).encode()
    if isinstance(key, ObjectKey):
        return dumps(key.as_dict())
    raise TypeError(f"a JSON map key cannot be a {type(key).__name__}")
