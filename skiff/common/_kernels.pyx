# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled versions of Skiff's shared measured hot loops (built when a C compiler is there):
the CommitLog record codec and pull answers. The other kernels live beside the package whose
logic they compile: the store's in `skiff.store._kernels`, the writer's in
`skiff.broker._kernels`, the column-wise record decoder's in `skiff.columnar._kernels`, the protocol's in
`skiff.protocol._frames`; what they share with this module (byte helpers, the held buffer,
the CRC-32, rows made by slot) is declared in `_kernels.pxd`.

Each function here has a pure-Python reference of the same name in the module that
uses it, and `skiff.common.kernels.select` picks one of the two at import time
(`SKIFF_NO_EXTENSIONS=1` forces the Python ones). The two must give identical
bytes and results for every input the callers pass; `tests/unit/common/test_kernels.py`
checks that with hypothesis. Everything here works on bytes, ints and lists only:
the callers keep the checks, the error messages and the data structures.

Memory safety does not rest on the callers: every write into a buffer is checked
against its size first, and list and tuple indexing keeps its bounds checks (a
column shorter than the others is an IndexError, not a read past its end).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy


cdef class _Buf:
    """A buffer held for the duration of a call (its fields are in _kernels.pxd)."""

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef _Buf _buf(object obj, bint writable=False):
    cdef _Buf b = _Buf.__new__(_Buf)
    if type(obj) is bytes and not writable:
        b.ptr = <const unsigned char *>PyBytes_AS_STRING(obj)
        b.size = PyBytes_GET_SIZE(obj)
        return b
    PyObject_GetBuffer(obj, &b.view, PyBUF_WRITABLE if writable else PyBUF_SIMPLE)
    b.held = True
    b.ptr = <const unsigned char *>b.view.buf
    b.size = b.view.len
    return b


# -- CommitLog records (skiff.common.record) -------------------------------------------

cdef extern from *:
    """
    /* Lay one stored record down at d (room for size bytes checked by the caller, sys_flag with
       its IPv6 bits); where it ends. Always inlined: called once per record by both kernels. */
    #if defined(__GNUC__)
    #define SKIFF_ALWAYS_INLINE static inline __attribute__((always_inline))
    #else
    #define SKIFF_ALWAYS_INLINE static inline
    #endif
    SKIFF_ALWAYS_INLINE void skiff_be32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
    }
    SKIFF_ALWAYS_INLINE void skiff_be64(unsigned char *p, int64_t v) {
        skiff_be32(p, (uint32_t)((uint64_t)v >> 32)); skiff_be32(p + 4, (uint32_t)(uint64_t)v);
    }
    SKIFF_ALWAYS_INLINE unsigned char *skiff_put_record(
            unsigned char *d, int64_t size, uint32_t crc, int32_t queue_id, int32_t flag, int64_t queue_offset,
            int64_t physical_offset, int32_t sys_flag, int64_t born_timestamp, const unsigned char *born,
            Py_ssize_t born_len, int64_t store_timestamp, const unsigned char *store, Py_ssize_t store_len,
            int32_t reconsume_times, int64_t prepared, const unsigned char *body, Py_ssize_t body_len,
            const unsigned char *topic, Py_ssize_t topic_len, const unsigned char *props, Py_ssize_t props_len) {
        skiff_be32(d, (uint32_t)size);
        skiff_be32(d + 4, (uint32_t)(int32_t)0xDAA320A7u);
        skiff_be32(d + 8, crc & 0x7FFFFFFFu);
        skiff_be32(d + 12, (uint32_t)queue_id);
        skiff_be32(d + 16, (uint32_t)flag);
        skiff_be64(d + 20, queue_offset);
        skiff_be64(d + 28, physical_offset);
        skiff_be32(d + 36, (uint32_t)sys_flag);
        skiff_be64(d + 40, born_timestamp);
        d += 48;
        memcpy(d, born, born_len);
        d += born_len;
        skiff_be64(d, store_timestamp);
        memcpy(d + 8, store, store_len);
        d += 8 + store_len;
        skiff_be32(d, (uint32_t)reconsume_times);
        skiff_be64(d + 4, prepared);
        skiff_be32(d + 12, (uint32_t)body_len);
        d += 16;
        memcpy(d, body, body_len);
        d += body_len;
        d[0] = (unsigned char)topic_len;
        memcpy(d + 1, topic, topic_len);
        d += 1 + topic_len;
        d[0] = (unsigned char)(props_len >> 8);
        d[1] = (unsigned char)props_len;
        memcpy(d + 2, props, props_len);
        return d + 2 + props_len;
    }
    """
    # The one writer of the record layout in the kernels (the store's `pack_records`, the tier's
    # `rebuild_records`), in C so that it is always inlined: as a Cython inline function GCC kept
    # it a call, 5-8 ns more per record of `pack_records` (64 x 100 B: 83 -> 88-92 ns).
    unsigned char *_put_record "skiff_put_record" (
        unsigned char *d, int64_t size, uint32_t crc, int32_t queue_id, int32_t flag, int64_t queue_offset,
        int64_t physical_offset, int32_t sys_flag, int64_t born_timestamp, const unsigned char *born,
        Py_ssize_t born_len, int64_t store_timestamp, const unsigned char *store, Py_ssize_t store_len,
        int32_t reconsume_times, int64_t prepared, const unsigned char *body, Py_ssize_t body_len,
        const unsigned char *topic, Py_ssize_t topic_len, const unsigned char *props,
        Py_ssize_t props_len) noexcept nogil

