"""The CPU the tier upload spends making its table of stored records and uploading it,
without a broker: ``python -m skiff.bench.tier_table --messages 50000 --size 1024``.

One run of ``--messages`` records of one queue (``--size`` random body bytes, the
properties a producer sets: KEYS, TAGS, UNIQ_KEY, WAIT; one born and one store host),
laid out as the store holds them, goes through `skiff.tier.columns.records_to_table`
``--repeat`` times; the best process CPU is printed per message and per MB of records.
Beside it, the rest of an upload of that table (`skiff.tier.tier.Tier.upload` to a
temporary ``file://`` tier: the Parquet file, its checksum, the key index, the manifest)
and, within that, the key index alone (`skiff.tier.index.key_index`): the steps of
``skiff bench tier``'s upload figure but the store read, without a broker and without the
noise of the other processes on the machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence

from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host, record_size, write_record
from skiff.tier.backends import FilesystemBackend
from skiff.tier.columns import records_to_table
from skiff.tier.index import key_index
from skiff.tier.manifest import Manifest
from skiff.tier.tier import Tier

_BORN, _STORE = pack_host("10.0.0.1", 5000), pack_host("127.0.0.1", 10911)


def make_run(messages: int, size: int) -> bytes:
    """``messages`` stored records of one queue, back to back, as a pull answer holds them."""
    out = bytearray()
    topic = b"BenchTier"
    for i in range(messages):
        props = encode_properties({Prop.KEYS: f"k{i}", Prop.TAGS: "t", Prop.UNIQ_KEY: f"ID{i:024X}",
                                   Prop.WAIT: "true"})
        body = os.urandom(size)
        raw = bytearray(record_size(len(body), len(topic), len(props)))
        write_record(raw, 0, 3, 0, i, i * 200, 0, 1_700_000_000_000 + i, _BORN, 1_700_000_000_001 + i, _STORE,
                     0, 0, body, topic, props)
        out += raw
    return bytes(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.tier_table", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000, help="records in the run (default 50000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes per record (default 1024)")
    parser.add_argument("--repeat", type=int, default=5, help="conversions timed, best kept (default 5)")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.size < 0 or args.repeat < 1:
        parser.error("--messages and --repeat must be at least 1, --size at least 0")
    run = make_run(args.messages, args.size)
    mb = len(run) / 1e6
    table = records_to_table(run, "broker-a")
    with tempfile.TemporaryDirectory() as directory:
        tier = Tier(FilesystemBackend(directory))
        steps: list[tuple[str, Callable[[], object]]] = [
            ("records_to_table", lambda: records_to_table(run, "broker-a")),
            ("Tier.upload of the table", lambda: tier.upload(Manifest("BenchTier", "broker-a"), table)),
            ("  of which key_index", lambda: key_index(table)),
        ]
        print(f"{args.messages} records of {args.size} B ({mb:.1f} MB), process CPU, best of {args.repeat}:")
        for name, step in steps:
            best = _best_cpu(step, args.repeat)
            print(f"{name}: {best / args.messages * 1e6:.2f} us CPU per message, {best / mb * 1e3:.2f} ms per MB")
    return 0


def _best_cpu(step: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        step()
        best = min(best, time.process_time() - start)
    return best


if __name__ == "__main__":
    raise SystemExit(main())
