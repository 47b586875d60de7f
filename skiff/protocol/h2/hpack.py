"""HPACK (RFC 7541) for the gRPC door: a decoder of request header blocks (static and
dynamic table, integers, Huffman-coded strings) and the constant header blocks of answers.

Answers never touch the client's dynamic table: ``:status 200`` is static index 8 and the
rest are literals without indexing, so their bytes are constants (`encode_literal`).

Decoding keeps what repeats cheap: Huffman-coded strings are remembered by their bytes
(clients send the same client id, method path and user agent over and over, most of them
indexed after the first call, but the per-call ones are Huffman strings), bounded by
`HPACK_STRINGS_CACHED`.
"""

from __future__ import annotations

from skiff.common.limits import HPACK_BLOCKS_CACHED, HPACK_STRINGS_CACHED
from skiff.protocol.h2.frames import COMPRESSION_ERROR, H2Error

STATIC: tuple[tuple[str, str], ...] = (
    ("", ""),  # index 0 is not an entry
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
    ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
    ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
    ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
    ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
    ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
)
"""RFC 7541 Appendix A."""
assert len(STATIC) == 62

ENTRY_OVERHEAD = 32
"""What an entry costs in the dynamic table beyond its name and value (RFC 7541 §4.1)."""

_HUFFMAN_CODES = """
    1111111111000 11111111111111111011000 1111111111111111111111100010 1111111111111111111111100011 1111111111111111111111100100 1111111111111111111111100101
    1111111111111111111111100110 1111111111111111111111100111 1111111111111111111111101000 111111111111111111101010 111111111111111111111111111100 1111111111111111111111101001
    1111111111111111111111101010 111111111111111111111111111101 1111111111111111111111101011 1111111111111111111111101100 1111111111111111111111101101 1111111111111111111111101110
    1111111111111111111111101111 1111111111111111111111110000 1111111111111111111111110001 1111111111111111111111110010 111111111111111111111111111110 1111111111111111111111110011
    1111111111111111111111110100 1111111111111111111111110101 1111111111111111111111110110 1111111111111111111111110111 1111111111111111111111111000 1111111111111111111111111001
    1111111111111111111111111010 1111111111111111111111111011 010100 1111111000 1111111001 111111111010
    1111111111001 010101 11111000 11111111010 1111111010 1111111011
    11111001 11111111011 11111010 010110 010111 011000
    00000 00001 00010 011001 011010 011011
    011100 011101 011110 011111 1011100 11111011
    111111111111100 100000 111111111011 1111111100 1111111111010 100001
    1011101 1011110 1011111 1100000 1100001 1100010
    1100011 1100100 1100101 1100110 1100111 1101000
    1101001 1101010 1101011 1101100 1101101 1101110
    1101111 1110000 1110001 1110010 11111100 1110011
    11111101 1111111111011 1111111111111110000 1111111111100 11111111111100 100010
    111111111111101 00011 100011 00100 100100 00101
    100101 100110 100111 00110 1110100 1110101
    101000 101001 101010 00111 101011 1110110
    101100 01000 01001 101101 1110111 1111000
    1111001 1111010 1111011 111111111111110 11111111100 11111111111101
    1111111111101 1111111111111111111111111100 11111111111111100110 1111111111111111010010 11111111111111100111 11111111111111101000
    1111111111111111010011 1111111111111111010100 1111111111111111010101 11111111111111111011001 1111111111111111010110 11111111111111111011010
    11111111111111111011011 11111111111111111011100 11111111111111111011101 11111111111111111011110 111111111111111111101011 11111111111111111011111
    111111111111111111101100 111111111111111111101101 1111111111111111010111 11111111111111111100000 111111111111111111101110 11111111111111111100001
    11111111111111111100010 11111111111111111100011 11111111111111111100100 111111111111111011100 1111111111111111011000 11111111111111111100101
    1111111111111111011001 11111111111111111100110 11111111111111111100111 111111111111111111101111 1111111111111111011010 111111111111111011101
    11111111111111101001 1111111111111111011011 1111111111111111011100 11111111111111111101000 11111111111111111101001 111111111111111011110
    11111111111111111101010 1111111111111111011101 1111111111111111011110 111111111111111111110000 111111111111111011111 1111111111111111011111
    11111111111111111101011 11111111111111111101100 111111111111111100000 111111111111111100001 1111111111111111100000 111111111111111100010
    11111111111111111101101 1111111111111111100001 11111111111111111101110 11111111111111111101111 11111111111111101010 1111111111111111100010
    1111111111111111100011 1111111111111111100100 11111111111111111110000 1111111111111111100101 1111111111111111100110 11111111111111111110001
    11111111111111111111100000 11111111111111111111100001 11111111111111101011 1111111111111110001 1111111111111111100111 11111111111111111110010
    1111111111111111101000 1111111111111111111101100 11111111111111111111100010 11111111111111111111100011 11111111111111111111100100 111111111111111111111011110
    111111111111111111111011111 11111111111111111111100101 111111111111111111110001 1111111111111111111101101 1111111111111110010 111111111111111100011
    11111111111111111111100110 111111111111111111111100000 111111111111111111111100001 11111111111111111111100111 111111111111111111111100010 111111111111111111110010
    111111111111111100100 111111111111111100101 11111111111111111111101000 11111111111111111111101001 1111111111111111111111111101 111111111111111111111100011
    111111111111111111111100100 111111111111111111111100101 11111111111111101100 111111111111111111110011 11111111111111101101 111111111111111100110
    1111111111111111101001 111111111111111100111 111111111111111101000 11111111111111111110011 1111111111111111101010 1111111111111111101011
    1111111111111111111101110 1111111111111111111101111 111111111111111111110100 111111111111111111110101 11111111111111111111101010 11111111111111111110100
    11111111111111111111101011 111111111111111111111100110 11111111111111111111101100 11111111111111111111101101 111111111111111111111100111 111111111111111111111101000
    111111111111111111111101001 111111111111111111111101010 111111111111111111111101011 1111111111111111111111111110 111111111111111111111101100 111111111111111111111101101
    111111111111111111111101110 111111111111111111111101111 111111111111111111111110000 11111111111111111111101110 111111111111111111111111111111
""".split()
"""RFC 7541 Appendix B: the code of each symbol 0..255, then EOS (256), as bits."""
assert len(_HUFFMAN_CODES) == 257
_EOS = 256


