"""Tiered storage: a topic's old messages as Parquet files in object storage.

Files only, like the store: the manifest format (`manifest`), the columns and the
records they rebuild (`columns`), the backends (`backends`: a filesystem path or an
S3-compatible bucket) and the tier that ties them (`tier`: upload, read, checksums, a
bounded cache). The broker uploads and serves through it (``skiff.broker.tier``);
the Spark source reads its files directly. Imports only ``skiff.common``,
``skiff.columnar`` (the column-wise record decoder it shares with the Spark source) and
third-party packages (docs/tiered-storage.md).
"""
