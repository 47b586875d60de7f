"""Request headers and the response header rule: ApiVersions always answers with header
v0 (no tag byte) even at its flexible versions; other flexible responses carry one."""

from __future__ import annotations

import struct

from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.frames import api_versions_body, decode_request, encode_response, read_header, unsupported_response
from skiff.protocol.kafka.wire import Reader, Writer


def request(key: int, version: int, correlation: int, body: bytes = b"", flexible: bool = False) -> bytes:
    w = Writer()
    w.int16(key)
    w.int16(version)
    w.int32(correlation)
    w.string("tester")
    if flexible:
        w.empty_tags()
    return bytes(w.buf) + body


def test_api_versions_v3_answers_with_header_v0_and_compact_body() -> None:
    w = Writer()
    w.string("librdkafka", compact=True)
    w.string("2.16", compact=True)
    w.empty_tags()
    header, body = read_header(request(ApiKey.API_VERSIONS, 3, 99, bytes(w.buf), flexible=True))
    assert decode_request(header, body) == {"client_software_name": "librdkafka", "client_software_version": "2.16"}
    frame = encode_response(header, api_versions_body())
    r = Reader(frame)
    assert r.int32() == len(frame) - 4
    assert r.int32() == 99
    assert r.int16() == 0  # error code right after the correlation id: no tag byte
    count = r.uvarint() - 1
    assert count == len(APIS)
    first = (r.int16(), r.int16(), r.int16())
    assert first == (ApiKey.PRODUCE, 3, 8)


def test_unsupported_api_versions_answers_v0_with_its_own_range() -> None:
    header, _ = read_header(request(ApiKey.API_VERSIONS, 9, 5))
    r = Reader(unsupported_response(header))
    assert (r.int32(), r.int32(), r.int16(), r.int32()) == (r.end - 4, 5, ErrorCode.UNSUPPORTED_VERSION, 1)
    assert (r.int16(), r.int16(), r.int16()) == (ApiKey.API_VERSIONS, 0, 4)


def test_unknown_api_key_answers_its_correlation_id_and_the_error() -> None:
    header, _ = read_header(request(57, 0, 1234))
    assert unsupported_response(header) == struct.pack(">iih", 6, 1234, ErrorCode.UNSUPPORTED_VERSION)


def test_every_advertised_range_is_served_by_a_schema() -> None:
    for api in APIS.values():
        assert 0 <= api.min_version <= api.max_version
        assert api.key in (ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE) or api.max_version < api.first_flexible