cdef inline Py_ssize_t _record_parts(tuple row, Py_ssize_t size, Py_ssize_t store_len, Py_ssize_t topic_len,
                                     Py_ssize_t i) except -1:
    """The born host's length of a record row, after checking its parts add up to ``size``."""
    cdef Py_ssize_t born_len = len(row[7]), props_len = len(row[3])
    if (born_len != HOST_V4 and born_len != HOST_V6) or (store_len != HOST_V4 and store_len != HOST_V6):
        raise ValueError("a host is neither 8 nor 20 bytes")
    if props_len > 32767 or topic_len > 255:
        raise ValueError("properties or topic too long for their length fields")
    if size != 91 - 16 + born_len + store_len + len(row[2]) + topic_len + props_len:
        raise ValueError(f"size {size} of record {i} does not match its parts")
    return born_len


def pack_records(rows, bytes topic, queue_offsets, physical_offsets, sizes, int64_t store_timestamp,
                 bytes store_host, body_crcs=None, out=None, Py_ssize_t at=0):
    """`skiff.common.record.pack_records`: the records of one topic back to back, as bytes
    or written into ``out`` at ``at`` (every record is checked before the first is written)."""
    cdef Py_ssize_t n = len(rows), i, total = 0, pos = 0, body_len, props_len, born_len
    cdef Py_ssize_t store_len = len(store_host), topic_len = len(topic)
    cdef int32_t host_bits
    cdef int64_t size
    cdef unsigned long crc
    cdef unsigned char *dest
    cdef const unsigned char *body
    cdef const unsigned char *props
    cdef const unsigned char *born
    cdef object body_obj, props_obj, born_obj
    cdef tuple row
    cdef _Buf held
    sizes = list(sizes)
    queue_offsets = queue_offsets if type(queue_offsets) is range else list(queue_offsets)
    physical_offsets = list(physical_offsets)
    if body_crcs is not None:
        body_crcs = list(body_crcs)
    n = min(n, len(sizes), len(queue_offsets), len(physical_offsets))
    if body_crcs is not None:
        n = min(n, len(body_crcs))
    for i in range(n):
        total += <Py_ssize_t>sizes[i]
        _record_parts(_tuple_of(rows[i], 10), sizes[i], store_len, topic_len, i)
    if out is None:
        result = PyBytes_FromStringAndSize(NULL, total)
        dest = <unsigned char *>PyBytes_AS_STRING(result)
    else:
        held = _buf(out, True)
        if at < 0 or at + total > held.size:
            raise ValueError(f"{total} bytes of records do not fit at {at} in a buffer of {held.size}")
        result = None
        dest = <unsigned char *>held.ptr + at
    for i in range(n):  # every row was checked above: its parts add up to its size
        row = <tuple>rows[i]
        size = sizes[i]
        born_len = len(row[7])
        body_obj, props_obj, born_obj = _as_bytes(row[2]), _as_bytes(row[3]), _as_bytes(row[7])
        body, props, born = _ptr(body_obj), _ptr(props_obj), _ptr(born_obj)
        body_len, props_len = len(body_obj), len(props_obj)
        host_bits = (STORE_V6 if store_len == HOST_V6 else 0) | (BORN_V6 if born_len == HOST_V6 else 0)
        if body_crcs is None:
            crc = _crc32(0, body, body_len)
        else:
            crc = <unsigned long><uint32_t><int64_t>body_crcs[i]
        pos = _put_record(dest + pos, size, crc, as_i32(row[1]), as_i32(row[4]), <int64_t>queue_offsets[i],
                          <int64_t>physical_offsets[i], as_i32(row[5]) | host_bits, <int64_t>row[6], born, born_len,
                          store_timestamp, <const unsigned char *>PyBytes_AS_STRING(store_host), store_len,
                          as_i32(row[8]), <int64_t>row[9], body, body_len,
                          <const unsigned char *>PyBytes_AS_STRING(topic), topic_len, props, props_len) - dest
    if pos != total:  # a part whose bytes are not its length (a buffer of wider items)
        raise ValueError("the sizes do not add up to the records")
    return result


