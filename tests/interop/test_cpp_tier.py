"""The RocketMQ C++ client (PyPI `rocketmq` 0.4.4) reads offsets that live only in the tier:
a tiered topic's messages are uploaded to a filesystem tier, local retention deletes their
CommitLog files, and the C++ pull consumer, starting at offset 0, gets every message once,
in order, with its body, keys and tags."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client import Admin, Message, MessageQueue, Producer
from skiff.testing.cluster import Cluster
from skiff.testing.processes import run_skiff
from skiff.testing.waits import wait_for
from tests.interop._cpp import cpp_python, run_script

pytestmark = pytest.mark.interop

TOPIC = "CppTiered"
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    cpp_python()  # skip early when the client is missing
    root = tmp_path_factory.mktemp("cpp-tier")
    args = [f"--tierStorageUrl=file://{root / 'tier'}", "--tierSealMs=1", "--tierUploadIntervalMs=200",
            "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}", "--cleanResourceInterval=100",
            "--mappedFileSizeCommitLog=65536"]
    with Cluster(root / "cluster", broker_args=args) as c:
        yield c


def test_cpp_pull_consumer_reads_offsets_only_in_the_tier(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    done = run_skiff(["topic", "create", "-t", TOPIC, "-q", "1", "-n", ns, "--attr", "tiered.storage=true"])
    assert done.returncode == 0, done.stdout
    mq = MessageQueue(TOPIC, "broker-a", 0)
    body = "c" * 1000
    with Producer("PG-cpp-tier", ns) as producer:
        for i in range(200):
            producer.send(Message.of(TOPIC, f"{i}:{body}", keys=f"k{i}", tags=f"t{i % 2}"), queue=mq)
    with Admin(ns) as admin:
        wait_for(lambda: admin.tier(TOPIC)[0].state.queues[0].local_min_offset > 0, 60,
                 "retention to delete the uploaded files")
        assert admin.min_offset(mq) == 0  # the queue starts in the tier
    got = run_script(tmp_path / "home", "pull_consumer", {"namesrv": ns, "group": "CG-cpp-tier", "topic": TOPIC,
                                                          "expected": 200, "timeout_s": 60})["messages"]
    assert [(m["queue_offset"], m["body"], m["keys"], m["tags"]) for m in got] == [
        (i, f"{i}:{body}", f"k{i}", f"t{i % 2}") for i in range(200)]
