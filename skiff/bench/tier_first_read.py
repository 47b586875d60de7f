"""Where the first read of a tiered offset spends its time, step by step, without a broker:
``python -m skiff.bench.tier_first_read --messages 50000 --size 1024``.

One queue's run of ``--messages`` records (`skiff.bench.tier_table.make_run`: random bodies,
a producer's properties) is uploaded as one file to a temporary ``file://`` tier, as the
uploader writes one queue's backlog (one file up to TIER_SEGMENT_MAX_MESSAGES or
TIER_SEGMENT_MAX_BYTES, row groups of TIER_ROW_GROUP_MESSAGES). Then the steps a broker takes
to answer the first pull of the file's first offset (`skiff.broker.tier.reads.TierReads`) are
timed one by one, each ``--repeat`` times, best kept: the file fetched (the backend's ``get``),
its SHA-256 checked, the Parquet footer opened, the first row group decoded, its records
rebuilt (`skiff.tier.columns.rows_to_record_list`) and made into the cached run (offsets,
tag codes, one buffer); the same through byte ranges (the footer and the row group fetched by
``get_range``, each checked, the row group decoded from its range: `skiff.tier.ranges`); the
whole first-read job both ways (`TierReads._open`, a manifest without ranges and with); and what
recording the ranges adds to an upload (`file_ranges`: a footer parse and a SHA-256 per range). Each is printed as wall ms and process CPU ms for the step and as CPU
µs per message of the row group, so the per-file steps (fetch, hash) and the per-row-group
ones can be set side by side.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from skiff.bench.tier_table import make_run
from skiff.broker.tier.reads import TierReads, rebuilt_run
from skiff.common.limits import TIER_ROW_GROUP_MESSAGES
from skiff.tier.backends import FilesystemBackend
from skiff.tier.columns import records_to_table, rows_to_record_list
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.ranges import checked_range, decode_row_group, file_ranges, footer_file
from skiff.tier.tier import FileCache, Tier, checked


def first_read_steps(messages: int, size: int, repeat: int) -> dict[str, Any]:
    """Wall and CPU seconds of each step of a first read (best of ``repeat``), and the file's sizes."""
    table = records_to_table(make_run(messages, size), "broker-a")
    with tempfile.TemporaryDirectory(prefix="skiff-bench-first-read-") as directory:
        tier = Tier(FilesystemBackend(directory))
        _, seg = tier.upload(Manifest("BenchTier", "broker-a"), table)
        data = tier.backend.get(seg.file)
        f = FileCache().put(seg.file, data)
        group = f.read_row_group(0)
        if not seg.ranged() or seg.footer is None:
            raise SystemExit("the uploaded file has no byte ranges: nothing to compare")
        foot, rg0 = seg.footer, seg.row_groups[0]
        foot_data, rg0_data = data[foot.start:foot.start + foot.length], data[rg0.start:rg0.start + rg0.length]
        footer = footer_file(foot_data)
        whole = replace(seg, row_groups=(), footer=None)  # an older build's manifest: the file read whole
        steps: list[tuple[str, Callable[[], object]]] = [
            ("fetch (whole file)", lambda: tier.backend.get(seg.file)),
            ("sha256 (whole file)", lambda: checked(seg, data)),
            ("open (Parquet footer)", lambda: FileCache().put(seg.file, data)),
            ("decode row group 0", lambda: f.read_row_group(0)),
            ("fetch footer + row group 0 (two ranged gets)",
             lambda: (tier.backend.get_range(seg.file, foot.start, foot.length),
                      tier.backend.get_range(seg.file, rg0.start, rg0.length))),
            ("sha256 footer + row group 0",
             lambda: (checked_range(seg, "footer", foot, foot_data), checked_range(seg, "row group 0", rg0, rg0_data))),
            ("open footer alone", lambda: footer_file(foot_data)),
            ("decode row group 0 from its range", lambda: decode_row_group(footer.metadata, len(data), 0, rg0, rg0_data)),
            ("rebuild: rows_to_record_list", lambda: rows_to_record_list(group)),
            ("run: rebuilt_run (what a read does)", lambda: rebuilt_run(group)),
            ("first read, whole file (TierReads._open)", lambda: _first_read(directory, whole)),
            ("first read, ranged (TierReads._open)", lambda: _first_read(directory, seg)),
            ("upload: file_ranges (ranges + their sha256)", lambda: file_ranges(data)),
        ]
        timed = {name: _best(step, repeat) for name, step in steps}
    return {"messages": messages, "size": size, "file_bytes": len(data), "row_groups": f.num_row_groups,
            "group_rows": group.num_rows, "ranged_bytes": foot.length + rg0.length, "steps": timed}


def _first_read(directory: str, seg: Segment) -> None:
    """What a broker's first pull of ``seg``'s first offset starts: the job of `TierReads._open`
    (fetch, check, decode, rebuild, cache), with empty caches."""
    reads = TierReads(Tier(FilesystemBackend(directory)), cast(Any, None))  # _open asks nothing of an uploader
    try:
        reads._open(seg, seg.first_offset)
    finally:
        reads.close()


def _best(step: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best wall and the best process CPU seconds of ``repeat`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        step()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu


def report(f: dict[str, Any]) -> None:
    print(f"{f['messages']} records of {f['size']} B: one file of {f['file_bytes'] / 1e6:.1f} MB, "
          f"{f['row_groups']} row groups of up to {TIER_ROW_GROUP_MESSAGES} rows (the first: {f['group_rows']})")
    print(f"bytes a first read fetches: {f['file_bytes']} whole file, {f['ranged_bytes']} ranged (footer + row "
          f"group 0: {f['ranged_bytes'] / f['file_bytes']:.1%})")
    for name, (wall, cpu) in f["steps"].items():
        print(f"{name}: {wall * 1e3:.2f} ms wall, {cpu * 1e3:.2f} ms CPU, "
              f"{cpu * 1e6 / f['group_rows']:.2f} us CPU per message of the row group")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.tier_first_read", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000, help="records in the file (default 50000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes per record (default 1024)")
    parser.add_argument("--repeat", type=int, default=5, help="times each step is timed, best kept (default 5)")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.size < 0 or args.repeat < 1:
        parser.error("--messages and --repeat must be at least 1, --size at least 0")
    report(first_read_steps(args.messages, args.size, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
