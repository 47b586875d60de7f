"""Record batches v2 against the clients' own encoders and decoders: batches built by
aiokafka's builder (every codec; snappy in xerial framing) decode here, batches encoded
here pass aiokafka's CRC check and read back the same records."""

from __future__ import annotations

import crc32c
import pytest
from aiokafka.codec import snappy_encode
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from skiff.common.errors import DecodeError
from skiff.protocol.kafka.records import Record, compress, decode_batches, decompress, encode_batch

CODECS = [0, 1, 2, 3, 4]


def built_by_aiokafka(codec: int, n: int = 20) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=42,
                                        producer_epoch=3, base_sequence=7, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None if i == 3 else f"k{i}".encode(),
                       value=None if i == 5 else b"value %d " % i * (i + 1),
                       headers=[("h", b"\x00\xff"), ("none", None)] if i % 2 else [])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_decodes_the_batches_aiokafka_builds(codec: int) -> None:
    [batch] = decode_batches(built_by_aiokafka(codec))
    assert batch.codec == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_offset_delta) == (42, 3, 7, 19)
    assert len(batch.records) == 20
    r3, r5, r7 = batch.records[3], batch.records[5], batch.records[7]
    assert r3.key is None and r3.value == b"value 3 " * 4
    assert r5.value is None and r5.key == b"k5" and r5.headers == (("h", b"\x00\xff"), ("none", None))
    assert (r7.offset_delta, r7.timestamp) == (7, 1_700_000_000_007)


@pytest.mark.parametrize("codec", CODECS)
def test_encoded_batches_read_back_in_aiokafka(codec: int) -> None:
    records = [Record(d, 1_000 + d, f"k{d}".encode(), b"v" * d, (("a", b"1"),)) for d in (0, 1, 4)]
    data = encode_batch(500, records, codec=codec, last_offset_delta=6)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.base_offset == 500 and batch.next_offset == 507  # a compacted gap after the last record
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(500 + d, 1_000 + d, f"k{d}".encode(), b"v" * d, [("a", b"1")]) for d in (0, 1, 4)]


def test_snappy_reads_both_framings() -> None:
    data = b"snappy " * 10_000
    assert decompress(2, snappy_encode(data, xerial_compatible=True, xerial_blocksize=4096)) == data
    assert decompress(2, compress(2, data)) == data


def test_an_empty_batch_spans_removed_offsets() -> None:
    [batch] = decode_batches(encode_batch(10, [], last_offset_delta=4))
    assert (batch.base_offset, batch.last_offset_delta, batch.records) == (10, 4, ())


def test_bad_batches_are_clear_errors() -> None:
    good = bytearray(built_by_aiokafka(0))
    corrupt = bytes(good[:-1]) + bytes([good[-1] ^ 1])
    with pytest.raises(DecodeError, match="CRC-32C"):
        decode_batches(corrupt)
    with pytest.raises(DecodeError, match="cut short|says"):
        decode_batches(bytes(good[:-5]))
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(DecodeError, match="magic 1"):
        decode_batches(bytes(old))
    with pytest.raises(DecodeError, match="do not decompress"):
        decompress(4, b"not zstd at all")


def with_crc(batch: bytearray) -> bytes:
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


def test_records_that_lie_about_their_sizes_are_clear_errors() -> None:
    good = bytearray(encode_batch(0, [Record(0, 5, b"key", b"value")]))
    more = bytearray(good)
    more[57:61] = (2).to_bytes(4, "big")  # two records claimed, one there
    with pytest.raises(DecodeError, match="runs past the end"):
        decode_batches(with_crc(more))
    longer = bytearray(good)
    longer[61] += 2  # the record's length (zig-zag) says one byte more than it has
    with pytest.raises(DecodeError, match="overruns its batch"):
        decode_batches(with_crc(longer))
    key = bytearray(good)
    key[65] = 0x7E  # a key length of 63 inside a record of 15 bytes
    with pytest.raises(DecodeError, match="overruns its record"):
        decode_batches(with_crc(key))
