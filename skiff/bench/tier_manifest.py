"""What a long history costs the tier's manifest: ``python -m skiff.bench.tier_manifest``.

In this process, on a filesystem tier in a temporary directory: a manifest of ``--segments``
segments as uploads write them (``--queues`` queues, each file ``--row-groups`` row groups with
their ranges and digests, a key index and CommitLog span), written once, then ``--files`` more
files added one at a time, each followed by the manifest write the uploader does after a file
(timed: this process's CPU and the bytes of the manifest object), then a cold read of the
manifest by a fresh `Tier` (a broker's start, a slave, Spark's planning). Both ways: in parts
(`skiff.tier.manifest_parts`, ``TIER_MANIFEST_PART_SEGMENTS``) and as one object (parts off).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

from skiff.common.limits import TIER_MANIFEST_PART_SEGMENTS
from skiff.tier.backends import FilesystemBackend
from skiff.tier.manifest import ByteRange, Manifest, ManifestError, Segment, SegmentIndex, manifest_file, segment_file
from skiff.tier.tier import Tier

TOPIC, BROKER = "Orders", "broker-a"
_FILE_ROWS = 100_000


def _segment(i: int, queues: int, row_groups: int) -> Segment:
    """File ``i`` of the history (queues in turn), shaped as an upload describes a 20 MB file."""
    q, k = i % queues, i // queues
    first, last = k * _FILE_ROWS, (k + 1) * _FILE_ROWS - 1
    name = segment_file(TOPIC, BROKER, q, first, last)
    digest = lambda: os.urandom(32).hex()  # noqa: E731 - a fresh digest per field
    size = 800_000
    return Segment(q, first, last, 1_700_000_000_000 + 10_000 * i, 1_700_000_000_000 + 10_000 * i + 9_999, name,
                   _FILE_ROWS, row_groups * size + 20_000, digest(), SegmentIndex(name[:-8] + ".keys", 9_000, digest()),
                   1_000_000 * i, 1_000_000 * i + 999_999, None,
                   tuple(ByteRange(4 + j * size, size, digest()) for j in range(row_groups)),
                   ByteRange(4 + row_groups * size, 20_000, digest()))


def run(segments: int, files: int, queues: int, row_groups: int, part_segments: int) -> dict[str, Any]:
    history = [_segment(i, queues, row_groups) for i in range(segments + files)]
    with tempfile.TemporaryDirectory(prefix="skiff-bench-manifest-") as root:
        tier = Tier(FilesystemBackend(root), part_segments=part_segments)
        t0 = time.process_time()
        m = tier.write_manifest(Manifest(TOPIC, BROKER, tuple(history[:segments])))
        first_s = time.process_time() - t0
        writes = []
        for seg in history[segments:]:
            t0 = time.process_time()
            m = tier.write_manifest(m.with_segment(seg))
            writes.append(time.process_time() - t0)
        top = len(tier.backend.get(manifest_file(TOPIC, BROKER)))
        t0 = time.process_time()
        try:
            cold = Tier(FilesystemBackend(root)).manifest(TOPIC, BROKER)
        except ManifestError as exc:  # one object past TIER_MANIFEST_MAX_BYTES
            read: Any = f"refused: {exc}"
        else:
            read = round(time.process_time() - t0, 3)
            assert cold == m and len(cold.segments) == segments + files
        return {"part_segments": part_segments, "segments": len(m.segments), "parts": len(m.parts),
                "manifest_bytes": top, "first_write_s": round(first_s, 3),
                "write_after_a_file_ms": round(1000 * statistics.median(writes), 2), "cold_read_s": read}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--segments", type=int, default=30_000)
    p.add_argument("--files", type=int, default=5, help="files added one at a time after the history")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--row-groups", type=int, default=25)
    args = p.parse_args(argv)
    for part_segments in (TIER_MANIFEST_PART_SEGMENTS, 10 * (args.segments + args.files)):
        print(json.dumps(run(args.segments, args.files, args.queues, args.row_groups, part_segments)), flush=True)


if __name__ == "__main__":
    main()
