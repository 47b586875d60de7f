"""Reading a few named properties straight from stored properties bytes.

A broker evaluating a filter has each candidate's properties as the bytes of
the stored record (``name 0x01 value 0x02 ...``, see `skiff.common.properties`).
A filter needs only the few names it mentions, so instead of decoding every pair
into a dict it searches for ``0x02 name 0x01`` from the end (the last pair of a
name wins, as in `decode_properties`) and decodes just that value.

The answer always equals ``decode_properties(raw).get(name)``: when the found
pair is one that decoding would drop (its value holds another 0x01), this falls
back to the full decode rather than guess.

`PropertyReader.view` returns a `RawView` that searches only when asked, so a
filter whose AND/OR stops early never pays for the properties it skips. Each
search costs about a third of decoding a typical six-property message, so a
filter that reads a name several times is better served by `decode_properties`
(measured with `python -m skiff.bench.filter`).
"""

from __future__ import annotations

from collections.abc import Iterable

from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, decode_properties

_PAIR_END = PROPERTY_SEPARATOR.encode()
_NAME_END = NAME_VALUE_SEPARATOR.encode()

RawProperties = bytes | bytearray | memoryview
_Needle = tuple[bytes, int, bytes]
"""0x02 name 0x01, its length, and name 0x01 (the form of a pair at offset 0)."""


def _value(data: bytes, name: str, needle: _Needle) -> str | None:
    """The last value of `name` in `data`, as `decode_properties` would give it."""
    pattern, size, head = needle
    at = data.rfind(pattern)
    if at >= 0:
        start = at + size
    elif data.startswith(head):
        start = size - 1
    else:
        return None
    end = data.find(_PAIR_END, start)
    value = data[start:end] if end >= 0 else data[start:]
    if _NAME_END in value:  # a pair decoding drops: let decoding decide
        return decode_properties(data).get(name)
    return value.decode("utf-8", "replace")


class RawView:
    """Read-only, mapping-like access to some properties of raw bytes.

    Offers what compiled filters use, ``get`` and ``in``, for the names of the
    `PropertyReader` that made it; each call searches the bytes again.
    """

    __slots__ = ("_data", "_needles")

    def __init__(self, data: bytes, needles: dict[str, _Needle]) -> None:
        self._data = data
        self._needles = needles

    def get(self, name: str, default: str | None = None) -> str | None:
        value = _value(self._data, name, self._needles[name])
        return default if value is None else value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None


class PropertyReader:
    """Extracts a fixed set of property names from raw properties bytes."""

    __slots__ = ("_needles",)

    def __init__(self, names: Iterable[str]) -> None:
        self._needles: dict[str, _Needle] = {}
        for name in sorted(set(names)):
            pattern = _PAIR_END + name.encode() + _NAME_END
            self._needles[name] = (pattern, len(pattern), pattern[1:])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._needles)

    def view(self, raw: RawProperties) -> RawView:
        return RawView(raw if type(raw) is bytes else bytes(raw), self._needles)
