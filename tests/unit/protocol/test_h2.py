"""The gRPC door's HTTP/2 codec (skiff.protocol.h2), sans IO: a client's bytes in, events and
frames out. Header blocks are made with grpcio-free HPACK encodings written here (literal and
Huffman strings, indexed and incremental entries), so the decoder is checked against RFC
7541's own examples too."""

from __future__ import annotations

import gzip
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.limits import H2_MAX_FRAME_BYTES, H2_RECEIVE_WINDOW_BYTES
from skiff.protocol.h2 import frames as f
from skiff.protocol.h2 import grpc as g
from skiff.protocol.h2.connection import DATA_EVENT, ENDED, GONE, HEADERS_EVENT, RESET, H2Server
from skiff.protocol.h2.frames import H2Error
from skiff.protocol.h2.hpack import _HUFFMAN_CODES, Decoder, encode_literal, huffman_decode

PATH = "/apache.rocketmq.v2.MessagingService/SendMessage"


def request_block(path: str = PATH, extra: tuple[tuple[bytes, bytes], ...] = ()) -> bytes:
    block = b"\x83\x86"  # :method POST, :scheme http (static)
    block += encode_literal(b":path", path.encode())
    block += encode_literal(b"content-type", b"application/grpc") + encode_literal(b"te", b"trailers")
    for name, value in extra:
        block += encode_literal(name, value)
    return block


def parse_frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    out, pos = [], 0
    while pos < len(data):
        high, low, kind, flags, sid = f.HEADER.unpack_from(data, pos)
        size = (high << 8) | low
        out.append((kind, flags, sid, data[pos + 9:pos + 9 + size]))
        pos += 9 + size
    assert pos == len(data)
    return out


def started() -> H2Server:
    conn = H2Server()
    conn.start()
    ours = parse_frames(conn.data_to_send())
    assert [k for k, *_ in ours] == [f.SETTINGS, f.WINDOW_UPDATE]
    settings = dict(f.SETTING.iter_unpack(ours[0][3]))
    assert settings[f.SETTINGS_INITIAL_WINDOW_SIZE] == H2_RECEIVE_WINDOW_BYTES
    assert f.U32.unpack(ours[1][3])[0] == H2_RECEIVE_WINDOW_BYTES - f.DEFAULT_WINDOW
    events = conn.feed(f.PREFACE + f.settings({}))
    assert events == []
    assert parse_frames(conn.data_to_send()) == [(f.SETTINGS, f.ACK, 0, b"")]
    return conn


def call_bytes(sid: int, body: bytes, path: str = PATH) -> bytes:
    return (f.frame(f.HEADERS, f.END_HEADERS, sid, request_block(path))
            + f.frame(f.DATA, f.END_STREAM, sid, g.message(body)))


def test_a_call_split_at_every_byte_gives_the_same_events():
    data = call_bytes(1, b"hello") + f.frame(f.PING, 0, 0, b"12345678")
    whole = started().feed(data)
    assert [e.kind for e in whole] == [HEADERS_EVENT, DATA_EVENT]
    assert (":path", PATH) in (whole[0].headers or [])
    assert whole[1].data == g.message(b"hello") and whole[1].end_stream
    for cut in range(1, len(data)):
        conn = started()
        events = conn.feed(data[:cut]) + conn.feed(data[cut:])
        assert events == whole, cut
        assert (f.PING, f.ACK, 0, b"12345678") in parse_frames(conn.data_to_send())


def test_the_preface_split_at_every_byte_and_a_wrong_one():
    for cut in range(1, len(f.PREFACE)):
        conn = H2Server()
        assert conn.feed(f.PREFACE[:cut]) == [] and not conn.ended
        assert conn.feed(f.PREFACE[cut:] + f.settings({})) == []
    conn = H2Server()
    events = conn.feed(b"GET / HTTP/1.1\r\n\r\n")
    assert [e.kind for e in events] == [ENDED] and events[0].code == f.PROTOCOL_ERROR
    [(kind, _, _, payload)] = parse_frames(conn.data_to_send())
    assert kind == f.GOAWAY and f.U32X2.unpack_from(payload)[1] == f.PROTOCOL_ERROR


def test_continuation_and_padding():
    conn = started()
    block = request_block()
    padded = bytes((3,)) + block[:10] + b"\0\0\0"
    data = (f.frame(f.HEADERS, f.PADDED, 1, padded) + f.frame(f.CONTINUATION, 0, 1, block[10:20])
            + f.frame(f.CONTINUATION, f.END_HEADERS, 1, block[20:])
            + f.frame(f.DATA, f.PADDED | f.END_STREAM, 1, bytes((4,)) + b"abc" + b"\0" * 4))
    events = conn.feed(data)
    assert [e.kind for e in events] == [HEADERS_EVENT, DATA_EVENT]
    assert dict(events[0].headers or [])[":path"] == PATH
    assert events[1].data == b"abc"


