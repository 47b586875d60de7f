"""`skiff bench kafka` runs end to end against the cluster it starts: librdkafka produces and
consumes through the Kafka listener, Skiff's client through remoting, and every phase
reads back everything its produce phase stored and reports the broker's CPU per message."""

from __future__ import annotations

import json

from skiff.testing.processes import run_skiff


def test_kafka_bench_reports_both_protocols() -> None:
    done = run_skiff(["bench", "kafka", "--seconds", "1", "--messages", "5000", "--threads", "2", "--json"], timeout_s=180)
    assert done.returncode == 0, done.stdout
    rows = {r["phase"]: r for r in json.loads(done.stdout[done.stdout.index("[{"):])}
    assert rows["kafka produce"]["messages"] > 0 and rows["skiff produce"]["messages"] > 0
    assert rows["kafka consume"]["messages"] == rows["kafka produce"]["messages"]
    assert rows["skiff consume"]["messages"] == rows["skiff produce"]["messages"]
    # The broker's CPU is read in clock ticks (10 ms): a second of producing always shows, a
    # drain of a few thousand messages (~15 ms of broker CPU) can read as 0 ticks.
    assert rows["kafka produce"]["broker_cpu_us_per_msg"] > 0 and rows["skiff produce"]["broker_cpu_us_per_msg"] > 0
    assert rows["kafka consume"]["broker_cpu_us_per_msg"] >= 0 and rows["skiff consume"]["broker_cpu_us_per_msg"] >= 0
