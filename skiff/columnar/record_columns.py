"""A run of stored records (a pull answer) as numpy columns of their fixed fields.

The record layout is `skiff.common.record`'s. Only finding where each record
starts is sequential (each TOTALSIZE says where the next one is): `record_starts`
walks it, compiled in `skiff.columnar._kernels` where that is built (`skiff.common.kernels`
chooses; `record_starts_py` is the reference). Every other field is gathered for all
records at once with numpy fancy indexing at ``start + field offset``; the fields after
the born host move by 12 bytes for each IPv6 host (sysFlag bits), which the gather offsets take
into account row by row. (The compiled `run_columns` of `skiff.columnar.arrow_decode`
reads the same fields in its own single pass; this module is its reference's.)

A record that does not hold together (bad magic, lengths that overrun it) is
refused with the precise `DecodeError` of the message decoder, which is asked
to decode the run when a check fails, so both decoders say the same thing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple, NoReturn

import numpy as np

from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.record import (
    BODY_AT_V4,
    BODY_LENGTH_AT_V4,
    BORN_TIMESTAMP_AT,
    FIXED_BYTES_V4,
    HOST_V4_BYTES,
    HOST_V6_BYTES,
    MAGIC_AT,
    MAGIC_V1,
    PHYSICAL_OFFSET_AT,
    QUEUE_OFFSET_AT,
    RECONSUME_TIMES_AT_V4,
    STORE_HOST_AT_V4,
    STORE_TIMESTAMP_AT_V4,
    SYSFLAG_AT,
)
from skiff.common.stored_message import decode_records
from skiff.common.sysflag import MessageSysFlag

_I32 = struct.Struct(">i")
HEX_PAIRS = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), np.uint8).reshape(256, 2)
"""Each byte value's two upper-case hex digits (ASCII), to format ids column-wise."""
_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOST_V6)
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_HOST_GROWTH = HOST_V6_BYTES - HOST_V4_BYTES


def record_starts_py(buf: bytes) -> np.ndarray | None:
    """Where each record of ``buf`` starts, by walking TOTALSIZE (the reference implementation);
    None when a TOTALSIZE does not fit."""
    starts: list[int] = []
    append = starts.append
    unpack = _I32.unpack_from
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < 4:
            return None
        total = unpack(buf, pos)[0]
        if total <= 0 or pos + total > end:
            return None
        append(pos)
        pos += total
    return np.array(starts, np.int64)


_record_starts: Callable[[bytes], np.ndarray | None] = kernels.select("record_starts", record_starts_py, "skiff.columnar._kernels")


def record_starts(buf: bytes) -> np.ndarray:
    """Where each record of ``buf`` starts; the message decoder's `DecodeError` when they do not fit."""
    starts = _record_starts(buf)
    if starts is None:
        raise_decode_error(buf)
    return starts


def raise_decode_error(buf: bytes) -> NoReturn:
    """Raise what the message decoder says is wrong with ``buf`` (it must fail somewhere)."""
    decode_records(buf)
    raise DecodeError("the records do not decode")


class FixedFields(NamedTuple):
    """Per record (int64 numpy arrays): where its parts are and its fixed fields."""

    start: np.ndarray
    end: np.ndarray
    queue_offset: np.ndarray
    physical_offset: np.ndarray
    sys_flag: np.ndarray
    born_timestamp: np.ndarray
    store_timestamp: np.ndarray
    store_host_at: np.ndarray
    store_host_len: np.ndarray
    reconsume_times: np.ndarray
    body_at: np.ndarray
    body_len: np.ndarray
    props_at: np.ndarray
    props_len: np.ndarray

    @property
    def compressed(self) -> np.ndarray:
        flags: np.ndarray = (self.sys_flag & _COMPRESSED) != 0
        return flags


def bytes_at(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes from each of ``at``, as an (n, width) array; a row running past the
    buffer's end repeats its last byte (callers zero what they do not own). Rows are copied
    through a sliding-window view, one fancy index over the rows, not one per byte."""
    n = len(at)
    if not len(u8) or not n:
        return np.zeros((n, width), np.uint8)
    if len(u8) < width:
        short: np.ndarray = u8[np.minimum(at[:, None] + np.arange(width), len(u8) - 1)]
        return short
    windows = np.lib.stride_tricks.sliding_window_view(u8, width)
    last = len(u8) - width
    out: np.ndarray = windows[np.minimum(at, last)]
    over = np.flatnonzero(at > last)
    if len(over):
        out[over] = u8[np.minimum(at[over, None] + np.arange(width), len(u8) - 1)]
    return out


def gather(u8: np.ndarray, at: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """The big-endian integer of ``width`` bytes at each of ``at``, as native int64."""
    return bytes_at(u8, at, width).view(dtype).ravel().astype(np.int64)


def fixed_fields(buf: bytes, starts: np.ndarray) -> FixedFields | None:
    """The fixed fields of the records starting at ``starts`` in ``buf``; None when one does not
    hold together."""
    u8 = np.frombuffer(buf, np.uint8)
    total = gather(u8, starts, 4, ">i4")
    if (total < FIXED_BYTES_V4).any():  # shorter than any record: its fields would be read past it
        return None
    sys_flag = gather(u8, starts + SYSFLAG_AT, 4, ">i4")
    born_growth = np.where(sys_flag & _BORN_V6, _HOST_GROWTH, 0)
    store_host_len = np.where(sys_flag & _STORE_V6, HOST_V6_BYTES, HOST_V4_BYTES)
    shift = born_growth + store_host_len - HOST_V4_BYTES  # how far the fields after the hosts moved
    end = starts + total
    body_at = starts + BODY_AT_V4 + shift
    if ((gather(u8, starts + MAGIC_AT, 4, ">i4") != MAGIC_V1) | (body_at > end)).any():
        return None
    body_len = gather(u8, starts + BODY_LENGTH_AT_V4 + shift, 4, ">i4")
    topic_len_at = body_at + body_len
    if ((body_len < 0) | (topic_len_at + 3 > end)).any():
        return None
    props_at = topic_len_at + 3 + u8[topic_len_at].astype(np.int64)
    if (props_at > end).any():
        return None
    props_len = gather(u8, props_at - 2, 2, ">i2")
    if (props_at + props_len != end).any():
        return None
    return FixedFields(
        start=starts, end=end,
        queue_offset=gather(u8, starts + QUEUE_OFFSET_AT, 8, ">i8"),
        physical_offset=gather(u8, starts + PHYSICAL_OFFSET_AT, 8, ">i8"),
        sys_flag=sys_flag,
        born_timestamp=gather(u8, starts + BORN_TIMESTAMP_AT, 8, ">i8"),
        store_timestamp=gather(u8, starts + STORE_TIMESTAMP_AT_V4 + born_growth, 8, ">i8"),
        store_host_at=starts + STORE_HOST_AT_V4 + born_growth,
        store_host_len=store_host_len,
        reconsume_times=gather(u8, starts + RECONSUME_TIMES_AT_V4 + shift, 4, ">i4"),
        body_at=body_at, body_len=body_len, props_at=props_at, props_len=props_len,
    )