def test_a_header_block_interrupted_is_a_protocol_error():
    conn = started()
    block = request_block()
    events = conn.feed(f.frame(f.HEADERS, 0, 1, block[:5]) + f.frame(f.PING, 0, 0, b"x" * 8))
    assert [e.kind for e in events] == [ENDED] and events[0].code == f.PROTOCOL_ERROR
    assert parse_frames(conn.data_to_send())[-1][0] == f.GOAWAY
    assert conn.feed(call_bytes(3, b"x")) == []  # nothing is read after a connection error


@pytest.mark.parametrize("data, code", [
    (f.frame(f.DATA, 0, 0, b"x"), f.PROTOCOL_ERROR),  # DATA on stream 0
    (f.frame(f.DATA, 0, 9, b"x"), f.PROTOCOL_ERROR),  # DATA on an idle stream
    (f.frame(f.HEADERS, f.END_HEADERS, 2, request_block()), f.PROTOCOL_ERROR),  # even stream id
    (f.frame(f.PING, 0, 0, b"short"), f.FRAME_SIZE_ERROR),
    (f.frame(f.SETTINGS, 0, 0, b"12345"), f.FRAME_SIZE_ERROR),
    (f.frame(f.SETTINGS, 0, 0, f.SETTING.pack(f.SETTINGS_INITIAL_WINDOW_SIZE, 2 ** 31)), f.FLOW_CONTROL_ERROR),
    (f.frame(f.WINDOW_UPDATE, 0, 0, f.U32.pack(0)), f.PROTOCOL_ERROR),
    (f.frame(f.WINDOW_UPDATE, 0, 0, f.U32.pack(2 ** 31 - 1)), f.FLOW_CONTROL_ERROR),
    (f.frame(f.HEADERS, f.END_HEADERS, 1, b"\xff\xff\xff\xff\xff\xff\x7f"), f.COMPRESSION_ERROR),
    (f.frame(f.HEADERS, f.END_HEADERS, 1, b"\xbf"), f.COMPRESSION_ERROR),  # index 63: no such entry
    (f.frame(f.CONTINUATION, f.END_HEADERS, 1, b""), f.PROTOCOL_ERROR),
    (f.frame(f.PUSH_PROMISE, 0, 1, b"\0\0\0\2"), f.PROTOCOL_ERROR),
    (f.frame(f.HEADERS, f.PADDED | f.END_HEADERS, 1, b"\x05ab"), f.PROTOCOL_ERROR),
    (f.HEADER.pack((H2_MAX_FRAME_BYTES + 1) >> 8, (H2_MAX_FRAME_BYTES + 1) & 0xFF, f.DATA, 0, 1), f.FRAME_SIZE_ERROR),
])
def test_malformed_frames_end_the_connection_with_goaway_and_the_right_code(data: bytes, code: int):
    conn = started()
    events = conn.feed(data)
    assert [(e.kind, e.code) for e in events] == [(ENDED, code)]
    kind, _, _, payload = parse_frames(conn.data_to_send())[-1]
    assert kind == f.GOAWAY and f.U32X2.unpack_from(payload)[1] == code


def test_unknown_frame_types_and_priority_are_ignored():
    conn = started()
    events = conn.feed(f.frame(0x42, 0xFF, 0, b"whatever") + f.frame(f.PRIORITY, 0, 1, b"\0\0\0\0\x10")
                       + call_bytes(1, b"x"))
    assert [e.kind for e in events] == [HEADERS_EVENT, DATA_EVENT]


def test_rst_stream_from_the_client_reports_the_stream_and_drops_its_answer():
    conn = started()
    conn.feed(f.frame(f.HEADERS, f.END_HEADERS, 1, request_block()))
    conn.data_to_send()
    events = conn.feed(f.rst_stream(1, f.CANCEL))
    assert [(e.kind, e.stream_id, e.code) for e in events] == [(RESET, 1, f.CANCEL)]
    conn.send_headers(1, g.RESPONSE_HEADERS)
    conn.send_data(1, b"late")
    assert conn.data_to_send() == b""  # nothing is written on a reset stream


