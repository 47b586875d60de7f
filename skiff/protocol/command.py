"""RemotingCommand: one request or response of RocketMQ's remoting protocol."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from skiff.protocol.codes import SKIFF_VERSION, ResponseCode, SerializeType

Buffer = Union[bytes, bytearray, memoryview]

RPC_TYPE_RESPONSE = 0x1
RPC_ONEWAY = 0x2

_LOCAL_OPAQUES = itertools.count(1)


def ext_value(value: object) -> str:
    """A header value as the wire carries it: always a string, booleans as Java writes them."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(slots=True)
class RemotingCommand:
    """A decoded or to-be-encoded frame.

    ``ext_fields`` values are strings once decoded (numbers and booleans from
    the C++ client are normalised), so header codecs parse one representation.
    ``body_parts``, when set, replaces ``body`` on encode with a run of buffers
    written as they are: a pull answer is slices of the mapped CommitLog.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    ext_fields: dict[str, str] | None = None
    remark: str | None = None
    body: Buffer = b""
    language: str = "PYTHON"
    version: int = SKIFF_VERSION
    serialize_type: SerializeType = SerializeType.JSON
    body_parts: Sequence[Buffer] | None = field(default=None, repr=False)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    @property
    def body_length(self) -> int:
        if self.body_parts is not None:
            return sum(len(p) for p in self.body_parts)
        return len(self.body)

    def ext(self, key: str, default: str | None = None) -> str | None:
        return (self.ext_fields or {}).get(key, default)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, object] | None = None,
        body: Buffer = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request; the connection that sends it assigns the opaque."""
        return cls(
            code=int(code),
            opaque=0,
            flag=RPC_ONEWAY if oneway else 0,
            ext_fields={k: ext_value(v) for k, v in ext_fields.items() if v is not None}
            if ext_fields is not None
            else None,
            body=body,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: Mapping[str, object] | None = None,
        body: Buffer = b"",
        *,
        body_parts: Sequence[Buffer] | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque, same serialization, flag bit 0 set.

        Responses always carry an extFields object (possibly empty): the C++
        client dereferences it without checking on several codes.
        """
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=RPC_TYPE_RESPONSE,
            ext_fields={k: ext_value(v) for k, v in (ext_fields or {}).items() if v is not None},
            remark=remark,
            body=body,
            serialize_type=self.serialize_type,
            body_parts=body_parts,
        )


def next_local_opaque() -> int:
    """Process-wide fallback opaque source (connections keep their own counters)."""
    return next(_LOCAL_OPAQUES) & 0x7FFFFFFF
