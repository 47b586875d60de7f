# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled versions of the store's measured hot loops (built when a C compiler is there).

Each function here has a pure-Python reference of the same name in the store module that
uses it (`skiff.store.checks`, `index_service`, `index_file`, `consume_queue`,
`message_store`, `replicated`), and `skiff.common.kernels.select` picks one of the two at
import time (`SKIFF_NO_EXTENSIONS=1` forces the Python ones). The two must give identical
bytes and results for every input the callers pass; `tests/unit/store/test_kernels.py`
checks that with hypothesis. The byte helpers, the held buffer and the CRC-32 are
`skiff.common._kernels`' (`_kernels.pxd`).

Memory safety does not rest on the callers: every write into a buffer is checked
against its size first, and list and tuple indexing keeps its bounds checks (a
column shorter than the others is an IndexError, not a read past its end).
"""

from cpython.exc cimport PyErr_CheckSignals
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.errno cimport EINTR, errno
from libc.string cimport memchr, memcmp, memcpy, memset, strerror
from posix.unistd cimport pwrite

from skiff.common._kernels cimport (
    BLANK_MAGIC_CODE, BORN_V6, CRC_MASK, FIXED_V4, HOST_V4, HOST_V6, MAGIC_V1, PROPERTIES_MAX_BYTES, STORE_V6,
    _Buf, _as_bytes, _buf, _crc32, _hex, _is, _ptr, _text, _tuple_of, as_i32, get16, get32, get64, put32, put64,
)
from skiff.common._kernels import pack_records as _pack_records


# -- checking a batch (skiff.store.checks) ---------------------------------------------

def batch_columns(msgs, topic, queue_id, Py_ssize_t max_body, Py_ssize_t base):
    """`skiff.store.checks.batch_columns`: sizes and dispatch columns of a batch in one pass,
    and the number of the first message refused (-1: none)."""
    cdef list sizes = [], sys_flags = [], tags = [], keys = [], uniq_keys = []
    cdef Py_ssize_t i, n = len(msgs), body_len, props_len, host_len, key_count = 0
    cdef int64_t any_flags = 0
    cdef tuple m
    for i in range(n):
        m = _tuple_of(msgs[i], 13)
        body_len, props_len, host_len = len(m[2]), len(m[3]), len(m[7])
        if (m[0] != topic or m[1] != queue_id or body_len > max_body or props_len > PROPERTIES_MAX_BYTES
                or (host_len != HOST_V4 and host_len != HOST_V6)):
            return sizes, sys_flags, tags, keys, uniq_keys, any_flags, key_count, i
        sizes.append(base + body_len + props_len + host_len)
        sys_flag = m[5]
        sys_flags.append(sys_flag)
        tags.append(m[10])
        words = m[11]
        keys.append(words)
        uniq = m[12]
        uniq_keys.append(uniq)
        any_flags |= <int64_t>sys_flag
        if uniq is not None:
            key_count += 1
        if words:
            key_count += words.count(" ") + 1
    return sizes, sys_flags, tags, keys, uniq_keys, any_flags, key_count, -1


# -- IndexFile and ConsumeQueue entries (skiff.store) ----------------------------------

def index_key_items(topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys,
                    Py_ssize_t start, prefixes):
    """`skiff.store.index_service.index_key_items`: (hash, offset, time) of every key, flat."""
    cdef list items = []
    cdef Py_ssize_t i, n = len(topics)
    for i in range(start, n):
        if (<int64_t>sys_flags[i] & 0xC) == 0xC:
            continue
        uniq = uniq_keys[i]
        keys = keys_column[i]
        if not uniq and not keys:
            continue
        _add_key_items(items, <unsigned long>(<int64_t>prefixes[topics[i]]), uniq, keys, physical_offsets[i],
                       store_timestamps[i])
    return items


cdef int _add_key_items(list items, unsigned long prefix, object uniq, object keys, object phys,
                        object store_ts) except -1:
    """The (hash, offset, time) triples of one record's UNIQ_KEY and KEYS words, onto ``items``."""
    cdef Py_ssize_t length, a, b
    cdef const char *text
    cdef unsigned long h
    if uniq:
        text = PyUnicode_AsUTF8AndSize(uniq, &length)
        h = _crc32(<uint32_t>prefix, <const unsigned char *>text, length) & CRC_MASK
        items += (h, phys, store_ts)
    if keys:
        text = PyUnicode_AsUTF8AndSize(keys, &length)
        a = 0
        while a < length:
            b = a
            while b < length and text[b] != 32:
                b += 1
            if b > a:
                h = _crc32(<uint32_t>prefix, <const unsigned char *>text + a, b - a) & CRC_MASK
                items += (h, phys, store_ts)
            a = b + 1
    return 0


