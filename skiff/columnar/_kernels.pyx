"""Compiled versions of the column-wise record decoder's hot loops (the Spark source's reads
and the tier upload; built when a C compiler is there): where the records of a run start,
their columns as plain buffers, and the fields the tier keeps beside those.

Each function here has a pure-Python reference (`skiff.columnar.record_columns.record_starts_py`,
`skiff.columnar.arrow_decode.run_columns_py`, `skiff.columnar.record_fields.record_fields_py`),
and `skiff.common.kernels.select` picks one of the two at import time (`SKIFF_NO_EXTENSIONS=1`
forces the Python ones). The two must give identical columns and refusals for every run
the source or the tier upload reads; `tests/unit/columnar/test_kernels.py`
checks that with hypothesis. The record layout's constants and the byte helpers are
`skiff.common._kernels`' (`_kernels.pxd`).

Memory safety does not rest on the callers: every record's parts are checked against the
run's end before they are read, and the growing buffers are checked before each write.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy, memset

from skiff.common._kernels cimport (
    BORN_V6, HOST_V4, HOST_V6, MAGIC_V1, STORE_V6, _hex, _is, _ptr, get16, get32, get64,
)


def record_starts(bytes data):
    """`skiff.columnar.record_columns.record_starts_py`: where each record starts (int64 array),
    or None when a TOTALSIZE does not fit (the caller raises the decoder's error)."""
    import numpy
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(data), count = 0, total
    while pos < end:
        if end - pos < 4:
            return None
        total = get32(d + pos)
        if total <= 0 or total > end - pos:
            return None
        pos += total
        count += 1
    out = numpy.empty(count, numpy.int64)
    cdef int64_t[::1] starts = out
    pos = 0
    for count in range(starts.shape[0]):
        starts[count] = pos
        pos += get32(d + pos)
    return out


cdef struct _Grow:
    char *p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _put(_Grow *g, const void *src, Py_ssize_t n) except -1:
    """Append ``n`` bytes to a growing buffer (doubling), MemoryError when it cannot grow."""
    cdef Py_ssize_t cap
    cdef char *grown
    if g.n + n > g.cap:
        cap = max(2 * g.cap, g.n + n, 4096)
        grown = <char *>realloc(g.p, cap)
        if grown == NULL:
            raise MemoryError()
        g.p = grown
        g.cap = cap
    if n:
        memcpy(g.p + g.n, src, n)
    g.n += n
    return 0


cdef int _put_offset(_Grow *g, Py_ssize_t value) except -1:
    cdef int32_t v
    if value > 2147483647:
        raise OverflowError("a column of one batch holds more than 2 GiB")
    v = <int32_t>value
    return _put(g, &v, 4)


cdef object _column_of(_Grow *offsets, _Grow *data, numpy):
    return (numpy.frombuffer(PyBytes_FromStringAndSize(offsets.p, offsets.n), numpy.int32),
            PyBytes_FromStringAndSize(data.p, data.n))


cdef enum:
    MAX_FAST_PAIRS = 32  # more pairs in one message: decode_properties decides (a dict, not O(k^2))


cdef bint _ascii(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            return False
    return True


cdef class _RowProps:
    """One message's properties, split: KEYS, TAGS and UNIQ_KEY apart, the shown pairs in order."""
    cdef const unsigned char *ptr[3]
    cdef Py_ssize_t length[3]
    cdef bint present[3]
    cdef list keep  # Python objects the pointers point into (decode_properties' strings)

    cdef void reset(self):
        self.present[0] = self.present[1] = self.present[2] = False
        self.keep = None


cdef int _flush_pairs(_RowProps row, const unsigned char **names, Py_ssize_t *name_lens,
                      const unsigned char **values, Py_ssize_t *value_lens, Py_ssize_t pairs, _Grow *g,
                      Py_ssize_t *entries, bint include_properties) except -1:
    """Sort one message's pairs: KEYS, TAGS, UNIQ_KEY to their columns, the hidden ones
    (skiff.columnar.schema.HIDDEN_PROPERTIES) away, the rest into the map."""
    cdef Py_ssize_t j, slot
    for j in range(pairs):
        slot = (0 if _is(names[j], name_lens[j], b"KEYS", 4) else 1 if _is(names[j], name_lens[j], b"TAGS", 4)
                else 2 if _is(names[j], name_lens[j], b"UNIQ_KEY", 8) else -1)
        if slot >= 0:
            row.present[slot] = True
            row.ptr[slot] = values[j]
            row.length[slot] = value_lens[j]
        elif not (_is(names[j], name_lens[j], b"WAIT", 4) or _is(names[j], name_lens[j], b"MIN_OFFSET", 10)
                  or _is(names[j], name_lens[j], b"MAX_OFFSET", 10)) and include_properties:
            _put_offset(&g[7], g[8].n)
            _put(&g[8], names[j], name_lens[j])
            _put_offset(&g[9], g[10].n)
            _put(&g[10], values[j], value_lens[j])
            entries[0] += 1
    return 0


def run_columns(bytes data, starts, bint include_properties, Py_ssize_t max_body_bytes, inflate, decode_properties):
    """`skiff.columnar.arrow_decode.run_columns_py`: the source's columns of the records of
    ``data`` starting at ``starts``, as plain buffers; None when a record does not hold
    together (the caller raises the message decoder's error)."""
    import numpy
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef const int64_t[::1] at = numpy.ascontiguousarray(starts, dtype=numpy.int64)
    cdef Py_ssize_t n = at.shape[0], i, s, e, total, shift, body_at, t, props_at, props_len, body_total = 0
    cdef int32_t sys_flag, born_growth, store_len, body_len
    fixed = numpy.empty((4, n), numpy.int64)
    where = numpy.empty((7, n), numpy.int64)
    cdef int64_t[:, ::1] fx = fixed
    cdef int64_t[:, ::1] w = where
    inflated = {}
    for i in range(n):
        s = at[i]
        if s < 0 or s > size - 91:
            return None
        total = get32(d + s)
        if total < 91 or total > size - s:
            return None
        e = s + total
        sys_flag = get32(d + s + 36)
        born_growth = HOST_V6 - HOST_V4 if sys_flag & BORN_V6 else 0
        store_len = HOST_V6 if sys_flag & STORE_V6 else HOST_V4
        shift = born_growth + store_len - HOST_V4
        body_at = s + 88 + shift
        if get32(d + s + 4) != MAGIC_V1 or body_at > e:
            return None
        body_len = get32(d + body_at - 4)
        t = body_at + body_len
        if body_len < 0 or t + 3 > e:
            return None
        props_at = t + 3 + d[t]
        if props_at > e:
            return None
        props_len = get16(d + props_at - 2)
        if props_at + props_len != e:
            return None
        fx[0, i] = get64(d + s + 20)
        fx[1, i] = get64(d + s + 40)
        fx[2, i] = get64(d + s + 56 + born_growth)
        fx[3, i] = get32(d + s + 72 + shift)
        w[0, i] = body_at
        w[1, i] = body_len
        w[2, i] = props_at
        w[3, i] = props_len
        w[4, i] = s + 64 + born_growth  # the store host (and port)
        w[5, i] = store_len
        w[6, i] = s
        if sys_flag & 1:  # COMPRESSED
            inflated[i] = inflate(data[body_at:t], max_body_bytes)
    for i in range(n):
        if i in inflated:
            w[1, i] = len(inflated[i])
        body_total += w[1, i]
    if body_total > 2147483647:
        raise OverflowError("the bodies of one batch hold more than 2 GiB")
    bodies = PyBytes_FromStringAndSize(NULL, body_total)
    body_offsets = numpy.empty(n + 1, numpy.int32)
    cdef int32_t[::1] bo = body_offsets
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(bodies)
    cdef Py_ssize_t pos = 0
    for i in range(n):
        bo[i] = <int32_t>pos
        if i in inflated:
            memcpy(out + pos, _ptr(inflated[i]), w[1, i])
        else:
            memcpy(out + pos, d + w[0, i], w[1, i])
        pos += w[1, i]
    bo[n] = <int32_t>pos
    return (fixed, (body_offsets, bodies)) + _property_columns(data, w, n, include_properties, decode_properties)


cdef tuple _property_columns(bytes data, int64_t[:, ::1] w, Py_ssize_t n, bint include_properties,
                             decode_properties):
    """msg_id, keys, tags and the properties map (or None) of `run_columns`."""
    import numpy
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef _Grow g[11]  # offsets and data of: msg ids, keys, tags; map offsets; names and values
    cdef Py_ssize_t i, k, j, entries = 0
    cdef _RowProps row = _RowProps.__new__(_RowProps)
    cdef const unsigned char *pp
    cdef Py_ssize_t pl, a, b, sep, pairs
    cdef const unsigned char *np_[MAX_FAST_PAIRS]
    cdef Py_ssize_t nl[MAX_FAST_PAIRS]
    cdef const unsigned char *vp[MAX_FAST_PAIRS]
    cdef Py_ssize_t vl[MAX_FAST_PAIRS]
    cdef bint slow
    cdef char hexed[56]
    keys_valid = numpy.zeros(n, numpy.bool_)
    tags_valid = numpy.zeros(n, numpy.bool_)
    cdef unsigned char[::1] kv = keys_valid.view(numpy.uint8)
    cdef unsigned char[::1] tv = tags_valid.view(numpy.uint8)
    memset(g, 0, sizeof(g))
    try:
        for i in range(n):
            for k in range(3):
                _put_offset(&g[2 * k], g[2 * k + 1].n)
            _put_offset(&g[6], entries)
            pp, pl = d + w[2, i], w[3, i]
            slow = False
            if not _ascii(pp, pl):
                try:
                    PyUnicode_DecodeUTF8(<const char *>pp, pl, "strict")
                except UnicodeDecodeError:
                    slow = True
            pairs = 0
            if not slow:  # split on 0x02, then exactly one 0x01 and a name: decode_properties' rule
                a = 0
                while a <= pl and not slow:
                    b = a
                    while b < pl and pp[b] != 2:
                        b += 1
                    sep = -1
                    for j in range(a, b):
                        if pp[j] == 1:
                            if sep >= 0:
                                sep = -2
                                break
                            sep = j
                    if sep > a:
                        if pairs == MAX_FAST_PAIRS:
                            slow = True
                            break
                        for j in range(pairs):
                            if nl[j] == sep - a and memcmp(np_[j], pp + a, nl[j]) == 0:
                                slow = True  # a repeated name: the dict's rules (last value, first place)
                        np_[pairs], nl[pairs] = pp + a, sep - a
                        vp[pairs], vl[pairs] = pp + sep + 1, b - sep - 1
                        pairs += 1
                    a = b + 1
            row.reset()
            if slow:
                row.keep = []
                pairs = 0
                for name, value in decode_properties(data[w[2, i]:w[2, i] + pl]).items():
                    if pairs == MAX_FAST_PAIRS:
                        _flush_pairs(row, np_, nl, vp, vl, pairs, g, &entries, include_properties)
                        pairs = 0
                    name_b, value_b = name.encode(), value.encode()
                    row.keep.append(name_b)
                    row.keep.append(value_b)
                    np_[pairs], nl[pairs] = _ptr(name_b), len(name_b)
                    vp[pairs], vl[pairs] = _ptr(value_b), len(value_b)
                    pairs += 1
            _flush_pairs(row, np_, nl, vp, vl, pairs, g, &entries, include_properties)
            if row.present[0]:
                kv[i] = 1
                _put(&g[3], row.ptr[0], row.length[0])
            if row.present[1]:
                tv[i] = 1
                _put(&g[5], row.ptr[1], row.length[1])
            if row.present[2] and row.length[2] > 0:
                _put(&g[1], row.ptr[2], row.length[2])
            else:  # the broker's offset msg id: store host and CommitLog offset in hex
                _hex(hexed, d + w[4, i], w[5, i])
                _hex(hexed + 2 * w[5, i], d + w[6, i] + 28, 8)
                _put(&g[1], hexed, 2 * (w[5, i] + 8))
        for k in range(3):
            _put_offset(&g[2 * k], g[2 * k + 1].n)
        _put_offset(&g[6], entries)
        _put_offset(&g[7], g[8].n)
        _put_offset(&g[9], g[10].n)
        msg_ids = _column_of(&g[0], &g[1], numpy)
        keys = _column_of(&g[2], &g[3], numpy) + (keys_valid,)
        tags = _column_of(&g[4], &g[5], numpy) + (tags_valid,)
        if not include_properties:
            return msg_ids, keys, tags, None
        map_offsets = numpy.frombuffer(PyBytes_FromStringAndSize(g[6].p, g[6].n), numpy.int32)
        return msg_ids, keys, tags, (map_offsets, _column_of(&g[7], &g[8], numpy), _column_of(&g[9], &g[10], numpy))
    finally:
        for k in range(11):
            free(g[k].p)


def record_fields(bytes data, starts):
    """`skiff.columnar.record_fields.record_fields_py`: the fields the tier keeps of the records
    of ``data`` starting at ``starts``, as a (13, n) int64 array in `RecordFields`' order, read
    in one pass; None when a record does not hold together."""
    import numpy
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef const int64_t[::1] at = numpy.ascontiguousarray(starts, dtype=numpy.int64)
    cdef Py_ssize_t n = at.shape[0], i, s, e, total, shift, body_at, t, props_at, props_len
    cdef int32_t sys_flag, born_len, store_len, body_len
    out = numpy.empty((13, n), numpy.int64)
    cdef int64_t[:, ::1] o = out
    for i in range(n):
        s = at[i]
        if s < 0 or s > size - 91:
            return None
        total = get32(d + s)
        if total < 91 or total > size - s:
            return None
        e = s + total
        sys_flag = get32(d + s + 36)
        born_len = HOST_V6 if sys_flag & BORN_V6 else HOST_V4
        store_len = HOST_V6 if sys_flag & STORE_V6 else HOST_V4
        shift = born_len + store_len - 2 * HOST_V4
        body_at = s + 88 + shift
        if get32(d + s + 4) != MAGIC_V1 or body_at > e:
            return None
        body_len = get32(d + body_at - 4)
        t = body_at + body_len
        if body_len < 0 or t + 3 > e:
            return None
        props_at = t + 3 + d[t]
        if props_at > e:
            return None
        props_len = get16(d + props_at - 2)
        if props_at + props_len != e:
            return None
        o[0, i] = get32(d + s + 12)  # queue id
        o[1, i] = get32(d + s + 16)  # flag
        o[2, i] = sys_flag
        o[3, i] = get64(d + s + 28)  # CommitLog offset
        o[4, i] = get64(d + s + 76 + shift)  # prepared transaction offset
        o[5, i] = t + 1  # the topic
        o[6, i] = d[t]
        o[7, i] = s + 48  # the born host (and port)
        o[8, i] = born_len
        o[9, i] = s + 64 + born_len - HOST_V4  # the store host (and port)
        o[10, i] = store_len
        o[11, i] = props_at
        o[12, i] = props_len
    return out
