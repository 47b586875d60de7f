"""One Spark session and one Skiff cluster for all the Spark tests.

The session is local[2] on 127.0.0.1 with the UI, the progress bar and most
logging off (skiff.spark.local); its Python workers run this interpreter, which
has skiff installed. The cluster is a real NameServer and two brokers, so
offsets span brokers; they filter by SQL92 too. Every test makes its own topics.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from skiff.testing.cluster import Cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from skiff.spark.local import local_session

    session = local_session("skiff-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("spark-cluster"), brokers=2,
                 broker_args=["--enablePropertyFilter=true"]) as running:
        yield running


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep every Spark test on one xdist worker, so `make test -n 2` starts one
    JVM and one Spark cluster, not one per worker."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.xdist_group("spark"))