def put_index_entries(mm, Py_ssize_t slots, Py_ssize_t entry_pos, int64_t number, items_in, Py_ssize_t count,
                      int64_t begin):
    """`skiff.store.index_file.put_index_entries`: link ``count`` keys into their slots."""
    cdef _Buf buf = _buf(mm, True)
    cdef list items = items_in if type(items_in) is list else list(items_in)
    if slots <= 0 or count < 0 or 3 * count > len(items) or entry_pos < 40 + 4 * slots or entry_pos + 20 * count > buf.size:
        raise ValueError("the entries do not fit in the file")
    return _link_index_entries(<unsigned char *>buf.ptr, slots, entry_pos, number, items, count, begin)


cdef Py_ssize_t _link_index_entries(unsigned char *base, Py_ssize_t slots, Py_ssize_t entry_pos, int64_t number,
                                    list items, Py_ssize_t count, int64_t begin) except -1:
    """`put_index_entries` once its bounds are checked (the caller's): the slots' count it added."""
    cdef Py_ssize_t i, slot_pos, added = 0
    cdef int64_t key_hash, prev, diff
    for i in range(min(count, _SLOT_LOOKAHEAD)):
        _prefetch_slot(base, slots, items[3 * i])
    for i in range(count):
        if i + _SLOT_LOOKAHEAD < count:
            _prefetch_slot(base, slots, items[3 * (i + _SLOT_LOOKAHEAD)])
        key_hash = items[3 * i]
        if key_hash < 0 or key_hash > 0x7FFFFFFF:
            raise ValueError(f"key hash {key_hash} is not a non-negative int32")
        slot_pos = 40 + (key_hash % slots) * 4
        prev = get32(base + slot_pos)
        if not 0 < prev < number:
            prev = 0
            added += 1
        diff = (<int64_t>items[3 * i + 2] - begin)
        diff = diff // 1000 if diff >= 0 else -((-diff + 999) // 1000)
        if diff < 0:
            diff = 0
        elif diff > 0x7FFFFFFF:
            diff = 0x7FFFFFFF
        put32(base + entry_pos, key_hash)
        put64(base + entry_pos + 4, <int64_t>items[3 * i + 1])
        put32(base + entry_pos + 12, diff)
        put32(base + entry_pos + 16, prev)
        put32(base + slot_pos, number)
        number += 1
        entry_pos += 20
    return added


def put_queue_entries(mm, Py_ssize_t pos, physical_offsets, sizes, tag_codes, Py_ssize_t first,
                      Py_ssize_t stop):
    """`skiff.store.consume_queue.put_queue_entries`: entries ``first`` to ``stop`` of the
    columns, 20 bytes each from ``pos``."""
    cdef _Buf buf = _buf(mm, True)
    if pos < 0 or first < 0 or stop < first or pos + 20 * (stop - first) > buf.size:
        raise ValueError("the entries do not fit in the file")
    _queue_entries(<unsigned char *>buf.ptr + pos, physical_offsets, sizes, tag_codes, first, stop)


cdef int _queue_entries(unsigned char *p, physical_offsets, sizes, tag_codes, Py_ssize_t first,
                        Py_ssize_t stop) except -1:
    """`put_queue_entries` once its bounds are checked (the caller's)."""
    cdef Py_ssize_t i
    for i in range(first, stop):
        put64(p, <int64_t>physical_offsets[i])
        put32(p + 8, as_i32(sizes[i]))
        put64(p + 12, <int64_t>tag_codes[i])
        p += 20
    return 0


def offset_msg_ids(bytes store_host, offsets):
    """`skiff.store.message_store.offset_msg_ids`: store host + offset, upper-case hex, per offset."""
    return _offset_ids(store_host, offsets)


cdef tuple _offset_ids(bytes store_host, offsets):
    cdef Py_ssize_t host_len = len(store_host), width = 2 * (host_len + 8)
    cdef const unsigned char *host = <const unsigned char *>PyBytes_AS_STRING(store_host)
    cdef unsigned char raw[28]
    cdef char text[56]
    if host_len > 20:
        raise ValueError("a store host is at most 20 bytes")
    memcpy(raw, host, host_len)
    out = []
    for offset in offsets:
        put64(raw + host_len, <int64_t>offset)
        _hex(text, raw, host_len + 8)
        out.append(text[:width].decode("ascii"))
    return tuple(out)


# -- replicated bytes (skiff.store.replicated) -----------------------------------------

