# cython: language_level=3
"""What `skiff.common._kernels` shares with the other kernel modules (`skiff.store._kernels`,
`skiff.broker._kernels`, `skiff.columnar._kernels`, `skiff.protocol._frames`): the record layout's
constants, big-endian reads and writes, the held buffer, zlib's CRC-32 and the making of
rows by slot. The inline helpers (and the C of `skiff_tuple_alloc`) are compiled into each
module that cimports them; `_Buf`, `_buf` and `_crc32` are defined in `_kernels.pyx`, and
the other modules call them through it."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp

cdef enum:
    MAGIC_V1 = -626843481  # skiff.common.record.MAGIC_V1
    BORN_V6 = 0x10  # MessageSysFlag.BORNHOST_V6
    STORE_V6 = 0x20  # MessageSysFlag.STOREHOST_V6
    HOST_V4 = 8  # record.HOST_V4_BYTES
    HOST_V6 = 20  # record.HOST_V6_BYTES
    CRC_MASK = 0x7FFFFFFF
    PROPERTIES_MAX_BYTES = 32767  # skiff.common.limits.PROPERTIES_MAX_BYTES


cdef inline void put32(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = u >> 24
    p[1] = u >> 16
    p[2] = u >> 8
    p[3] = u


cdef inline void put64(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    put32(p, <int64_t>(u >> 32))
    put32(p + 4, <uint32_t>u)


cdef inline int32_t get32(const unsigned char *p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline int16_t get16(const unsigned char *p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | p[1])


cdef inline int64_t get64(const unsigned char *p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>get32(p) << 32) | <uint32_t>get32(p + 4))


cdef inline int32_t as_i32(object v) except? -1:
    """A Python int as int32, OverflowError outside its range (as struct's error is a ValueError)."""
    cdef int64_t x = v
    if x < -2147483648 or x > 2147483647:
        raise OverflowError(f"{v} does not fit in 32 bits")
    return <int32_t>x


cdef class _Buf:
    """A buffer held for the duration of a call: bytes directly, anything else through
    the buffer protocol (memoryview slices of a mapping, bytearrays)."""
    cdef Py_buffer view
    cdef bint held
    cdef const unsigned char *ptr
    cdef Py_ssize_t size


cdef _Buf _buf(object obj, bint writable=*)


cdef inline object _as_bytes(object obj):
    return obj if type(obj) is bytes else bytes(obj)


cdef inline const unsigned char *_ptr(object b):
    return <const unsigned char *>PyBytes_AS_STRING(b)


cdef inline tuple _tuple_of(object item, Py_ssize_t at_least):
    """``item`` (a tuple or a NamedTuple such as MessageInput) with enough items to index unchecked."""
    if not isinstance(item, tuple) or len(<tuple>item) < at_least:
        raise TypeError(f"expected a tuple of at least {at_least} items, got {type(item).__name__}")
    return <tuple>item


cdef enum:
    BLANK_MAGIC_CODE = -875286124  # skiff.common.record.BLANK_MAGIC
    FIXED_V4 = 91  # record.FIXED_BYTES_V4


cdef inline bint _is(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t name_len) noexcept nogil:
    return n == name_len and memcmp(p, name, n) == 0


cdef inline bint _property_values(const unsigned char *p, Py_ssize_t end, list refusing, list wanted,
                                  Py_ssize_t *at, Py_ssize_t *length) except -1:
    """A property text (``name\\x01value\\x02``...) read as `decode_properties` reads it: pairs
    with one 0x01 and a name, the last of a repeated name wins. For the k-th of ``wanted`` (UTF-8
    names), ``at[k]``/``length[k]`` get its value's place in ``p`` (``at[k]`` -1: not there);
    False as soon as one of ``refusing`` is there. One scan for the writer's batch rows
    (`skiff.broker._kernels.batch_inputs`) and a read of single sends (`skiff.protocol._frames.plain_sends`)."""
    cdef Py_ssize_t pos = 0, stop, sep, k, count = len(wanted)
    cdef const unsigned char *hit
    for k in range(count):
        at[k] = -1
    while pos < end:
        hit = <const unsigned char *>memchr(p + pos, 2, end - pos)
        stop = end if hit == NULL else hit - p
        hit = <const unsigned char *>memchr(p + pos, 1, stop - pos)
        if hit != NULL:
            sep = hit - p
            if sep > pos and memchr(p + sep + 1, 1, stop - sep - 1) == NULL:
                for name in refusing:
                    if _is(p + pos, sep - pos, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)):
                        return False
                for k in range(count):
                    name = wanted[k]
                    if _is(p + pos, sep - pos, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)):
                        at[k] = sep + 1
                        length[k] = stop - sep - 1
        pos = stop + 1
    return True


cdef inline object _text(const unsigned char *p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char *>p, n, "replace")


cdef inline void _hex(char *out, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef const char *digits = b"0123456789ABCDEF"
    cdef Py_ssize_t j
    for j in range(n):
        out[2 * j] = digits[p[j] >> 4]
        out[2 * j + 1] = digits[p[j] & 15]


cdef uint32_t _crc32(uint32_t crc, const unsigned char *p, Py_ssize_t n) noexcept nogil


cdef extern from *:
    """
    static inline PyObject *skiff_tuple_alloc(PyObject *type, Py_ssize_t n) {
        return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    }
    static inline PyObject *skiff_atomic_row_alloc(PyObject *type, Py_ssize_t n) {
        PyObject *row = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
        if (row != NULL)
            PyObject_GC_UnTrack(row);
        return row;
    }
    """
    # An empty instance of the tuple subclass ``type`` with room for ``n`` items (its
    # ``tp_alloc``, as ``tuple.__new__`` makes one, without the tuple it would copy from).
    # Static inline C: this block is included in every module that cimports this file.
    object skiff_tuple_alloc(object type, Py_ssize_t n)
    # The same, not tracked by the cyclic garbage collector: for a store row whose items are
    # all strings, numbers, bytes or None, which can never be part of a cycle. CPython
    # untracks such exact tuples itself at their first collection, but not a tuple subclass:
    # the rows of a request, alive across a collection, were promoted generation by
    # generation and made the broker run full collections (in process, a batched Kafka
    # produce of 1 KiB records spent 0.7 of 2.1 us per record in the collector:
    # docs/performance.md, "Store rows the collector does not track"). Not for a row that
    # holds an arbitrary object (`decode_run`'s source), which may reach back to the row.
    object skiff_atomic_row_alloc(object type, Py_ssize_t n)


cdef inline void _set_item(object row, Py_ssize_t k, object value):
    """Item ``k`` of a row fresh from `skiff_tuple_alloc` (its slot is empty: nothing to release)."""
    Py_INCREF(value)
    PyTuple_SET_ITEM(row, k, value)
