# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled remoting frame codec for the request path (built when a C compiler is there).

Twins of `skiff.protocol.frame`'s and `skiff.protocol.message_codec`'s references,
selected by `skiff.common.kernels.select` (``SKIFF_NO_EXTENSIONS=1`` forces the references):

- `json_frames` decodes the run of whole JSON frames at the start of a buffer into
  RemotingCommands, the way `frame.decode_frame` does (orjson, then the header's fields),
  but in one pass with no intermediate dict. It decodes only the header shapes it knows
  for certain it reads as orjson would (integers without fraction or exponent, strings
  without surrogate escapes, string / integer / boolean / null ext values); at the first
  frame it does not, it stops, and the caller decodes that one with the reference (which
  also raises the `FrameError` a bad frame deserves). Its reference decodes nothing.
- `json_head` encodes a command's length prefix, header word and JSON header: the bytes
  `frame.json_head_py` gives (orjson's compact form), or None for a command outside what
  it encodes (a non-str ext value, numbers past 64 bits), which the caller then encodes
  with the reference.
- `plain_sends` reads a read's single sends into store rows grouped by queue (the send
  header's fields and the properties the store indexes, no dict per request), or None when
  one is not plain; `sent_answers` encodes the answers of one stored run of them. Their
  references are `skiff.broker.processors.send.plain_sends_py` and `sent_answers_py`.
- `json_frames` repeats neither the decoding of an extFields text equal to the last one at its
  place, in this read or an earlier one (`_Seen`), nor a command's ``__init__`` (its slots are
  set directly, `_learn`).
- `plain_sends` encodes the property names it is given once (`_plain_names`), and
  `sent_answers` the parts its answers share once per set of fields (`_Shared`).
- `pack_batch` and `split_batch` build and split a batch message body, as
  `skiff.protocol.message_codec.pack_batch_py` and `split_batch_py` do; `pack_bare_batch`
  builds one of messages without properties of their own, their UNIQ_KEYs made in the same
  pass, as `pack_bare_batch_py` does.

The store rows are made by slot with `skiff.common._kernels`' `skiff_atomic_row_alloc` and
`_set_item` (declared in `skiff/common/_kernels.pxd`, compiled into this module).

Everything reads its input with bounds checked first: a frame whose declared lengths
overrun the buffer is left to the reference.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.long cimport PyLong_FromLongLong
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

cimport cython

from skiff.common._kernels cimport _property_values, _set_item, skiff_atomic_row_alloc

cdef enum:
    SER_JSON = 0
    MAX_DIGITS = 18  # an integer of at most 18 digits fits int64 without overflow checks


cdef inline uint32_t _get32(const unsigned char *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline void _put32(unsigned char *p, uint32_t v) noexcept nogil:
    p[0] = v >> 24
    p[1] = v >> 16
    p[2] = v >> 8
    p[3] = v


# -- decoding --------------------------------------------------------------------------

cdef struct _Cur:
    const unsigned char *p
    const unsigned char *end


cdef inline void _ws(_Cur *c) noexcept nogil:
    while c.p < c.end and (c.p[0] == 32 or c.p[0] == 10 or c.p[0] == 13 or c.p[0] == 9):
        c.p += 1


cdef inline bint _eat(_Cur *c, unsigned char ch) noexcept nogil:
    _ws(c)
    if c.p < c.end and c.p[0] == ch:
        c.p += 1
        return True
    return False


cdef inline int _hexval(unsigned char ch) noexcept nogil:
    if 48 <= ch <= 57:
        return ch - 48
    if 97 <= ch <= 102:
        return ch - 87
    if 65 <= ch <= 70:
        return ch - 55
    return -1


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)


cdef unsigned char _PLAIN[256]
"""1 for a byte a JSON string holds as itself in ASCII text (printable, not a quote or a backslash)."""
for _b in range(256):
    _PLAIN[_b] = 1 if 32 <= _b < 128 and _b != 34 and _b != 92 else 0

cdef enum:
    ESCAPED = 1  # the string's raw text holds a backslash escape
    HIGH = 2  # ... or a byte past ASCII
    STACK_BYTES = 1024  # escaped strings up to this are unescaped on the stack, no malloc
    SEEN_SLOTS = 32  # extFields entries whose last text `_Seen` keeps
    SEEN_TEXT_BYTES = 1024  # ... when it is at most this long (a longer one is decoded each time)


cdef inline object _ascii(const unsigned char *p, Py_ssize_t n):
    """ASCII bytes as str, copied without a decoder's pass (a 1-char string is CPython's own)."""
    if n <= 1:
        return PyUnicode_DecodeUTF8(<const char *>p, n, NULL)
    text = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(text), p, n)
    return text


cdef inline int _scan(_Cur *c, const unsigned char **start, Py_ssize_t *n) noexcept nogil:
    """The raw text of the JSON string at the cursor (past its opening quote), the cursor moved
    past its closing quote: ESCAPED / HIGH flags, or -1 when it is not one this decoder reads
    (a raw control byte, no closing quote)."""
    cdef const unsigned char *q = c.p
    cdef int flags = 0
    cdef unsigned char ch
    while q < c.end:
        ch = q[0]
        if _PLAIN[ch]:
            q += 1
            continue
        if ch == 34:
            break
        if ch < 32:
            return -1
        if ch == 92:
            flags |= ESCAPED
            q += 2
            continue
        flags |= HIGH
        q += 1
    if q >= c.end:
        return -1
    start[0] = c.p
    n[0] = q - c.p
    c.p = q + 1
    return flags


cdef object _text_of(const unsigned char *p, Py_ssize_t n, int flags):
    """A scanned string's text; None when it does not decode as this decoder reads it."""
    if flags & ESCAPED:
        return _unescape(p, p + n)
    if not flags & HIGH:
        return _ascii(p, n)
    try:
        return PyUnicode_DecodeUTF8(<const char *>p, n, NULL)
    except UnicodeDecodeError:
        return None


