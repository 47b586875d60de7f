"""Skiff-over-Kafka rows of `skiff bench compare`: the harness's Skiff server opens its Kafka
listener, librdkafka's producer and consumer carry every message through it in both shapes,
skiff-kafka is in the default set but never a "peer", and it is skipped, with the reason,
when its client module cannot be imported."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from skiff.bench.compare import report, run
from skiff.bench.compare.phases import PhaseOptions, run_e2e, run_produce
from skiff.bench.compare.procs import CHILDREN
from skiff.bench.compare.results import Mode, Row, Workload
from skiff.bench.compare.servers import SkiffServer
from skiff.bench.compare.systems import SYSTEMS, parse_systems

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.timeout(180)


def test_kafka_rows_run_through_the_harness_broker_in_both_shapes(tmp_path: Path) -> None:
    server = SkiffServer(tmp_path / "skiff", durable=False)
    server.start()
    try:
        assert server.endpoint()["kafka_bootstrap"] == f"127.0.0.1:{server.kafka_port}"
        single = PhaseOptions(batch=1, window=64, queues=4, duration_s=60.0, work_dir=tmp_path, fetch=32)
        e2e = run_e2e("skiff-kafka", server, Mode.NORMAL, "bench_kafka_e2e", 100, 400, single)
        assert (e2e.ok, e2e.messages, e2e.note) == (True, 400, "")
        assert e2e.p50_ms is not None and e2e.p99_ms is not None
        assert 0 < e2e.p50_ms <= e2e.p99_ms  # latency measured from the producer's stamp in every body
        assert e2e.broker_cpu_s > 0
        batched = dataclasses.replace(single, batch=64, window=4, fetch=0)
        produced = run_produce("skiff-kafka", server, Mode.NORMAL, "bench_kafka_backlog", 100, 1000, batched)
        assert (produced.ok, produced.messages) == (True, 1000)
    finally:
        server.stop()
        CHILDREN.stop_all()


def test_skiff_kafka_is_in_the_default_set_and_skipped_without_its_client(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = [s.name for s in parse_systems(run.parse_args(["--smoke"]).systems)]
    assert defaults[:2] == ["skiff", "skiff-kafka"]
    missing = dataclasses.replace(SYSTEMS["skiff-kafka"], client_module="no_such_kafka_client_module")
    kept, skipped = run.select_installed([SYSTEMS["skiff"], missing], allow_install=False)
    assert [s.name for s in kept] == ["skiff"]
    assert skipped == ["skiff-kafka: Python module no_such_kafka_client_module is not importable"]


def test_skiff_kafka_is_not_the_best_peer_of_skiff() -> None:
    rows = [Row(system, Mode.NORMAL, Workload.E2E, 100, 100, seconds, 1e-4, 1)
            for system, seconds in (("skiff", 1.0), ("skiff-kafka", 0.1), ("redis", 0.5))]
    ratio, peer = report.e2e_ratio(rows, 100)
    assert (peer, ratio) == ("redis", pytest.approx(0.5))
