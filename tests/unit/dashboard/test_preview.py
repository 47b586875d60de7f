"""Body previews: each kind of body is read the way a person would want to see it."""

from __future__ import annotations

import pytest

from skiff.dashboard.preview import HEX_MAX_BYTES, hex_dump, preview_body


def test_utf8_text_is_shown_as_is():
    p = preview_body("héllo wörld\nline two".encode())
    assert (p.encoding, p.text, p.size_bytes, p.truncated) == ("utf-8", "héllo wörld\nline two", 22, False)


def test_json_is_indented():
    p = preview_body(b'{"order":17,"items":[1,2]}')
    assert p.encoding == "json"
    assert p.text == '{\n  "order": 17,\n  "items": [\n    1,\n    2\n  ]\n}'


def test_text_that_only_looks_like_json_stays_text():
    assert preview_body(b"{not json}").encoding == "utf-8"


def test_gbk_from_a_java_producer_is_recognised():
    text = "订单已创建，请尽快付款。感谢您的购买，我们将尽快为您发货。"
    p = preview_body(text.encode("gbk"))
    assert p.encoding in ("gb18030", "gbk", "gb2312")
    assert p.text == text


def test_binary_is_a_hex_dump_not_garbage():
    body = bytes(range(256)) * 2
    p = preview_body(body)
    assert p.encoding == "binary" and p.truncated and p.size_bytes == 512
    lines = p.text.splitlines()
    assert len(lines) == HEX_MAX_BYTES // 16
    assert lines[0] == "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................"
    assert lines[2].endswith(" !\"#$%&'()*+,-./")


def test_empty_body():
    p = preview_body(b"")
    assert (p.encoding, p.text, p.size_bytes) == ("empty", "", 0)


def test_a_long_body_is_cut_without_breaking_a_character():
    body = ("€" * 3000).encode()  # 3 bytes each: the cut at 4096 falls inside a character
    p = preview_body(body, max_bytes=4096)
    assert p.encoding == "utf-8" and p.truncated and p.size_bytes == 9000
    assert p.text == "€" * (4096 // 3)


def test_long_json_is_not_reindented_from_a_cut():
    body = b'{"a": "' + b"x" * 5000 + b'"}'
    p = preview_body(body)
    assert p.encoding == "utf-8" and p.truncated and len(p.text) == 4096


@pytest.mark.parametrize("data", [b"", b"A", bytes(range(40))])
def test_hex_dump_has_one_line_per_sixteen_bytes(data: bytes):
    assert len(hex_dump(data).splitlines()) == (len(data) + 15) // 16
