"""Declarative custom headers: a frozen dataclass per header, parsed from and
written to a command's extFields.

Field names are snake_case; the wire name is the camelCase form unless the
class maps it in ``WIRE_NAMES`` (SEND_MESSAGE_V2's one-letter keys). Parsing
accepts what RocketMQ clients send: numbers or strings, and "0"/"1"/"true"/
"false" for booleans. A missing required field or a bad value raises
`HeaderError`, which processors answer with a clear remark.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from skiff.common.config import snake_to_camel
from skiff.common.errors import DecodeError

H = TypeVar("H", bound="Header")

_MISSING = dataclasses.MISSING


class HeaderError(DecodeError):
    """A request header is missing a field or holds a value of the wrong kind."""


def parse_bool(value: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true"):
        return True
    if text in ("0", "false", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean")


def _parser(kind: Any) -> tuple[Any, bool]:
    """The parse function for an annotation, and whether None is allowed."""
    optional = False
    if typing.get_origin(kind) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        optional = len(args) < len(typing.get_args(kind))
        kind = args[0]
    if kind is bool:
        return parse_bool, optional
    if kind is int:
        return lambda v: int(v.strip()) if "." not in v else int(float(v)), optional
    if kind is str:
        return str, optional
    raise TypeError(f"unsupported header field type {kind!r}")


class _Spec(typing.NamedTuple):
    name: str
    wire: str
    parse: Any
    optional: bool
    required: bool


class Header:
    """Base of every custom header class (subclasses are frozen slotted dataclasses)."""

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}
    _specs: ClassVar[tuple[_Spec, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._specs = ()

    @classmethod
    def _field_specs(cls) -> tuple[_Spec, ...]:
        if not cls._specs:
            hints = typing.get_type_hints(cls)
            specs = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                parse, optional = _parser(hints[f.name])
                required = f.default is _MISSING and f.default_factory is _MISSING
                specs.append(_Spec(f.name, cls.WIRE_NAMES.get(f.name, snake_to_camel(f.name)), parse, optional, required))
            cls._specs = tuple(specs)
        return cls._specs

    @classmethod
    def from_ext(cls: type[H], ext: Mapping[str, str] | None) -> H:
        """Parse from extFields; raise `HeaderError` naming the field on any problem."""
        ext = ext or {}
        values: dict[str, Any] = {}
        for spec in cls._field_specs():
            raw = ext.get(spec.wire)
            if raw is None or (raw == "" and spec.optional):
                if spec.required:
                    raise HeaderError(f"the request header has no {spec.wire}")
                continue
            try:
                values[spec.name] = spec.parse(raw)
            except (ValueError, AttributeError):
                raise HeaderError(f"the request header field {spec.wire}={raw!r} is not valid") from None
        return cls(**values)

    def to_ext(self) -> dict[str, str]:
        """The header as extFields: every value a string, None values left out."""
        out: dict[str, str] = {}
        for spec in self._field_specs():
            value = getattr(self, spec.name)
            if value is None:
                continue
            out[spec.wire] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out
