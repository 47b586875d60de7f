"""Remote-address patterns of plain_acl.yml (RocketMQ's RemoteAddressStrategyFactory).

| pattern                         | matches                                   |
|---------------------------------|-------------------------------------------|
| ``*`` or ``*.*.*.*``            | every address                             |
| ``192.168.0.1``, ``::1``        | that address                              |
| ``192.168.0.1,192.168.0.2``     | any address of the list                   |
| ``192.168.1.{1,2,3}``           | the last segment from the braces          |
| ``192.168.*.*``, ``10.1.1.1-50``| IPv4 with ``*`` or ``a-b`` per segment    |

A pattern that fits none of these is a `ValueError` naming it: plain_acl.yml is
refused instead of a typo silently opening (or closing) access.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

Matcher = Callable[[str], bool]
_SEGMENT = re.compile(r"^(\*|\d{1,3}|\d{1,3}-\d{1,3})$")


def never(_host: str) -> bool:
    return False


def always(_host: str) -> bool:
    return True


def address_matcher(pattern: str | None) -> Matcher:
    """A predicate over a peer's host (no port) for ``pattern``; blank matches nothing."""
    text = (pattern or "").strip()
    if not text:
        return never
    if text in ("*", "*.*.*.*") or set(text) <= {"*", ":"}:
        return always
    if "{" in text:
        head, _, rest = text.partition("{")
        if not rest.endswith("}"):
            raise ValueError(f"address pattern {text!r}: braces must close the pattern")
        return _any_of([head + part.strip() for part in rest[:-1].split(",")])
    if "," in text:
        return _any_of([part.strip() for part in text.split(",") if part.strip()])
    return _single(text)


def _any_of(patterns: list[str]) -> Matcher:
    matchers = [_single(p) for p in patterns]
    return lambda host: any(m(host) for m in matchers)


def _single(text: str) -> Matcher:
    if ":" in text:
        try:
            wanted = ipaddress.ip_address(text)
        except ValueError:
            raise ValueError(f"address pattern {text!r} is not an IPv6 address") from None
        return lambda host: _same(host, wanted)
    segments = text.split(".")
    if len(segments) != 4 or not all(_SEGMENT.match(s) for s in segments):
        raise ValueError(f"address pattern {text!r} is not an IPv4 address with '*' or 'a-b' segments")
    ranges = [_segment_range(s, text) for s in segments]
    return lambda host: _in_ranges(host, ranges)


def _segment_range(segment: str, text: str) -> tuple[int, int]:
    if segment == "*":
        return 0, 255
    low, _, high = segment.partition("-")
    lo, hi = int(low), int(high or low)
    if not 0 <= lo <= hi <= 255:
        raise ValueError(f"address pattern {text!r}: segment {segment!r} is not within 0-255")
    return lo, hi


def _in_ranges(host: str, ranges: list[tuple[int, int]]) -> bool:
    parts = host.split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return False
    return all(lo <= int(p) <= hi for p, (lo, hi) in zip(parts, ranges))


def _same(host: str, wanted: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")) == wanted
    except ValueError:
        return False
