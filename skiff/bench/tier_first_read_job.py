"""One first read of a tiered file, alone in a process, for instruction counts (callgrind):

    python -m skiff.bench.tier_first_read_job setup DIR   # once: one file of 50,000 x 1 KiB in DIR
    valgrind --tool=callgrind python -m skiff.bench.tier_first_read_job {none,whole,ranged} DIR

``whole`` runs the first-read job (`TierReads._open`) with the segment's byte ranges removed (as an
older build's manifest lists it: the file fetched and hashed whole), ``ranged`` with them (the
footer and the row group fetched alone), ``none`` only what both do besides (imports, the tier
opened): the job's instructions are a mode's count minus ``none``'s. The upload is a separate
step so that its cost is not counted (``setup``, not under valgrind).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from skiff.tier.backends import FilesystemBackend
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier

_SEGMENT = "segment.json"


def setup(directory: str, messages: int, size: int) -> Segment:
    """Upload one queue's run to a ``file://`` tier in ``directory``; its segment kept beside it."""
    from skiff.bench.tier_table import make_run
    from skiff.tier.columns import records_to_table

    table = records_to_table(make_run(messages, size), "broker-a")
    _, seg = Tier(FilesystemBackend(directory)).upload(Manifest("BenchTier", "broker-a"), table)
    with open(os.path.join(directory, _SEGMENT), "w") as f:
        json.dump(seg.to_json(), f)
    return seg


def first_read(directory: str, mode: str) -> None:
    """The first-read job of the uploaded file's first offset (``mode``: none, whole, ranged)."""
    from skiff.broker.tier.reads import TierReads

    with open(os.path.join(directory, _SEGMENT)) as f:
        seg = Segment.from_json(json.load(f))
    if mode == "whole":
        seg = replace(seg, row_groups=(), footer=None)
    reads = TierReads(Tier(FilesystemBackend(directory)), cast(Any, None))  # _open asks nothing of an uploader
    try:
        if mode != "none":
            reads._open(seg, seg.first_offset)
            if reads.runs.get((seg.file, 0)) is None:
                raise SystemExit("the first read cached no row group")
    finally:
        reads.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.tier_first_read_job",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["setup", "none", "whole", "ranged"])
    parser.add_argument("directory", help="the tier's directory (made by setup)")
    parser.add_argument("--messages", type=int, default=50_000, help="records in the file, setup (default 50000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes per record, setup (default 1024)")
    args = parser.parse_args(argv)
    if args.mode == "setup":
        if args.messages < 1 or args.size < 0:
            parser.error("--messages must be at least 1, --size at least 0")
        seg = setup(args.directory, args.messages, args.size)
        print(f"{seg.file}: {seg.size_bytes} bytes, {len(seg.row_groups)} row groups with ranges")
    elif not os.path.isfile(os.path.join(args.directory, _SEGMENT)):
        parser.error(f"{args.directory} holds no uploaded file: run setup first")
    else:
        first_read(args.directory, args.mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
