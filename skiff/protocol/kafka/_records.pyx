# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled Kafka record batch decoding for the Produce path (built when a C compiler is there).

`decode_plain_batches` is the twin of `skiff.protocol.kafka.records.decode_batches_py` for
what producers send one record at a time: uncompressed record batches v2, read in one pass
with the varints decoded in C, no Python call per field. It decodes only what it reads
exactly as the reference does; anything else — a compressed batch, any error (a cut batch,
another magic, a bad CRC, records that overrun), a varint longer than 9 bytes, input that is
not ``bytes`` — answers None, and the caller decodes the input with the reference, which also
raises the `DecodeError` a bad batch deserves. Selected by `skiff.common.kernels.select`
(``SKIFF_NO_EXTENSIONS=1`` forces the reference).

`encode_records` is the twin of `records.encode_records_py`: the records of a batch a Fetch
serves (one per stored message), written into one buffer with the varints encoded in C;
None for a record it does not write exactly as the reference (then the reference does).

Every read is bounds-checked against the input before it is made.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, int8_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy

cdef enum:
    HEADER_BYTES = 61
    CRC_FROM = 21
    CODEC_MASK = 7


cdef inline int64_t _i64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
                     | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int16_t _i16(const unsigned char* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef inline Py_ssize_t _varint(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, int64_t* out) noexcept nogil:
    """A zig-zag varint at ``pos``: the position after it, or -1 past ``end`` or past 9 bytes
    (a 10-byte varint is left to the reference, whose ints do not wrap)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if pos >= end or shift > 56:
            return -1
        b = p[pos]
        pos += 1
        value |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = <int64_t>(value >> 1) ^ -(<int64_t>(value & 1))
            return pos
        shift += 7


def decode_plain_batches(object data, object crc, object record, object batch):
    """`decode_batches_py` of ``data`` when every batch is uncompressed and reads cleanly, else
    None. ``crc``: CRC-32C of a bytes object; ``record``, ``batch``: the `Record` and
    `RecordBatch` types (passed in: this module is imported by theirs)."""
    if type(data) is not bytes:
        return None
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, end, rpos, rend, records_at
    cdef int32_t length, epoch, last_delta, base_seq, count
    cdef int16_t attributes, pepoch
    cdef int64_t base_offset, base_ts, max_ts, pid, rec_len, ts_delta, offset_delta, n_headers, n, h
    cdef int32_t i
    cdef object key, value, hk, hv
    out = []
    while pos < size:
        if size - pos < HEADER_BYTES:
            return None
        base_offset = _i64(p + pos)
        length = <int32_t>_u32(p + pos + 8)
        epoch = <int32_t>_u32(p + pos + 12)
        if <int8_t>p[pos + 16] != 2:
            return None
        if length < HEADER_BYTES - 12 or length > size - pos - 12:
            return None
        end = pos + 12 + length
        attributes = _i16(p + pos + 21)
        if attributes & CODEC_MASK:
            return None  # compressed: the reference decompresses it
        if crc(PyBytes_FromStringAndSize(<const char*>p + pos + CRC_FROM, end - pos - CRC_FROM)) != _u32(p + pos + 17):
            return None
        last_delta = <int32_t>_u32(p + pos + 23)
        base_ts = _i64(p + pos + 27)
        max_ts = _i64(p + pos + 35)
        pid = _i64(p + pos + 43)
        pepoch = _i16(p + pos + 51)
        base_seq = <int32_t>_u32(p + pos + 53)
        count = <int32_t>_u32(p + pos + 57)
        records_at = pos + HEADER_BYTES
        if count < 0 or count > end - records_at:
            return None
        records = []
        rpos = records_at
        for i in range(count):
            rpos = _varint(p, rpos, end, &rec_len)
            if rpos < 0 or rec_len < 0 or rec_len > end - rpos:
                return None
            rend = rpos + <Py_ssize_t>rec_len
            rpos = _varint(p, rpos + 1, rend, &ts_delta)  # after the unused attributes byte
            if rpos < 0:
                return None
            rpos = _varint(p, rpos, rend, &offset_delta)
            if rpos < 0:
                return None
            rpos = _varint(p, rpos, rend, &n)
            if rpos < 0 or n > rend - rpos:
                return None
            if n < 0:
                key = None
            else:
                key = PyBytes_FromStringAndSize(<const char*>p + rpos, <Py_ssize_t>n)
                rpos += <Py_ssize_t>n
            rpos = _varint(p, rpos, rend, &n)
            if rpos < 0 or n > rend - rpos:
                return None
            if n < 0:
                value = None
            else:
                value = PyBytes_FromStringAndSize(<const char*>p + rpos, <Py_ssize_t>n)
                rpos += <Py_ssize_t>n
            rpos = _varint(p, rpos, rend, &n_headers)
            if rpos < 0:
                return None
            headers = []
            for h in range(n_headers):
                rpos = _varint(p, rpos, rend, &n)
                if rpos < 0 or n > rend - rpos:
                    return None
                if n < 0:
                    hk = None
                else:
                    hk = PyBytes_FromStringAndSize(<const char*>p + rpos, <Py_ssize_t>n)
                    rpos += <Py_ssize_t>n
                if hk is None:
                    return None
                rpos = _varint(p, rpos, rend, &n)
                if rpos < 0 or n > rend - rpos:
                    return None
                if n < 0:
                    hv = None
                else:
                    hv = PyBytes_FromStringAndSize(<const char*>p + rpos, <Py_ssize_t>n)
                    rpos += <Py_ssize_t>n
                try:
                    headers.append(((<bytes>hk).decode("utf-8"), hv))
                except UnicodeDecodeError:
                    return None
            if rpos != rend:
                return None
            records.append(record(offset_delta, <object>base_ts + <object>ts_delta, key, value, tuple(headers)))
        if rpos != end:
            return None
        out.append(batch(base_offset, attributes, last_delta, base_ts, max_ts, pid, pepoch, base_seq,
                         tuple(records), epoch))
        pos = end
    return out


cdef struct _Out:
    unsigned char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int _room(_Out* out, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap
    cdef unsigned char* grown
    if out.size + n <= out.cap:
        return 0
    cap = max(out.cap * 2, out.size + n + 256)
    grown = <unsigned char*>PyMem_Realloc(out.data, cap)
    if grown == NULL:
        raise MemoryError()
    out.data, out.cap = grown, cap
    return 0


cdef inline int _uvarint(_Out* out, uint64_t v) except -1:
    _room(out, 10)
    while v >= 0x80:
        out.data[out.size] = <unsigned char>((v & 0x7F) | 0x80)
        out.size += 1
        v >>= 7
    out.data[out.size] = <unsigned char>v
    out.size += 1
    return 0


cdef inline int _zvarint(_Out* out, int64_t v) except -1:
    return _uvarint(out, (<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


cdef inline int _raw(_Out* out, const char* p, Py_ssize_t n) except -1:
    _room(out, n)
    memcpy(out.data + out.size, p, n)
    out.size += n
    return 0


cdef int _field(_Out* out, object value) except -1:
    """A nullable bytes field: its varint length (-1: null) and its bytes."""
    if value is None:
        return _zvarint(out, -1)
    _zvarint(out, PyBytes_GET_SIZE(value))
    return _raw(out, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))


def encode_records(object records, object base_ts):
    """`encode_records_py` of ``records`` (Record tuples) against ``base_ts``: their bytes in a
    batch; None when a value is not what it reads exactly (a key, value or header value that
    is not bytes, a header name that is not str, a delta past 64 bits)."""
    cdef _Out out
    cdef _Out body
    cdef int64_t base, ts_delta
    cdef object rec, key, value, headers, name, hv, raw_name
    out.data, out.size, out.cap = NULL, 0, 0
    body.data, body.size, body.cap = NULL, 0, 0
    try:
        try:
            base = base_ts
        except OverflowError:
            return None
        for rec in records:
            if not isinstance(rec, tuple):
                return None
            offset_delta, timestamp, key, value, headers = rec
            if (key is not None and type(key) is not bytes) or (value is not None and type(value) is not bytes):
                return None
            try:
                ts_delta = timestamp - base_ts
                body.size = 0
                _room(&body, 1)
                body.data[0] = 0
                body.size = 1
                _zvarint(&body, ts_delta)
                _zvarint(&body, offset_delta)
            except (OverflowError, TypeError):
                return None
            _field(&body, key)
            _field(&body, value)
            _zvarint(&body, len(headers))
            for name, hv in headers:
                if type(name) is not str or (hv is not None and type(hv) is not bytes):
                    return None
                raw_name = (<str>name).encode("utf-8")
                _field(&body, raw_name)
                _field(&body, hv)
            _zvarint(&out, body.size)
            _raw(&out, <const char*>body.data, body.size)
        return PyBytes_FromStringAndSize(<const char*>out.data, out.size)
    finally:
        PyMem_Free(out.data)
        PyMem_Free(body.data)
