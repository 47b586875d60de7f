"""`SkiffDataSource`: the class Spark registers as ``format("skiff")``.

It only reads the options and hands out readers and writers; Spark pickles it
(with its options) to the driver-side helper processes, so it holds nothing else.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions, SourceOptions
from skiff.spark.schema import SCHEMA
from skiff.spark.sink import SkiffBatchWriter, SkiffStreamWriter
from skiff.spark.sink_rows import SinkColumns
from skiff.spark.source import SkiffBatchReader, SkiffStreamReader


class SkiffDataSource(DataSource):
    """Skiff topics as a Spark source (batch and streaming) and sink (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "skiff"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> SkiffBatchReader:
        _check_schema(schema)
        return SkiffBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> SkiffStreamReader:
        _check_schema(schema)
        options = SourceOptions.parse(self.options)
        options.check_streaming()
        return SkiffStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> SkiffBatchWriter:
        if overwrite:
            raise SparkOptionError('the skiff sink only appends: a topic cannot be emptied and refilled; '
                                   'use .mode("append")')
        options = SinkOptions.parse(self.options)
        return SkiffBatchWriter(options, SinkColumns.of(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> SkiffStreamWriter:
        if overwrite:
            raise SparkOptionError("the skiff sink only appends: use outputMode append or update, not complete")
        options = SinkOptions.parse(self.options)
        return SkiffStreamWriter(options, SinkColumns.of(schema, options))


def _check_schema(schema: StructType) -> None:
    """A user schema (``.schema(...)``) must be the source's own: the rows are built to it."""
    if schema.simpleString() != SCHEMA.simpleString():
        raise SparkOptionError(f"the skiff source's schema is fixed ({SCHEMA.simpleString()}); "
                               f"select or cast columns after load() instead of passing {schema.simpleString()}")
