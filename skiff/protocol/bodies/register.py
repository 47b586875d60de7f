"""REGISTER_BROKER's body, in its JSON and its compressed form.

JSON form (header ``compressed`` false)::

    {"topicConfigSerializeWrapper": {"topicConfigTable": {...}, "dataVersion": {...}},
     "filterServerList": []}

Compressed form (header ``compressed`` true): one zlib stream (RFC 1950; Java's
Deflater at best compression) whose inflated bytes are, big-endian:

| field                   | size      | struct | content                                    |
|-------------------------|-----------|--------|--------------------------------------------|
| dataVersion length      | 4         | >i     | n                                          |
| dataVersion             | n         |        | DataVersion JSON                           |
| topic count             | 4         | >i     | t                                          |
| per topic: length       | 4         | >i     | m                                          |
| per topic: config       | m         |        | UTF-8 ``"name read write perm filterType"`` |
| filterServerList length | 4         | >i     | f                                          |
| filterServerList        | f         |        | JSON array of strings                      |

The compact topic form carries no topicSysFlag or order flag (as in RocketMQ).
The NameServer answers a registration with a `KVTable` (bodies.admin) of its
ORDER_TOPIC_CONFIG namespace.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass

from skiff.common.record import body_crc

from skiff.protocol import fastjson
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.base import BodyError, JsonBody
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import RegisterBrokerRequestHeader
from skiff.protocol.message_codec import inflate

_LEN = struct.Struct(">i")
assert _LEN.size == 4

COMPRESS_LEVEL = 9
"""Java's Deflater.BEST_COMPRESSION."""


class _Reader:
    """Length-prefixed fields of the inflated registration body, with clear errors."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def int32(self, name: str) -> int:
        if self._pos + 4 > len(self._data):
            raise BodyError(f"compressed RegisterBrokerBody ends before its {name}")
        value: int = _LEN.unpack_from(self._data, self._pos)[0]
        self._pos += 4
        return value

    def chunk(self, name: str) -> bytes:
        n = self.int32(f"{name} length")
        if n < 0 or self._pos + n > len(self._data):
            raise BodyError(f"compressed RegisterBrokerBody {name} length {n} overruns the body")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody(JsonBody):
    """What a broker registers: its topic table (with DataVersion) and filter servers."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = TopicConfigSerializeWrapper()
    filter_server_list: tuple[str, ...] = ()

    def to_compressed(self) -> bytes:
        wrapper = self.topic_config_serialize_wrapper
        parts = [_chunk(wrapper.data_version.to_json()), _LEN.pack(len(wrapper.topic_config_table))]
        parts += [_chunk(tc.to_compact().encode()) for tc in wrapper.topic_config_table.values()]
        parts.append(_chunk(fastjson.dumps(list(self.filter_server_list))))
        return zlib.compress(b"".join(parts), COMPRESS_LEVEL)

    @classmethod
    def from_compressed(cls, data: bytes | bytearray | memoryview) -> RegisterBrokerBody:
        reader = _Reader(inflate(data))
        version = DataVersion.from_json(reader.chunk("dataVersion"))
        count = reader.int32("topic count")
        if count < 0:
            raise BodyError(f"compressed RegisterBrokerBody has a negative topic count {count}")
        configs = {}
        for i in range(count):
            try:
                tc = TopicConfig.from_compact(reader.chunk(f"topic config {i}").decode())
            except UnicodeDecodeError:
                raise BodyError(f"compressed RegisterBrokerBody topic config {i} is not UTF-8") from None
            configs[tc.topic_name] = tc
        body = cls.from_obj({"filterServerList": _json(reader.chunk("filterServerList"))})
        return cls(TopicConfigSerializeWrapper(configs, version), body.filter_server_list)

    def encode(self, compressed: bool) -> bytes:
        return self.to_compressed() if compressed else self.to_json()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool) -> RegisterBrokerBody:
        return cls.from_compressed(data) if compressed else cls.from_json(data)


def _json(data: bytes) -> object:
    try:
        return fastjson.loads(data)
    except fastjson.JsonDecodeError as exc:
        raise BodyError(f"compressed RegisterBrokerBody filterServerList is not JSON: {exc}") from None


def _chunk(data: bytes) -> bytes:
    return _LEN.pack(len(data)) + data


def register_broker_request(header: RegisterBrokerRequestHeader, body: RegisterBrokerBody) -> RemotingCommand:
    """REGISTER_BROKER carrying ``body``, compressed when ``header.compressed``, with its bodyCrc32."""
    raw = body.encode(header.compressed)
    header = dataclasses.replace(header, body_crc32=body_crc(raw))
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), raw)
