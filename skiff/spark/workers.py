"""Whether Spark's Python workers can import skiff, checked when the format is registered.

A data source runs in Python workers that Spark starts with ``sc.pythonExec``
(``PYSPARK_PYTHON``, else whatever ``python3`` is on PATH). When that is not the
interpreter skiff is installed in, every query fails later with "No module named
'skiff'" deep in a worker traceback. Checking once at registration turns that
into a fix (a local session: the workers run on this machine, so they can run
this interpreter) or one precise error (a cluster: only its operator can say
which interpreter the executors have).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from typing import Any

log = logging.getLogger(__name__)

PROBE_MODULE = "skiff.spark.datasource"
"""What a worker imports to unpickle the data source (it pulls in pyarrow and the client)."""
PROBE_TIMEOUT_S = 60.0


class SparkWorkerPythonError(RuntimeError):
    """Spark's Python workers would start an interpreter that cannot import skiff."""


def worker_import_error(python: str) -> str | None:
    """Why ``python`` cannot import the data source, or None when it can. Run outside the
    repository (workers do not start in it), with this process's environment (they inherit it)."""
    try:
        done = subprocess.run([python, "-c", f"import {PROBE_MODULE}"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, cwd=tempfile.gettempdir(), check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def ensure_worker_python(spark: Any) -> None:
    """Point a local session's workers at this interpreter when theirs cannot import skiff;
    raise `SparkWorkerPythonError` saying what to set when the session is not local."""
    sc = spark.sparkContext
    python = sc.pythonExec
    if python == sys.executable:
        return
    reason = worker_import_error(python)
    if reason is None:
        return
    if sc.master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        log.info("Spark's Python workers would run %s (%s); using %s instead", python, reason, sys.executable)
        sc.pythonExec = sys.executable
        os.environ["PYSPARK_PYTHON"] = sys.executable
        return
    raise SparkWorkerPythonError(
        f"Spark's Python workers run {python!r}, which cannot import skiff ({reason}). "
        f"Set PYSPARK_PYTHON={sys.executable} (or an interpreter with skiffmq[spark] installed on every "
        f"executor) before the SparkSession starts, or spark.pyspark.python for a cluster.")
