"""The floor under the Spark source's reads in ``skiff bench tier``: a Python data source that
only hands Spark batches it already has, so its cost is what Spark spends on a Python source's
rows (the JVM reading the Arrow batches into rows, the worker writing them to the JVM),
whatever the source does to make them. A module of its own so the Python workers import it
(and pyspark) only when the benchmark runs Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from skiff.columnar.schema import ARROW_SCHEMA, SOURCE_COLUMNS
from skiff.common.limits import SPARK_TIER_BATCH_ROWS
from skiff.spark.schema import SCHEMA


class FloorSource(DataSource):
    """A Python data source that yields one prebuilt batch of the source's schema over and over
    (``rows`` rows in ``partitions`` partitions): what Spark itself costs for a Python source's
    rows, whatever the source does (the floor under both skiff reads)."""

    @classmethod
    def name(cls) -> str:
        return "skiff-bench-floor"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(int(self.options["rows"]), int(self.options["partitions"]), self.options["file"])


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, file: str) -> None:
        self.rows, self.parts, self.file = rows, partitions, file

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The first batch of the first tiered file, as the tier's reads decode it
        (`SPARK_TIER_BATCH_ROWS` rows), sent again and again: ``rows // partitions`` rows."""
        f = pq.ParquetFile(self.file)
        batch = next(f.iter_batches(SPARK_TIER_BATCH_ROWS, columns=SOURCE_COLUMNS, use_threads=False))
        assert batch.schema.equals(ARROW_SCHEMA), batch.schema
        full, rest = divmod(self.rows // self.parts, batch.num_rows)
        for _ in range(full):
            yield batch
        if rest:
            yield batch.slice(0, rest)