cdef object _string(_Cur *c):
    """A JSON string at the cursor (past its opening quote) as str; None: not one this
    decoder reads (a surrogate escape, a raw control byte, bad UTF-8, no closing quote)."""
    cdef const unsigned char *start
    cdef Py_ssize_t n
    cdef int flags = _scan(c, &start, &n)
    if flags < 0:
        return None
    return _text_of(start, n, flags)


cdef class _Seen:
    """The last raw text and str of each of the first extFields keys and values, by position:
    the sends of a producer repeat most of their fields (group, topic, template, flags), and a
    text equal to the last one at its place is that str again, not decoded anew. The raw texts
    are copies, so what one read learnt serves the next (a lone send per read too); one is kept
    for the module (`_SEEN`), a call that finds it in use makes its own."""
    cdef unsigned char *raw[2 * SEEN_SLOTS]  # entry 2 * slot + (1 for a key, 0 for a value)
    cdef Py_ssize_t n[2 * SEEN_SLOTS]
    cdef Py_ssize_t cap[2 * SEEN_SLOTS]
    cdef list texts
    cdef bint busy

    def __cinit__(self):
        self.texts = [None] * (2 * SEEN_SLOTS)
        for k in range(2 * SEEN_SLOTS):
            self.raw[k] = NULL
            self.n[k] = self.cap[k] = 0
        self.busy = False

    def __dealloc__(self):
        for k in range(2 * SEEN_SLOTS):
            free(self.raw[k])


cdef _Seen _SEEN = _Seen.__new__(_Seen)


@cython.boundscheck(False)
cdef inline object _seen_string(_Cur *c, _Seen seen, Py_ssize_t slot, bint key):
    """`_string`, through ``seen``'s entry for ``slot`` (of keys or values)."""
    cdef const unsigned char *start
    cdef Py_ssize_t n
    cdef Py_ssize_t i = 2 * slot + key
    cdef int flags
    cdef unsigned char *copy
    if slot < SEEN_SLOTS:  # the last text at this place again, and its closing quote: no scan
        n = seen.n[i]
        if seen.raw[i] != NULL and c.end - c.p > n and c.p[n] == 34 and memcmp(seen.raw[i], c.p, n) == 0:
            c.p += n + 1
            return seen.texts[i]
    flags = _scan(c, &start, &n)
    if flags < 0:
        return None
    text = _text_of(start, n, flags)
    if text is None or slot >= SEEN_SLOTS or n > SEEN_TEXT_BYTES:
        return text
    if n > seen.cap[i] or seen.raw[i] == NULL:
        copy = <unsigned char *>realloc(seen.raw[i], n if n > 0 else 1)
        if copy == NULL:
            return text  # not kept: the entry is still the last one it kept
        seen.raw[i], seen.cap[i] = copy, n
    memcpy(seen.raw[i], start, n)
    seen.n[i] = n
    seen.texts[i] = text
    return text


cdef object _unescape(const unsigned char *p, const unsigned char *end):
    cdef Py_ssize_t cap = end - p
    cdef unsigned char stack[STACK_BYTES]
    cdef unsigned char *out = &stack[0]
    cdef Py_ssize_t n = 0
    cdef int code, k, h
    cdef bint high = False
    if cap + 1 > STACK_BYTES:
        out = <unsigned char *>malloc(cap + 1)
        if out == NULL:
            raise MemoryError()
    try:
        while p < end:
            if p[0] != 92:
                if p[0] >= 128:
                    high = True
                out[n] = p[0]
                n += 1
                p += 1
                continue
            if p + 1 >= end:
                return None
            ch = p[1]
            p += 2
            if ch == 34 or ch == 92 or ch == 47:
                out[n] = ch
            elif ch == 98:
                out[n] = 8
            elif ch == 102:
                out[n] = 12
            elif ch == 110:
                out[n] = 10
            elif ch == 114:
                out[n] = 13
            elif ch == 116:
                out[n] = 9
            elif ch == 117:
                if p + 4 > end:
                    return None
                code = 0
                for k in range(4):
                    h = _hexval(p[k])
                    if h < 0:
                        return None
                    code = code * 16 + h
                p += 4
                if 0xD800 <= code <= 0xDFFF:
                    return None  # surrogates: the reference's business
                if code < 0x80:
                    out[n] = code
                elif code < 0x800:  # 2 UTF-8 bytes where the escape took 6: fits
                    high = True
                    out[n] = 0xC0 | (code >> 6)
                    n += 1
                    out[n] = 0x80 | (code & 0x3F)
                else:
                    high = True
                    out[n] = 0xE0 | (code >> 12)
                    n += 1
                    out[n] = 0x80 | ((code >> 6) & 0x3F)
                    n += 1
                    out[n] = 0x80 | (code & 0x3F)
            else:
                return None
            n += 1
        if not high:
            return _ascii(out, n)
        try:
            return PyUnicode_DecodeUTF8(<const char *>out, n, NULL)
        except UnicodeDecodeError:
            return None
    finally:
        if out != &stack[0]:
            free(out)


cdef bint _integer(_Cur *c, int64_t *value) noexcept nogil:
    """A JSON integer (no fraction, no exponent, at most 18 digits) followed by a delimiter."""
    cdef bint neg = False
    cdef int64_t v = 0
    cdef Py_ssize_t digits = 0
    _ws(c)
    if c.p < c.end and c.p[0] == 45:
        neg = True
        c.p += 1
    if c.p >= c.end or not (48 <= c.p[0] <= 57):
        return False
    if c.p[0] == 48 and c.p + 1 < c.end and 48 <= c.p[1] <= 57:
        return False  # a leading zero: not JSON
    while c.p < c.end and 48 <= c.p[0] <= 57:
        v = v * 10 + (c.p[0] - 48)
        digits += 1
        c.p += 1
        if digits > MAX_DIGITS:
            return False
    if c.p < c.end and (c.p[0] == 46 or c.p[0] == 101 or c.p[0] == 69):
        return False
    value[0] = -v if neg else v
    return True


