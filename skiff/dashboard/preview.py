"""Body previews: what a person can read of a message body, and in which encoding it was read.

Bodies are bytes of any kind. UTF-8 is tried first (most producers send it, and
a strict decode seldom succeeds by accident); JSON in it is shown indented. Other
text (GBK from Java producers, Latin-1, UTF-16) is recognised by
charset-normalizer; anything else is shown as a hex dump, so a preview never
garbles or hides binary data.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from charset_normalizer import from_bytes

PREVIEW_MAX_BYTES = 4096
"""Bytes of a body a preview reads (the page says how many the body has)."""
HEX_MAX_BYTES = 256
"""Bytes a hex dump shows: past that a binary body is seldom read by eye."""
TEXT_MIN_PRINTABLE = 0.95
"""Share of printable characters a decoding needs to count as text."""


@dataclass(frozen=True, slots=True)
class BodyPreview:
    encoding: str
    """``utf-8``, ``json`` (UTF-8 JSON), a charset name, ``binary`` or ``empty``."""
    text: str
    size_bytes: int
    truncated: bool


def preview_body(body: bytes, max_bytes: int = PREVIEW_MAX_BYTES) -> BodyPreview:
    head = body[:max_bytes]
    cut = len(body) > max_bytes
    if not body:
        return BodyPreview("empty", "", 0, False)
    utf8 = _utf8(head, cut)
    if utf8 is not None:
        return _json(utf8, len(body), cut) or BodyPreview("utf-8", utf8, len(body), cut)
    guess = from_bytes(head).best()
    if guess is not None and _printable(str(guess)):
        return BodyPreview(guess.encoding, str(guess), len(body), cut)
    return BodyPreview("binary", hex_dump(body[:HEX_MAX_BYTES]), len(body), len(body) > HEX_MAX_BYTES)


def _utf8(head: bytes, cut: bool) -> str | None:
    """``head`` as UTF-8 text, forgiving only a character split by the cut; None if not text."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not cut or exc.start < len(head) - 3:
            return None
        text = head[:exc.start].decode("utf-8")
    return text if _printable(text) else None


def _json(text: str, size: int, cut: bool) -> BodyPreview | None:
    if cut or text[:1] not in ("{", "["):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return BodyPreview("json", pretty, size, False)


def _printable(text: str) -> bool:
    if not text:
        return False
    ok = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    return ok / len(text) >= TEXT_MIN_PRINTABLE


def hex_dump(data: bytes, width: int = 16) -> str:
    """``offset  hex bytes  ascii`` lines, like ``hexdump -C``."""
    lines = []
    for at in range(0, len(data), width):
        row = data[at:at + width]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {row.hex(' '):<{width * 3 - 1}}  {ascii_}")
    return "\n".join(lines)
