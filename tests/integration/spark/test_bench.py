"""`skiff bench spark` measures what it says: a small run on the test session and cluster
(rows counted by Spark's progress for the reads, by the broker for the sink), with the
CPU split between the JVM and its Python workers (where the skiff source reads)."""

from __future__ import annotations

import argparse

import pytest

from skiff.bench.spark import measure

pytestmark = pytest.mark.spark


def test_bench_reads_and_writes_every_message(spark, cluster, tmp_path):
    args = argparse.Namespace(messages=1000, size=200, queues=2, pull_batch_size=[256])
    figures = measure(spark, args, cluster.namesrv_addr, tmp_path)
    assert [f.step for f in figures] == [
        "fill (producer, batches of 256)", "skiff source, pullBatchSize 256",
        "parquet source (ceiling)", "skiff sink (batch write of the bodies)"]
    assert all(f.rows == 1000 and f.wall_s > 0 and f.batches_s > 0 for f in figures), figures
    source, parquet = figures[1], figures[2]
    assert source.cpu_s["jvm"] > 0 and source.cpu_s["workers"] > 0, source
    assert parquet.cpu_s["jvm"] > 0, parquet