cdef inline bint _word(_Cur *c, const char *w, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if c.end - c.p < n:
        return False
    for i in range(n):
        if c.p[i] != <unsigned char>w[i]:
            return False
    c.p += n
    return True


cdef object _ext(_Cur *c, _Seen seen):
    """The extFields object (past its brace) as a dict of str, or None when outside the subset.
    Values as `frame._ext_from_json` leaves them: str as is, integers as their text, booleans
    as true/false, null as empty."""
    cdef dict ext = {}  # not presized: a presized table is for any keys, and its str lookups cost more
    cdef int64_t number
    cdef Py_ssize_t slot = 0
    if _eat(c, 125):
        return ext
    while True:
        if not _eat(c, 34):
            return None
        key = _seen_string(c, seen, slot, True)
        if key is None or not _eat(c, 58):
            return None
        _ws(c)
        if c.p >= c.end:
            return None
        if c.p[0] == 34:
            c.p += 1
            value = _seen_string(c, seen, slot, False)
            if value is None:
                return None
        elif _word(c, b"true", 4):
            value = "true"
        elif _word(c, b"false", 5):
            value = "false"
        elif _word(c, b"null", 4):
            value = ""
        else:
            if not _integer(c, &number):
                return None
            value = str(number)
        PyDict_SetItem(ext, key, value)
        slot += 1
        if _eat(c, 44):
            continue
        if _eat(c, 125):
            return ext
        return None


cdef inline int _key(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """The top-level header key: 1 code, 2 opaque, 3 flag, 4 version, 5 language, 6 remark,
    7 extFields, 0 any other (skipped)."""
    if n == 4 and p[0] == 99 and p[1] == 111 and p[2] == 100 and p[3] == 101:
        return 1
    if n == 6 and p[0] == 111 and p[1] == 112 and p[2] == 97:  # opaque
        return 2 if p[3] == 113 and p[4] == 117 and p[5] == 101 else 0
    if n == 4 and p[0] == 102 and p[1] == 108 and p[2] == 97 and p[3] == 103:
        return 3
    if n == 7 and p[0] == 118 and p[1] == 101 and p[2] == 114 and p[3] == 115 and p[6] == 110:  # version
        return 4
    if n == 8 and p[0] == 108 and p[1] == 97 and p[2] == 110 and p[7] == 101:  # language
        return 5
    if n == 6 and p[0] == 114 and p[1] == 101 and p[2] == 109 and p[3] == 97:  # remark
        return 6 if p[4] == 114 and p[5] == 107 else 0
    if n == 9 and p[0] == 101 and p[1] == 120 and p[2] == 116 and p[3] == 70 and p[8] == 115:  # extFields
        return 7
    return 0


cdef extern from *:
    """
    #include "structmember.h"
    static PyObject *skiff_frames_alloc(PyObject *type) {
        return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    }
    static Py_ssize_t skiff_frames_member_offset(PyObject *descr) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        return (m->type == T_OBJECT_EX && !(m->flags & READONLY)) ? m->offset : -1;
    }
    static void skiff_frames_set_slot(PyObject *o, Py_ssize_t offset, PyObject *v) {
        Py_INCREF(v);
        *(PyObject **)((char *)o + offset) = v;
    }
    """
    object skiff_frames_alloc(object type)
    Py_ssize_t skiff_frames_member_offset(object descr)
    void skiff_frames_set_slot(object o, Py_ssize_t offset, object v)

cdef tuple _COMMAND_FIELDS = ("code", "opaque", "flag", "ext_fields", "remark", "body", "language", "version",
                              "serialize_type", "body_parts")
cdef object _slotted = None  # the command class whose slot offsets are known
cdef Py_ssize_t _offsets[10]


cdef bint _learn(object cls) except -1:
    """Whether commands of ``cls`` can be made slot by slot: a dataclass whose slots are
    exactly `_COMMAND_FIELDS`, in that order, plain object slots, with no ``__post_init__``
    (what its ``__init__`` does is then only to set them). Anything else is made by calling it."""
    global _slotted
    cdef Py_ssize_t k
    cdef Py_ssize_t learnt[10]
    if cls is _slotted:
        return True
    if not isinstance(cls, type) or getattr(cls, "__slots__", None) != _COMMAND_FIELDS \
            or hasattr(cls, "__post_init__") or cls.__base__ is not object \
            or tuple(getattr(cls, "__dataclass_fields__", ())) != _COMMAND_FIELDS:
        return False
    for k in range(10):
        descr = (<type>cls).__dict__.get(_COMMAND_FIELDS[k])
        if type(descr).__name__ != "member_descriptor":
            return False
        learnt[k] = skiff_frames_member_offset(descr)
        if learnt[k] < 0:
            return False
    for k in range(10):  # only now: the class learnt before keeps its offsets until then
        _offsets[k] = learnt[k]
    _slotted = cls
    return True


cdef object _command(object cls, int64_t code, int64_t opaque, int64_t flag, object ext, object remark, object body,
                     object language, int64_t version, object json_type):
    """``cls(code, opaque, flag, ext, remark, body, language, version, json_type)``, made without
    running its ``__init__`` where `_learn` allows (a command per frame: a third of its cost)."""
    if not _learn(cls):
        return cls(code, opaque, flag, ext, remark, body, language, version, json_type)
    cmd = skiff_frames_alloc(cls)
    skiff_frames_set_slot(cmd, _offsets[0], PyLong_FromLongLong(code))
    skiff_frames_set_slot(cmd, _offsets[1], PyLong_FromLongLong(opaque))
    skiff_frames_set_slot(cmd, _offsets[2], PyLong_FromLongLong(flag))
    skiff_frames_set_slot(cmd, _offsets[3], ext)
    skiff_frames_set_slot(cmd, _offsets[4], remark)
    skiff_frames_set_slot(cmd, _offsets[5], body)
    skiff_frames_set_slot(cmd, _offsets[6], language)
    skiff_frames_set_slot(cmd, _offsets[7], PyLong_FromLongLong(version))
    skiff_frames_set_slot(cmd, _offsets[8], json_type)
    skiff_frames_set_slot(cmd, _offsets[9], None)
    return cmd


cdef object _header(const unsigned char *p, Py_ssize_t n, object cls, object body, object json_type, _Seen seen):
    """One JSON header as a command of ``cls``, or None when outside the subset."""
    cdef _Cur c
    cdef int64_t code = 0, opaque = 0, flag = 0, version = 0, number
    cdef bint has_code = False
    cdef const unsigned char *key_start
    cdef int which
    c.p = p
    c.end = p + n
    language = "OTHER"
    remark = None
    ext = None
    if not _eat(&c, 123):
        return None
    if not _eat(&c, 125):
        while True:
            if not _eat(&c, 34):
                return None
            key_start = c.p
            while c.p < c.end and c.p[0] != 34 and c.p[0] != 92 and 32 <= c.p[0] < 128:
                c.p += 1  # an escape or a byte past ASCII in a top-level key: the reference's
            if c.p >= c.end or c.p[0] != 34:
                return None
            which = _key(key_start, c.p - key_start)
            c.p += 1
            if not _eat(&c, 58):
                return None
            _ws(&c)
            if c.p >= c.end:
                return None
            if 1 <= which <= 4:
                if not _integer(&c, &number):
                    return None
                if which == 1:
                    code = number
                    has_code = True
                elif which == 2:
                    opaque = number
                elif which == 3:
                    flag = number
                else:
                    version = number
            elif which == 5 or which == 6:
                if c.p[0] == 34:
                    c.p += 1
                    text = _string(&c)
                    if text is None:
                        return None
                elif which == 6 and _word(&c, b"null", 4):
                    text = None
                else:
                    return None  # a language code or a non-string remark: the reference's
                if which == 5:
                    language = text
                else:
                    remark = text
            elif which == 7:
                if _word(&c, b"null", 4):
                    ext = None
                elif _eat(&c, 123):
                    ext = _ext(&c, seen)
                    if ext is None:
                        return None
                else:
                    return None
            else:  # another key: a string, number, true, false or null is skipped
                if c.p[0] == 34:
                    c.p += 1
                    if _string(&c) is None:
                        return None
                elif not (_word(&c, b"true", 4) or _word(&c, b"false", 5) or _word(&c, b"null", 4)
                          or _integer(&c, &number)):
                    return None
            if _eat(&c, 44):
                continue
            if _eat(&c, 125):
                break
            return None
    _ws(&c)
    if c.p != c.end or not has_code:
        return None
    return _command(cls, code, opaque, flag, ext, remark, body, language, version, json_type)


def json_frames(buf, Py_ssize_t pos, Py_ssize_t max_frame_bytes, cls, json_type):
    """The commands of the whole JSON frames from ``pos`` on, and the position after the
    last: stops at an incomplete frame and at one to leave to the reference."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef Py_ssize_t end, length, header_len
    cdef uint32_t word
    cdef list out = []
    cdef _Seen seen = _SEEN
    if seen.busy:  # a command class's __init__ that decodes frames itself
        seen = _Seen.__new__(_Seen)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    seen.busy = True
    try:
        p = <const unsigned char *>view.buf
        end = view.len
        while end - pos >= 8:
            length = <Py_ssize_t><int>_get32(p + pos)
            if length < 4 or length + 4 > max_frame_bytes or end - pos - 4 < length:
                break
            word = _get32(p + pos + 4)
            header_len = word & 0xFFFFFF
            if (word >> 24) != SER_JSON or header_len <= 0 or 4 + header_len > length:
                break
            body = PyBytes_FromStringAndSize(<const char *>p + pos + 8 + header_len, length - 4 - header_len)
            cmd = _header(p + pos + 8, header_len, cls, body, json_type, seen)
            if cmd is None:
                break
            out.append(cmd)
            pos += 4 + length
    finally:
        seen.busy = False
        PyBuffer_Release(&view)
    return out, pos


# -- encoding --------------------------------------------------------------------------

cdef struct _Out:
    unsigned char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _grow(_Out *o, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap
    cdef unsigned char *data
    if o.len + n <= o.cap:
        return 0
    cap = max(o.cap * 2, o.len + n + 64)
    data = <unsigned char *>realloc(o.data, cap)
    if data == NULL:
        raise MemoryError()
    o.data, o.cap = data, cap
    return 0


cdef int _raw(_Out *o, const char *s, Py_ssize_t n) except -1:
    _grow(o, n)
    memcpy(o.data + o.len, s, n)
    o.len += n
    return 0


cdef int _int(_Out *o, int64_t v) except -1:
    cdef char tmp[24]
    cdef Py_ssize_t i = 24
    cdef uint64_t u = <uint64_t>(-v) if v < 0 else <uint64_t>v
    while True:
        i -= 1
        tmp[i] = 48 + <char>(u % 10)
        u //= 10
        if u == 0:
            break
    if v < 0:
        i -= 1
        tmp[i] = 45
    return _raw(o, tmp + i, 24 - i)


cdef char *_HEX = b"0123456789abcdef"


cdef int _str(_Out *o, str s) except -1:
    """``s`` as orjson writes it: quoted, with ", \\ and control characters escaped."""
    cdef Py_ssize_t n, i
    cdef const unsigned char *p = <const unsigned char *>PyUnicode_AsUTF8AndSize(s, &n)
    cdef unsigned char ch
    _grow(o, n * 6 + 2)
    o.data[o.len] = 34
    o.len += 1
    for i in range(n):
        ch = p[i]
        if ch >= 32 and ch != 34 and ch != 92:
            o.data[o.len] = ch
            o.len += 1
            continue
        o.data[o.len] = 92
        if ch == 34 or ch == 92:
            o.data[o.len + 1] = ch
            o.len += 2
        elif ch == 8 or ch == 12 or ch == 10 or ch == 13 or ch == 9:
            o.data[o.len + 1] = b"b"[0] if ch == 8 else b"f"[0] if ch == 12 else b"n"[0] if ch == 10 \
                else b"r"[0] if ch == 13 else b"t"[0]
            o.len += 2
        else:
            memcpy(o.data + o.len + 1, b"u00", 3)
            o.data[o.len + 4] = _HEX[ch >> 4]
            o.data[o.len + 5] = _HEX[ch & 15]
            o.len += 6
    o.data[o.len] = 34
    o.len += 1
    return 0


cdef inline bint _fits(object v):
    """An int (an IntEnum such as ResponseCode too, which orjson writes as its value; not a bool)
    within 64 bits."""
    return isinstance(v, int) and type(v) is not bool and -(2 ** 63) <= v < 2 ** 63


def json_head(int serialize_type, code, language, version, opaque, flag, remark, ext, Py_ssize_t body_len):
    """The frame's first bytes (length, header word, JSON header) of a command with these
    fields and a body of ``body_len`` bytes; None when a field is outside what this encodes."""
    cdef _Out o
    if not (_fits(code) and _fits(version) and _fits(opaque) and _fits(flag)):
        return None
    if type(language) is not str or (remark is not None and type(remark) is not str):
        return None
    if ext is not None:
        if type(ext) is not dict:
            return None
        for k, v in (<dict>ext).items():
            if type(k) is not str or type(v) is not str:
                return None
    o.data = NULL
    o.len = o.cap = 0
    try:
        _grow(&o, 256)
        o.len = 8
        _raw(&o, b'{"code":', 8)
        _int(&o, code)
        _raw(&o, b',"language":', 12)
        _str(&o, language)
        _raw(&o, b',"version":', 11)
        _int(&o, version)
        _raw(&o, b',"opaque":', 10)
        _int(&o, opaque)
        _raw(&o, b',"flag":', 8)
        _int(&o, flag)
        if remark is not None:
            _raw(&o, b',"remark":', 10)
            _str(&o, remark)
        if ext is not None:
            _raw(&o, b',"extFields":{', 14)
            first = True
            for k, v in (<dict>ext).items():
                if not first:
                    _raw(&o, b",", 1)
                first = False
                _str(&o, k)
                _raw(&o, b":", 1)
                _str(&o, v)
            _raw(&o, b"}", 1)
        _raw(&o, b',"serializeTypeCurrentRPC":"JSON"}', 34)
        header_len = o.len - 8
        _put32(o.data, <uint32_t>(4 + header_len + body_len))
        _put32(o.data + 4, (<uint32_t>serialize_type << 24) | <uint32_t>header_len)
        return PyBytes_FromStringAndSize(<const char *>o.data, o.len)
    except UnicodeEncodeError:  # a lone surrogate: the reference says what it makes of it
        return None
    finally:
        free(o.data)


# -- the send header (skiff.protocol.headers.send.send_fields_py) -----------------------

cdef tuple _V1_WIRE = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                       "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch",
                       "maxReconsumeTimes")
cdef tuple _V2_WIRE = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "l")
cdef enum:
    SEND_MESSAGE_V2 = 310  # RequestCode: the codes whose send header has V2's one-letter keys
    SEND_BATCH_MESSAGE = 320
    SEND_REPLY_MESSAGE_V2 = 325


