"""Compiled versions of the column-wise record decoder's hot loops (the Spark source's reads
and the tier upload; built when a C compiler is there): where the records of a run start,
their columns as plain buffers, the fields the tier keeps beside those, and the rows of
the tier's key index (BLAKE2b-64 of each key, no Python call per key).

Each function here has a pure-Python reference (`skiff.columnar.record_columns.record_starts_py`,
`skiff.columnar.arrow_decode.run_columns_py`, `skiff.columnar.record_fields.record_fields_py`,
`skiff.columnar.key_rows.key_index_rows_py`),
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
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memchr, memcmp, memcpy, memset

from skiff.common._kernels cimport (
    BORN_V6, HOST_V4, HOST_V6, MAGIC_V1, STORE_V6, _Buf, _buf, _hex, _is, _ptr, get16, get32, get64,
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


# Where one stored record's variable parts are (`_walk`).
cdef struct _Record:
    Py_ssize_t end
    int32_t sys_flag
    Py_ssize_t born_len, store_len  # the hosts' bytes (with their ports): 8 (IPv4) or 20 (IPv6)
    Py_ssize_t body_at, body_len
    Py_ssize_t topic_at  # its length byte
    Py_ssize_t props_at, props_len


cdef inline bint _walk(const unsigned char *d, Py_ssize_t size, Py_ssize_t s, _Record *r) noexcept nogil:
    """Find the parts of the record at ``s`` of ``d`` (``size`` bytes); False when it does not
    hold together (a size, magic code or length out of its bounds). One walk for `run_columns`
    and `record_fields`, so both refuse the same records."""
    cdef Py_ssize_t total, t
    if s < 0 or s > size - 91:
        return False
    total = get32(d + s)
    if total < 91 or total > size - s:
        return False
    r.end = s + total
    r.sys_flag = get32(d + s + 36)
    r.born_len = HOST_V6 if r.sys_flag & BORN_V6 else HOST_V4
    r.store_len = HOST_V6 if r.sys_flag & STORE_V6 else HOST_V4
    r.body_at = s + 88 + r.born_len + r.store_len - 2 * HOST_V4
    if get32(d + s + 4) != MAGIC_V1 or r.body_at > r.end:
        return False
    r.body_len = get32(d + r.body_at - 4)
    t = r.body_at + r.body_len
    if r.body_len < 0 or t + 3 > r.end:
        return False
    r.topic_at = t
    r.props_at = t + 3 + d[t]
    if r.props_at > r.end:
        return False
    r.props_len = get16(d + r.props_at - 2)
    return r.props_at + r.props_len == r.end


def run_columns(bytes data, starts, bint include_properties, Py_ssize_t max_body_bytes, inflate, decode_properties):
    """`skiff.columnar.arrow_decode.run_columns_py`: the source's columns of the records of
    ``data`` starting at ``starts``, as plain buffers; None when a record does not hold
    together (the caller raises the message decoder's error)."""
    import numpy
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef const int64_t[::1] at = numpy.ascontiguousarray(starts, dtype=numpy.int64)
    cdef Py_ssize_t n = at.shape[0], i, s, born_growth, shift, body_total = 0
    cdef _Record r
    fixed = numpy.empty((4, n), numpy.int64)
    where = numpy.empty((7, n), numpy.int64)
    cdef int64_t[:, ::1] fx = fixed
    cdef int64_t[:, ::1] w = where
    inflated = {}
    for i in range(n):
        s = at[i]
        if not _walk(d, size, s, &r):
            return None
        born_growth = r.born_len - HOST_V4
        shift = born_growth + r.store_len - HOST_V4
        fx[0, i] = get64(d + s + 20)
        fx[1, i] = get64(d + s + 40)
        fx[2, i] = get64(d + s + 56 + born_growth)
        fx[3, i] = get32(d + s + 72 + shift)
        w[0, i] = r.body_at
        w[1, i] = r.body_len
        w[2, i] = r.props_at
        w[3, i] = r.props_len
        w[4, i] = s + 64 + born_growth  # the store host (and port)
        w[5, i] = r.store_len
        w[6, i] = s
        if r.sys_flag & 1:  # COMPRESSED
            inflated[i] = inflate(data[r.body_at:r.body_at + r.body_len], max_body_bytes)
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
    cdef Py_ssize_t n = at.shape[0], i, s, shift
    cdef _Record r
    out = numpy.empty((13, n), numpy.int64)
    cdef int64_t[:, ::1] o = out
    for i in range(n):
        s = at[i]
        if not _walk(d, size, s, &r):
            return None
        shift = r.born_len + r.store_len - 2 * HOST_V4
        o[0, i] = get32(d + s + 12)  # queue id
        o[1, i] = get32(d + s + 16)  # flag
        o[2, i] = r.sys_flag
        o[3, i] = get64(d + s + 28)  # CommitLog offset
        o[4, i] = get64(d + s + 76 + shift)  # prepared transaction offset
        o[5, i] = r.topic_at + 1  # the topic
        o[6, i] = d[r.topic_at]
        o[7, i] = s + 48  # the born host (and port)
        o[8, i] = r.born_len
        o[9, i] = s + 64 + r.born_len - HOST_V4  # the store host (and port)
        o[10, i] = r.store_len
        o[11, i] = r.props_at
        o[12, i] = r.props_len
    return out


# -- the tier's key index (skiff.columnar.key_rows) ------------------------------------------
#
# BLAKE2b (RFC 7693) cut to what the index's hash is: an 8-byte digest, no key, no salt or
# personalization, messages of any length (a KEYS token can exceed one 128-byte block).

cdef extern from *:
    """
    /* RFC 7693's IV, message schedule and F, the 12 rounds written out so that every message
       word's index is a constant (the compiler keeps the state in registers: about half the
       instructions of a loop over the rounds that looks the schedule up). */
    static const uint64_t skiff_b2b_iv[8] = {
        0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
        0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};
    static const unsigned char skiff_b2b_sigma[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};
    #define SKIFF_ROTR(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
    #define SKIFF_G(r, i, a, b, c, d) do { \
        a = a + b + m[skiff_b2b_sigma[r][2 * i]]; d = SKIFF_ROTR(d ^ a, 32); \
        c = c + d; b = SKIFF_ROTR(b ^ c, 24); \
        a = a + b + m[skiff_b2b_sigma[r][2 * i + 1]]; d = SKIFF_ROTR(d ^ a, 16); \
        c = c + d; b = SKIFF_ROTR(b ^ c, 63); } while (0)
    #define SKIFF_ROUND(r) do { \
        SKIFF_G(r, 0, v[0], v[4], v[8], v[12]); SKIFF_G(r, 1, v[1], v[5], v[9], v[13]); \
        SKIFF_G(r, 2, v[2], v[6], v[10], v[14]); SKIFF_G(r, 3, v[3], v[7], v[11], v[15]); \
        SKIFF_G(r, 4, v[0], v[5], v[10], v[15]); SKIFF_G(r, 5, v[1], v[6], v[11], v[12]); \
        SKIFF_G(r, 6, v[2], v[7], v[8], v[13]); SKIFF_G(r, 7, v[3], v[4], v[9], v[14]); } while (0)
    /* One 128-byte block into the state h; t: bytes hashed so far (the high word is 0). */
    static void skiff_b2b_compress(uint64_t *h, const unsigned char *block, uint64_t t, int last) {
        uint64_t m[16], v[16];
        int i;
        for (i = 0; i < 16; i++) {  /* little-endian words (the compiler makes this one load) */
            const unsigned char *p = block + 8 * i;
            m[i] = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24
                   | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
        }
        for (i = 0; i < 8; i++) {
            v[i] = h[i];
            v[i + 8] = skiff_b2b_iv[i];
        }
        v[12] ^= t;
        if (last)
            v[14] = ~v[14];
        SKIFF_ROUND(0); SKIFF_ROUND(1); SKIFF_ROUND(2); SKIFF_ROUND(3); SKIFF_ROUND(4); SKIFF_ROUND(5);
        SKIFF_ROUND(6); SKIFF_ROUND(7); SKIFF_ROUND(8); SKIFF_ROUND(9); SKIFF_ROUND(10); SKIFF_ROUND(11);
        for (i = 0; i < 8; i++)
            h[i] ^= v[i] ^ v[i + 8];
    }
    """
    const uint64_t skiff_b2b_iv[8]
    void _b2b_compress "skiff_b2b_compress"(uint64_t *h, const unsigned char *block, uint64_t t,
                                            bint last) noexcept nogil


cdef enum:
    B2B_BLOCK = 128
    B2B_PARAMS_DIGEST_8 = 0x01010008  # parameter block word 0: fanout 1, depth 1, no key, 8-byte digest


cdef int64_t _key_hash(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """`skiff.columnar.key_rows.key_hash` of the UTF-8 key ``p[:n]``: BLAKE2b with an 8-byte
    digest, its bytes read as a signed big-endian int64."""
    cdef uint64_t h[8]
    cdef unsigned char last[B2B_BLOCK]
    cdef uint64_t t = 0, d = 0
    cdef int i
    for i in range(8):
        h[i] = skiff_b2b_iv[i]
    h[0] ^= B2B_PARAMS_DIGEST_8
    while n > B2B_BLOCK:  # every full block but the last: the last is compressed as final
        t += B2B_BLOCK
        _b2b_compress(h, p, t, False)
        p += B2B_BLOCK
        n -= B2B_BLOCK
    memset(last, 0, B2B_BLOCK)
    memcpy(last, p, n)
    _b2b_compress(h, last, t + <uint64_t>n, True)
    for i in range(8):  # the digest is h[0]'s bytes little-endian first; read them big-endian
        d = (d << 8) | ((h[0] >> (8 * i)) & 0xFF)
    return <int64_t>d


def key_hash(bytes key):
    """`_key_hash` of ``key`` (UTF-8 bytes), for the known-answer test against hashlib."""
    return _key_hash(<const unsigned char *>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))


cdef struct _Seen:
    int64_t message  # the message the slot was filled for (-1: never): no clearing between messages
    int64_t hash
    const unsigned char *p
    Py_ssize_t n


cdef struct _KeyRows:
    _Grow hashes
    _Grow offsets
    _Seen *seen
    Py_ssize_t mask


cdef int _add_key(_KeyRows *out, int64_t message, const unsigned char *p, Py_ssize_t n, int64_t queue_offset) except -1:
    """One key of a message: a row unless the message had this key already (a hash-set probe;
    an equal hash is checked on the bytes, so a collision of two keys keeps both rows)."""
    cdef int64_t h = _key_hash(p, n)
    cdef Py_ssize_t s = <Py_ssize_t>(<uint64_t>h & <uint64_t>out.mask)
    while out.seen[s].message == message:
        if out.seen[s].hash == h and out.seen[s].n == n and memcmp(out.seen[s].p, p, n) == 0:
            return 0
        s = (s + 1) & out.mask
    out.seen[s].message = message
    out.seen[s].hash = h
    out.seen[s].p = p
    out.seen[s].n = n
    _put(&out.hashes, &h, 8)
    _put(&out.offsets, &queue_offset, 8)
    return 0


cdef tuple _string_column(str name, tuple column, Py_ssize_t n):
    """`check_columns` for one column: its offsets, held data and validity (uint8 or None)."""
    import numpy
    offsets_obj, data, valid = column
    cdef const int32_t[::1] offsets = numpy.ascontiguousarray(offsets_obj, dtype=numpy.int32)
    if offsets.shape[0] != n + 1 or (valid is not None and len(valid) != n):
        raise ValueError(f"the {name} column has not one row per queue offset ({n})")
    cdef _Buf held = _buf(data)
    cdef Py_ssize_t i
    cdef bint bad
    if n:
        bad = offsets[0] < 0 or offsets[n] > held.size
        for i in range(n):
            if offsets[i + 1] < offsets[i]:
                bad = True
        if bad:
            raise ValueError(f"the {name} column's offsets do not fit its data")
    return offsets, held, None if valid is None else numpy.ascontiguousarray(valid, dtype=numpy.bool_).view(numpy.uint8)


cdef inline int _check_utf8(const unsigned char *p, Py_ssize_t n) except -1:
    """A UnicodeDecodeError for bad UTF-8, as the reference's ``bytes.decode()`` raises it."""
    if not _ascii(p, n):
        PyUnicode_DecodeUTF8(<const char *>p, n, "strict")
    return 0


def key_index_rows(tuple keys, tuple msg_ids, queue_offsets):
    """`skiff.columnar.key_rows.key_index_rows_py`: (key_hash, queue_offset) int64 arrays, one row
    per distinct key of each message (its KEYS tokens, then its msg_id), in the same order."""
    import numpy
    cdef const int64_t[::1] qo = numpy.ascontiguousarray(queue_offsets, dtype=numpy.int64)
    cdef Py_ssize_t n = qo.shape[0], i, a, b, e, bound, size, cap = 0
    key_offsets_obj, key_held, key_valid_obj = _string_column("keys", keys, n)
    id_offsets_obj, id_held, id_valid_obj = _string_column("msg_id", msg_ids, n)
    cdef const int32_t[::1] ko = key_offsets_obj
    cdef const int32_t[::1] io = id_offsets_obj
    cdef const unsigned char[::1] kv
    cdef const unsigned char[::1] iv
    cdef bint all_keys = key_valid_obj is None, all_ids = id_valid_obj is None
    if not all_keys:
        kv = key_valid_obj
    if not all_ids:
        iv = id_valid_obj
    cdef const unsigned char *kd = (<_Buf>key_held).ptr
    cdef const unsigned char *idd = (<_Buf>id_held).ptr
    cdef const unsigned char *space
    cdef bint has_keys, has_id
    cdef _KeyRows out
    cdef _Seen *grown
    cdef int64_t[::1] hv
    cdef int64_t[::1] ov
    memset(&out, 0, sizeof(out))
    try:
        for i in range(n):
            has_keys = all_keys or kv[i]
            has_id = all_ids or iv[i]
            a, b = ko[i], ko[i + 1]
            if has_keys:
                _check_utf8(kd + a, b - a)
            if has_id:
                _check_utf8(idd + io[i], io[i + 1] - io[i])
            bound = ((b - a + 1) // 2 if has_keys else 0) + 1  # tokens of KEYS at most, and the msg_id
            size = 8
            while size < 2 * bound:  # a set at most half full
                size *= 2
            if size > cap:
                grown = <_Seen *>realloc(out.seen, size * sizeof(_Seen))
                if grown == NULL:
                    raise MemoryError()
                out.seen, cap = grown, size
                for e in range(cap):
                    out.seen[e].message = -1
            out.mask = size - 1
            if has_keys:
                while a < b:  # split_keys: on each space, empty tokens dropped
                    space = <const unsigned char *>memchr(kd + a, 32, b - a)
                    e = b if space == NULL else space - kd
                    if e > a:
                        _add_key(&out, i, kd + a, e - a, qo[i])
                    a = e + 1
            if has_id and io[i + 1] > io[i]:
                _add_key(&out, i, idd + io[i], io[i + 1] - io[i], qo[i])
        hashes = numpy.empty(out.hashes.n // 8, numpy.int64)
        offsets = numpy.empty(out.offsets.n // 8, numpy.int64)
        if out.hashes.n:
            hv, ov = hashes, offsets
            memcpy(&hv[0], out.hashes.p, out.hashes.n)
            memcpy(&ov[0], out.offsets.p, out.offsets.n)
        return hashes, offsets
    finally:
        free(out.hashes.p)
        free(out.offsets.p)
        free(out.seen)
