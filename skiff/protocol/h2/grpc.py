"""gRPC over HTTP/2 (the gRPC "PROTOCOL-HTTP2" spec), server side, sans IO: the request's
headers read into a `CallHead`, length-prefixed messages split from DATA, and the constant
header blocks of answers.

Message prefix (each message, possibly spanning DATA frames):

| offset | size | field                                  |
|--------|------|----------------------------------------|
| 0      | 1    | compressed flag (0 or 1)               |
| 1      | 4    | message length, big-endian             |
| 5      | len  | message (gzip when flagged and the call's ``grpc-encoding`` is gzip) |

Answers: HEADERS ``:status 200``, ``content-type: application/grpc``; DATA of messages;
trailers ``grpc-status`` and ``grpc-message`` (percent-encoded) ending the stream. An error
before any message is one HEADERS holding both ("trailers-only").
"""

from __future__ import annotations

import base64
import gzip
import struct
import urllib.parse
import zlib
from dataclasses import dataclass

from skiff.common.limits import HPACK_BLOCKS_CACHED
from skiff.protocol.h2.hpack import encode_integer, encode_literal

PREFIX = struct.Struct(">BI")
PREFIX_BYTES = 5
assert PREFIX.size == PREFIX_BYTES

# gRPC status codes
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
RESOURCE_EXHAUSTED = 8
INTERNAL = 13
UNIMPLEMENTED = 12
UNAVAILABLE = 14

_STATUS_200 = b"\x88"
"""``:status 200``: static table index 8, fully indexed (touches no dynamic table)."""
_CONTENT_TYPE = encode_integer(31, 4, 0) + encode_integer(16, 7, 0) + b"application/grpc"
"""``content-type`` (static name index 31), literal without indexing."""
RESPONSE_HEADERS = _STATUS_200 + _CONTENT_TYPE
OK_TRAILERS = encode_literal(b"grpc-status", b"0")

_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIMEOUT_DIGITS_MAX = 8


class GrpcError(Exception):
    """A call refused with a gRPC status (trailers-only, or trailers after its messages)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def trailers(code: int, message: str = "") -> bytes:
    """The trailers block of a status; ``message`` percent-encoded as the spec says."""
    if code == OK and not message:
        return OK_TRAILERS
    block = encode_literal(b"grpc-status", str(code).encode())
    if message:
        block += encode_literal(b"grpc-message", urllib.parse.quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")
                                .encode())
    return block


def trailers_only(code: int, message: str) -> bytes:
    return RESPONSE_HEADERS + trailers(code, message)


def message(payload: bytes) -> bytes:
    """One uncompressed length-prefixed message."""
    return PREFIX.pack(0, len(payload)) + payload


def timeout_s(text: str) -> float:
    """``grpc-timeout`` (1-8 digits and a unit H M S m u n) in seconds; `GrpcError` if malformed."""
    scale = _TIMEOUT_UNITS.get(text[-1:])
    digits = text[:-1]
    if scale is None or not digits.isdigit() or len(digits) > _TIMEOUT_DIGITS_MAX:
        raise GrpcError(INVALID_ARGUMENT, f"grpc-timeout {text!r} is not 1-8 digits and a unit of H M S m u n")
    return int(digits) * scale


@dataclass(frozen=True, slots=True)
class CallHead:
    """What a request's headers say."""

    method: str
    """The part of ``:path`` after the service (``SendMessage``)."""
    service: str
    timeout_s: float | None
    gzip: bool
    metadata: tuple[tuple[str, str | bytes], ...]
    """The custom headers, ``-bin`` values base64-decoded to bytes, as grpcio hands them over."""


_RESERVED = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding",
                       "user-agent", "host"})


_heads: dict[tuple[tuple[str, str], ...], CallHead] = {}


def call_head(headers: tuple[tuple[str, str], ...]) -> CallHead:
    """The call a request's header list opens; `GrpcError` when it is no gRPC call. A list seen
    before gives the same head (clients repeat their calls; `HPACK_BLOCKS_CACHED` bounds it)."""
    head = _heads.get(headers)
    if head is None:
        head = _call_head(headers)
        if len(_heads) >= HPACK_BLOCKS_CACHED:
            _heads.clear()
        _heads[headers] = head
    return head


def _call_head(headers: tuple[tuple[str, str], ...]) -> CallHead:
    path, content_type, timeout, encoding, method_verb = "", "", None, "", ""
    metadata: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name[:1] == ":":
            if name == ":path":
                path = value
            elif name == ":method":
                method_verb = value
            continue
        if name == "content-type":
            content_type = value
        elif name == "grpc-timeout":
            timeout = timeout_s(value)
        elif name == "grpc-encoding":
            encoding = value
        elif name not in _RESERVED:
            metadata.append((name, _binary(name, value) if name.endswith("-bin") else value))
    if method_verb != "POST" or not content_type.startswith("application/grpc"):
        raise GrpcError(UNIMPLEMENTED, f"not a gRPC call (:method {method_verb}, content-type {content_type!r})")
    service, _, method = path[1:].partition("/")
    if encoding not in ("", "identity", "gzip"):
        raise GrpcError(UNIMPLEMENTED, f"grpc-encoding {encoding!r} is not served (identity, gzip)")
    return CallHead(method, service, timeout, encoding == "gzip", tuple(metadata))


def _binary(name: str, value: str) -> bytes:
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        raise GrpcError(INVALID_ARGUMENT, f"metadata {name} is not base64") from None


class MessageReader:
    """Splits one call's request messages from its DATA, however the frames cut them."""

    __slots__ = ("_buffer", "_max_bytes", "_gzip")

    def __init__(self, max_bytes: int, gzip_allowed: bool) -> None:
        self._buffer = b""
        self._max_bytes = max_bytes
        self._gzip = gzip_allowed

    def feed(self, data: bytes) -> list[bytes]:
        """The messages completed by ``data``; `GrpcError` for an oversize or undecodable one."""
        buffer = self._buffer + data if self._buffer else data
        out: list[bytes] = []
        pos, end = 0, len(buffer)
        while end - pos >= PREFIX_BYTES:
            flag, size = PREFIX.unpack_from(buffer, pos)
            if size > self._max_bytes:
                raise GrpcError(RESOURCE_EXHAUSTED, f"a message of {size} bytes is over the limit of "
                                                    f"{self._max_bytes}")
            if end - pos - PREFIX_BYTES < size:
                break
            body = buffer[pos + PREFIX_BYTES:pos + PREFIX_BYTES + size]
            pos += PREFIX_BYTES + size
            out.append(self._inflate(body) if flag else body)
        self._buffer = buffer[pos:] if pos < end else b""
        return out

    @property
    def partial(self) -> bool:
        """Bytes of an unfinished message are held (the stream ended mid-message: a protocol error)."""
        return bool(self._buffer)

    def _inflate(self, body: bytes) -> bytes:
        if not self._gzip:
            raise GrpcError(UNIMPLEMENTED, "a compressed message without grpc-encoding gzip")
        try:
            inflater = zlib.decompressobj(wbits=31)
            out = inflater.decompress(body, self._max_bytes + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise GrpcError(INTERNAL, f"a gzip message that does not inflate: {exc}") from None
        if len(out) > self._max_bytes or inflater.unconsumed_tail:
            raise GrpcError(RESOURCE_EXHAUSTED, f"a message inflating past the limit of {self._max_bytes} bytes")
        return out
