"""Framing and header serialization of remoting frames.

| offset | size      | field                                                      |
|--------|-----------|------------------------------------------------------------|
| 0      | 4         | length = 4 + header length + body length (not itself)      |
| 4      | 4         | header word = serialize type << 24 | header length         |
| 8      | headerLen | header: JSON text, or the ROCKETMQ binary layout below     |
| …      | bodyLen   | body                                                       |

ROCKETMQ binary header: code int16, language int8, version int16, opaque int32,
flag int32, remark (int32 length + UTF-8, 0 = none), extFields (int32 total
length + repeated (int16 key length, key, int32 value length, value)).

Replies use the request's serialization; the C++ client only reads JSON.

The request path's hot part has a compiled twin (`skiff.protocol._frames`, chosen by
`skiff.common.kernels.select`): `json_frames` decodes the whole JSON frames of a read in
one pass and `json_head` encodes a JSON header; both leave what they do not read or write
exactly as orjson would to the references below, one frame at a time.
"""

from __future__ import annotations

import struct

import orjson

from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.protocol.codes import SKIFF_VERSION, LanguageCode, SerializeType
from skiff.protocol.command import RPC_TYPE_RESPONSE, Buffer, RemotingCommand, ext_value

_PREFIX = struct.Struct(">ii")
_RMQ_FIXED = struct.Struct(">hbhii")
_I32 = struct.Struct(">i")
_JSON = SerializeType.JSON
"""Read once: an enum member named through its class costs a metaclass `__getattr__` hook per use."""
_I16 = struct.Struct(">h")
_LANG_BY_NAME = {m.name: m.value for m in LanguageCode}
_LANG_BY_CODE = {m.value: m.name for m in LanguageCode}


class FrameError(DecodeError):
    """A frame that cannot be decoded; the connection that sent it is closed."""


def _json_header(code: object, language: object, version: object, opaque: object, flag: object, remark: object,
                 ext: dict[str, str] | None) -> bytes:
    header: dict[str, object] = {
        "code": code,
        "language": language,
        "version": version,
        "opaque": opaque,
        "flag": flag,
    }
    if remark is not None:
        header["remark"] = remark
    if ext is not None:
        header["extFields"] = {k: v if type(v) is str else ext_value(v) for k, v in ext.items()}
    header["serializeTypeCurrentRPC"] = "JSON"
    return orjson.dumps(header)


def json_head_py(serialize_type: int, code: object, language: object, version: object, opaque: object, flag: object,
                 remark: object, ext: dict[str, str] | None, body_len: int) -> bytes | None:
    """A JSON frame's first bytes: its length, header word and header (orjson's compact form)."""
    header = _json_header(code, language, version, opaque, flag, remark, ext)
    return _PREFIX.pack(4 + len(header) + body_len, (serialize_type << 24) | len(header)) + header


_json_head_kernel = kernels.select("json_head", json_head_py, "skiff.protocol._frames")


def _json_head(cmd: RemotingCommand, body_len: int) -> bytes:
    args = (int(SerializeType.JSON), cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
            cmd.ext_fields, body_len)
    head = _json_head_kernel(*args)
    return json_head_py(*args) if head is None else head  # type: ignore[return-value]  # the reference gives bytes


def _rocketmq_header(cmd: RemotingCommand) -> bytes:
    parts = [
        _RMQ_FIXED.pack(
            cmd.code, _LANG_BY_NAME.get(cmd.language, LanguageCode.OTHER), cmd.version, cmd.opaque, cmd.flag
        )
    ]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts += [_I32.pack(len(remark)), remark]
    ext = bytearray()
    for k, v in (cmd.ext_fields or {}).items():
        kb, vb = k.encode(), ext_value(v).encode()
        ext += _I16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)


def encode_frame(cmd: RemotingCommand) -> list[Buffer]:
    """Encode a command as buffers to write in order (prefix and header, then body)."""
    body: list[Buffer] = list(cmd.body_parts) if cmd.body_parts is not None else [cmd.body] if cmd.body else []
    body_len = sum(len(b) for b in body) if body else 0
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = _rocketmq_header(cmd)
        prefix = _PREFIX.pack(4 + len(header) + body_len, (int(SerializeType.ROCKETMQ) << 24) | len(header)) + header
    else:
        prefix = _json_head(cmd, body_len)
    if len(prefix) + body_len > FRAME_MAX_BYTES:
        raise FrameError(f"frame of {len(prefix) + body_len} bytes exceeds the {FRAME_MAX_BYTES}-byte limit")
    return [prefix, *body]


def answer_frame(request: RemotingCommand, code: int, remark: str | None, ext: dict[str, str]) -> bytes:
    """The whole frame of a body-less response to ``request``, as ``encode_frame`` of the
    `RemotingCommand` would give it, without making one (a single send's answer: the JSON
    header in one kernel call)."""
    if request.serialize_type == SerializeType.JSON:
        args = (int(SerializeType.JSON), code, "PYTHON", SKIFF_VERSION, request.opaque, RPC_TYPE_RESPONSE, remark, ext, 0)
        head = _json_head_kernel(*args)
        if head is not None and len(head) <= FRAME_MAX_BYTES:
            return head
    return encode_frame_bytes(RemotingCommand(code=code, opaque=request.opaque, flag=RPC_TYPE_RESPONSE, ext_fields=ext,
                                              remark=remark, serialize_type=request.serialize_type))


