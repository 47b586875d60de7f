"""`skiff bench pull_path`, `skiff bench brokers` (two brokers) and `skiff bench clients` run end to end and
report figures of the work they did (every pull answered in full; messages counted by the
producers; sends answered by RocketMQ's own clients)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.bench.pull_path import measure

REPO = Path(__file__).resolve().parents[2]


def test_pull_path_pulls_every_message_in_batches_of_32() -> None:
    figures = asyncio.run(measure(messages=3200, batch=32, size=100, repeat=1))
    assert figures["pulls"] == 100
    assert 0 < figures["us_per_message"] < figures["us_per_pull"]


def test_brokers_bench_moves_messages_through_two_brokers() -> None:
    out = subprocess.run([sys.executable, "-m", "skiff", "bench", "brokers", "--brokers", "2", "--producers",
                          "1", "--seconds", "1", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r["brokers"] for r in rows] == [2]
    assert all(r["messages"] > 0 and r["broker_cpu_us_per_msg"] > 0 for r in rows), rows


def test_clients_bench_sends_with_the_cpp_client() -> None:
    python = os.environ.get("SKIFF_CPP_PYTHON") or str(REPO / "build" / "venv-rocketmq-cpp" / "bin" / "python")
    if not Path(python).exists():
        pytest.skip("the RocketMQ C++ client is not installed (SKIFF_CPP_PYTHON; `make test` builds it)")
    out = subprocess.run([sys.executable, "-m", "skiff", "bench", "clients", "--client", "cpp", "--threads", "1",
                          "--seconds", "0.5", "--json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SKIFF_CPP_PYTHON": python})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    (run,) = json.loads(out.stdout.strip().splitlines()[-1])
    assert run["client"] == "cpp" and run["sent"] > 0 and run["errors"] == 0 and run["broker_cpu_us_per_msg"] > 0
