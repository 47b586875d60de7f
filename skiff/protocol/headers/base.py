"""Declarative custom headers: a frozen dataclass per header, parsed from and
written to a command's extFields.

Field names are snake_case; the wire name is the camelCase form unless the
class maps it in ``WIRE_NAMES`` (SEND_MESSAGE_V2's one-letter keys). Field types
follow Java's header classes: ``str``, ``bool``, `Int32` for a Java ``Integer``
and plain ``int`` for a Java ``Long``; a field without a default is required
(Java's ``@CFNotNull``), an ``X | None`` field treats an empty value as absent.

Parsing accepts what RocketMQ clients send: numbers or strings, and
"0"/"1"/"true"/"false" for booleans. A missing required field or a bad value
raises `HeaderError`, which processors answer with a clear remark.

SEND and PULL headers are parsed once per request, so each class gets a
``from_ext``/``to_ext`` pair generated from its fields on first use (straight-
line code, as `dataclasses` generates ``__init__``); the dataclass stays the one
declarative definition.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, NamedTuple, TypeVar

from skiff.common.config import snake_to_camel
from skiff.common.errors import DecodeError

H = TypeVar("H", bound="Header")

_MISSING = dataclasses.MISSING
_EMPTY: Mapping[str, str] = types.MappingProxyType({})


class HeaderError(DecodeError):
    """A request header is missing a field or holds a value of the wrong kind."""


class _Bounds(NamedTuple):
    low: int
    high: int


Int32 = Annotated[int, _Bounds(-(2**31), 2**31 - 1)]
"""A Java ``Integer`` header field: values outside 32 bits are refused."""
_INT64 = _Bounds(-(2**63), 2**63 - 1)


def parse_bool(value: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true"):
        return True
    if text in ("0", "false", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean")


def _int_parser(bounds: _Bounds) -> Callable[[str], int]:
    low, high = bounds

    def parse(value: str) -> int:
        number = int(value) if "." not in value else int(float(value))
        if low <= number <= high:
            return number
        raise ValueError(f"{number} is out of range")

    parse.bounds = bounds  # type: ignore[attr-defined]
    return parse


def _parser(kind: Any) -> tuple[Callable[[str], Any], bool]:
    """The parse function for an annotation, and whether None is allowed."""
    optional = False
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        optional = len(args) < len(typing.get_args(kind))
        kind = args[0]
    bounds = _INT64
    if typing.get_origin(kind) is Annotated:
        kind, *extras = typing.get_args(kind)
        bounds = next((e for e in extras if isinstance(e, _Bounds)), _INT64)
    if kind is bool:
        return parse_bool, optional
    if kind is int:
        return _int_parser(bounds), optional
    if kind is str:
        return str, optional
    raise TypeError(f"unsupported header field type {kind!r}")


class _Spec(NamedTuple):
    name: str
    wire: str
    parse: Callable[[str], Any]
    optional: bool
    required: bool
    default: Any


def _missing(wire: str) -> HeaderError:
    return HeaderError(f"the request header has no {wire}")


def _invalid(wire: str, raw: object) -> HeaderError:
    return HeaderError(f"the request header field {wire}={raw!r} is not valid")


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _field_specs(cls: type) -> tuple[_Spec, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    wire_names: Mapping[str, str] = getattr(cls, "WIRE_NAMES", {})
    specs = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not _MISSING or f.kw_only or not f.init:
            raise TypeError(f"{cls.__name__}.{f.name}: header fields are plain positional fields")
        parse, optional = _parser(hints[f.name])
        required = f.default is _MISSING
        wire = wire_names.get(f.name, snake_to_camel(f.name))
        specs.append(_Spec(f.name, wire, parse, optional, required, None if required else f.default))
    return tuple(specs)


def _compile(cls: type, source: list[str], namespace: dict[str, Any]) -> Callable[..., Any]:
    namespace.update(_missing=_missing, _invalid=_invalid, _EMPTY=_EMPTY, _bool_text=_bool_text)
    exec("\n".join(source), namespace)  # noqa: S102 - generated from the class's own fields
    fn: Callable[..., Any] = namespace["fn"]
    fn.__qualname__ = f"{cls.__name__}.{fn.__name__}"
    return fn


def _slot_setter(cls: type, name: str) -> Callable[[object, Any], None]:
    slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
    if not isinstance(slot, types.MemberDescriptorType):
        raise TypeError(f"{cls.__name__} must be a slotted dataclass (field {name})")
    return slot.__set__


def _value_lines(i: int, spec: _Spec) -> list[str]:
    """Lines that parse ``raw`` into ``v``; ints are inlined (they are most fields)."""
    if spec.parse is str:
        return ["v = raw"]
    bounds = getattr(spec.parse, "bounds", None)
    if bounds is None:
        return [f"v = p{i}(raw)"]
    return [
        "v = int(raw) if '.' not in raw else int(float(raw))",
        f"if not {bounds.low} <= v <= {bounds.high}: raise ValueError",
    ]


def _compile_from_ext(cls: type) -> Callable[..., Any]:
    """Straight-line parsing that sets the slots directly (no frozen ``__init__``)."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: headers have no __post_init__")
    src = ["def fn(cls, ext):", "    get = (ext or _EMPTY).get", "    wire = raw = None", "    obj = _new(cls)", "    try:"]
    ns: dict[str, Any] = {"_new": object.__new__}
    for i, s in enumerate(_field_specs(cls)):
        ns[f"p{i}"], ns[f"d{i}"], ns[f"s{i}"] = s.parse, s.default, _slot_setter(cls, s.name)
        src.append(f"        wire = {s.wire!r}; raw = get(wire)")
        if s.required:
            src.append("        if raw is None: raise _missing(wire)")
            indent = " " * 8
        else:
            absent = "raw is None or raw == ''" if s.optional else "raw is None"
            src += [f"        if {absent}: v = d{i}", "        else:"]
            indent = " " * 12
        src += [indent + line for line in _value_lines(i, s)]
        src.append(f"        s{i}(obj, v)")
    src += [
        "    except (ValueError, TypeError, OverflowError, AttributeError):",
        "        raise _invalid(wire, raw) from None",
        "    return obj",
    ]
    fn = _compile(cls, src, ns)
    fn.__name__ = "from_ext"
    return fn


