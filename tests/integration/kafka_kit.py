"""What the Kafka tests share: a cluster whose broker serves Kafka on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port


@contextmanager
def kafka_cluster(root: Path, *extra: str) -> Iterator[tuple[Cluster, str]]:
    """A NameServer and a broker with its Kafka listener; yields the cluster and the
    Kafka bootstrap address."""
    port = free_port()
    with Cluster(root, broker_args=[f"--kafkaListenPort={port}", *extra]) as cluster:
        yield cluster, f"127.0.0.1:{port}"
