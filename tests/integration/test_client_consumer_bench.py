"""`skiff bench consumer` and `skiff bench e2e` run end to end through the command
(small runs: the figures they print must account for every message)."""

from __future__ import annotations

import json

from skiff.testing.processes import run_skiff


def last_json(output: str) -> dict:
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def test_bench_consumer_drains_its_backlog() -> None:
    done = run_skiff(["--log-level", "WARNING", "bench", "consumer", "--messages", "3000", "--size", "256",
                      "--listener", "sync", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = last_json(done.stdout)
    assert figures["messages"] == 3008, "the backlog is whole batches of 64"
    assert figures["consume_tps"] > 0 and figures["client_cpu_us_per_msg"] > 0
    assert figures["broker_cpu_us_per_msg"] is not None
    assert 0 <= figures["p50_s2c_ms"] <= figures["p99_s2c_ms"] <= figures["max_s2c_ms"]


def test_bench_e2e_delivers_what_it_sent() -> None:
    done = run_skiff(["--log-level", "WARNING", "bench", "e2e", "--seconds", "1", "--rate", "3000", "--json"],
                     timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = last_json(done.stdout)
    assert figures["sent"] > 0 and figures["send_failed"] == 0
    assert figures["consume"]["messages"] == figures["sent"]
    assert figures["consume"]["p99_b2c_ms"] < 5000


def test_bench_consumer_lite_drains_its_backlog_in_pulled_batches() -> None:
    done = run_skiff(["--log-level", "WARNING", "bench", "consumer", "--lite", "--messages", "3000", "--size", "100",
                      "--pull-batch", "256", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = last_json(done.stdout)
    assert figures["messages"] == 3008 and figures["listener"] == "lite" and figures["batch"] == 256
    assert figures["consume_tps"] > 0 and figures["client_cpu_us_per_msg"] > 0
    assert 0 <= figures["p50_s2c_ms"] <= figures["p99_s2c_ms"] <= figures["max_s2c_ms"]