# -- tier rows back into records (skiff.tier.columns) --------------------------------

cdef enum:
    _REBUILT_FIELDS = 9  # skiff.tier.columns.REBUILT_FIELDS


cdef const int64_t *_int64s(_Buf b, Py_ssize_t count, str what) except NULL:
    if b.size != count * 8:
        raise ValueError(f"{what}: {b.size} bytes, not {count} int64 values")
    return <const int64_t *>b.ptr


cdef int _span(const int64_t *at, Py_ssize_t i, Py_ssize_t data_size, str what) except -1:
    if at[i] < 0 or at[i] > at[i + 1] or at[i + 1] > data_size:
        raise ValueError(f"{what} of row {i} ({at[i]}..{at[i + 1]}) is not within its {data_size} bytes")
    return 0


def rebuild_records(fields, sizes, topics, topic_data, bodies, body_data, props, props_data, hosts, host_data,
                    born_index, store_index):
    """`skiff.tier.columns.rebuild_records_py`: the stored records of tier rows, back to back,
    from their columns (every row checked before the first is written; the writing and the body
    CRCs without the GIL)."""
    cdef _Buf s = _buf(sizes)
    cdef Py_ssize_t n = s.size // 8, i, total = 0, pos = 0, nh, b, t
    cdef const int64_t *size = _int64s(s, n, "sizes")
    cdef _Buf fb = _buf(fields), tb = _buf(topics), bb = _buf(bodies), pb = _buf(props), hb = _buf(hosts)
    cdef _Buf bi = _buf(born_index), si = _buf(store_index)
    cdef _Buf td = _buf(topic_data), bd = _buf(body_data), pd = _buf(props_data), hd = _buf(host_data)
    cdef const int64_t *f = _int64s(fb, _REBUILT_FIELDS * n, "fields")
    cdef const int64_t *topic = _int64s(tb, n + 1, "topic offsets")
    cdef const int64_t *body = _int64s(bb, n + 1, "body offsets")
    cdef const int64_t *prop = _int64s(pb, n + 1, "properties offsets")
    cdef const int64_t *born = _int64s(bi, n, "born hosts")
    cdef const int64_t *store = _int64s(si, n, "store hosts")
    cdef const int64_t *host
    cdef unsigned char *dest
    cdef int32_t bits
    nh = hb.size // 8 - 1
    host = _int64s(hb, nh + 1, "host offsets")
    for i in range(nh):
        _span(host, i, hd.size, "the packed host")
        if host[i + 1] - host[i] != HOST_V4 and host[i + 1] - host[i] != HOST_V6:
            raise ValueError(f"packed host {i} is {host[i + 1] - host[i]} bytes, neither 8 nor 20")
    for i in range(n):
        _span(topic, i, td.size, "the topic")
        _span(body, i, bd.size, "the body")
        _span(prop, i, pd.size, "the properties")
        b, t = born[i], store[i]
        if b < 0 or b >= nh or t < 0 or t >= nh:
            raise ValueError(f"the hosts of row {i} ({b}, {t}) are not among the {nh} given")
        if topic[i + 1] - topic[i] > 255 or prop[i + 1] - prop[i] > 32767:
            raise ValueError(f"the properties or topic of row {i} are too long for their length fields")
        if size[i] != 91 - 16 + host[b + 1] - host[b] + host[t + 1] - host[t] + body[i + 1] - body[i] \
                + topic[i + 1] - topic[i] + prop[i + 1] - prop[i]:
            raise ValueError(f"size {size[i]} of record {i} does not match its parts")
        total += size[i]
    result = PyBytes_FromStringAndSize(NULL, total)
    dest = <unsigned char *>PyBytes_AS_STRING(result)
    with nogil:
        for i in range(n):
            b, t = born[i], store[i]
            bits = (STORE_V6 if host[t + 1] - host[t] == HOST_V6 else 0) | \
                (BORN_V6 if host[b + 1] - host[b] == HOST_V6 else 0)
            pos = _put_record(dest + pos, size[i], _crc32(0, bd.ptr + body[i], body[i + 1] - body[i]),
                              <int32_t>f[i], <int32_t>f[n + i], f[2 * n + i], f[3 * n + i],
                              <int32_t>f[4 * n + i] | bits, f[5 * n + i], hd.ptr + host[b], host[b + 1] - host[b],
                              f[6 * n + i], hd.ptr + host[t], host[t + 1] - host[t], <int32_t>f[7 * n + i],
                              f[8 * n + i], bd.ptr + body[i], body[i + 1] - body[i], td.ptr + topic[i],
                              topic[i + 1] - topic[i], pd.ptr + prop[i], prop[i + 1] - prop[i]) - dest
    return result


