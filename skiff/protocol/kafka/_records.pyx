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

`stored_batch` is the twin of `stored_batch.stored_batch_py`: a Fetch's whole record batch
made from the pulled CommitLog records in one pass, with no Python object per message that
has no properties (a keyless Kafka record without headers); a message with properties is
made a `Record` by the caller's mapping and written here. None where it would not make the
reference's bytes (a record that fails the layout checks, a compressed body, a value of
another type or past its field's width).

`decode_plain_rows` is the twin of `records.decode_plain_rows_py` for what a batching producer
sends (librdkafka's defaults: hundreds of keyless records without headers per batch): one
uncompressed batch read straight into the store's rows (`MessageInput`, made by slot with
`skiff.common._kernels`' `skiff_atomic_row_alloc`), with no `Record` per record. None for anything
else (a key, a header, a null value, a compressed, transactional or control batch, more than
one batch, any error): the caller then decodes with `decode_batches` and maps each `Record`.

`parse_produce` is the twin of `produce_wire.parse_produce_py`: a one-partition ProduceRequest's
fields read in C (librdkafka sends one per partition batch, so one per record with
``linger.ms=0``).

Every read is bounds-checked against the input before it is made.
"""

from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, int8_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.string cimport memcpy

from skiff.common._kernels cimport _Buf, _buf, _set_item, skiff_atomic_row_alloc

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


cdef enum:
    TRANSACTIONAL_OR_CONTROL = 0x30
    ROW_SLOTS = 13  # skiff.common.kernels.ROW_LAYOUTS["MessageInput"]


def decode_plain_rows(object data, object crc, object batch, object row, object topic, object queue_id,
                      object host):
    """`records.decode_plain_rows_py`: (the batch's header as ``batch`` with no records, one
    ``row`` per record, the values' total bytes) when ``data`` is one uncompressed batch of
    keyless records without headers that reads cleanly, else None."""
    if type(data) is not bytes or not (isinstance(row, type) and issubclass(row, tuple)):
        return None
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data), rpos, rend, total = 0
    cdef int32_t length, count, i
    cdef int16_t attributes
    cdef int64_t base_ts, rec_len, ts_delta, offset_delta, n
    if size < HEADER_BYTES or <int8_t>p[16] != 2:
        return None
    length = <int32_t>_u32(p + 8)
    attributes = _i16(p + 21)
    if length != size - 12 or attributes & (CODEC_MASK | TRANSACTIONAL_OR_CONTROL):
        return None  # not exactly one batch, or one the reference path decompresses or refuses
    if crc(memoryview(data)[CRC_FROM:]) != _u32(p + 17):
        return None
    base_ts = _i64(p + 27)
    count = <int32_t>_u32(p + 57)
    if count <= 0 or count > size - HEADER_BYTES:
        return None
    empty = b""
    cdef list rows = []
    rpos = HEADER_BYTES
    for i in range(count):
        rpos = _varint(p, rpos, size, &rec_len)
        if rpos < 0 or rec_len < 0 or rec_len > size - rpos:
            return None
        rend = rpos + <Py_ssize_t>rec_len
        rpos = _varint(p, rpos + 1, rend, &ts_delta)  # after the unused attributes byte
        if rpos < 0 or (ts_delta > 0 and base_ts > INT64_MAX - ts_delta) or (ts_delta < 0 and base_ts < INT64_MIN - ts_delta):
            return None
        rpos = _varint(p, rpos, rend, &offset_delta)
        if rpos < 0:
            return None
        rpos = _varint(p, rpos, rend, &n)
        if rpos < 0 or n != -1:
            return None  # a key (or a bad length): the reference path maps it
        rpos = _varint(p, rpos, rend, &n)
        if rpos < 0 or n < 0 or n > rend - rpos:
            return None  # a null value (a tombstone) is the reference path's
        value = PyBytes_FromStringAndSize(<const char*>p + rpos, <Py_ssize_t>n)
        rpos += <Py_ssize_t>n
        total += <Py_ssize_t>n
        rpos = _varint(p, rpos, rend, &n)
        if rpos != rend or n != 0:
            return None  # headers, or bytes after them
        r = skiff_atomic_row_alloc(row, ROW_SLOTS)
        _set_item(r, 0, topic)
        _set_item(r, 1, queue_id)
        _set_item(r, 2, value)
        _set_item(r, 3, empty)
        _set_item(r, 4, 0)
        _set_item(r, 5, 0)
        _set_item(r, 6, base_ts + ts_delta)
        _set_item(r, 7, host)
        _set_item(r, 8, 0)
        _set_item(r, 9, 0)
        _set_item(r, 10, None)
        _set_item(r, 11, None)
        _set_item(r, 12, None)
        rows.append(r)
    if rpos != size:
        return None
    head = batch(_i64(p), attributes, <int32_t>_u32(p + 23), base_ts, _i64(p + 35), _i64(p + 43), _i16(p + 51),
                 <int32_t>_u32(p + 53), (), <int32_t>_u32(p + 12))
    return head, rows, total


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
    cdef int64_t base
    cdef object rec
    out.data, out.size, out.cap = NULL, 0, 0
    body.data, body.size, body.cap = NULL, 0, 0
    try:
        try:
            base = base_ts
        except OverflowError:
            return None
        for rec in records:
            if _record(&out, &body, rec, base_ts) < 0:
                return None
        return PyBytes_FromStringAndSize(<const char*>out.data, out.size)
    finally:
        PyMem_Free(out.data)
        PyMem_Free(body.data)


cdef int _record(_Out* out, _Out* body, object rec, object base_ts) except -2:
    """One Record tuple appended to ``out`` as `encode_records_py` writes it (``body``: scratch
    space for its bytes before its length); -1 when it is not written exactly (nothing added)."""
    cdef object offset_delta, timestamp, key, value, headers, name, hv, raw_name
    if not isinstance(rec, tuple):
        return -1
    offset_delta, timestamp, key, value, headers = rec
    if (key is not None and type(key) is not bytes) or (value is not None and type(value) is not bytes):
        return -1
    try:
        body.size = 0
        _room(body, 1)
        body.data[0] = 0
        body.size = 1
        _zvarint(body, timestamp - base_ts)
        _zvarint(body, offset_delta)
    except (OverflowError, TypeError):
        return -1
    _field(body, key)
    _field(body, value)
    _zvarint(body, len(headers))
    for name, hv in headers:
        if type(name) is not str or (hv is not None and type(hv) is not bytes):
            return -1
        raw_name = (<str>name).encode("utf-8")
        _field(body, raw_name)
        _field(body, hv)
    _zvarint(out, body.size)
    _raw(out, <const char*>body.data, body.size)
    return 0


# -- a Fetch's record batch from stored CommitLog records (skiff.protocol.kafka.stored_batch) --

cdef enum:
    STORED_MIN_HEAD = 88  # the fixed part with IPv4 hosts (skiff.common.record.HEAD_V4)
    STORED_COMPRESSED = 0x1
    STORED_BORN_V6 = 0x10
    STORED_STORE_V6 = 0x20
    RECORD_OVERHEAD = 24  # stored_batch.RECORD_OVERHEAD: a record's bytes beyond key, value, headers

cdef uint32_t STORED_MAGIC_V1 = 0xDAA320A7


cdef Py_ssize_t _stored_at(const unsigned char* d, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t* body_at,
                           Py_ssize_t* topic_at, Py_ssize_t* props_at, int32_t* sys_flag) noexcept nogil:
    """The end of the stored record at ``pos`` and where its parts are, or -1 when it fails the
    layout checks of `skiff.common.stored_message.decode_run` (the same checks, in its order)."""
    cdef const unsigned char* r = d + pos
    cdef Py_ssize_t head_size, t, p, rec_end
    cdef int32_t total, body_len
    if end - pos < STORED_MIN_HEAD:
        return -1
    sys_flag[0] = <int32_t>_u32(r + 36)
    head_size = 72 + (20 if sys_flag[0] & STORED_BORN_V6 else 8) + (20 if sys_flag[0] & STORED_STORE_V6 else 8)
    if end - pos < head_size:
        return -1
    total = <int32_t>_u32(r)
    body_len = <int32_t>_u32(r + head_size - 4)
    t = pos + head_size + body_len
    rec_end = pos + total
    if _u32(r + 4) != STORED_MAGIC_V1 or total <= 0 or rec_end > end or body_len < 0 or t >= end:
        return -1
    p = t + 3 + d[t]
    if p > rec_end or p + _i16(d + p - 2) != rec_end:
        return -1
    body_at[0], topic_at[0], props_at[0] = pos + head_size, t, p
    return rec_end


cdef inline int _zlen(int64_t v) noexcept nogil:
    """The bytes of ``v`` as a zig-zag varint."""
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline bint _sub_fits(int64_t a, int64_t b, int64_t* out) noexcept nogil:
    """``a - b`` into ``out``; False when it does not fit 64 bits (then the reference decides)."""
    if (b > 0 and a < INT64_MIN + b) or (b < 0 and a > INT64_MAX + b):
        return False
    out[0] = a - b
    return True


cdef inline void _put(unsigned char* p, uint64_t v, int n) noexcept nogil:
    """``v``'s low ``n`` bytes, big-endian."""
    cdef int i
    for i in range(n):
        p[i] = <unsigned char>(v >> (8 * (n - 1 - i)))


cdef int64_t _mapped_size(object rec) except -2:
    """`stored_batch._size` of a mapped Record: -1 when a field is not of the type the
    reference's encoder reads exactly (then the whole batch is left to the reference)."""
    cdef int64_t size = RECORD_OVERHEAD
    cdef object key, value, headers, name, hv
    if not isinstance(rec, tuple) or len(rec) != 5:
        return -1
    key, value, headers = rec[2], rec[3], rec[4]
    if (key is not None and type(key) is not bytes) or (value is not None and type(value) is not bytes):
        return -1
    if type(headers) is not tuple:
        return -1
    size += (PyBytes_GET_SIZE(key) if key is not None else 0) + (PyBytes_GET_SIZE(value) if value is not None else 0)
    for item in <tuple>headers:
        if type(item) is not tuple or len(item) != 2:
            return -1
        name, hv = item
        if type(name) is not str or (hv is not None and type(hv) is not bytes):
            return -1
        size += PyUnicode_GET_LENGTH(name) + (PyBytes_GET_SIZE(hv) if hv is not None else 0) + 4
    return size


cdef enum:
    SCRATCH_KEPT_BYTES = 4 * 1024 * 1024  # a Fetch of librdkafka's 1 MiB per partition grows it to 2 MiB


cdef _Out _scratch
"""`stored_batch`'s buffer, kept between calls (up to SCRATCH_KEPT_BYTES): a MiB-sized buffer
allocated and freed per partition answer is mapped afresh by malloc on many calls (past its mmap
threshold), and the kernel zeroes its pages on first touch: system CPU per Fetch
(docs/performance.md, "Kafka: batched produce rows from the kernel")."""
_scratch.data, _scratch.size, _scratch.cap = NULL, 0, 0


def stored_batch(object data, Py_ssize_t max_bytes, bint first, object record_of, object crc):
    """`stored_batch_py(bytes(data), max_bytes, first, record_of)`: (base offset, batch bytes), or
    None where it would not make the reference's answer exactly. ``data``: bytes or a memoryview
    (of a buffer the caller reuses: nothing returned refers to it). ``crc``: CRC-32C of a buffer."""
    if type(data) is not bytes and type(data) is not memoryview:
        return None
    cdef _Buf held = _buf(data)  # a memoryview: the caller's reused buffer of the pulled bytes, held for the call
    cdef const unsigned char* d = held.ptr
    cdef Py_ssize_t end = held.size, pos = 0, rec_end, body_at, t, p, n
    cdef int32_t sys_flag, count = 0
    cdef int64_t base, offset_delta, born, ts, base_ts = 0, max_ts = 0, ts_delta, rec_size, size = 0, last_delta = 0
    cdef unsigned char* w
    cdef _Out out
    cdef _Out body
    cdef object rec, result
    # Every record checks out and none is compressed: the reference decodes (and inflates)
    # every pulled record before it serves any, so one that does not is its to refuse.
    while pos < end:
        rec_end = _stored_at(d, pos, end, &body_at, &t, &p, &sys_flag)
        if rec_end < 0 or sys_flag & STORED_COMPRESSED:
            return None
        pos = rec_end
    if end == 0:
        return 0, b""
    base = _i64(d + 20)
    out.data, out.size, out.cap = _scratch.data, 0, _scratch.cap  # the buffer kept from the last call
    _scratch.data, _scratch.cap = NULL, 0
    body.data, body.size, body.cap = NULL, 0, 0
    try:
        _room(&out, HEADER_BYTES)
        out.size = HEADER_BYTES
        pos = 0
        while pos < end:
            rec_end = _stored_at(d, pos, end, &body_at, &t, &p, &sys_flag)
            if not _sub_fits(_i64(d + pos + 20), base, &offset_delta):
                return None
            born = _i64(d + pos + 40)
            if p == rec_end:  # no properties: a keyless record without headers, the body its value
                rec = None
                ts = born
                rec_size = RECORD_OVERHEAD + (t - body_at)
            else:
                rec = record_of(offset_delta, born, PyBytes_FromStringAndSize(<const char*>d + body_at, t - body_at),
                                PyBytes_FromStringAndSize(<const char*>d + p, rec_end - p))
                rec_size = _mapped_size(rec)
                if rec_size < 0:
                    return None
                try:
                    ts, offset_delta = rec[1], rec[0]
                except (OverflowError, TypeError):
                    return None
            if count and size + rec_size > max_bytes:
                break
            if not count and not first and rec_size > max_bytes:
                return base, b""
            if offset_delta < -0x80000000 or offset_delta > 0x7FFFFFFF:
                return None  # the header's last offset delta is 32 bits
            if not count:
                base_ts = max_ts = ts
            if rec is None:
                if not _sub_fits(ts, base_ts, &ts_delta):
                    return None
                n = t - body_at
                _zvarint(&out, 1 + _zlen(ts_delta) + _zlen(offset_delta) + 1 + _zlen(n) + n + 1)
                _room(&out, 1)
                out.data[out.size] = 0  # attributes
                out.size += 1
                _zvarint(&out, ts_delta)
                _zvarint(&out, offset_delta)
                _zvarint(&out, -1)  # a null key
                _zvarint(&out, n)
                _raw(&out, <const char*>d + body_at, n)
                _zvarint(&out, 0)  # no headers
            elif _record(&out, &body, rec, base_ts) < 0:
                return None
            if ts > max_ts:
                max_ts = ts
            last_delta = offset_delta
            size += rec_size
            count += 1
            pos = rec_end
        if out.size - 12 > 0x7FFFFFFF:
            return None
        w = out.data
        _put(w, <uint64_t>base, 8)
        _put(w + 8, <uint64_t>(out.size - 12), 4)
        _put(w + 12, 0xFFFFFFFF, 4)  # partition leader epoch -1
        w[16] = 2  # magic
        _put(w + 21, 0, 2)  # attributes: uncompressed
        _put(w + 23, <uint64_t>last_delta, 4)
        _put(w + 27, <uint64_t>base_ts, 8)
        _put(w + 35, <uint64_t>max_ts, 8)
        _put(w + 43, 0xFFFFFFFFFFFFFFFF, 8)  # producer id -1
        _put(w + 51, 0xFFFF, 2)  # producer epoch -1
        _put(w + 53, 0xFFFFFFFF, 4)  # base sequence -1
        _put(w + 57, <uint64_t>count, 4)
        result = PyBytes_FromStringAndSize(<const char*>out.data, out.size)
        _put(<unsigned char*>PyBytes_AS_STRING(result) + 17, <uint32_t>crc(memoryview(result)[CRC_FROM:]), 4)
        return base, result
    finally:
        if out.cap <= SCRATCH_KEPT_BYTES and _scratch.data == NULL:
            _scratch.data, _scratch.cap = out.data, out.cap
        else:
            PyMem_Free(out.data)
        PyMem_Free(body.data)


# -- a one-partition ProduceRequest (skiff.protocol.kafka.produce_wire) -------------------

cdef enum:
    PRODUCE_HEAD = 10  # api key, version, correlation id, client id length
    PRODUCE_FIELDS = 14  # transactional id length, acks, timeout, topic count, topic name length
    PRODUCE_PARTITION = 12  # partition count, index, records length


def parse_produce(object frame, object produce_one):
    """`produce_wire.parse_produce_py(frame)`: a one-partition Produce as ``produce_one`` (the
    `ProduceOne` type), or None for anything else (and for input that is not ``bytes``)."""
    if type(frame) is not bytes:
        return None
    cdef const unsigned char* f = <const unsigned char*>PyBytes_AS_STRING(frame)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(frame), pos, name_end, records_at
    cdef int16_t version, client_len, name_len
    cdef int32_t topics, partitions, records_len
    if size < PRODUCE_HEAD + PRODUCE_FIELDS + PRODUCE_PARTITION:
        return None
    version = _i16(f + 2)
    client_len = _i16(f + 8)
    if _i16(f) != 0 or version < 3 or version > 8 or client_len < -1:
        return None
    pos = PRODUCE_HEAD + (client_len if client_len > 0 else 0)
    if pos + PRODUCE_FIELDS > size:
        return None
    topics = <int32_t>_u32(f + pos + 8)
    name_len = _i16(f + pos + 12)
    if _i16(f + pos) != -1 or topics != 1 or name_len < 0:
        return None
    name_end = pos + PRODUCE_FIELDS + name_len
    if name_end + PRODUCE_PARTITION > size:
        return None
    partitions = <int32_t>_u32(f + name_end)
    records_len = <int32_t>_u32(f + name_end + 8)
    records_at = name_end + PRODUCE_PARTITION
    if partitions != 1 or records_len < 0 or records_at + records_len != size:
        return None
    try:
        topic = PyUnicode_DecodeUTF8(<const char*>f + pos + PRODUCE_FIELDS, name_len, NULL)
    except UnicodeDecodeError:
        return None
    return produce_one(<int32_t>_u32(f + 4), version, _i16(f + pos + 2), topic, <int32_t>_u32(f + name_end + 4),
                       PyBytes_FromStringAndSize(<const char*>f + records_at, records_len))