def _nibble_table() -> tuple[list[int], list[bool]]:
    """The Huffman code as a state machine read four bits at a time (as nghttp2 decodes it):
    a state is an inner node of the code's tree; entry ``state << 4 | nibble`` is
    ``next_state << 9 | symbol + 1`` (0: no symbol ended in these four bits), or -1 where the
    bits reach EOS. Four bits end at most one symbol: the shortest code is five. ``ends[state]``
    says whether a string may stop there: on the root, or on at most 7 bits that are all 1s
    (the EOS prefix as padding). Bit-by-bit lookups of string slices cost ~20 µs per request id."""
    zero, one = [-1], [-1]  # children of inner node i; a leaf is stored as -2 - symbol
    depth, ones = [0], [True]
    for symbol, code in enumerate(_HUFFMAN_CODES):
        node = 0
        for i, bit in enumerate(code):
            side = one if bit == "1" else zero
            if i == len(code) - 1:
                side[node] = -2 - symbol
                break
            if side[node] == -1:
                side[node] = len(zero)
                zero.append(-1)
                one.append(-1)
                depth.append(depth[node] + 1)
                ones.append(ones[node] and bit == "1")
            node = side[node]
    table = []
    for state in range(len(zero)):
        for nibble in range(16):
            node, emitted = state, 0
            for shift in (3, 2, 1, 0):
                child = one[node] if nibble >> shift & 1 else zero[node]
                if child <= -2:
                    if -2 - child == _EOS:
                        emitted = -1
                        break
                    emitted, node = -1 - child, 0  # symbol + 1
                else:
                    node = child
            table.append(-1 if emitted < 0 else node << 9 | emitted)
    return table, [d <= 7 and o for d, o in zip(depth, ones)]


_NIBBLES, _ENDS = _nibble_table()


def huffman_decode(data: bytes) -> bytes:
    """A Huffman-coded string (RFC 7541 §5.2); `H2Error` for EOS, bad padding or a cut code."""
    table, state, out = _NIBBLES, 0, bytearray()
    for byte in data:
        for nibble in (byte >> 4, byte & 15):
            entry = table[state << 4 | nibble]
            if entry < 0:
                raise H2Error(COMPRESSION_ERROR, "a Huffman string holds EOS")
            state = entry >> 9
            if entry & 511:
                out.append((entry & 511) - 1)
    if not _ENDS[state]:
        raise H2Error(COMPRESSION_ERROR, "a Huffman string's padding is not the EOS prefix")
    return bytes(out)


def encode_integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer (§5.1) in a ``prefix_bits`` prefix, ``first``'s high bits kept."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_literal(name: bytes, value: bytes) -> bytes:
    """A header as a literal without indexing with a literal name (§6.2.2), no Huffman."""
    return b"\x00" + encode_integer(len(name), 7, 0) + name + encode_integer(len(value), 7, 0) + value