def test_a_tiny_peer_window_holds_data_and_trailers_until_window_updates():
    conn = started()
    conn.feed(f.settings({f.SETTINGS_INITIAL_WINDOW_SIZE: 10, f.SETTINGS_MAX_FRAME_SIZE: 16_384})
              + call_bytes(1, b"req"))
    conn.data_to_send()
    body = bytes(range(256)) * 4
    conn.send_headers(1, g.RESPONSE_HEADERS)
    conn.send_data(1, body)
    conn.send_headers(1, g.OK_TRAILERS, end_stream=True)
    sent = parse_frames(conn.data_to_send())
    assert [(k, p) for k, _, _, p in sent] == [(f.HEADERS, g.RESPONSE_HEADERS), (f.DATA, body[:10])]
    got = body[:10]
    while len(got) < len(body):
        conn.feed(f.window_update(1, 7))  # the stream's window opens a little at a time
        frames = parse_frames(conn.data_to_send())
        assert [k for k, *_ in frames][:1] == [f.DATA]
        got += b"".join(p for k, _, _, p in frames if k == f.DATA)
        if len(got) < len(body):
            assert all(k == f.DATA for k, *_ in frames)
    assert got == body
    assert frames[-1][:2] == (f.HEADERS, f.END_HEADERS | f.END_STREAM)  # trailers after the last byte


def test_the_connection_window_holds_every_stream_and_a_settings_change_reopens_them():
    conn = started()
    conn.feed(call_bytes(1, b"a") + call_bytes(3, b"b"))
    conn.data_to_send()

    def data_sent() -> list[tuple[int, int]]:
        return [(sid, len(p)) for k, _, sid, p in parse_frames(conn.data_to_send()) if k == f.DATA]

    conn.send_data(1, b"x" * 70_000)
    conn.send_data(3, b"y" * 10)
    assert sum(n for _, n in data_sent()) == f.DEFAULT_WINDOW  # both windows spent on stream 1
    conn.feed(f.window_update(0, 100_000))
    assert data_sent() == [(3, 10)]  # stream 1's own window is still closed
    conn.feed(f.settings({f.SETTINGS_INITIAL_WINDOW_SIZE: 100_000}))
    assert data_sent() == [(1, 70_000 - f.DEFAULT_WINDOW)]  # the new initial size opens it


def test_data_frames_are_cut_at_the_peers_max_frame_size():
    conn = started()
    conn.feed(f.settings({f.SETTINGS_INITIAL_WINDOW_SIZE: 1_000_000}) + f.window_update(0, 1_000_000)
              + call_bytes(1, b"a"))
    conn.data_to_send()
    conn.send_data(1, b"z" * 40_000)
    sizes = [len(p) for k, _, _, p in parse_frames(conn.data_to_send()) if k == f.DATA]
    assert sizes == [16_384, 16_384, 40_000 - 2 * 16_384]