def _compile_to_ext(cls: type) -> Callable[..., dict[str, str]]:
    src = ["def fn(self):", "    out = {}"]
    for s in _field_specs(cls):
        text = "v" if s.parse is str else "_bool_text(v)" if s.parse is parse_bool else "str(v)"
        src += [f"    v = self.{s.name}", f"    if v is not None: out[{s.wire!r}] = {text}"]
    src.append("    return out")
    fn = _compile(cls, src, {})
    fn.__name__ = "to_ext"
    return fn


_FROM_EXT: dict[type, Callable[..., Any]] = {}
_TO_EXT: dict[type, Callable[..., dict[str, str]]] = {}
"""Compiled codecs by class; the first call also installs them on the class, so
later calls skip this lookup (a method bound before that still finds them here)."""


class Header:
    """Base of every custom header class (subclasses are frozen slotted dataclasses)."""

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass starts from the lazy codecs, never from a parent's compiled ones.
        cls.from_ext = Header.__dict__["from_ext"]  # type: ignore[method-assign]
        cls.to_ext = Header.__dict__["to_ext"]  # type: ignore[method-assign]

    @classmethod
    def from_ext(cls: type[H], ext: Mapping[str, str] | None) -> H:
        """Parse from extFields; raise `HeaderError` naming the field on any problem."""
        fn = _FROM_EXT.get(cls)
        if fn is None:
            fn = _FROM_EXT[cls] = _compile_from_ext(cls)
            cls.from_ext = classmethod(fn)  # type: ignore[method-assign,assignment]
        return typing.cast(H, fn(cls, ext))

    def to_ext(self) -> dict[str, str]:
        """The header as extFields: every value a string, None values left out."""
        cls = type(self)
        fn = _TO_EXT.get(cls)
        if fn is None:
            fn = _TO_EXT[cls] = _compile_to_ext(cls)
            cls.to_ext = fn  # type: ignore[method-assign]
        return fn(self)

    @classmethod
    def wire_names(cls) -> tuple[str, ...]:
        """The extFields keys this header reads and writes, in field order."""
        return tuple(s.wire for s in _field_specs(cls))
