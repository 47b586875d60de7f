"""Hypothesis strategies built from the type hints of header and body dataclasses,
so every header and body is round-tripped without a hand-written strategy each."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from hypothesis import strategies as st

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
"""Any text JSON can carry (no lone surrogates)."""
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
message_queues = st.builds(MessageQueue, text, text, int32)


def header_strategy(cls: type) -> st.SearchStrategy[Any]:
    """Instances of a header class; optional strings are never "" (that reads back as None)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: _header_value(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


def _header_value(tp: Any) -> st.SearchStrategy[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        value = _header_value(inner)
        if inner is str:
            value = value.filter(bool)
        return st.none() | value
    if typing.get_origin(tp) is Annotated:
        return int32
    return {str: text, int: int64, bool: st.booleans()}[tp]


def body_strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | body_strategy(inner)
    if origin is tuple:
        return st.lists(body_strategy(args[0]), max_size=3).map(tuple)
    if origin in (Mapping, dict):
        return st.dictionaries(body_strategy(args[0]), body_strategy(args[1]), max_size=3)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and issubclass(tp, JsonBody):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: body_strategy(hints[f.name]) for f in dataclasses.fields(tp)})
    scalars = {
        str: text,
        int: int64,
        bool: st.booleans(),
        float: st.floats(allow_nan=False, allow_infinity=False),
        MessageQueue: message_queues,
    }
    return scalars[tp]