def test_the_inbound_windows_are_replenished():
    conn = started()
    conn.feed(f.frame(f.HEADERS, f.END_HEADERS, 1, request_block()))
    chunk = b"d" * (H2_MAX_FRAME_BYTES - 100)
    updates = []
    for _ in range(H2_RECEIVE_WINDOW_BYTES // len(chunk) + 2):
        conn.feed(f.frame(f.DATA, 0, 1, chunk))
        updates += [(sid, f.U32.unpack(p)[0]) for k, _, sid, p in parse_frames(conn.data_to_send())
                    if k == f.WINDOW_UPDATE]
    assert {sid for sid, _ in updates} == {0, 1}
    assert sum(n for sid, n in updates if sid == 0) >= H2_RECEIVE_WINDOW_BYTES // 2


def test_goaway_from_the_peer_and_ours():
    conn = started()
    conn.feed(call_bytes(1, b"a"))
    events = conn.feed(f.goaway(1, f.NO_ERROR))
    assert [e.kind for e in events] == [GONE]
    conn.close()
    [(kind, _, _, payload)] = parse_frames(conn.data_to_send())
    assert kind == f.GOAWAY and f.U32X2.unpack_from(payload) == (1, f.NO_ERROR)
    assert conn.feed(call_bytes(3, b"b")) == []  # past our GOAWAY: not taken


def test_answering_before_the_client_ends_resets_its_stream_with_no_error():
    conn = started()
    conn.feed(f.frame(f.HEADERS, f.END_HEADERS, 1, request_block()))
    conn.send_headers(1, g.trailers_only(g.UNIMPLEMENTED, "no"), end_stream=True)
    frames = parse_frames(conn.data_to_send())
    assert [(k, p) for k, _, _, p in frames][-1] == (f.RST_STREAM, f.U32.pack(f.NO_ERROR))


# -- HPACK ---------------------------------------------------------------------------


def test_hpack_rfc7541_c4_requests_with_huffman_and_the_dynamic_table():
    decoder = Decoder(4096, 65_536)
    first = bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")
    assert decoder.decode(first) == ((":method", "GET"), (":scheme", "http"), (":path", "/"),
                                     (":authority", "www.example.com"))
    second = bytes.fromhex("828684be5886a8eb10649cbf")
    assert decoder.decode(second) == ((":method", "GET"), (":scheme", "http"), (":path", "/"),
                                      (":authority", "www.example.com"), ("cache-control", "no-cache"))
    third = bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")
    assert decoder.decode(third) == ((":method", "GET"), (":scheme", "https"), (":path", "/index.html"),
                                     (":authority", "www.example.com"), ("custom-key", "custom-value"))


def test_huffman_rejects_bad_padding_and_eos():
    assert huffman_decode(bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff")) == b"www.example.com"
    with pytest.raises(H2Error):
        huffman_decode(bytes.fromhex("f1e3c2e5f23a6ba0ab90f4fe"))  # padding has a zero bit
    with pytest.raises(H2Error):
        huffman_decode(b"\xff\xff\xff\xff")  # EOS
    with pytest.raises(H2Error):
        huffman_decode(bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff") + b"\xff")  # 8 bits or more of padding


def _huffman_encode(data: bytes) -> bytes:
    """RFC 7541's code, bit by bit from Appendix B's table, padded with 1s: the plain encoder
    the state-machine decoder is checked against."""
    bits = "".join(_HUFFMAN_CODES[b] for b in data)
    bits += "1" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


def test_huffman_decodes_what_the_code_table_encodes_for_random_strings() -> None:
    rng = random.Random(7541)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 48)))
        assert huffman_decode(_huffman_encode(data)) == data
        if data:  # cut inside the last symbol's code, or padded with a zero: refused, not misread
            encoded = _huffman_encode(data)
            damaged = encoded[:-1] + bytes([encoded[-1] & 0xFE])
            try:
                decoded = huffman_decode(damaged)
            except H2Error:
                continue
            assert decoded != data or damaged == encoded


def test_hpack_table_size_updates_evict_and_are_bounded():
    decoder = Decoder(4096, 65_536)
    decoder.decode(encode_literal(b"a", b"b").replace(b"\x00", b"\x40", 1))  # incremental indexing
    assert decoder.decode(b"\xbe") == (("a", "b"),)
    assert decoder.decode(b"\xbe") == (("a", "b"),)  # remembered while the table holds
    decoder.decode(encode_literal(b"c", b"d").replace(b"\x00", b"\x40", 1))
    assert decoder.decode(b"\xbe") == (("c", "d"),)  # the same bytes, a changed table: decoded again
    decoder.decode(b"\x20")  # table size 0: evicts everything
    with pytest.raises(H2Error):
        decoder.decode(b"\xbe")
    with pytest.raises(H2Error):
        decoder.decode(b"\x3f\xe2\x1f")  # an update past SETTINGS_HEADER_TABLE_SIZE


# -- gRPC framing ----------------------------------------------------------------------


def test_messages_split_at_every_byte():
    data = g.message(b"one") + g.message(b"") + g.message(b"three" * 100)
    for cut in range(len(data) + 1):
        reader = g.MessageReader(1000, False)
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == [b"one", b"", b"three" * 100]
        assert not reader.partial


def test_an_oversize_message_is_resource_exhausted_before_its_bytes_come():
    reader = g.MessageReader(100, False)
    with pytest.raises(g.GrpcError) as err:
        reader.feed(struct.pack(">BI", 0, 101))
    assert err.value.code == g.RESOURCE_EXHAUSTED


def test_compressed_messages_need_grpc_encoding_gzip():
    packed = gzip.compress(b"payload")
    framed = struct.pack(">BI", 1, len(packed)) + packed
    assert g.MessageReader(100, True).feed(framed) == [b"payload"]
    with pytest.raises(g.GrpcError) as err:
        g.MessageReader(100, False).feed(framed)
    assert err.value.code == g.UNIMPLEMENTED
    bomb = gzip.compress(b"\0" * 10_000)
    with pytest.raises(g.GrpcError) as err:
        g.MessageReader(100, True).feed(struct.pack(">BI", 1, len(bomb)) + bomb)
    assert err.value.code == g.RESOURCE_EXHAUSTED


