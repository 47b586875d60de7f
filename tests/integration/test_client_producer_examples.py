"""examples/send.py and examples/admin.py run as a user would run them, against a
real cluster; what they print is checked against what the cluster then holds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.client import Admin, MessageQueue
from skiff.testing.cluster import Cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("examples")) as c:
        yield c


def run_example(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_send_example_sends_what_it_prints(cluster: Cluster):
    out = run_example("send.py", "--namesrv", cluster.namesrv_addr, "--topic", "X-send")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["plain"] + ["ordered"] * 6 + ["batch", "async", "oneway"]
    ordered = [re.search(r"queue=(\S+)", line)[1] for line in lines if line.startswith("ordered")]
    assert ordered[0::2] == [ordered[0]] * 3 and ordered[1::2] == [ordered[1]] * 3  # one queue per order
    with Admin(cluster.namesrv_addr, instance_name="it-examples") as admin:
        plain_id = re.search(r"offset_id=(\S+)", lines[0])[1]
        msg = admin.message_by_id(plain_id)
        assert (msg.body, msg.tags, msg.keys, msg.properties["region"]) == (b"hello", "TagA", ["order-1", "user-7"],
                                                                            "eu")
        broker, queue = ordered[0].split(":")
        mq = MessageQueue("X-send", broker, int(queue))
        stored = [admin.message_at(mq, offset) for offset in range(admin.max_offset(mq))]
        order1 = [m.body.decode() for m in stored if m is not None and m.keys == ["order-1"]]
        assert order1 == ["order-1 created", "order-1 paid", "order-1 shipped"]


def test_admin_example_creates_and_reports(cluster: Cluster):
    out = run_example("admin.py", "--namesrv", cluster.namesrv_addr, "--topic", "X-admin", "--group", "X-group")
    assert f"at {cluster.broker_addr(0)}" in out and "created on" in out
    assert len([line for line in out.splitlines() if line.startswith("queue ")]) == 4
    assert out.rstrip().endswith("total lag 0")