# -- pull answers (skiff.common.stored_message) ----------------------------------------

cdef class _Repeat:
    """The last value made for one field of a run's records, handed out again while the
    next records hold the same one: a pull's records mostly share their hosts and their
    timestamps (a batch is born and stored in one millisecond), so most records make no
    new object for them."""
    cdef int64_t value
    cdef object obj
    cdef const unsigned char *at
    cdef Py_ssize_t n

    cdef inline object int_of(self, int64_t value):
        if self.obj is None or value != self.value:
            self.value = value
            self.obj = value
        return self.obj

    cdef inline object bytes_of(self, bytes data, Py_ssize_t pos, Py_ssize_t n):
        cdef const unsigned char *at = <const unsigned char *>PyBytes_AS_STRING(data) + pos
        if self.obj is None or n != self.n or memcmp(at, self.at, n) != 0:
            self.obj = data[pos : pos + n]
            self.at = at
            self.n = n
        return self.obj


def decode_run(bytes data, cls, src, inflate, Py_ssize_t max_body_bytes):
    """`skiff.common.stored_message.decode_run`: the records of ``data`` as ``cls`` tuples,
    and where the first bad one starts (-1: none). Each tuple is filled by slot (no tuple
    made to be copied), and a host or timestamp equal to the previous record's is the same
    object (`_Repeat`)."""
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(data), head_size, born_len, store_len, body_at, t, p, rec_end
    cdef int32_t total, body_len, sys_flag
    cdef const unsigned char *r
    cdef list out = []
    cdef _Repeat born_ts = _Repeat(), store_ts = _Repeat(), size = _Repeat()
    cdef _Repeat born_host = _Repeat(), store_host = _Repeat()
    while pos < end:
        if end - pos < 88:
            return out, pos
        r = d + pos
        sys_flag = get32(r + 36)
        born_len = HOST_V6 if sys_flag & BORN_V6 else HOST_V4
        store_len = HOST_V6 if sys_flag & STORE_V6 else HOST_V4
        head_size = 72 + born_len + store_len
        if end - pos < head_size:
            return out, pos
        total = get32(r)
        body_len = get32(r + head_size - 4)
        body_at = pos + head_size
        t = body_at + body_len
        rec_end = pos + total
        if get32(r + 4) != MAGIC_V1 or total <= 0 or rec_end > end or body_len < 0 or t >= end:
            return out, pos
        p = t + 3 + d[t]
        if p > rec_end or p + get16(d + p - 2) != rec_end:
            return out, pos
        body = data[body_at:t]
        if sys_flag & 1 and inflate is not None:
            body = inflate(body, max_body_bytes)
        row = skiff_tuple_alloc(cls, 23)
        _set_item(row, 0, None)
        _set_item(row, 1, body)
        _set_item(row, 2, None)
        _set_item(row, 3, get32(r + 16))
        _set_item(row, 4, get32(r + 12))
        _set_item(row, 5, get64(r + 20))
        _set_item(row, 6, get64(r + 28))
        _set_item(row, 7, sys_flag)
        _set_item(row, 8, born_ts.int_of(get64(r + 40)))
        _set_item(row, 9, None)
        _set_item(row, 10, store_ts.int_of(get64(r + 48 + born_len)))
        _set_item(row, 11, None)
        _set_item(row, 12, get32(r + 56 + born_len + store_len))
        _set_item(row, 13, get64(r + 60 + born_len + store_len))
        _set_item(row, 14, get32(r + 8))
        _set_item(row, 15, size.int_of(total))
        _set_item(row, 16, None)
        _set_item(row, 17, src)
        _set_item(row, 18, born_host.bytes_of(data, pos + 48, born_len))
        _set_item(row, 19, store_host.bytes_of(data, pos + 56 + born_len, store_len))
        _set_item(row, 20, t)
        _set_item(row, 21, p)
        _set_item(row, 22, rec_end)
        out.append(row)
        pos = rec_end
    return out, -1


