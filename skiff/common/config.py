"""Configuration with RocketMQ's key names: Java properties files, camelCase keys,
command-line overrides, and a clear error that names the key on any bad value.

A config is a dataclass whose snake_case fields map to RocketMQ's camelCase keys
(``storePathRootDir`` ↔ ``store_path_root_dir``). A class may declare
``ALIASES`` for RocketMQ's historical spellings (``mapedFileSizeCommitLog``).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from skiff.common.errors import ConfigError

T = TypeVar("T")

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")


def camel_to_snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub(r"_\1", name).lower()


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``k=v``, ``k: v`` or ``k v``, comments, continuations."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"^((?:\\.|[^=:\s\\])+)\s*[=:\s]\s*(.*)$", logical)
        if m:
            out[_unescape(m.group(1))] = _unescape(m.group(2))
        elif logical:
            out[_unescape(logical)] = ""
        logical = ""
    return out


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return re.sub(
        r"\\(u[0-9a-fA-F]{4}|.)",
        lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u" and len(m.group(1)) == 5
        else {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1), m.group(1)),
        s,
    )


def read_properties_file(path: str | Path) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc


def _coerce(key: str, value: Any, kind: Any) -> Any:
    if typing.get_origin(kind) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if value is None or value == "":
            return None
        kind = args[0]
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if isinstance(value, kind):
            return value
        try:
            return kind[str(value).strip().upper()]
        except KeyError:
            choices = ", ".join(m.name for m in kind)
            raise ConfigError(f"{key}: {value!r} is not one of {choices}") from None
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: {value!r} is not a boolean (true or false)")
    if kind is int:
        try:
            return int(str(value).strip().replace("_", ""))
        except ValueError:
            raise ConfigError(f"{key}: {value!r} is not a whole number") from None
    if kind is float:
        try:
            return float(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key}: {value!r} is not a number") from None
    if kind is str:
        return str(value).strip()
    return value


def build_config(cls: type[T], *sources: Mapping[str, Any], base: T | None = None) -> T:
    """Build ``cls`` from mappings of RocketMQ keys (later sources win).

    Keys may be camelCase (RocketMQ's) or snake_case; an unknown key or a bad
    value raises `ConfigError` naming the key. Fields missing from every source
    keep their defaults (or ``base``'s values).
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    aliases: Mapping[str, str] = getattr(cls, "ALIASES", {})
    values: dict[str, Any] = {}
    for source in sources:
        for key, value in source.items():
            name = aliases.get(key) or (key if key in names else camel_to_snake(key))
            if name not in names:
                raise ConfigError(f"unknown configuration key {key!r}")
            values[name] = _coerce(key, value, hints[name])
    if base is not None:
        return dataclasses.replace(base, **values)  # type: ignore[type-var]
    try:
        config = cls(**values)
    except TypeError as exc:
        raise ConfigError(str(exc)) from exc
    validate = getattr(config, "validate", None)
    if validate is not None:
        validate()
    return config


def parse_overrides(args: Iterable[str]) -> dict[str, str]:
    """Turn ``--key=value`` (or ``key=value``) arguments into a mapping."""
    out: dict[str, str] = {}
    for arg in args:
        text = arg[2:] if arg.startswith("--") else arg
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {arg!r} is not of the form --key=value")
        out[key] = value
    return out


def to_properties(config: object) -> dict[str, str]:
    """A config as RocketMQ-named string properties (for logs and `--print-config`)."""
    out = {}
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        v = getattr(config, f.name)
        out[snake_to_camel(f.name)] = v.name if isinstance(v, enum.Enum) else str(v).lower() if isinstance(v, bool) else str(v)
    return out
