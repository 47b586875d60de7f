"""Body previews: each kind of body is read the way a person would want to see it."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from skiff.dashboard.cjk import common_share, has_cjk
from skiff.dashboard.preview import CJK_ENCODINGS, HEX_MAX_BYTES, hex_dump, preview_body, read_cjk


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


GB, BIG5, SJIS, KR = ("gb18030",), ("big5",), ("shift_jis", "cp932"), ("euc_kr", "cp949")

CJK_BODIES = [  # (the producer's encoding, the names the preview may give, the text)
    ("gbk", GB, "支付成功，谢谢！"),
    ("gbk", GB, "库存不足，无法下单"),
    ("gbk", GB, "退款申请已通过审核"),
    ("gbk", GB, "用户张三登录失败：密码错误"),
    ("gbk", GB, "您的验证码是834521，五分钟内有效。"),
    ("gbk", GB, '{"orderId":"A20240501","status":"已发货","receiver":"张伟","address":"北京市朝阳区建国路88号"}'),
    ("gbk", GB, "尊敬的客户，您好！您于今天上午十点在我们的网上商城购买的商品已经打包完毕，预计明天下午送达。"
                "如果您在收货时发现商品有任何质量问题，请在七天之内联系我们的客服中心，我们会尽快为您办理退换货"
                "手续。感谢您一直以来对我们的支持与信任。"),
    ("gb18030", GB, "𠮷野家的牛肉饭很好吃"),  # 𠮷 is not in GBK: four bytes in GB18030
    ("gb18030", GB, "欢迎光临，本店支持欧元€付款"),
    ("big5", BIG5, "會員帳號已停用"),
    ("big5", BIG5, "您的訂單已取消。"),
    ("big5", BIG5, "付款成功，謝謝您的支持！"),
    ("big5", BIG5, '{"訂單編號":"TW1001","狀態":"已出貨","收件人":"陳大文"}'),
    ("big5", BIG5, "親愛的會員您好，感謝您在本店購物。您所訂購的商品已於今日寄出，預計兩到三個工作天內送達。"
                   "若有任何問題，歡迎隨時與我們的客服人員聯繫，我們將竭誠為您服務。"),
    ("shift_jis", SJIS, "注文確認完了"),  # kanji only, no kana
    ("shift_jis", SJIS, "在庫がありません。"),
    ("shift_jis", SJIS, "東京都新宿区西新宿二丁目"),
    ("shift_jis", SJIS, "パスワードを変更しました"),
    ("shift_jis", SJIS, "ご注文ありがとうございます"),
    ("shift_jis", SJIS, '{"name":"山田太郎","status":"発送済み","address":"東京都新宿区"}'),
    ("cp932", SJIS, "①番窓口へお越しください"),  # ① is one of Windows-31J's NEC characters
    ("shift_jis", SJIS, "このたびは当店をご利用いただき、誠にありがとうございます。ご注文いただいた商品は本日発送"
                        "いたしました。お届けまで二、三日ほどかかる場合がございますので、あらかじめご了承ください。"),
    ("euc_kr", KR, "재고가 부족합니다"),
    ("euc_kr", KR, "결제에 실패했습니다"),
    ("euc_kr", KR, "주문이 완료되었습니다."),
    ("euc_kr", KR, "비밀번호가 변경되었습니다"),
    ("euc_kr", KR, '{"이름":"홍길동","상태":"배송중","주소":"서울특별시 강남구"}'),
    ("euc_kr", KR, "고객님, 안녕하세요. 주문하신 상품이 오늘 발송되었습니다. 배송은 보통 이삼 일 정도 걸리며, "
                   "배송 조회는 홈페이지에서 하실 수 있습니다. 이용해 주셔서 감사합니다."),
]


@pytest.mark.parametrize("encoding, names, text", CJK_BODIES, ids=[f"{e}-{t[:6]}" for e, _, t in CJK_BODIES])
def test_cjk_bodies_are_read_in_their_encoding(encoding: str, names: tuple[str, ...], text: str):
    p = preview_body(text.encode(encoding))
    assert p.encoding in names and p.text == text, (p.encoding, p.text)


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def test_most_of_those_bodies_also_decode_in_another_cjk_encoding():
    """What makes the choice: a strict decode alone would not, since most bodies decode in
    another CJK encoding too (GBK as Big5 and EUC-KR, Shift-JIS and Big5 as GB18030, ...)."""
    families = [names for names, _ in CJK_ENCODINGS]
    ambiguous = [text for encoding, names, text in CJK_BODIES
                 if any(_decodes(text.encode(encoding), other[0]) for other in families if other != names)]
    assert len(ambiguous) >= len(CJK_BODIES) - 3
    assert all(_decodes("支付成功，谢谢！".encode("gbk"), names[0]) for names in families)


def test_the_wrong_readings_are_made_of_rare_characters():
    body = "订单已创建，请尽快付款。感谢您的购买，我们将尽快为您发货。".encode("gbk")
    assert common_share(body.decode("gb18030"), "zh") > 0.6
    for wrong, language in (("big5", "zh"), ("euc_kr", "ko")):  # 隆等眒斐膘ㄛ..., 땐데綠눼쉔，...
        share = common_share(body.decode(wrong), language)
        assert share is not None and share <= 0.2, (wrong, body.decode(wrong))


def test_a_cut_cjk_body_loses_only_the_split_character():
    text = "订单" * 3000  # two bytes a character in GBK: a cut at an odd byte splits one
    p = preview_body(text.encode("gbk"), max_bytes=4095)
    assert (p.encoding, p.truncated, p.text) == ("gb18030", True, text[:2047])


@pytest.mark.parametrize("encoding, text", [
    ("latin-1", "Müller"),  # charset-normalizer's first reading is UTF-16: "ﱍ汬牥"
    ("latin-1", "Ausführung fehlgeschlagen"),  # "ü" and "h" are one GBK character
    ("latin-1", "Grüße aus München, schöne Tage in Köln!"),
    ("latin-1", "Café crème à la française, déjà réglé."),
    ("latin-1", "Señor Pérez pagó 20 EUR"),
    ("latin-1", '{"name":"José Müller","city":"Zürich"}'),
    ("cp1252", "naïve façade – “quoted” résumé"),
])
def test_latin1_text_is_read_as_latin1_not_cjk(encoding: str, text: str):
    body = text.encode(encoding)
    assert read_cjk(body) is None
    p = preview_body(body)
    assert (p.encoding, p.text) == (encoding, text)


@pytest.mark.parametrize("encoding, text", [
    ("cp1251", "Заказ оплачен, спасибо за покупку!"),
    ("koi8_r", "Заказ оплачен"),
    ("cp1253", "Η παραγγελία σας απεστάλη"),
    ("cp1250", "Zamówienie zostało wysłane"),
    ("cp1250", "Příkaz selhal"),
])
def test_other_single_byte_text_is_not_read_as_cjk(encoding: str, text: str):
    body = text.encode(encoding)
    assert read_cjk(body) is None
    assert not has_cjk(preview_body(body).text)


@pytest.mark.parametrize("text", ["hello wörld", "订单已创建，请尽快付款。"])
def test_utf16_with_a_byte_order_mark_is_read_as_utf16(text: str):
    p = preview_body(text.encode("utf-16"))
    assert (p.encoding, p.text) == ("utf_16", text)


@pytest.mark.parametrize("body", [
    zlib.compress(b"hello world" * 10),
    b"\x89PNG\r\n\x1a\n" + bytes(range(200, 256)) * 2,
    struct.pack(">qqd", 17, 123456789, 3.14) * 3,
    *(random.Random(seed).randbytes(n) for seed in range(10) for n in (64, 300)),  # 8 random bytes may be text
], ids=lambda b: b[:4].hex())
def test_binary_bodies_are_hex_dumps(body: bytes):
    assert read_cjk(body) is None
    assert preview_body(body).encoding == "binary"


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