# -- CRC-32 (zlib's, for record bodies and index keys) ---------------------------------

cdef uint32_t _CRC_TABLE[8][256]


cdef void _crc_tables() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else c >> 1
        _CRC_TABLE[0][i] = c
    for i in range(256):
        for k in range(1, 8):
            _CRC_TABLE[k][i] = (_CRC_TABLE[k - 1][i] >> 8) ^ _CRC_TABLE[0][_CRC_TABLE[k - 1][i] & 0xFF]


_crc_tables()


cdef extern from *:
    """
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <immintrin.h>
    /* Folding by carry-less multiplication (Gopal et al., "Fast CRC Computation for Generic
       Polynomials Using PCLMULQDQ", Intel, 2009), zlib's polynomial in the bit-reflected
       domain: len >= 64 and a multiple of 16; crc is the running (inverted) register. */
    __attribute__((target("pclmul,sse4.1")))
    static uint32_t skiff_crc32_fold(const unsigned char *buf, size_t len, uint32_t crc) {
        const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
        const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
        const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
        const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
        __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;
        x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)buf), _mm_cvtsi32_si128((int)crc));
        x2 = _mm_loadu_si128((const __m128i *)(buf + 16));
        x3 = _mm_loadu_si128((const __m128i *)(buf + 32));
        x4 = _mm_loadu_si128((const __m128i *)(buf + 48));
        buf += 64;
        len -= 64;
        x0 = k1k2;
        while (len >= 64) {
            x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
            x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
            x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
            x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
            x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x5);
            x2 = _mm_xor_si128(_mm_clmulepi64_si128(x2, x0, 0x11), x6);
            x3 = _mm_xor_si128(_mm_clmulepi64_si128(x3, x0, 0x11), x7);
            x4 = _mm_xor_si128(_mm_clmulepi64_si128(x4, x0, 0x11), x8);
            x1 = _mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)buf));
            x2 = _mm_xor_si128(x2, _mm_loadu_si128((const __m128i *)(buf + 16)));
            x3 = _mm_xor_si128(x3, _mm_loadu_si128((const __m128i *)(buf + 32)));
            x4 = _mm_xor_si128(x4, _mm_loadu_si128((const __m128i *)(buf + 48)));
            buf += 64;
            len -= 64;
        }
        x0 = k3k4;
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x2), x5);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x3), x5);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x4), x5);
        while (len >= 16) {
            x2 = _mm_loadu_si128((const __m128i *)buf);
            x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
            x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x2), x5);
            buf += 16;
            len -= 16;
        }
        x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
        x3 = _mm_setr_epi32(~0, 0, ~0, 0);
        x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
        x0 = k5k0;
        x2 = _mm_srli_si128(x1, 4);
        x1 = _mm_and_si128(x1, x3);
        x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x00), x2);
        x0 = poly;
        x2 = _mm_and_si128(x1, x3);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
        x2 = _mm_and_si128(x2, x3);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        return (uint32_t)_mm_extract_epi32(x1, 1);
    }
    static int skiff_crc32_clmul(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    #else
    static uint32_t skiff_crc32_fold(const unsigned char *buf, size_t len, uint32_t crc) { return crc; }
    static int skiff_crc32_clmul(void) { return 0; }
    #endif
    """
    uint32_t skiff_crc32_fold(const unsigned char *buf, size_t length, uint32_t crc) nogil
    int skiff_crc32_clmul() nogil