cdef bint _digits(object raw, int64_t low, int64_t high, int64_t *out):
    """``raw``: plain ASCII digits with an optional minus, at most 18, within [low, high]."""
    cdef Py_ssize_t n, i = 0, digits
    cdef const char *p
    cdef int64_t v = 0
    if type(raw) is not str:
        return False
    p = PyUnicode_AsUTF8AndSize(raw, &n)
    if n and p[0] == 45:
        i = 1
    digits = n - i
    if digits <= 0 or digits > MAX_DIGITS:
        return False
    while i < n:
        if not (48 <= p[i] <= 57):
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    if p[0] == 45:
        v = -v
    if v < low or v > high:
        return False
    out[0] = v
    return True


cdef int _truth(object raw):
    """0 false, 1 true, -1 neither (as `headers.send._flag`)."""
    cdef Py_ssize_t n
    cdef const char *p
    if raw is None:
        return 0
    if type(raw) is not str:
        return -1
    try:
        p = PyUnicode_AsUTF8AndSize(raw, &n)
    except UnicodeEncodeError:
        return -1  # a lone surrogate: neither
    if n == 0 or (n == 5 and memcmp(p, b"false", 5) == 0) or (n == 1 and p[0] == 48):
        return 0
    if (n == 4 and memcmp(p, b"true", 4) == 0) or (n == 1 and p[0] == 49):
        return 1
    return -1


