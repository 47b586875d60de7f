"""Stored records to Arrow columns, column-wise: shared by the tier and the Spark source.

Both turn runs of stored records into the same twelve columns (`schema.SOURCE_FIELDS`):
the Spark source for the batches it hands Spark, the broker's tier uploader for the
Parquet files it writes (whose first columns are exactly the source's, so the source
hands tiered row groups on as they are). `arrow_decode` builds them from a run with no
Python object per message, `record_columns` finds the records and gathers their fixed
fields with numpy, and the compiled kernel `_kernels` (Cython, optional; chosen by
`skiff.common.kernels`) does the per-record pass. Imports only ``skiff.common`` and
third-party packages (numpy, pyarrow), so that ``skiff.tier`` and ``skiff.spark`` both can.
"""
