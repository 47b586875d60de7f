"""A stored record's fields beyond the source's twelve columns, column-wise: what the tier
keeps to rebuild each record (`skiff.tier.columns`), gathered for a whole run at once.

`record_columns.fixed_fields` finds where each record's parts are; this adds the fields
only the tier needs (queue id, user flag, prepared transaction offset, where the topic and
the born host are) with the same numpy gathers, and `span_texts` turns byte spans such as
hosts and topics into a string column without formatting each row: a run holds few
distinct hosts and topics (one store host, a few producers), so each distinct span is
formatted once, by the same function the message decoder uses, and the column is taken
from those few strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from skiff.columnar.record_columns import FixedFields, bytes_at, gather
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
    """Per record (int64 numpy arrays): the fields `FixedFields` leaves out."""

    queue_id: np.ndarray
    flag: np.ndarray
    prepared_transaction_offset: np.ndarray
    topic_at: np.ndarray
    topic_len: np.ndarray
    born_host_at: np.ndarray
    born_host_len: np.ndarray
    """With the port, as `FixedFields.store_host_len`."""


def record_fields(u8: np.ndarray, f: FixedFields) -> RecordFields:
    """The remaining fields of the records `fixed_fields` checked (``u8``: the run's bytes)."""
    born_len = np.where(f.sys_flag & _BORN_V6, HOST_V6_BYTES, HOST_V4_BYTES)
    shift = born_len + f.store_host_len - 2 * HOST_V4_BYTES  # how far the fields after the hosts moved
    topic_len_at = f.body_at + f.body_len
    return RecordFields(
        queue_id=gather(u8, f.start + QUEUE_ID_AT, 4, ">i4"),
        flag=gather(u8, f.start + FLAG_AT, 4, ">i4"),
        prepared_transaction_offset=gather(u8, f.start + PREPARED_TRANSACTION_OFFSET_AT_V4 + shift, 8, ">i8"),
        topic_at=topic_len_at + 1,
        topic_len=u8[topic_len_at].astype(np.int64) if len(topic_len_at) else np.zeros(0, np.int64),
        born_host_at=f.start + BORN_HOST_AT,
        born_host_len=born_len.astype(np.int64),
    )


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