cdef bint _CLMUL = skiff_crc32_clmul()
"""The CPU folds 16 bytes a step (PCLMULQDQ): bodies of 64 bytes and more go that way."""


cdef inline uint32_t _le32(const unsigned char *p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef uint32_t _crc32(uint32_t crc, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """zlib's ``crc32(crc, p, n)``: 64 bytes and more folded by carry-less multiplication
    where the CPU has it, the rest eight bytes a step (slicing by 8). zlib 1.2.13 goes a
    byte at a time below a few hundred bytes, where most bodies and every key are."""
    cdef uint32_t one, two
    cdef Py_ssize_t folded
    crc = ~crc
    if _CLMUL and n >= 64:
        folded = n & ~15
        crc = skiff_crc32_fold(p, folded, crc)
        p += folded
        n -= folded
    while n >= 8:
        one = _le32(p) ^ crc
        two = _le32(p + 4)
        crc = (_CRC_TABLE[7][one & 0xFF] ^ _CRC_TABLE[6][(one >> 8) & 0xFF] ^ _CRC_TABLE[5][(one >> 16) & 0xFF]
               ^ _CRC_TABLE[4][one >> 24] ^ _CRC_TABLE[3][two & 0xFF] ^ _CRC_TABLE[2][(two >> 8) & 0xFF]
               ^ _CRC_TABLE[1][(two >> 16) & 0xFF] ^ _CRC_TABLE[0][two >> 24])
        p += 8
        n -= 8
    while n > 0:
        crc = _CRC_TABLE[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return ~crc
