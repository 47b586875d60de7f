"""HTTP/2 frames (RFC 9113 §4, §6): the 9-byte frame header, the types and flags the gRPC
door reads, and the encoders of the frames it writes.

Frame header (network byte order):

| offset | size | field                                             |
|--------|------|---------------------------------------------------|
| 0      | 3    | payload length (not the header itself)            |
| 3      | 1    | type                                              |
| 4      | 1    | flags                                             |
| 5      | 4    | reserved bit (ignored) + 31-bit stream identifier |
| 9      | len  | payload                                           |

Payloads read here: DATA and HEADERS may be padded (flag PADDED: one byte of pad length
first, that many zero bytes last); HEADERS may carry PRIORITY (5 bytes: dependency 4,
weight 1), skipped; SETTINGS is n × (identifier 2, value 4); PING 8 opaque bytes;
WINDOW_UPDATE one 31-bit increment; RST_STREAM one 32-bit error code; GOAWAY last stream
id 4, error code 4, debug data.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">HBBBI")
"""Length as 16 high bits + 8 low bits, type, flags, stream id (reserved bit masked off by readers)."""
HEADER_BYTES = 9
assert HEADER.size == HEADER_BYTES

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What a client sends before its first frame (RFC 9113 §3.4)."""

# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)

# flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# settings identifiers
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6
SETTING = struct.Struct(">HI")
assert SETTING.size == 6

# error codes (RFC 9113 §7)
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9

DEFAULT_WINDOW = 65_535
"""Every window's size before SETTINGS says otherwise (and the connection's, always)."""
DEFAULT_MAX_FRAME = 16_384
MAX_WINDOW = 2 ** 31 - 1
MAX_FRAME_LIMIT = 2 ** 24 - 1

U32 = struct.Struct(">I")
U32X2 = struct.Struct(">II")
PING_PAYLOAD_BYTES = 8


class H2Error(Exception):
    """A connection error (RFC 9113 §5.4.1): answered with GOAWAY ``code`` and the connection closes."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    size = len(payload)
    return HEADER.pack(size >> 8, size & 0xFF, kind, flags, stream_id) + payload


def settings(values: dict[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(SETTING.pack(k, v) for k, v in values.items()))


SETTINGS_ACK = frame(SETTINGS, ACK, 0)


def window_update(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, U32.pack(increment))


def rst_stream(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, U32.pack(code))


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, U32X2.pack(last_stream_id, code) + debug)
