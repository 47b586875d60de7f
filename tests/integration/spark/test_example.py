"""The order pipeline of examples/spark/ runs end to end: events in, windows in Parquet and in a topic."""

from __future__ import annotations

import collections
import importlib.util
import json
import subprocess
import sys
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest

from tests.integration.spark.kit import create_topic, finish, pull_all

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "spark"
MINUTE_MS = 60_000


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_order_pipeline(spark, cluster, tmp_path):
    producer, pipeline = example("orders_producer"), example("orders_pipeline")
    ns = cluster.namesrv_addr
    orders, stats = create_topic(ns, "orders", queues=2), create_topic(ns, "order-stats", queues=1)
    events = producer.generate(300, minutes=8, late_s=20, seed=3, end_ms=1_700_000_000_000)
    producer.produce(ns, orders, events)

    job = pipeline.Job(ns, orders, stats, str(tmp_path / "out"), str(tmp_path / "checkpoint"),
                       max_messages_per_trigger=120)
    finish(pipeline.start(spark, job, {"availableNow": True}))

    watermark_ms = max(e.event_ms for e in events) - 2 * MINUTE_MS
    expected = collections.defaultdict(lambda: [0, Decimal(0)])
    for e in events:
        start_ms = e.event_ms // MINUTE_MS * MINUTE_MS
        if start_ms + MINUTE_MS <= watermark_ms:  # closed by the watermark: written
            expected[(start_ms, e.status)][0] += 1
            expected[(start_ms, e.status)][1] += Decimal(e.amount)
    assert len(expected) > 10

    parquet = spark.read.parquet(job.output).collect()
    assert sorted((round(r.window_start.timestamp() * 1000), r.status, r.orders, r.revenue) for r in parquet) == \
        sorted((k[0], k[1], n, total) for k, (n, total) in expected.items())
    messages = [json.loads(m.body) for _, m in pull_all(ns, stats)]
    assert sorted((m["window_start"], m["status"], m["orders"], Decimal(str(m["revenue"]))) for m in messages) == \
        sorted((_iso(k[0]), k[1], n, total) for k, (n, total) in expected.items())


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_default_output_and_checkpoint_are_ignored_by_git():
    """Run from the repository root, the example writes nowhere git would show."""
    root = EXAMPLES.parents[1]
    job = example("orders_pipeline").Job("127.0.0.1:9876")
    for path in (job.output, job.checkpoint):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=root, check=False)
        assert done.returncode == 0, f"{path} is not ignored by git"