def encode_frame_bytes(cmd: RemotingCommand) -> bytes:
    return b"".join(bytes(b) for b in encode_frame(cmd))


def _ext_from_json(raw: object) -> dict[str, str] | None:
    if raw is None:
        return None
    if type(raw) is not dict:
        raise FrameError("extFields is not an object")
    for v in raw.values():
        if type(v) is not str:
            return {k: v if type(v) is str else ("" if v is None else ext_value(v)) for k, v in raw.items()}
    return raw


def _decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    try:
        h = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    if not isinstance(h, dict):
        raise FrameError("header is not a JSON object")
    try:
        code = int(h["code"])
        opaque = int(h.get("opaque", 0))
        flag = int(h.get("flag", 0))
        version = int(h.get("version", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameError(f"header field missing or not a number: {exc}") from None
    lang = h.get("language", "OTHER")
    remark = h.get("remark")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        ext_fields=_ext_from_json(h.get("extFields")),
        remark=remark if isinstance(remark, str) else None,
        language=lang if isinstance(lang, str) else _LANG_BY_CODE.get(lang, "OTHER"),
        version=version,
        serialize_type=SerializeType.JSON,
    )


def _take(data: bytes, pos: int, n: int) -> tuple[bytes, int]:
    if n < 0 or pos + n > len(data):
        raise FrameError("ROCKETMQ header field overruns the header")
    return data[pos : pos + n], pos + n


def _decode_rocketmq_header(data: bytes) -> RemotingCommand:
    if len(data) < _RMQ_FIXED.size + 8:
        raise FrameError("ROCKETMQ header is too short")
    code, lang, version, opaque, flag = _RMQ_FIXED.unpack_from(data, 0)
    pos = _RMQ_FIXED.size
    remark_len = _I32.unpack_from(data, pos)[0]
    remark_raw, pos = _take(data, pos + 4, remark_len)
    if pos + 4 > len(data):
        raise FrameError("ROCKETMQ header has no extFields length")
    ext_len = _I32.unpack_from(data, pos)[0]
    ext_raw, pos = _take(data, pos + 4, ext_len)
    ext: dict[str, str] | None = None
    if ext_len:
        ext = {}
        p = 0
        while p < len(ext_raw):
            if p + 2 > len(ext_raw):
                raise FrameError("ROCKETMQ extFields key length is cut short")
            k, p = _take(ext_raw, p + 2, _I16.unpack_from(ext_raw, p)[0])
            if p + 4 > len(ext_raw):
                raise FrameError("ROCKETMQ extFields value length is cut short")
            v, p = _take(ext_raw, p + 4, _I32.unpack_from(ext_raw, p)[0])
            ext[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        ext_fields=ext,
        remark=remark_raw.decode("utf-8", "replace") if remark_len else None,
        language=_LANG_BY_CODE.get(lang, "OTHER"),
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame without its 4-byte length prefix (header word, header, body)."""
    if len(frame) < 4:
        raise FrameError("frame is shorter than its header word")
    word = _I32.unpack_from(frame, 0)[0]
    serialize = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    if header_len <= 0 or 4 + header_len > len(frame):
        raise FrameError(f"header length {header_len} does not fit a {len(frame)}-byte frame")
    if serialize == SerializeType.JSON:
        cmd = _decode_json_header(frame[4 : 4 + header_len])
    elif serialize == SerializeType.ROCKETMQ:
        cmd = _decode_rocketmq_header(bytes(frame[4 : 4 + header_len]))
    else:
        raise FrameError(f"unknown serialize type {serialize}")
    cmd.body = bytes(frame[4 + header_len :])
    return cmd


def json_frames_py(buf: bytes | bytearray, pos: int, max_frame_bytes: int, cls: type[RemotingCommand],
                   json_type: SerializeType) -> tuple[list[RemotingCommand], int]:
    """The reference of the compiled `json_frames` (the whole JSON frames from ``pos`` on, read
    in one pass) decodes none of them: `FrameDecoder.feed` then reads each with `decode_frame`."""
    return [], pos


_json_frames = kernels.select("json_frames", json_frames_py, "skiff.protocol._frames")


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole commands back.

    Raises `FrameError` on a frame that is too large or malformed; the caller
    closes that connection and nothing else.
    """

    def __init__(self, max_frame_bytes: int = FRAME_MAX_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        out: list[RemotingCommand] = []
        pos = 0
        if not buf and type(data) is bytes:
            # nothing buffered: the kernel reads the read's bytes as they are; a read of whole
            # JSON frames (a synchronous producer's lone send) is never copied into the buffer.
            # Else the read is buffered as usual, and the loop goes on from where the kernel stopped
            out, pos = _json_frames(data, 0, self._max, RemotingCommand, _JSON)
            if pos == len(data):
                return out
        buf += data
        end = len(buf)
        view = memoryview(buf)
        try:
            while True:
                # the run of JSON frames the kernel reads; the next frame, if whole, by the reference
                more, pos = _json_frames(buf, pos, self._max, RemotingCommand, _JSON)
                if more:
                    out += more
                if end - pos < 4:
                    break
                length = _I32.unpack_from(buf, pos)[0]
                if length < 4 or length + 4 > self._max:
                    raise FrameError(f"frame length {length} is outside 4..{self._max - 4}")
                if end - pos - 4 < length:
                    break
                out.append(decode_frame(view[pos + 4 : pos + 4 + length]))
                pos += 4 + length
        finally:
            view.release()
        if pos:
            del buf[:pos]
        return out
