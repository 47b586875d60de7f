"""The PySpark ``skiff`` data source: Skiff topics as a batch and Structured Streaming
source and sink, written with PySpark's Python Data Source API (no JVM jars).

    from skiff.spark import register
    register(spark)
    df = spark.readStream.format("skiff").option("namesrvAddr", "127.0.0.1:9876") \\
        .option("topic", "Orders").load()

docs/spark.md lists the options, the schema and the delivery guarantees.
"""

from __future__ import annotations

from typing import Any

from skiff.spark.datasource import SkiffDataSource
from skiff.spark.workers import SparkWorkerPythonError, ensure_worker_python

__all__ = ["SkiffDataSource", "SparkWorkerPythonError", "register"]


def register(spark: Any) -> None:
    """Make ``format("skiff")`` known to ``spark`` (a SparkSession; registration is per session).

    First it makes sure the session's Python workers can import skiff (`ensure_worker_python`):
    the registered source carries the worker interpreter, so it must be right before this."""
    ensure_worker_python(spark)
    spark.dataSource.register(SkiffDataSource)
