"""A quiet local Spark session with the skiff format registered: what the examples,
the benchmark and the tests start, so they all run Spark the same way.

Spark binds to 127.0.0.1 (``SPARK_LOCAL_IP`` and the driver's host), workers run
this interpreter (``PYSPARK_PYTHON``, else they start whatever ``python3`` is on
PATH, which may lack pyarrow), the web UI and the progress bar are off, and
log4j prints errors only (``log4j2.properties`` beside this module). The
environment variables are set only when unset, and before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from skiff.spark import register

LOG4J2_FILE = Path(__file__).with_name("log4j2.properties")
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_FILE}",
}


def local_session(app_name: str = "skiff", master: str = "local[2]", **conf: str) -> SparkSession:
    """``getOrCreate`` a session on ``master`` with `LOCAL_CONF` (``conf`` entries override it)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONF, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
