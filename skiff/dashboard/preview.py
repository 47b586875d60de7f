"""Body previews: what a person can read of a message body, and in which encoding it was read.

Bodies are bytes of any kind, read the first of these ways that fits:

1. UTF-8, strictly (most producers send it, and a strict decode seldom succeeds by
   accident); JSON in it is shown indented.
2. The CJK encodings Java producers still send (GBK/GB18030, Big5, Shift-JIS, EUC-KR):
   each is decoded strictly, and of those that decode, the reading most made of its
   language's common characters wins if enough of it is (`read_cjk`,
   `skiff.dashboard.cjk`). A statistical detector alone reads short CJK bodies wrongly
   (GBK as Thai).
3. Latin-1 (Java's ISO-8859-1) or Windows-1252, when the text reads as a Western
   European language (`_latin`).
4. charset-normalizer's most likely reading (UTF-16 with a byte order mark, Cyrillic,
   Greek, ...), but not one of the CJK readings step 2 refused, nor one whose CJK
   characters are mostly rare (in UTF-16 any even-length Latin text reads as CJK).
5. A hex dump, so a preview never garbles or hides binary data.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import orjson
from charset_normalizer import from_bytes

from skiff.dashboard.cjk import Language, cjk_share, common_share, has_cjk

PREVIEW_MAX_BYTES = 4096
"""Bytes of a body a preview reads (the page says how many the body has)."""
HEX_MAX_BYTES = 256
"""Bytes a hex dump shows: past that a binary body is seldom read by eye."""
TEXT_MIN_PRINTABLE = 0.95
"""Share of printable characters a decoding needs to count as text."""
CJK_ENCODINGS: tuple[tuple[tuple[str, ...], Language], ...] = (
    (("gb18030",), "zh"),  # GB2312 and GBK are subsets
    (("big5",), "zh"),
    (("shift_jis", "cp932"), "ja"),  # cp932 (Windows-31J, Java's MS932) adds NEC and IBM characters
    (("euc_kr", "cp949"), "ko"),  # cp949 (UHC, Java's MS949) adds the Hangul EUC-KR lacks
)
"""The CJK encodings a body is tried in, each with its language; of a narrow encoding and its
Windows superset the first that decodes names the body."""
JUDGED_ENCODINGS = frozenset({
    "gb18030", "gbk", "gb2312", "big5", "big5hkscs", "cp950", "shift_jis", "cp932", "shift_jis_2004", "shift_jisx0213",
    "euc_kr", "cp949",
})
"""The CJK encodings whose readings `read_cjk` judges (with the names charset-normalizer gives
them and their subsets)."""
CJK_MIN_SHARE = 0.4
"""`common_share` a CJK reading needs: real text scores 0.5 to 1, a wrong reading of CJK bytes
or of Latin-1 or Cyrillic text mostly under 0.2 (`skiff.dashboard.cjk` has the measurements)."""
GUESS_CJK_MIN_SHARE = 0.6
"""`cjk_share` a reading of charset-normalizer's with CJK characters needs (EUC-JP, UTF-16):
real text scores that (Japanese, full of kana, 0.6 to 1), its wrong readings of Chinese and
Korean bodies often do not."""
WESTERN_LETTERS = frozenset("àáâãäåæçèéêëìíîïñòóôõöøùúûüÿÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜßœŒ")
"""The non-ASCII letters of French, German, Spanish, Portuguese, Italian, Dutch and the
Scandinavian languages in Latin-1 and Windows-1252."""
LATIN_SYMBOLS = frozenset("\xa0¡¢£¥§©«®°±²³µ¶·¹º»¼½¾¿×÷€„…†‡•–—‘’“”™‹›ª")
"""Non-ASCII characters other than letters that Western European text has."""


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
    utf8 = _decode(head, "utf-8", cut)
    if utf8 is not None:
        return _json(utf8, len(body), cut) or BodyPreview("utf-8", utf8, len(body), cut)
    read = read_cjk(head, cut) or _latin(head) or _guess(head)
    if read is not None:
        return BodyPreview(read[0], read[1], len(body), cut)
    return BodyPreview("binary", hex_dump(body[:HEX_MAX_BYTES]), len(body), len(body) > HEX_MAX_BYTES)


def read_cjk(head: bytes, cut: bool = False) -> tuple[str, str] | None:
    """``(encoding, text)`` of the CJK reading of ``head`` most made of common characters of its
    language, if that is at least `CJK_MIN_SHARE`; None when no CJK reading is likely."""
    best: tuple[float, str, str] | None = None
    for encodings, language in CJK_ENCODINGS:
        for encoding in encodings:
            text = _decode(head, encoding, cut)
            if text is not None:
                share = common_share(text, language)
                if share is not None and (best is None or share > best[0]):
                    best = (share, encoding, text)
                break
    if best is None or best[0] < CJK_MIN_SHARE:
        return None
    return best[1], best[2]


def _latin(head: bytes) -> tuple[str, str] | None:
    """``head`` as Latin-1 (``cp1252`` if it has Windows-1252's punctuation bytes) when it reads
    as a Western European language: every word with a non-ASCII letter has ASCII letters too
    (or is that letter alone), every such letter is one of theirs where their words have it
    (`WESTERN_LETTERS`), and no symbol sits inside a word.

    Cyrillic, Greek or CJK bytes read this way give words of accented letters only; Polish,
    Czech and Romanian (Windows-1250) give symbols in words ("s³owo", "¿e") and accents where
    no Western language puts them ("Zmìny", "Pøíkaz", "zmieniæ", "fãrã"); Turkish
    (Windows-1254) gives Icelandic letters ("doðru"). Those are left to charset-normalizer."""
    encoding = "cp1252" if any(0x80 <= b <= 0x9F for b in head) else "latin-1"
    text = _decode(head, encoding, False)
    if text is None or not any(map(_ascii_letter, text)):
        return None
    if any(len(word) > 1 and not any(map(_ascii_letter, word)) for word in _words(text) if not word.isascii()):
        return None
    if ("¿" in text and "?" not in text) or ("¡" in text and "!" not in text):
        return None  # Polish ż
    if _both(text, "øØ", "áíúèìòùêÁÍÚÈÌÒÙÊ") or _both(text, "èÈ", "íÍ"):
        return None  # Czech ř, ů, č, ě next to its á, í ("Pøíkaz", "balíèky")
    for i, c in enumerate(text):
        if c.isascii():
            continue
        left = text[i - 1] if i else " "
        right = text[i + 1] if i + 1 < len(text) else " "
        if c not in WESTERN_LETTERS:
            if c not in LATIN_SYMBOLS or (left.isalpha() and right.isalpha()) or (c in "¹²³" and right.isalpha()):
                return None  # Polish ł, ą ("s³owo", "bie¿¹ca", "³añcuch")
        elif ((c in "ìòùÌÒÙ" and right.isalpha())  # Italian and French have them last in a word
              or (c in "æÆ" and not right.isalpha())  # Polish ć: "zmieniæ"
              or (c in "ñÑ" and right.lower() not in "aeiouáéíóú")  # Polish ń: "poleceñ", "Koñczy"
              or (c in "œŒ" and right.lower() not in "uie")  # Polish ś: "noœnika"
              or (c in "ãõÃÕ" and (right.lower() not in "oes" if right.isalpha() else left in "rcdtpbfgkz"))):
            return None  # Romanian ă: "fãrã", "necesarã"
    return encoding, text


def _words(text: str) -> list[str]:
    return "".join(c if c.isalpha() else " " for c in text).split()


def _both(text: str, some: str, others: str) -> bool:
    return any(c in text for c in some) and any(c in text for c in others)


def _ascii_letter(c: str) -> bool:
    return c.isascii() and c.isalpha()


def _guess(head: bytes) -> tuple[str, str] | None:
    """charset-normalizer's most likely reading that is text, is not one `read_cjk` refused, and
    if it has CJK characters is mostly common ones (in UTF-16 any even-length Latin text reads
    as CJK, in EUC-JP many Chinese or Korean bodies do), unless a byte order mark says what it is."""
    for match in from_bytes(head):
        if match.encoding in JUDGED_ENCODINGS:
            continue
        text = str(match)
        if _printable(text) and (match.bom or not has_cjk(text) or cjk_share(text) >= GUESS_CJK_MIN_SHARE):
            return match.encoding, text
    return None


def _decode(head: bytes, encoding: str, cut: bool) -> str | None:
    """``head`` decoded strictly, forgiving only a character split by the cut; None if not text."""
    try:
        text = head.decode(encoding)
    except UnicodeDecodeError as exc:
        if not cut or exc.start < len(head) - 3:  # a character is at most 4 bytes
            return None
        try:
            text = head[:exc.start].decode(encoding)
        except UnicodeDecodeError:
            return None
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
    ok = sum(1 for c in text if c.isprintable() or c in "\n\r\t" or unicodedata.category(c) == "Zs")
    return ok / len(text) >= TEXT_MIN_PRINTABLE


def hex_dump(data: bytes, width: int = 16) -> str:
    """``offset  hex bytes  ascii`` lines, like ``hexdump -C``."""
    lines = []
    for at in range(0, len(data), width):
        row = data[at:at + width]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {row.hex(' '):<{width * 3 - 1}}  {ascii_}")
    return "\n".join(lines)