class Decoder:
    """One connection's request header decoding state (its dynamic table)."""

    def __init__(self, max_table_bytes: int, max_list_bytes: int) -> None:
        self.max_table_bytes = max_table_bytes
        """What our SETTINGS_HEADER_TABLE_SIZE allows the client's table updates."""
        self.table_bytes = max_table_bytes
        self.max_list_bytes = max_list_bytes
        self._dynamic: list[tuple[str, str]] = []
        """Newest first (index 62 is the newest)."""
        self._size = 0
        self._strings: dict[bytes, str] = {}
        self._version = 0
        """Counts the dynamic table's changes: a block decoded at one version decodes the same
        while the version holds (what its indexes point at is unchanged)."""
        self._blocks: dict[bytes, tuple[int, tuple[tuple[str, str], ...]]] = {}

    def decode(self, block: bytes) -> tuple[tuple[str, str], ...]:
        """The header list of one block; `H2Error` (COMPRESSION_ERROR) for anything malformed.

        A block that changed nothing in the table is remembered with the table's version: a
        client repeating a call sends the same bytes (grpcio indexes its headers after the first
        call and sends metadata as literals), and they are not decoded again while the table
        holds (`HPACK_BLOCKS_CACHED` bound it)."""
        known = self._blocks.get(block)
        if known is not None and known[0] == self._version:
            return known[1]
        version = self._version
        headers = tuple(self._decode(block))
        if self._version == version:
            if len(self._blocks) >= HPACK_BLOCKS_CACHED:
                self._blocks.clear()
            self._blocks[block] = (version, headers)
        return headers

    def _decode(self, block: bytes) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        pos, end, listed = 0, len(block), 0
        try:
            while pos < end:
                byte = block[pos]
                if byte & 0x80:  # indexed field
                    index, pos = self._integer(block, pos, 7)
                    name, value = self._entry(index)
                elif byte & 0x40:  # literal with incremental indexing
                    name, value, pos = self._literal(block, pos, 6)
                    self._add(name, value)
                elif byte & 0x20:  # dynamic table size update
                    size, pos = self._integer(block, pos, 5)
                    if size > self.max_table_bytes:
                        raise H2Error(COMPRESSION_ERROR, f"a table size update to {size} bytes, over "
                                                         f"{self.max_table_bytes}")
                    self.table_bytes = size
                    self._version += 1
                    self._evict()
                    continue
                else:  # literal without indexing / never indexed
                    name, value, pos = self._literal(block, pos, 4)
                listed += len(name) + len(value) + ENTRY_OVERHEAD
                if listed > self.max_list_bytes:
                    raise H2Error(COMPRESSION_ERROR, f"a header list over {self.max_list_bytes} bytes")
                headers.append((name, value))
        except IndexError:
            raise H2Error(COMPRESSION_ERROR, "a header block cut short") from None
        return headers

    def _integer(self, block: bytes, pos: int, prefix_bits: int) -> tuple[int, int]:
        limit = (1 << prefix_bits) - 1
        value = block[pos] & limit
        pos += 1
        if value < limit:
            return value, pos
        shift = 0
        while True:
            byte = block[pos]
            pos += 1
            value += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, pos
            if shift > 28:
                raise H2Error(COMPRESSION_ERROR, "an HPACK integer past 2^28")

    def _string(self, block: bytes, pos: int) -> tuple[str, int]:
        huffman = block[pos] & 0x80
        size, pos = self._integer(block, pos, 7)
        if pos + size > len(block):
            raise H2Error(COMPRESSION_ERROR, "a header string past its block")
        raw = block[pos:pos + size]
        pos += size
        if not huffman:
            return raw.decode("latin-1"), pos
        text = self._strings.get(raw)
        if text is None:
            text = huffman_decode(raw).decode("latin-1")
            if len(self._strings) >= HPACK_STRINGS_CACHED:
                self._strings.clear()
            self._strings[raw] = text
        return text, pos

    def _literal(self, block: bytes, pos: int, prefix_bits: int) -> tuple[str, str, int]:
        index, pos = self._integer(block, pos, prefix_bits)
        if index:
            name = self._entry(index)[0]
        else:
            name, pos = self._string(block, pos)
        value, pos = self._string(block, pos)
        return name, value, pos

    def _entry(self, index: int) -> tuple[str, str]:
        if 0 < index < len(STATIC):
            return STATIC[index]
        dynamic = index - len(STATIC)
        if index == 0 or dynamic >= len(self._dynamic):
            raise H2Error(COMPRESSION_ERROR, f"header table index {index} does not exist")
        return self._dynamic[dynamic]

    def _add(self, name: str, value: str) -> None:
        self._version += 1
        self._dynamic.insert(0, (name, value))
        self._size += len(name) + len(value) + ENTRY_OVERHEAD
        self._evict()

    def _evict(self) -> None:
        while self._size > self.table_bytes and self._dynamic:
            name, value = self._dynamic.pop()
            self._size -= len(name) + len(value) + ENTRY_OVERHEAD