cdef struct _Fields:
    # borrowed from the extFields dict, which the caller holds
    PyObject *topic
    PyObject *properties  # NULL: none
    PyObject *template
    int64_t queue_id
    int64_t flag
    int64_t sys_flag
    int64_t born_ms
    int64_t reconsume_times
    bint batch
    int64_t queue_nums


def send_fields(code, ext):
    """`send_fields_py`'s twin: the send's fields as a tuple in `SendFields`' order, or None."""
    cdef _Fields f
    if type(ext) is not dict:
        return None if ext is None else _fallback(code, ext)
    if not _read_fields(code, <dict>ext, &f):
        return None
    return _fields_tuple(&f)


cdef inline tuple _fields_tuple(_Fields *f):
    props = "" if f.properties == NULL else <object>f.properties
    return (<object>f.topic, f.queue_id, props or "", f.flag, f.sys_flag, f.born_ms, f.reconsume_times, f.batch,
            <object>f.template, f.queue_nums)


cdef inline object _get(dict d, object key):
    """``d.get(key)``, without a method call."""
    cdef PyObject *v = PyDict_GetItemWithError(d, key)
    return None if v == NULL else <object>v


cdef bint _read_fields(object code, dict d, _Fields *f) except -1:
    """The send header's fields into ``f`` (False: not a header `send_fields_py` reads)."""
    cdef int64_t ignored
    cdef int unit, batch
    cdef tuple names = _V2_WIRE if code == SEND_MESSAGE_V2 or code == SEND_BATCH_MESSAGE \
        or code == SEND_REPLY_MESSAGE_V2 else _V1_WIRE
    cdef PyObject *v
    group, topic, template = _get(d, names[0]), _get(d, names[1]), _get(d, names[2])
    if group is None or topic is None or template is None:
        return False
    f.reconsume_times = 0
    if not (_digits(_get(d, names[3]), -2147483648, 2147483647, &f.queue_nums)
            and _digits(_get(d, names[4]), -2147483648, 2147483647, &f.queue_id)
            and _digits(_get(d, names[5]), -2147483648, 2147483647, &f.sys_flag)
            and _digits(_get(d, names[6]), -999999999999999999, 999999999999999999, &f.born_ms)
            and _digits(_get(d, names[7]), -2147483648, 2147483647, &f.flag)):
        return False
    raw = _get(d, names[9])
    if raw and not _digits(raw, -2147483648, 2147483647, &f.reconsume_times):
        return False
    unit, batch = _truth(_get(d, names[10])), _truth(_get(d, names[11]))
    raw = _get(d, names[12])
    if unit < 0 or batch < 0 or (raw and not _digits(raw, -2147483648, 2147483647, &ignored)):
        return False
    f.batch = batch == 1
    f.topic = <PyObject *>topic
    f.template = <PyObject *>template
    v = PyDict_GetItemWithError(d, names[8])
    f.properties = NULL if v == NULL or <object>v is None else v
    return True


