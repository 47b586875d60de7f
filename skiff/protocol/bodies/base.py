"""Declarative JSON bodies: a frozen dataclass per body, read with `from_json`
and written with `to_json`.

Field names are snake_case; the JSON key is the camelCase form unless the class
maps it in ``WIRE_NAMES`` (``clientID``, ``lockOKMQSet``). Supported field types:
``str``, ``int``, ``float``, ``bool``, enums (IntEnums are written as their Java
ordinal, str enums as their value), ``X | None``, ``tuple[X, ...]`` (a JSON
array; Java's sets and lists), ``Mapping[K, V]`` with ``str``, ``int`` or
`MessageQueue` keys, `MessageQueue` itself and nested bodies.

Reading is lenient the way RocketMQ's clients need: numbers may arrive as
strings (the C++ client writes ``"subVersion":"1574400000000"``), booleans as
"true"/"1", enums as ordinals or names, `MessageQueue` map keys as fastjson's
object keys; unknown keys are ignored and a null or absent field takes its
default. Anything else raises `BodyError` naming the field's path. Writing
is fastjson's: keys sorted, None fields left out, `MessageQueue` map keys as
objects, so Skiff writes the same bytes as Java's broker for the same data.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple, Self

from skiff.common.config import snake_to_camel
from skiff.common.errors import DecodeError
from skiff.common.message import MessageQueue
from skiff.protocol import fastjson

Decode = Callable[[Any, str], Any]
Encode = Callable[[Any], Any]


class BodyError(DecodeError):
    """A request or response body does not hold what its code promises."""


class _Codec(NamedTuple):
    decode: Decode
    encode: Encode


def _fail(path: str, what: str, raw: Any) -> BodyError:
    return BodyError(f"{path}: expected {what}, got {raw!r}"[:300])


def _identity(value: Any) -> Any:
    return value


def _decode_str(raw: Any, path: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, float)):
        return str(raw)
    raise _fail(path, "a string", raw)


def _decode_int(raw: Any, path: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    try:
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if isinstance(raw, str):
            return int(raw.strip())
    except ValueError:
        pass
    raise _fail(path, "a whole number", raw)


def _decode_float(raw: Any, path: str) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    try:
        if isinstance(raw, str):
            return float(raw)
    except ValueError:
        pass
    raise _fail(path, "a number", raw)


_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def _decode_bool(raw: Any, path: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if raw in (0, 1) and isinstance(raw, int):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[raw.strip().lower()]
    raise _fail(path, "a boolean", raw)


def _enum_codec(kind: type[enum.Enum]) -> _Codec:
    by_name = {m.name: m for m in kind}

    def decode(raw: Any, path: str) -> enum.Enum:
        try:
            if isinstance(raw, str) and raw in by_name:
                return by_name[raw]
            if issubclass(kind, int) and isinstance(raw, str):
                return kind(int(raw))
            if not isinstance(raw, bool):
                return kind(raw)
        except (ValueError, TypeError):
            pass
        raise _fail(path, f"one of {', '.join(by_name)}", raw)

    def encode(value: enum.Enum) -> Any:
        return int(value) if isinstance(value, int) else value.value

    return _Codec(decode, encode)


def _mq_to_obj(mq: MessageQueue) -> dict[str, Any]:
    """A MessageQueue as Java writes it (fastjson sorts field names)."""
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def _decode_mq(raw: Any, path: str) -> MessageQueue:
    if isinstance(raw, fastjson.ObjectKey):
        raw = raw.as_dict()
    elif isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            raw = fastjson.loads(raw)
        except DecodeError:
            raise _fail(path, "a message queue", raw) from None
    if not isinstance(raw, Mapping):
        raise _fail(path, "a message queue object", raw)
    try:
        topic, broker, queue = raw["topic"], raw["brokerName"], raw["queueId"]
    except KeyError as exc:
        raise BodyError(f"{path}: the message queue has no {exc.args[0]}") from None
    return MessageQueue(_decode_str(topic, path + ".topic"), _decode_str(broker, path + ".brokerName"),
                        _decode_int(queue, path + ".queueId"))


_MQ = _Codec(_decode_mq, _mq_to_obj)
_SCALARS: dict[Any, _Codec] = {
    str: _Codec(_decode_str, _identity),
    int: _Codec(_decode_int, _identity),
    float: _Codec(_decode_float, _identity),
    bool: _Codec(_decode_bool, _identity),
    MessageQueue: _MQ,
}
_KEYS: dict[Any, _Codec] = {
    str: _SCALARS[str],
    int: _Codec(_decode_int, str),
    MessageQueue: _Codec(_decode_mq, lambda mq: fastjson.ObjectKey.of(_mq_to_obj(mq))),
}


def _optional(inner: _Codec) -> _Codec:
    return _Codec(lambda raw, path: None if raw is None else inner.decode(raw, path),
                  lambda value: None if value is None else inner.encode(value))


def _array(item: _Codec) -> _Codec:
    def decode(raw: Any, path: str) -> tuple[Any, ...]:
        if not isinstance(raw, (list, tuple)):
            raise _fail(path, "an array", raw)
        return tuple(item.decode(v, f"{path}[{i}]") for i, v in enumerate(raw))

    return _Codec(decode, lambda value: [item.encode(v) for v in value])


def _mapping(key: _Codec, value: _Codec) -> _Codec:
    def decode(raw: Any, path: str) -> dict[Any, Any]:
        if not isinstance(raw, Mapping):
            raise _fail(path, "an object", raw)
        return {key.decode(k, f"{path} key"): value.decode(v, f"{path}[{k!r}]") for k, v in raw.items()}

    return _Codec(decode, lambda m: {key.encode(k): value.encode(v) for k, v in m.items()})


def _codec_for(tp: Any) -> _Codec:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"unsupported body field type {tp!r}")
        return _optional(_codec_for(rest[0]))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _array(_codec_for(args[0]))
    if origin in (Mapping, dict, typing.Mapping):
        if args[0] not in _KEYS:
            raise TypeError(f"unsupported body map key type {args[0]!r}")
        return _mapping(_KEYS[args[0]], _codec_for(args[1]))
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_codec(tp)
    if isinstance(tp, type) and issubclass(tp, JsonBody):
        return _Codec(tp.from_obj, lambda body: body.to_obj())
    raise TypeError(f"unsupported body field type {tp!r}")


class _Field(NamedTuple):
    name: str
    wire: str
    codec: _Codec
    default: Callable[[], Any] | None
    """Makes the value of an absent field; None when the field is required."""


class JsonBody:
    """Base of every JSON body (subclasses are frozen slotted dataclasses)."""

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}
    _fields_cache: ClassVar[dict[type, tuple[_Field, ...]]] = {}

    @classmethod
    def _body_fields(cls) -> tuple[_Field, ...]:
        cached = JsonBody._fields_cache.get(cls)
        if cached is None:
            hints = typing.get_type_hints(cls)
            made = (_make_field(cls, f, hints[f.name]) for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            cached = tuple(sorted(made, key=lambda f: f.wire))
            JsonBody._fields_cache[cls] = cached
        return cached

    @classmethod
    def from_obj(cls, raw: Any, path: str | None = None) -> Self:
        """Build from parsed JSON (a dict); `BodyError` names the path of any bad field."""
        path = path or cls.__name__
        if not isinstance(raw, Mapping):
            raise _fail(path, "an object", raw)
        values: dict[str, Any] = {}
        for f in cls._body_fields():
            item = raw.get(f.wire)
            if item is None:
                if f.default is None:
                    raise BodyError(f"{path}: {f.wire} is missing")
                values[f.name] = f.default()
            else:
                values[f.name] = f.codec.decode(item, f"{path}.{f.wire}")
        return cls(**values)

    def to_obj(self) -> dict[str, Any]:
        """The body as JSON-ready values; None fields are left out."""
        out: dict[str, Any] = {}
        for f in self._body_fields():
            value = getattr(self, f.name)
            if value is not None:
                out[f.wire] = f.codec.encode(value)
        return out

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        try:
            raw = fastjson.loads(data)
        except fastjson.JsonDecodeError as exc:
            raise BodyError(f"{cls.__name__}: the body is not JSON: {exc}") from None
        return cls.from_obj(raw)

    def to_json(self) -> bytes:
        return fastjson.dumps(self.to_obj())


def _make_field(cls: type, f: dataclasses.Field[Any], tp: Any) -> _Field:
    wire = getattr(cls, "WIRE_NAMES", {}).get(f.name, snake_to_camel(f.name))
    codec = _codec_for(tp)
    if f.default is not dataclasses.MISSING:
        default = f.default
        return _Field(f.name, wire, codec, lambda: default)
    if f.default_factory is not dataclasses.MISSING:
        return _Field(f.name, wire, codec, f.default_factory)
    return _Field(f.name, wire, codec, None)