def replicated_columns(data, int64_t start, int64_t file_size):
    """`skiff.store.replicated.replicated_columns_py`: whole units, the first bad one, and
    the dispatch columns of the records, in one walk."""
    cdef _Buf buf = _buf(data)
    cdef const unsigned char *d = buf.ptr
    cdef const unsigned char *r
    cdef const unsigned char *a
    cdef const unsigned char *b
    cdef const unsigned char *e
    cdef const unsigned char *s
    cdef const unsigned char *tags_at = NULL
    cdef const unsigned char *keys_at = NULL
    cdef const unsigned char *uniq_at = NULL
    cdef const unsigned char *last_topic_at = NULL
    cdef const unsigned char *last_tags_at = NULL
    cdef Py_ssize_t pos = 0, end = buf.size, head_size, body_at, t, topic_len, props_at, props_len
    cdef Py_ssize_t tags_len = 0, keys_len = 0, uniq_len = 0, last_topic_len = -1, last_tags_len = -1
    cdef int64_t phys, room
    cdef int32_t total, magic, sys_flag, body_len, queue_id
    cdef unsigned long crc
    cdef list topics = [], queue_ids = [], queue_offsets = [], physical_offsets = [], sizes = []
    cdef list tags = [], store_timestamps = [], sys_flags = [], keys = [], uniq_keys = []
    cdef object topic = None, tag = None, last_tag = None
    if file_size <= 0:
        raise ValueError("the file size must be positive")
    while pos < end:
        phys = start + pos
        room = file_size - phys % file_size
        if room < 8:
            return (pos, pos, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_timestamps,
                    sys_flags, keys, uniq_keys)
        if end - pos < 8:
            break
        r = d + pos
        total = get32(r)
        magic = get32(r + 4)
        if magic == BLANK_MAGIC_CODE:
            if total != room:
                return (pos, pos, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags,
                        store_timestamps, sys_flags, keys, uniq_keys)
            if end - pos < total:
                break
            pos += total
            continue
        if magic != MAGIC_V1 or total <= FIXED_V4 or total > room:
            return (pos, pos, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_timestamps,
                    sys_flags, keys, uniq_keys)
        if end - pos < total:
            break
        # the whole record is here: check its structure as read_head/read_tail do
        sys_flag = get32(r + 36)
        head_size = 72 + (HOST_V6 if sys_flag & BORN_V6 else HOST_V4) + (HOST_V6 if sys_flag & STORE_V6 else HOST_V4)
        queue_id = get32(r + 12)
        body_len = get32(r + head_size - 4) if head_size <= total else -1
        body_at = head_size
        t = body_at + body_len
        if (head_size > total or body_len < 0 or t + 1 > total or get64(r + 28) != phys or queue_id < 0
                or r[t] == 0 or t + 1 + r[t] + 2 > total):
            return (pos, pos, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_timestamps,
                    sys_flags, keys, uniq_keys)
        topic_len = r[t]
        props_at = t + 3 + topic_len
        props_len = get16(r + props_at - 2)
        crc = _crc32(0, r + body_at, body_len) & CRC_MASK
        if props_len < 0 or props_at + props_len != total or <int64_t>crc != <int64_t>get32(r + 8):
            return (pos, pos, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_timestamps,
                    sys_flags, keys, uniq_keys)
        # TAGS, KEYS and UNIQ_KEY as decode_properties reads them: items split at 0x02, a name
        # and value split at the item's only 0x01, a later item wins
        tags_at = keys_at = uniq_at = NULL
        a = r + props_at
        e = a + props_len
        while a <= e:
            b = <const unsigned char *>memchr(a, 2, e - a) if a < e else NULL
            if b == NULL:
                b = e
            s = <const unsigned char *>memchr(a, 1, b - a) if a < b else NULL
            if s != NULL and s > a and (s + 1 >= b or memchr(s + 1, 1, b - s - 1) == NULL):
                if _is(a, s - a, "TAGS", 4):
                    tags_at, tags_len = s + 1, b - s - 1
                elif _is(a, s - a, "KEYS", 4):
                    keys_at, keys_len = s + 1, b - s - 1
                elif _is(a, s - a, "UNIQ_KEY", 8):
                    uniq_at, uniq_len = s + 1, b - s - 1
            a = b + 1
        if last_topic_at == NULL or topic_len != last_topic_len or memcmp(r + t + 1, last_topic_at, topic_len) != 0:
            topic = _text(r + t + 1, topic_len)
            last_topic_at, last_topic_len = r + t + 1, topic_len
        if tags_at == NULL:
            tag = None
        else:
            if last_tags_at == NULL or tags_len != last_tags_len or memcmp(tags_at, last_tags_at, tags_len) != 0:
                last_tag = _text(tags_at, tags_len)
                last_tags_at, last_tags_len = tags_at, tags_len
            tag = last_tag
        topics.append(topic)
        queue_ids.append(queue_id)
        queue_offsets.append(get64(r + 20))
        physical_offsets.append(phys)
        sizes.append(total)
        tags.append(tag)
        store_timestamps.append(get64(r + 48 + (HOST_V6 if sys_flag & BORN_V6 else HOST_V4)))
        sys_flags.append(sys_flag)
        keys.append(None if keys_at == NULL else _text(keys_at, keys_len))
        uniq_keys.append(None if uniq_at == NULL else _text(uniq_at, uniq_len))
        pos += total
    return (pos, -1, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_timestamps, sys_flags,
            keys, uniq_keys)


