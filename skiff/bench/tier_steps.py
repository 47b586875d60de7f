"""Where the Spark source's tier read spends its CPU, step by step, without Spark:
``python -m skiff.bench.tier --read-steps`` (after its upload) or
``python -m skiff.bench.tier_steps --tier DIR --topic T``.

Each tiered file of the topic is fetched (the backend's ``get``), checked (SHA-256), opened
and decoded as `skiff.spark.tier_read` decodes it (pyarrow's streaming reader, the source's
twelve columns, batches of `SPARK_TIER_BATCH_ROWS`); then each column alone, to see which
columns the decoding spends on. Figures are process CPU µs per row, best of ``repeat``: what
an executor's Python worker spends per row before Spark's own handoff (the floor in
``skiff bench tier``).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from skiff.columnar.schema import SOURCE_COLUMNS
from skiff.common.limits import SPARK_TIER_BATCH_ROWS
from skiff.tier.backends import FilesystemBackend
from skiff.tier.tier import Tier

T = TypeVar("T")


def read_steps(tier_dir: str, topic: str, broker: str = "broker-a", repeat: int = 3) -> dict[str, float]:
    """CPU µs per row of each step of reading every tiered file of ``topic`` (best of ``repeat``)."""
    tier = Tier(FilesystemBackend(tier_dir))
    m = tier.manifest(topic, broker)
    segs = [s for q in m.queue_ids() for s in m.queue(q)]
    rows = sum(s.rows for s in segs)
    if not rows:
        raise ValueError(f"nothing of {topic!r} is tiered in {tier_dir}")
    best: dict[str, float] = {}
    for _ in range(repeat):
        spent: dict[str, float] = {}

        def step(name: str, fn: Callable[[], T]) -> T:
            started = time.process_time()
            out = fn()
            spent[name] = spent.get(name, 0.0) + time.process_time() - started
            return out

        for seg in segs:
            data = step("fetch", lambda: tier.backend.get(seg.file))
            step("sha256", lambda: hashlib.sha256(data).hexdigest())
            f = step("open", lambda: pq.ParquetFile(pa.BufferReader(data)))
            step("decode", lambda: list(f.iter_batches(SPARK_TIER_BATCH_ROWS, columns=SOURCE_COLUMNS, use_threads=False)))
            for col in SOURCE_COLUMNS:
                step(f"decode {col}", lambda: f.read(columns=[col], use_threads=False))
        best = {k: min(v, best.get(k, v)) for k, v in spent.items()}
    return {"rows": rows, **{k: v * 1e6 / rows for k, v in best.items()}}


def report(steps: dict[str, Any]) -> None:
    whole = ("fetch", "sha256", "open", "decode")
    print(f"tier read steps, CPU us per row of {steps['rows']} rows: "
          + ", ".join(f"{k} {steps[k]:.3f}" for k in whole) + f" (sum {sum(steps[k] for k in whole):.3f})")
    print("  decoding one column alone: " + ", ".join(
        f"{k.removeprefix('decode ')} {v:.3f}" for k, v in steps.items() if k.startswith("decode ")))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m skiff.bench.tier_steps", description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", required=True, help="a filesystem tier's directory")
    p.add_argument("--topic", required=True)
    p.add_argument("--broker", default="broker-a")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    report(read_steps(args.tier, args.topic, args.broker, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
