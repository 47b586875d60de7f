"""Kafka frames: an int32 size, a request header, a body; the response header rule.

A request header is v1 (api_key, api_version, correlation_id, client_id with an int16
length) and, at a flexible version of its API, v2 (the same plus a tagged-field section).
A response header is v0 (the correlation id) or v1 (plus tags) at a flexible version, with
one exception from KIP-511: ApiVersions answers always with header v0, so a client that
does not know the broker's versions yet can read the answer. A tag byte there shifts the
whole parse of librdkafka and kafka-python.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.common.errors import DecodeError
from skiff.protocol.kafka.apis import APIS, Api, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.schema import Array, decode, encode
from skiff.protocol.kafka.wire import Buffer, Reader, Writer

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str

    @property
    def api(self) -> Api | None:
        return APIS.get(self.api_key)

    @property
    def supported(self) -> bool:
        api = self.api
        return api is not None and api.min_version <= self.api_version <= api.max_version


def read_header(frame: bytes | memoryview) -> tuple[RequestHeader, Reader]:
    """The header of a frame (without its size prefix), and a reader at the body. The
    tagged section of a v2 header is skipped when the API and version are known to be
    flexible; for anything else the body is not read."""
    if len(frame) < _HEAD.size + 2:
        raise DecodeError(f"a request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation = _HEAD.unpack_from(frame, 0)
    r = Reader(frame, _HEAD.size)
    client_id = r.string(nullable=True) or ""
    header = RequestHeader(key, version, correlation, client_id)
    api = header.api
    if api is not None and header.supported and api.flexible(version):
        r.skip_tags()
    return header, r


def decode_request(header: RequestHeader, body: Reader) -> dict[str, Any]:
    api = header.api
    assert api is not None and header.supported, "decode_request of an unsupported request"
    return decode(body, api.request, header.api_version, api.flexible(header.api_version))


def encode_response(header: RequestHeader, body: Mapping[str, Any], version: int | None = None) -> bytes:
    """The whole response frame (size prefix included) for ``header``'s request. ``version``
    overrides the request's (an ApiVersions error answers in v0)."""
    w = _response(header, body, version, Writer())
    _SIZE.pack_into(w.buf, 0, len(w.buf) - 4)
    return bytes(w.buf)


def encode_response_parts(header: RequestHeader, body: Mapping[str, Any]) -> list[Buffer]:
    """`encode_response`'s frame as the parts a transport writes in one go (``writelines``): its
    long bytes fields, a Fetch answer's record batches, are parts of their own rather than copied
    into the frame (`wire.BY_REFERENCE_MIN_BYTES`)."""
    parts = _response(header, body, None, Writer(parts=True)).output()
    head = parts[0]
    assert isinstance(head, bytearray), "the first part is the writer's buffer, the size at its start"
    _SIZE.pack_into(head, 0, sum(map(len, parts)) - 4)
    return parts


def _response(header: RequestHeader, body: Mapping[str, Any], version: int | None, w: Writer) -> Writer:
    api = header.api
    assert api is not None
    v = header.api_version if version is None else version
    flexible = api.flexible(v)
    w.int32(0)  # the size, written when the whole is known (the first part holds it)
    w.int32(header.correlation_id)
    if flexible and api.key != ApiKey.API_VERSIONS:
        w.empty_tags()
    encode(w, api.response, v, body, flexible)
    return w


def encode_request(key: ApiKey, version: int, correlation: int, body: Mapping[str, Any], client_id: str) -> bytes:
    """The whole request frame (size prefix included) a client sends: what drivers of the
    listener (skiff.bench.kafka_path, the tests) feed it; request header v2 with its tag
    buffer when the version is flexible, v1 otherwise."""
    api = APIS[key]
    flexible = api.flexible(version)
    w = Writer()
    w.int32(0)
    w.int16(key)
    w.int16(version)
    w.int32(correlation)
    w.string(client_id, False)
    if flexible:
        w.empty_tags()
    encode(w, api.request, version, body, flexible)
    _SIZE.pack_into(w.buf, 0, len(w.buf) - 4)
    return bytes(w.buf)