cdef object _fallback(code, ext):
    return None  # a mapping other than a dict: the header decode reads it


# -- a read of single sends (skiff.broker.processors.send.plain_sends_py, sent_answers_py) ----

cdef object _refused_of = None  # the two tuples of names whose UTF-8 `_plain_utf8` holds
cdef object _indexed_of = None
cdef tuple _plain_utf8 = None


cdef tuple _plain_names(object refused, object indexed):
    """The ``refused`` and ``indexed`` names as lists of UTF-8 bytes: the two tuples the last
    call passed are not encoded again (the broker passes the same two each read, and a tuple
    of str cannot change under it); anything else is encoded each call."""
    global _refused_of, _indexed_of, _plain_utf8
    if refused is _refused_of and indexed is _indexed_of:
        return _plain_utf8
    names = ([name.encode() for name in refused], [name.encode() for name in indexed])
    if type(refused) is tuple and type(indexed) is tuple:
        _refused_of, _indexed_of, _plain_utf8 = refused, indexed, names
    return names


def plain_sends(reqs, bytes host, row_cls, int64_t client_flags, int64_t not_consumable, refused, indexed):
    """`plain_sends_py`'s twin: the store rows of a read of plain single sends, grouped by
    (topic, queue id), or None when one of them is not plain."""
    cdef tuple names = _plain_names(refused, indexed)
    cdef list refusing = names[0], wanted = names[1]  # wanted: TAGS, KEYS, UNIQ_KEY, WAIT
    cdef dict groups = {}
    cdef list rows = [], waits = [], g
    cdef Py_ssize_t i, n = len(reqs), k, end
    cdef Py_ssize_t at[4]
    cdef Py_ssize_t length[4]
    cdef const unsigned char *p
    cdef _Fields f
    if len(wanted) != 4 or not (isinstance(row_cls, type) and issubclass(row_cls, tuple)):
        raise ValueError("plain_sends takes a tuple type and four indexed names")
    for i in range(n):
        req = reqs[i]
        ext = req.ext_fields
        if type(ext) is not dict or not _read_fields(req.code, <dict>ext, &f):
            return None
        body = req.body
        if f.batch or f.queue_id < 0 or f.sys_flag & not_consumable or type(body) is not bytes:
            return None
        props = "" if f.properties == NULL else <object>f.properties
        if not props:
            props = ""
        elif type(props) is not str:
            return None
        topic, template, queue_id = <object>f.topic, <object>f.template, f.queue_id
        try:
            p = <const unsigned char *>PyUnicode_AsUTF8AndSize(props, &end)
        except UnicodeEncodeError:
            return None
        if not _property_values(p, end, refusing, wanted, at, length):
            return None
        row = skiff_atomic_row_alloc(row_cls, 13)
        _set_item(row, 0, topic)
        _set_item(row, 1, queue_id)
        _set_item(row, 2, body)
        _set_item(row, 3, PyBytes_FromStringAndSize(<const char *>p, end) if end else b"")
        _set_item(row, 4, f.flag)
        _set_item(row, 5, f.sys_flag & client_flags)
        _set_item(row, 6, f.born_ms)
        _set_item(row, 7, host)
        _set_item(row, 8, f.reconsume_times)
        _set_item(row, 9, 0)
        for k in range(3):
            _set_item(row, 10 + k, None if at[k] < 0 else PyUnicode_DecodeUTF8(<const char *>p + at[k], length[k], NULL))
        rows.append(row)
        waits.append(not (at[3] >= 0 and length[3] == 5 and memcmp(p + at[3], b"false", 5) == 0))
        key = (topic, queue_id)
        found = groups.get(key)
        if found is None:
            groups[key] = [template, f.queue_nums, [i], [row], len(body)]
            continue
        g = <list>found
        if g[0] != template or g[1] != f.queue_nums:
            return None  # one queue named with two templates: the gate may answer each apart
        (<list>g[2]).append(i)
        (<list>g[3]).append(row)
        g[4] += len(body)
    return groups, rows, waits


