"""`python -m skiff.bench.compare.latency_split`: a small run through its command, whose
stages must account for every message and add up to the end-to-end figure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from skiff.bench.compare.latency_split import _weighted_quantile

CLOCK_SLACK_MS = 3.0
"""Born and store times are whole milliseconds: each stage is off by up to one."""


def test_weighted_quantile_weighs_each_batch_by_its_messages() -> None:
    assert _weighted_quantile([5.0, 1.0], [1, 3], 0.5) == 1.0
    assert _weighted_quantile([5.0, 1.0], [3, 1], 0.5) == 5.0
    assert _weighted_quantile([], [], 0.5) == 0.0


@pytest.mark.slow  # a NameServer, a broker and a producer process (8-15 s at load 8)
def test_latency_split_accounts_for_every_message() -> None:
    done = subprocess.run([sys.executable, "-m", "skiff.bench.compare.latency_split", "--count", "5120",
                           "--batch", "256", "--window", "2", "--queues", "4", "--timeout-s", "90"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["messages"] == figures["sent"] == 5120
    assert 0 < figures["consumer_cpu_us_per_msg"] < 10_000
    for stage in ("producer_ms", "to_store_ms", "store_to_consumer_ms", "e2e_ms"):
        assert -CLOCK_SLACK_MS <= figures[stage]["p50"] <= figures[stage]["p99"] < 60_000, (stage, figures)
    parts = figures["producer_ms"]["p50"] + figures["to_store_ms"]["p50"] + figures["store_to_consumer_ms"]["p50"]
    assert figures["e2e_ms"]["p50"] <= figures["e2e_ms"]["p99"]
    assert parts > 0 and figures["e2e_ms"]["p50"] > 0


def test_latency_split_refuses_an_empty_run() -> None:
    done = subprocess.run([sys.executable, "-m", "skiff.bench.compare.latency_split", "--count", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--count must be at least 1" in done.stderr
