"""Request headers and the response header rule: ApiVersions always answers with header
v0 (no tag byte) even at its flexible versions; other flexible responses carry one."""

from __future__ import annotations

import random
import struct

from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
import pytest

from skiff.protocol.kafka.frames import (
    RequestHeader,
    api_versions_body,
    decode_request,
    encode_response,
    encode_response_parts,
    read_header,
    unsupported_response,
)
from skiff.protocol.kafka.wire import BY_REFERENCE_MIN_BYTES, Reader, Writer


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


def _fetch_answer(rng: random.Random, sizes: list[int]) -> dict[str, object]:
    partition = {"error_code": 0, "high_watermark": 9, "last_stable_offset": 9, "log_start_offset": 0,
                 "aborted_transactions": None, "preferred_read_replica": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "T", "partitions": [partition | {"partition_index": i, "records": rng.randbytes(n)}
                                      for i, n in enumerate(sizes)]}]}


@pytest.mark.parametrize("version", [4, 11, 12])  # flexible from 12: compact lengths and tag sections
def test_a_fetch_answer_in_parts_is_the_frame_and_keeps_long_record_sets_uncopied(version: int) -> None:
    rng = random.Random(version)
    long = BY_REFERENCE_MIN_BYTES
    body = _fetch_answer(rng, [0, 10, long - 1, long, 3 * long, 7])
    header = RequestHeader(ApiKey.FETCH, version, 77, "c")
    parts = encode_response_parts(header, body)
    assert b"".join(parts) == encode_response(header, body)
    records = [p["records"] for t in body["responses"] for p in t["partitions"]]  # type: ignore[attr-defined]
    kept = [p for p in parts if any(p is r for r in records)]
    assert kept == records[3:5]  # the two long ones, as they were given
    assert len(parts) == 5
    small = _fetch_answer(rng, [5, 100])
    assert encode_response_parts(header, small) == [bytearray(encode_response(header, small))]
