"""A stored record's fields beyond the source's twelve columns, column-wise: what the tier
keeps to rebuild each record (`skiff.tier.columns`), read for a whole run at once.

`record_fields` reads them (queue id, user flag, sysFlag, CommitLog and prepared
transaction offsets, and where the topic, the hosts and the properties are) in one
pass of the compiled kernel (`skiff.columnar._kernels`) where that is built, else with
the numpy gathers of `record_fields_py`, its reference (`record_columns.fixed_fields`
and a few more); `span_texts` turns byte spans such as hosts and topics into a string
column without formatting each row: a run holds few distinct hosts and topics (one
store host, a few producers), so each distinct span is formatted once, by the same
function the message decoder uses, and the column is taken from those few strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from skiff.columnar.record_columns import bytes_at, fixed_fields, gather, raise_decode_error
from skiff.common import kernels
from skiff.common.record import (
    BORN_HOST_AT,
    FLAG_AT,
    HOST_V4_BYTES,
    HOST_V6_BYTES,
    PREPARED_TRANSACTION_OFFSET_AT_V4,
    QUEUE_ID_AT,
)
from skiff.common.sysflag import MessageSysFlag

_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)


class RecordFields(NamedTuple):
    """Per record (int64 numpy arrays, the rows of the kernel's (13, n) result, in this order)."""

    queue_id: np.ndarray
    flag: np.ndarray
    sys_flag: np.ndarray
    commit_log_offset: np.ndarray
    prepared_transaction_offset: np.ndarray
    topic_at: np.ndarray
    topic_len: np.ndarray
    born_host_at: np.ndarray
    born_host_len: np.ndarray
    """With the port: 8 bytes for IPv4, 20 for IPv6."""
    store_host_at: np.ndarray
    store_host_len: np.ndarray
    props_at: np.ndarray
    props_len: np.ndarray


def record_fields_py(buf: bytes, starts: np.ndarray) -> np.ndarray | None:
    """The reference of the compiled `record_fields` (`skiff.columnar._kernels`): the fields of the
    records starting at ``starts``, as a (13, n) int64 array in `RecordFields`' order; None when
    a record does not hold together."""
    f = fixed_fields(buf, starts)
    if f is None:
        return None
    u8 = np.frombuffer(buf, np.uint8)
    born_len = np.where(f.sys_flag & _BORN_V6, HOST_V6_BYTES, HOST_V4_BYTES).astype(np.int64)
    shift = born_len + f.store_host_len - 2 * HOST_V4_BYTES  # how far the fields after the hosts moved
    topic_len_at = f.body_at + f.body_len
    return np.stack([
        gather(u8, f.start + QUEUE_ID_AT, 4, ">i4"),
        gather(u8, f.start + FLAG_AT, 4, ">i4"),
        f.sys_flag,
        f.physical_offset,
        gather(u8, f.start + PREPARED_TRANSACTION_OFFSET_AT_V4 + shift, 8, ">i8"),
        topic_len_at + 1,
        u8[topic_len_at].astype(np.int64),
        f.start + BORN_HOST_AT,
        born_len,
        f.store_host_at,
        f.store_host_len.astype(np.int64),
        f.props_at,
        f.props_len,
    ]).reshape(13, len(starts))


_record_fields: Callable[[bytes, np.ndarray], np.ndarray | None] = kernels.select(
    "record_fields", record_fields_py, "skiff.columnar._kernels")


def record_fields(buf: bytes, starts: np.ndarray) -> RecordFields:
    """The fields of the records of ``buf`` starting at ``starts``; the message decoder's
    `DecodeError` when one does not hold together."""
    fields = _record_fields(buf, starts)
    if fields is None:
        raise_decode_error(buf)
    return RecordFields(*fields)


def span_texts(u8: np.ndarray, at: np.ndarray, length: np.ndarray, text_of: Callable[[bytes], str]) -> pa.Array:
    """The string column of ``text_of`` each span (``length`` bytes at ``at`` of ``u8``), calling it
    once per distinct span: rows are grouped by length, and a group's distinct spans found with
    one `numpy.unique` (or one comparison, when all are the same)."""
    n = len(at)
    texts: list[str] = []
    codes = np.zeros(n, np.int64)
    widths = np.unique(length)
    for width in widths.tolist():
        rows = np.flatnonzero(length == width) if len(widths) > 1 else np.arange(n)
        spans = np.ascontiguousarray(bytes_at(u8, at[rows], width)) if width else np.zeros((len(rows), 0), np.uint8)
        if not width or (spans == spans[0]).all():
            distinct, inverse = [spans[0].tobytes()], np.zeros(len(rows), np.int64)
        else:
            unique, inverse = np.unique(spans.view(np.dtype((np.void, width))).ravel(), return_inverse=True)
            distinct = [u.tobytes() for u in unique]
        codes[rows] = inverse.ravel() + len(texts)
        texts.extend(text_of(span) for span in distinct)
    if len(texts) == 1:
        return pa.repeat(pa.scalar(texts[0], pa.string()), n)
    return pa.array(texts, pa.string()).take(pa.array(codes))
