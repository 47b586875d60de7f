# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled versions of Skiff's shared measured hot loops (built when a C compiler is there):
the CommitLog record codec, pull answers, the writer's batch inputs and the Spark source's
columns. The store's own kernels are in `skiff.store._kernels`, the protocol's in
`skiff.protocol._frames`; what they share with this module (byte helpers, the held buffer,
the CRC-32) is declared in `_kernels.pxd`.

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
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memchr, memcmp, memcpy, memset


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
    cdef int32_t sys_flag, host_bits
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
        sys_flag = as_i32(row[5])
        put32(dest + pos, size)
        put32(dest + pos + 4, MAGIC_V1)
        put32(dest + pos + 8, crc & CRC_MASK)
        put32(dest + pos + 12, as_i32(row[1]))
        put32(dest + pos + 16, as_i32(row[4]))
        put64(dest + pos + 20, <int64_t>queue_offsets[i])
        put64(dest + pos + 28, <int64_t>physical_offsets[i])
        put32(dest + pos + 36, sys_flag | host_bits)
        put64(dest + pos + 40, <int64_t>row[6])
        pos += 48
        memcpy(dest + pos, born, born_len)
        pos += born_len
        put64(dest + pos, store_timestamp)
        memcpy(dest + pos + 8, PyBytes_AS_STRING(store_host), store_len)
        pos += 8 + store_len
        put32(dest + pos, as_i32(row[8]))
        put64(dest + pos + 4, <int64_t>row[9])
        put32(dest + pos + 12, body_len)
        pos += 16
        memcpy(dest + pos, body, body_len)
        pos += body_len
        dest[pos] = <unsigned char>topic_len
        memcpy(dest + pos + 1, PyBytes_AS_STRING(topic), topic_len)
        pos += 1 + topic_len
        dest[pos] = <unsigned char>(props_len >> 8)
        dest[pos + 1] = <unsigned char>props_len
        memcpy(dest + pos + 2, props, props_len)
        pos += 2 + props_len
    if pos != total:  # a part whose bytes are not its length (a buffer of wider items)
        raise ValueError("the sizes do not add up to the records")
    return result


# -- pull answers (skiff.common.stored_message) ----------------------------------------

def decode_run(bytes data, cls, src, inflate, Py_ssize_t max_body_bytes):
    """`skiff.common.stored_message.decode_run`: the records of ``data`` as ``cls`` tuples,
    and where the first bad one starts (-1: none)."""
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(data), head_size, born_len, store_len, body_at, t, p, rec_end
    cdef int32_t total, body_len, sys_flag
    cdef const unsigned char *r
    cdef list out = []
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
        out.append(tuple.__new__(cls, (
            None, body, None, get32(r + 16), get32(r + 12), get64(r + 20), get64(r + 28), sys_flag, get64(r + 40),
            None, get64(r + 48 + born_len), None, get32(r + 56 + born_len + store_len),
            get64(r + 60 + born_len + store_len), get32(r + 8), total, None, src, data[pos + 48 : pos + 48 + born_len],
            data[pos + 56 + born_len : pos + 56 + born_len + store_len], t, p, rec_end)))
        pos = rec_end
    return out, -1


# -- store inputs of a batch (skiff.broker.writer) -------------------------------------

cdef extern from *:
    """
    static PyObject *skiff_tuple_alloc(PyObject *type, Py_ssize_t n) {
        return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    }
    """
    # An empty instance of the tuple subclass ``type`` with room for ``n`` items (its
    # ``tp_alloc``, as ``tuple.__new__`` makes one, without the tuple it would copy from).
    object skiff_tuple_alloc(object type, Py_ssize_t n)


cdef inline void _set_item(object row, Py_ssize_t k, object value):
    Py_INCREF(value)
    PyTuple_SET_ITEM(row, k, value)


def batch_inputs(cls, tuple head, flags, bodies, properties, indexed, refused):
    """`skiff.broker.writer.batch_inputs`: one ``cls`` row per message, its ``indexed``
    properties' values (as `decode_properties` reads them: pairs with one 0x01 and a name,
    the last of a repeated name) at its end, or None when a message has a ``refused`` one."""
    cdef list wanted = [name.encode() for name in indexed]
    cdef list refusing = [name.encode() for name in refused]
    cdef Py_ssize_t n = len(flags), i, k, pos, stop, sep, end, count = len(wanted)
    cdef Py_ssize_t at[3]
    cdef Py_ssize_t length[3]
    cdef const unsigned char *p
    cdef const unsigned char *hit
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
        at[0] = at[1] = at[2] = -1
        pos = 0
        while pos < end:
            hit = <const unsigned char *>memchr(p + pos, 2, end - pos)
            stop = end if hit == NULL else hit - p
            hit = <const unsigned char *>memchr(p + pos, 1, stop - pos)
            if hit != NULL:
                sep = hit - p
                if sep > pos and memchr(p + sep + 1, 1, stop - sep - 1) == NULL:
                    for name in refusing:
                        if _is(p + pos, sep - pos, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)):
                            return None
                    for k in range(3):
                        if _is(p + pos, sep - pos, PyBytes_AS_STRING(wanted[k]), PyBytes_GET_SIZE(wanted[k])):
                            at[k] = sep + 1
                            length[k] = stop - sep - 1
            pos = stop + 1
        row = skiff_tuple_alloc(cls, 13)
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

# -- the Spark source's columns (skiff.spark.record_columns, skiff.spark.arrow_decode) --

def record_starts(bytes data):
    """`skiff.spark.record_columns.record_starts_py`: where each record starts (int64 array),
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
    (skiff.spark.schema.HIDDEN_PROPERTIES) away, the rest into the map."""
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
    """`skiff.spark.arrow_decode.run_columns_py`: the source's columns of the records of
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