def test_call_head_reads_timeout_metadata_and_refuses_what_is_no_grpc_call():
    head = g.call_head(((":method", "POST"), (":path", PATH), ("content-type", "application/grpc+proto"),
                        ("grpc-timeout", "2500m"), ("x-mq-client-id", "c1"), ("trace-bin", "AAEC")))
    assert (head.service, head.method, head.timeout_s) == ("apache.rocketmq.v2.MessagingService", "SendMessage", 2.5)
    assert head.metadata == (("x-mq-client-id", "c1"), ("trace-bin", b"\0\1\2"))
    for unit, seconds in (("H", 3600.0), ("M", 60.0), ("S", 1.0), ("u", 1e-6), ("n", 1e-9)):
        assert g.timeout_s("3" + unit) == pytest.approx(3 * seconds)
    for bad in ("", "5", "5x", "123456789S", "-1S"):
        with pytest.raises(g.GrpcError):
            g.timeout_s(bad)
    with pytest.raises(g.GrpcError) as err:
        g.call_head(((":method", "GET"), (":path", PATH), ("content-type", "text/html")))
    assert err.value.code == g.UNIMPLEMENTED


def test_trailers_percent_encode_the_message():
    block = g.trailers(g.INTERNAL, "bad 100% ü\n")
    assert b"grpc-status" in block and b"13" in block
    assert b"bad 100%25 %C3%BC%0A" in block


def test_a_whole_answer_in_one_piece_or_through_the_windows():
    conn = started()
    conn.feed(call_bytes(1, b"a") + call_bytes(3, b"b"))
    conn.data_to_send()
    conn.send_answer(1, g.RESPONSE_HEADERS, b"small", g.OK_TRAILERS)
    assert [(k, fl, sid, p) for k, fl, sid, p in parse_frames(conn.data_to_send())] == [
        (f.HEADERS, f.END_HEADERS, 1, g.RESPONSE_HEADERS), (f.DATA, 0, 1, b"small"),
        (f.HEADERS, f.END_HEADERS | f.END_STREAM, 1, g.OK_TRAILERS)]
    big = b"B" * (f.DEFAULT_WINDOW + 10)  # over the stream's window: the rest waits, the trailers behind it
    conn.send_answer(3, g.RESPONSE_HEADERS, big, g.OK_TRAILERS)
    first = parse_frames(conn.data_to_send())
    assert first[-1][0] == f.DATA and sum(len(p) for k, _, _, p in first if k == f.DATA) == f.DEFAULT_WINDOW - 5
    conn.feed(f.window_update(0, 1000) + f.window_update(3, 1000))
    rest = parse_frames(conn.data_to_send())
    assert b"".join(p for k, _, _, p in rest if k == f.DATA) == big[f.DEFAULT_WINDOW - 5:]
    assert rest[-1][:2] == (f.HEADERS, f.END_HEADERS | f.END_STREAM) and rest[-1][3] == g.OK_TRAILERS


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.lists(st.tuples(st.integers(0, 12), st.integers(0, 255),
                                                                           st.integers(0, 7), st.binary(max_size=40)),
                                                                 max_size=12))
def test_whatever_a_client_sends_the_codec_answers_and_never_raises(chunks: list[bytes],
                                                                    made: list[tuple[int, int, int, bytes]]):
    conn = started()
    data = b"".join(f.frame(kind, flags, sid, payload) for kind, flags, sid, payload in made) + b"".join(chunks)
    for event in conn.feed(data[:len(data) // 2]) + conn.feed(data[len(data) // 2:]):
        assert event.kind in (HEADERS_EVENT, DATA_EVENT, RESET, ENDED, GONE)
    conn.data_to_send()


def test_a_smaller_peer_header_table_is_acknowledged_at_the_start_of_our_next_block():
    conn = started()
    conn.feed(f.settings({f.SETTINGS_HEADER_TABLE_SIZE: 0}) + call_bytes(1, b"a") + call_bytes(3, b"b"))
    conn.data_to_send()
    conn.send_answer(1, g.RESPONSE_HEADERS, b"x", g.OK_TRAILERS)
    conn.send_answer(3, g.RESPONSE_HEADERS, b"y", g.OK_TRAILERS)
    blocks = [p for k, _, _, p in parse_frames(conn.data_to_send()) if k == f.HEADERS]
    assert blocks == [b"\x20" + g.RESPONSE_HEADERS, g.OK_TRAILERS, g.RESPONSE_HEADERS, g.OK_TRAILERS]
    assert Decoder(0, 65_536).decode(blocks[0]) == ((":status", "200"), ("content-type", "application/grpc"))
