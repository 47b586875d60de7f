# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled version of the writer's hot loop (built when a C compiler is there): the store
inputs of a batch.

`batch_inputs` has a pure-Python reference, `skiff.broker.writer.batch_inputs_py`, and
`skiff.common.kernels.select` picks one of the two at import time (`SKIFF_NO_EXTENSIONS=1`
forces the Python one). The two must give identical rows and refusals for every input the
writer passes; `tests/unit/broker/test_writer_kernels.py` checks that with hypothesis. The
held buffer, the byte helpers and the making of rows by slot are `skiff.common._kernels`'
(`_kernels.pxd`).

Memory safety does not rest on the caller: every read of a property string stays inside
its buffer, and list indexing keeps its bounds checks.
"""

from skiff.common._kernels cimport _Buf, _buf, _property_values, _set_item, _text, skiff_atomic_row_alloc


def batch_inputs(cls, tuple head, flags, bodies, properties, indexed, refused):
    """`skiff.broker.writer.batch_inputs`: one ``cls`` row per message, its ``indexed``
    properties' values (as `decode_properties` reads them: pairs with one 0x01 and a name,
    the last of a repeated name) at its end, or None when a message has a ``refused`` one."""
    cdef list wanted = [name.encode() for name in indexed]
    cdef list refusing = [name.encode() for name in refused]
    cdef Py_ssize_t n = len(flags), i, k, end, count = len(wanted)
    cdef Py_ssize_t at[3]
    cdef Py_ssize_t length[3]
    cdef const unsigned char *p
    cdef _Buf buf
    cdef list out = []
    if count != 3 or len(head) != 6 or not (isinstance(cls, type) and issubclass(cls, tuple)):
        raise ValueError("batch_inputs takes a tuple type, three indexed names and a head of six fields")
    topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times = head
    n = min(n, len(bodies), len(properties))
    for i in range(n):
        raw = properties[i]
        buf = _buf(raw)
        p, end = buf.ptr, buf.size
        if not _property_values(p, end, refusing, wanted, at, length):
            return None
        row = skiff_atomic_row_alloc(cls, 13)
        _set_item(row, 0, topic)
        _set_item(row, 1, queue_id)
        _set_item(row, 2, bodies[i])
        _set_item(row, 3, raw)
        _set_item(row, 4, flags[i])
        _set_item(row, 5, sys_flag)
        _set_item(row, 6, born_timestamp)
        _set_item(row, 7, born_host)
        _set_item(row, 8, reconsume_times)
        _set_item(row, 9, 0)
        for k in range(3):
            _set_item(row, 10 + k, None if at[k] < 0 else _text(<const unsigned char *>p + at[k], length[k]))
        out.append(row)
    return out

