"""What the Kafka tests share: a cluster whose broker serves Kafka on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port, start_namesrv


@contextmanager
def kafka_cluster(root: Path, *extra: str) -> Iterator[tuple[Cluster, str]]:
    """A NameServer and a broker with its Kafka listener; yields the cluster and the
    Kafka bootstrap address."""
    port = free_port()
    with Cluster(root, broker_args=[f"--kafkaListenPort={port}", *extra]) as cluster:
        yield cluster, f"127.0.0.1:{port}"


@contextmanager
def kafka_groups(root: Path, count: int, *extra: str) -> Iterator[tuple[Cluster, list[str]]]:
    """A NameServer and ``count`` broker groups (broker-a, broker-b, ...), each master with
    its own Kafka listener; yields the cluster and each group's Kafka bootstrap address."""
    ports = [free_port() for _ in range(count)]
    cluster = Cluster(root, brokers=count, broker_args=list(extra))
    try:
        cluster.namesrv = start_namesrv()
        for i, port in enumerate(ports):
            cluster.start_broker(i, f"--kafkaListenPort={port}")
        yield cluster, [f"127.0.0.1:{port}" for port in ports]
    except BaseException:
        cluster._kill_all()
        raise
    else:
        cluster.stop()