cdef class _Shared:
    """The parts every answer of a `sent_answers` call shares, for one code, language, version
    and extra fields (the broker's are the same each call): up to the opaque, and after the
    queue offset. Kept for the next call (`_SHARED`); a call with other fields makes a new one."""
    cdef _Out head
    cdef _Out end
    cdef int64_t code
    cdef int64_t version
    cdef str language
    cdef tuple extra  # its (key, value) pairs in order

    def __cinit__(self):
        self.head.data = self.end.data = NULL
        self.head.len = self.head.cap = self.end.len = self.end.cap = 0

    def __dealloc__(self):
        free(self.head.data)
        free(self.end.data)


cdef _Shared _SHARED = None


cdef bint _shares(_Shared shared, int64_t code, str language, int64_t version, dict extra):
    """Whether ``shared`` was made for these fields (str for str, equal, extra in the same order)."""
    cdef Py_ssize_t k = 0
    if shared is None or shared.code != code or shared.version != version or len(extra) != len(shared.extra):
        return False
    if language is not shared.language and language != shared.language:
        return False
    for key, value in extra.items():
        pair = <tuple>shared.extra[k]
        if type(key) is not str or type(value) is not str or key != pair[0] or value != pair[1]:
            return False
        k += 1
    return True


cdef _Shared _shared(int64_t code, str language, int64_t version, dict extra):
    """The `_Shared` parts of these fields: the last call's, or made anew (then kept)."""
    global _SHARED
    cdef _Shared shared = _SHARED
    if _shares(shared, code, language, version, extra):
        return shared
    for key, value in extra.items():
        if type(key) is not str or type(value) is not str or key in ("msgId", "queueId", "queueOffset"):
            raise ValueError("sent_answers takes extra fields of str, other than the three it writes")
    shared = _Shared.__new__(_Shared)
    shared.code, shared.language, shared.version = code, language, version
    shared.extra = tuple(extra.items())
    _raw(&shared.head, b'{"code":', 8)
    _int(&shared.head, code)
    _raw(&shared.head, b',"language":', 12)
    _str(&shared.head, language)
    _raw(&shared.head, b',"version":', 11)
    _int(&shared.head, version)
    _raw(&shared.head, b',"opaque":', 10)
    _raw(&shared.end, b'"', 1)
    for key, value in shared.extra:
        _raw(&shared.end, b",", 1)
        _str(&shared.end, key)
        _raw(&shared.end, b":", 1)
        _str(&shared.end, value)
    _raw(&shared.end, b'},"serializeTypeCurrentRPC":"JSON"}', 35)
    _SHARED = shared
    return shared


cdef enum:
    SCRATCH_KEPT_BYTES = 4096  # `_scratch` stays allocated up to this size


cdef _Out _scratch  # one answer at a time is written here, kept for the next one
_scratch.data = NULL
_scratch.len = _scratch.cap = 0


def sent_answers(reqs, indices, ids, int64_t queue_id, int64_t first_offset, int64_t code, language,
                 int64_t version, int64_t flag, extra, out):
    """`sent_answers_py`'s twin: the answer frame of each stored send of one append, into ``out``
    at its request's index; a request not in JSON is left for the caller. Returns how many
    were left."""
    cdef Py_ssize_t k, n = len(indices), left = 0
    if type(language) is not str or type(extra) is not dict:
        raise TypeError("sent_answers takes a str language and a dict of extra fields")
    cdef _Shared shared = _shared(code, <str>language, version, <dict>extra)
    for k in range(n):
        i = indices[k]
        req = reqs[i]
        if req.serialize_type != SER_JSON:
            left += 1
            continue
        msg_id = ids[k]
        if type(msg_id) is not str:
            raise TypeError("a message id is not a str")
        out[i] = _answer(shared, queue_id, req.opaque, flag, <str>msg_id, first_offset + k)
    return left


cdef object _answer(_Shared shared, int64_t queue_id, int64_t opaque, int64_t flag, str msg_id, int64_t offset):
    cdef _Out *o = &_scratch
    cdef Py_ssize_t header_len
    o.len = 0
    _grow(o, 8 + shared.head.len + shared.end.len + 160)
    o.len = 8
    _raw(o, <const char *>shared.head.data, shared.head.len)
    _int(o, opaque)
    _raw(o, b',"flag":', 8)
    _int(o, flag)
    _raw(o, b',"extFields":{"msgId":', 22)
    _str(o, msg_id)
    _raw(o, b',"queueId":"', 12)
    _int(o, queue_id)
    _raw(o, b'","queueOffset":"', 17)
    _int(o, offset)
    _raw(o, <const char *>shared.end.data, shared.end.len)
    header_len = o.len - 8
    _put32(o.data, <uint32_t>(4 + header_len))
    _put32(o.data + 4, (<uint32_t>SER_JSON << 24) | <uint32_t>header_len)
    answer = PyBytes_FromStringAndSize(<const char *>o.data, o.len)
    if o.cap > SCRATCH_KEPT_BYTES:  # an answer past the usual size does not stay allocated
        free(o.data)
        o.data = NULL
        o.cap = 0
    return answer


# -- batch bodies (skiff.protocol.message_codec) ---------------------------------------

cdef inline int32_t _as_i32(object v) except? -1:
    """A Python int as int32, OverflowError outside its range (as struct's error is a ValueError)."""
    cdef int64_t x = v
    if x < -2147483648 or x > 2147483647:
        raise OverflowError(f"{v} does not fit in 32 bits")
    return <int32_t>x


cdef inline Py_ssize_t _batch_record(unsigned char *out, Py_ssize_t pos, object body, int32_t flag,
                                     Py_ssize_t props_len) noexcept:
    """A batch record up to its properties at ``pos`` of ``out`` (its size, magic code and body
    CRC 0, ``flag``, the body with its length, the properties' length); where they go."""
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    _put32(out + pos, <uint32_t>(22 + body_len + props_len))
    _put32(out + pos + 4, 0)
    _put32(out + pos + 8, 0)
    _put32(out + pos + 12, <uint32_t>flag)
    _put32(out + pos + 16, <uint32_t>body_len)
    memcpy(out + pos + 20, PyBytes_AS_STRING(body), body_len)
    pos += 20 + body_len
    out[pos] = <unsigned char>(props_len >> 8)
    out[pos + 1] = <unsigned char>props_len
    return pos + 2