def api_versions_body(error: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    """What ApiVersions answers: every API and its range (only ApiVersions' own range with
    UNSUPPORTED_VERSION, as Kafka's broker does, so a client retries at a version it has)."""
    apis = list(APIS.values()) if error is ErrorCode.NONE else [APIS[ApiKey.API_VERSIONS]]
    return {"error_code": int(error), "throttle_time_ms": 0,
            "api_keys": [{"api_key": int(a.key), "min_version": a.min_version, "max_version": a.max_version}
                         for a in apis]}


def unsupported_response(header: RequestHeader) -> bytes:
    """The answer to a request Skiff does not serve, instead of closing the connection.

    An unsupported ApiVersions gets a v0 body with UNSUPPORTED_VERSION (KIP-511: every
    client retries from it). A known API at an unknown version gets its response at that
    version as far as the schema knows it, with UNSUPPORTED_VERSION in every error field.
    An unknown API key gets the correlation id and the int16 error code: the layout of the
    many responses that open with their error code."""
    api = header.api
    if api is not None and api.key == ApiKey.API_VERSIONS:
        return encode_response(header, api_versions_body(ErrorCode.UNSUPPORTED_VERSION), version=0)
    if api is not None:
        return error_response(header, ErrorCode.UNSUPPORTED_VERSION)
    return _SIZE.pack(6) + struct.pack(">ih", header.correlation_id, int(ErrorCode.UNSUPPORTED_VERSION))


def error_response(header: RequestHeader, error: ErrorCode) -> bytes:
    """``header``'s response with ``error`` in its top-level error fields and every array empty."""
    api = header.api
    assert api is not None
    body: dict[str, Any] = {f.name: int(error) for f in api.response if f.name == "error_code"} | {
        f.name: [] for f in api.response if isinstance(f.type, Array)}
    return encode_response(header, body)


class FrameTooLarge(DecodeError):
    """A frame's size field is not 1..the limit: the stream cannot be read on."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a frame of {size} bytes (at most {limit})")
        self.size = size


class FrameSplitter:
    """A connection's reads cut into request frames (each without its size field), sans IO.

    Each byte of a frame is copied once: a frame whole in one read is sliced from it, and a
    frame that spans reads is kept as the reads' pieces and joined once when its last byte
    comes. A batching producer's ProduceRequests are often larger than a read (a socket
    read gives at most 256 KiB), and appending each read to the bytes held before copied a
    1 MiB request's bytes about three times (docs/performance.md, "Kafka frames that span
    reads")."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._pieces: list[bytes | memoryview] = []
        """The reads (or their tails) of a frame not yet whole, its size field first."""
        self._held = 0
        self._need = 0
        """Bytes of that frame with its size field, once its size field is whole; else 0."""

    @property
    def buffered(self) -> int:
        return self._held

    def feed(self, data: bytes, out: list[bytes] | deque[bytes]) -> None:
        """Append to ``out`` the frames ``data`` completes; `FrameTooLarge` when a size field
        is out of range (the frames before it are appended first)."""
        view: bytes | memoryview = data
        if self._pieces:
            rest = self._complete(data, out)
            if rest is None:
                return
            view = rest
        pos, end = 0, len(view)
        while end - pos >= 4:
            size = self._size_at(view, pos)
            if end - pos - 4 < size:
                break
            out.append(view[pos + 4:pos + 4 + size] if type(view) is bytes else bytes(view[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos < end:
            self._pieces.append(memoryview(view)[pos:])
            self._held = end - pos
            self._need = 4 + _SIZE.unpack_from(view, pos)[0] if end - pos >= 4 else 0

    def _size_at(self, buf: bytes | memoryview, pos: int) -> int:
        """The frame size field at ``pos``; `FrameTooLarge` outside 1..the limit."""
        size: int = _SIZE.unpack_from(buf, pos)[0]
        if not 0 < size <= self._max:
            raise FrameTooLarge(size, self._max)
        return size

    def _complete(self, data: bytes, out: list[bytes] | deque[bytes]) -> memoryview | None:
        """``data`` added to the frame begun in earlier reads; its bytes after that frame when
        this read completes it (the frame appended to ``out``), else None."""
        pieces = self._pieces
        pieces.append(data)
        self._held += len(data)
        if not self._need:
            if self._held < 4:
                return None
            self._need = 4 + self._size_at(b"".join(bytes(p[:4]) for p in pieces), 0)
        if self._held < self._need:
            return None
        extra = self._held - self._need
        last = memoryview(data)
        pieces[-1] = last[:len(data) - extra]
        skip = 4  # the size field, at the start of the first pieces
        while skip:
            first = pieces[0]
            if len(first) > skip:
                pieces[0] = first[skip:]
                break
            skip -= len(first)
            del pieces[0]
        out.append(b"".join(pieces))
        self._pieces, self._held, self._need = [], 0, 0
        return last[len(data) - extra:]
