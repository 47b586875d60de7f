"""A tiny interpreter of Kafka's message schemas: each API's request and response is a
tuple of `F`ields with the versions they exist in, as Kafka's own
``clients/src/main/resources/common/message/*.json`` state them, and one decoder and
one encoder walk any of them at any version.

Written as data, not as a class per message and version, because Kafka's messages are
mostly the same fields at shifting versions: one table per API is easy to check against
Kafka's JSON, and a version added later is one number changed. Flexible versions
(compact lengths, a tagged-field section closing every struct) are the same walk with
``flexible=True``; unknown tagged fields are skipped, as Kafka's rule says.

Values are plain dicts keyed by the field names (Kafka's snake_case names); the encoder
fills a missing field with its type's zero value (0, "", None for nullable, [] for arrays).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from skiff.common.errors import DecodeError
from skiff.protocol.kafka.wire import Reader, Writer

Scalar = str
"""One of: int8 int16 int32 int64 bool string nstring bytes nbytes (records are nbytes)."""


@dataclass(frozen=True, slots=True)
class Array:
    of: Type
    nullable: bool = False


Type = Union[Scalar, Array, tuple["F", ...]]


@dataclass(frozen=True, slots=True)
class F:
    name: str
    type: Type
    since: int = 0
    until: int = 1 << 15

    def present(self, version: int) -> bool:
        return self.since <= version <= self.until


Struct = tuple[F, ...]

_ZERO: dict[str, Any] = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "string": "",
                         "nstring": None, "bytes": b"", "nbytes": None}


def decode(r: Reader, struct: Struct, version: int, flexible: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in struct:
        if f.present(version):
            out[f.name] = _decode_value(r, f.type, version, flexible)
    if flexible:
        r.skip_tags()
    return out


def _decode_value(r: Reader, t: Type, version: int, flexible: bool) -> Any:
    if isinstance(t, str):
        if t == "int32":
            return r.int32()
        if t == "int16":
            return r.int16()
        if t == "int64":
            return r.int64()
        if t == "int8":
            return r.int8()
        if t == "bool":
            return r.boolean()
        if t in ("string", "nstring"):
            return r.string(flexible, t == "nstring")
        if t in ("bytes", "nbytes"):
            return r.bytes_(flexible, t == "nbytes")
        raise AssertionError(f"unknown type {t}")
    if isinstance(t, Array):
        n = r.count(flexible)
        if n < 0:
            if not t.nullable:
                raise DecodeError(f"a null array at {r.pos} where one is required")
            return None
        return [_decode_value(r, t.of, version, flexible) for _ in range(n)]
    return decode(r, t, version, flexible)


def encode(w: Writer, struct: Struct, version: int, value: Mapping[str, Any], flexible: bool = False) -> None:
    for f in struct:
        if f.present(version):
            _encode_value(w, f.type, version, value.get(f.name, _zero(f.type)), flexible)
    if flexible:
        w.empty_tags()


def _zero(t: Type) -> Any:
    if isinstance(t, str):
        return _ZERO[t]
    if isinstance(t, Array):
        return None if t.nullable else []
    return {}


def _encode_value(w: Writer, t: Type, version: int, v: Any, flexible: bool) -> None:
    if isinstance(t, str):
        if t == "int32":
            w.int32(v)
        elif t == "int16":
            w.int16(v)
        elif t == "int64":
            w.int64(v)
        elif t == "int8":
            w.int8(v)
        elif t == "bool":
            w.boolean(v)
        elif t in ("string", "nstring"):
            w.string(v, flexible)
        elif t in ("bytes", "nbytes"):
            w.bytes_(v, flexible)
        else:
            raise AssertionError(f"unknown type {t}")
        return
    if isinstance(t, Array):
        if v is None:
            w.count(None, flexible)
            return
        w.count(len(v), flexible)
        for item in v:
            _encode_value(w, t.of, version, item, flexible)
        return
    encode(w, t, version, v, flexible)
