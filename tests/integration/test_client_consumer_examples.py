"""The consumer examples run as a user runs them, against real `skiff` processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.testing.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("examples-cluster")) as c:
        yield c


def run_example(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args, "--timeout-s", "60"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_push_consume_example(cluster: Cluster) -> None:
    out = run_example("push_consume.py", "--namesrv", cluster.namesrv_addr, "--count", "10")
    lines = [line for line in out.splitlines() if line.startswith("DemoTopic ")]
    assert sorted(line.split()[1] for line in lines) == ["TagA"] * 5
    assert {line.split("body=")[1] for line in lines} == {f"hello {i}" for i in range(0, 10, 2)}
    assert "received 5 of 5 TagA messages" in out


def test_orderly_example(cluster: Cluster) -> None:
    out = run_example("orderly.py", "--namesrv", cluster.namesrv_addr, "--orders", "4", "--steps", "5")
    assert "4 orders, every one in order: True" in out
    steps = [line.rsplit(" ", 1)[1] for line in out.splitlines() if "order-0 step" in line]
    assert steps == ["0", "1", "2", "3", "4"]


def test_pull_example_resumes_from_its_commits(cluster: Cluster) -> None:
    first = run_example("pull.py", "--namesrv", cluster.namesrv_addr, "--count", "20")
    assert "polled 20 of 20 messages" in first
    committed = [int(line.rsplit(": ", 1)[1]) for line in first.splitlines() if line.startswith("committed")]
    assert sum(committed) == 20
    second = run_example("pull.py", "--namesrv", cluster.namesrv_addr, "--count", "5")
    assert "polled 5 of 5 messages" in second
    bodies = sorted(line.split("body=")[1] for line in second.splitlines() if "body=" in line)
    assert bodies == sorted(f"record {i}" for i in range(5)), "the second run reads only what is new"
    assert sum(int(line.rsplit(": ", 1)[1]) for line in second.splitlines() if line.startswith("committed")) == 25
