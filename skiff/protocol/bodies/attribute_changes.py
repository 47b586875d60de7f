"""mqadmin's text for changing a map of attributes (topics' and consumer groups' alike):
``+name=value`` sets a name, ``-name`` removes it (back to the default), comma-separated
(RocketMQ's ``AttributeParser.parseToMap``)."""

from __future__ import annotations

from collections.abc import Callable

from skiff.protocol.bodies.base import BodyError

Check = Callable[[str, str | None], str | None]
"""``check(name, value)``: the value in its kept form, None when ``value`` is None (a removal);
BodyError for an unknown name or a bad value."""


def parse_changes(text: str, what: str, check: Check) -> dict[str, str | None]:
    """``"+a=1,-b"`` -> ``{"a": "1", "b": None}`` (None: remove), each name checked once;
    ``what`` names the map in errors ("topic attribute")."""
    changes: dict[str, str | None] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        sign, body = part[0], part[1:]
        if sign == "+" and "=" in body:
            name, value = (s.strip() for s in body.split("=", 1))
        elif sign == "-" and body.strip() and "=" not in body:
            name, value = body.strip(), None
        else:
            raise BodyError(f"{what} change {part!r}: write +name=value to set or -name to remove")
        if name in changes:
            raise BodyError(f"{what} {name!r} is changed twice")
        changes[name] = check(name, value)
    return changes