# -- index slots ahead of their writes (put_index_entries) ------------------------------

cdef extern from *:
    """
    #if defined(__GNUC__)
    #define skiff_prefetch_w(p) __builtin_prefetch((p), 1, 1)
    #else
    #define skiff_prefetch_w(p) ((void)(p))
    #endif
    """
    void skiff_prefetch_w(const void *p) nogil


# Keys whose slots are fetched ahead: a slot is a random 4 bytes in tens of MB, a cache (and
# TLB) miss each; fetching them ahead lets the misses overlap instead of queueing.
cdef enum:
    _SLOT_LOOKAHEAD = 16


cdef inline void _prefetch_slot(unsigned char *base, Py_ssize_t slots, object key_hash) noexcept:
    """A hint only: what is not a valid hash is skipped here and refused by the main loop
    when it gets there, after the same entries as without the hint were written."""
    cdef int64_t h
    try:
        h = key_hash
    except (OverflowError, TypeError):
        return
    if 0 <= h <= 0x7FFFFFFF:
        skiff_prefetch_w(base + 40 + (h % slots) * 4)


# -- one run's append: records, ConsumeQueue entries, index entries (skiff.store.run_write) ----

def write_run(rows, bytes topic_raw, int64_t base, list sizes, Py_ssize_t total, int64_t store_timestamp,
              bytes store_host, packed, int fd, int64_t file_pos, int64_t phys, cq_mm, Py_ssize_t cq_pos,
              list tag_codes, ix_mm, Py_ssize_t slots, Py_ssize_t entry_pos, int64_t number, int64_t begin,
              prefixes, Py_ssize_t room):
    """`skiff.store.run_write.write_run_py`: a run's records packed into ``packed`` and written
    with ``pwrite`` (the GIL released), its ConsumeQueue entries and its index entries, in one
    call; every bound is checked before the first byte is written."""
    cdef Py_ssize_t n = len(rows), i, count = 0, done = 0, added = 0, wrote
    cdef int err = 0
    cdef unsigned long prefix
    cdef int64_t at = phys
    cdef tuple row
    cdef list offsets = []
    cdef list items = []
    cdef _Buf out, cq, ix
    cdef const unsigned char *data
    if n == 0 or len(sizes) != n or len(tag_codes) != n:
        raise ValueError("a run has one size and one tag code per record, and at least one record")
    for i in range(n):
        offsets.append(at)
        at += <int64_t>sizes[i]
    if at - phys != total:
        raise ValueError(f"the sizes add up to {at - phys} bytes, not {total}")
    _pack_records(rows, topic_raw, range(base, base + n), offsets, sizes, store_timestamp, store_host, None, packed,
                  0)
    ids = _offset_ids(store_host, offsets)
    cq = _buf(cq_mm, True)
    if cq_pos < 0 or cq_pos + 20 * n > cq.size:
        raise ValueError("the ConsumeQueue entries do not fit in the file")
    if ix_mm is not None:
        ix = _buf(ix_mm, True)
        prefix = <unsigned long>(<int64_t>prefixes[_tuple_of(rows[0], 13)[0]])
        for i in range(n):
            row = _tuple_of(rows[i], 13)
            if (<int64_t>row[5] & 0xC) != 0xC and (row[12] or row[11]):
                _add_key_items(items, prefix, row[12], row[11], offsets[i], store_timestamp)
        count = len(items) // 3
        if count > room or slots <= 0 or entry_pos < 40 + 4 * slots or entry_pos + 20 * count > ix.size:
            raise ValueError("the index entries do not fit in the file")
    out = _buf(packed)
    if total > out.size:
        raise ValueError(f"{total} bytes of records do not fit in a buffer of {out.size}")
    data = out.ptr
    while done < total:  # a short write (a signal, a nearly full disk): the rest
        with nogil:
            wrote = pwrite(fd, data + done, total - done, file_pos + done)
            if wrote < 0:
                err = errno
        if wrote < 0:
            if err == EINTR:
                PyErr_CheckSignals()  # as os.pwrite: a handler that raises ends the write
                continue
            raise OSError(err, strerror(err).decode())
        done += wrote
    _queue_entries(<unsigned char *>cq.ptr + cq_pos, offsets, sizes, tag_codes, 0, n)
    if count:
        added = _link_index_entries(<unsigned char *>ix.ptr, slots, entry_pos, number, items, count, begin)
        return offsets, ids, count, added, items[1], items[3 * count - 2]
    return offsets, ids, 0, 0, -1, -1