def pack_batch(messages, properties):
    """`skiff.protocol.message_codec.pack_batch`: the batch records of ``messages``."""
    cdef Py_ssize_t n = min(len(messages), len(properties)), i, total = 0, pos = 0, props_len
    cdef list bodies = [], props = [], flags = []
    cdef unsigned char *out
    for i in range(n):
        body = messages[i].body
        body = body if type(body) is bytes else bytes(body)
        prop = properties[i]
        prop = prop if type(prop) is bytes else bytes(prop)
        if len(prop) > 32767 or len(body) > 2147483647 - 22 - len(prop):
            raise ValueError("a batch record's properties or body are too long for their length fields")
        bodies.append(body)
        props.append(prop)
        flags.append(_as_i32(messages[i].flag))
        total += 22 + len(body) + len(prop)
    result = PyBytes_FromStringAndSize(NULL, total)
    out = <unsigned char *>PyBytes_AS_STRING(result)
    for i in range(n):
        prop = props[i]
        props_len = len(prop)
        pos = _batch_record(out, pos, bodies[i], <int32_t>flags[i], props_len)
        memcpy(out + pos, PyBytes_AS_STRING(prop), props_len)
        pos += props_len
    return result


cdef const char *_HEX_DIGITS = b"0123456789ABCDEF"


cdef inline void _put_hex4(unsigned char *p, uint32_t v) noexcept nogil:
    p[0] = _HEX_DIGITS[(v >> 12) & 15]
    p[1] = _HEX_DIGITS[(v >> 8) & 15]
    p[2] = _HEX_DIGITS[(v >> 4) & 15]
    p[3] = _HEX_DIGITS[v & 15]


def pack_bare_batch(messages, str props_head, str id_prefix, counters):
    """`skiff.protocol.message_codec.pack_bare_batch_py`: the batch records of ``messages``, each
    with the properties ``props_head`` + its id + 0x02, its id ``id_prefix`` + its counter's 4
    hex digits; and the ids joined by commas."""
    cdef Py_ssize_t n = min(len(messages), len(counters)), i, total = 0, pos = 0
    cdef Py_ssize_t head_len, prefix_len, props_len, id_len, at
    cdef const char *head_p = PyUnicode_AsUTF8AndSize(props_head, &head_len)
    cdef const char *prefix_p = PyUnicode_AsUTF8AndSize(id_prefix, &prefix_len)
    cdef list bodies = [], flags = []
    cdef unsigned char *out
    cdef unsigned char *idp
    cdef uint32_t counter
    id_len = prefix_len + 4
    props_len = head_len + id_len + 1
    if props_len > 32767:
        raise ValueError("a batch record's properties are too long for their length field")
    for i in range(n):
        msg = messages[i]
        body = msg.body
        body = body if type(body) is bytes else bytes(body)
        if len(body) > 2147483647 - 22 - props_len:
            raise ValueError("a batch record's body is too long for its length field")
        bodies.append(body)
        flags.append(_as_i32(msg.flag))
        total += 22 + len(body) + props_len
    result = PyBytes_FromStringAndSize(NULL, total)
    ids = PyBytes_FromStringAndSize(NULL, n * (id_len + 1) - 1 if n else 0)
    out = <unsigned char *>PyBytes_AS_STRING(result)
    idp = <unsigned char *>PyBytes_AS_STRING(ids)
    for i in range(n):
        counter = <uint32_t>(counters[i] & 0xFFFF)
        pos = _batch_record(out, pos, bodies[i], <int32_t>flags[i], props_len)
        memcpy(out + pos, head_p, head_len)
        at = pos + head_len
        memcpy(out + at, prefix_p, prefix_len)
        _put_hex4(out + at + prefix_len, counter)
        out[at + id_len] = 2
        pos += props_len
        at = i * (id_len + 1)
        memcpy(idp + at, prefix_p, prefix_len)
        _put_hex4(idp + at + prefix_len, counter)
        if i + 1 < n:
            idp[at + id_len] = 44  # ','
    return result, PyUnicode_DecodeUTF8(PyBytes_AS_STRING(ids), PyBytes_GET_SIZE(ids), NULL)


def split_batch(data, Py_ssize_t max_messages):
    """`skiff.protocol.message_codec.split_batch`: flags, bodies and properties of each
    record, where splitting stopped, and whether the record there is bad."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const unsigned char *p = <const unsigned char *>view.buf
    cdef Py_ssize_t pos = 0, end = view.len, total, body_len, props_at, next_pos, count = 0
    cdef list flags = [], bodies = [], props = []
    cdef bint bad = False, is_bytes = type(data) is bytes
    try:
        while count < max_messages and pos < end:
            if end - pos < 20:
                bad = True
                break
            total = <int32_t>_get32(p + pos)
            body_len = <int32_t>_get32(p + pos + 16)
            props_at = pos + 20 + body_len
            next_pos = pos + total
            if (body_len < 0 or total < 0 or next_pos > end or props_at + 2 > next_pos
                    or <int16_t>((<uint32_t>p[props_at] << 8) | p[props_at + 1]) != total - 22 - body_len):
                bad = True
                break
            flags.append(<int32_t>_get32(p + pos + 12))
            if is_bytes:  # what slicing makes, without a slice object per part
                bodies.append(PyBytes_FromStringAndSize(<const char *>p + pos + 20, body_len))
                props.append(PyBytes_FromStringAndSize(<const char *>p + props_at + 2, next_pos - props_at - 2))
            else:
                bodies.append(data[pos + 20 : props_at])
                props.append(data[props_at + 2 : next_pos])
            pos = next_pos
            count += 1
    finally:
        PyBuffer_Release(&view)
    return flags, bodies, props, pos, bad
