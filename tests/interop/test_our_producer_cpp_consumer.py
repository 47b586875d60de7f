"""Our producer -> the RocketMQ C++ client's push consumer (PyPI `rocketmq` 0.4.4,
in its own venv, at $SKIFF_CPP_PYTHON), through a real Skiff cluster: every
message it should get arrives once, with tags, keys, properties, ids and bodies
(a compressed one and batch members included) intact, and tag filtering holds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, AsyncProducer, Message
from skiff.client._impl.config import ClientConfig
from skiff.testing.cluster import Cluster
from skiff.transport.loop import run_coroutine

CPP_PYTHON = os.environ.get("SKIFF_CPP_PYTHON", "")
SCRIPT = Path(__file__).parent / "cpp" / "ours_to_cpp_consumer.py"
TOPIC = "Interop-ours-to-cpp"
WAIT_S = 90

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(not CPP_PYTHON, reason="SKIFF_CPP_PYTHON (the rocketmq 0.4.4 venv's python) is not set"),
]


async def produce(namesrv: str) -> list[tuple[Message, str]]:
    """Send what the C++ consumer should and should not see; return (message, msg id) of the wanted ones."""
    config = ClientConfig(namesrv, instance_name="interop-producer", client_ip="127.0.0.1")
    async with AsyncAdmin(client_config=config) as admin:
        await admin.create_topic(TOPIC, queue_nums=4)
    wanted: list[tuple[Message, str]] = []
    async with AsyncProducer("PG-interop", client_config=config) as producer:
        for i in range(12):
            tag = ("TagA", "TagB", "TagC")[i % 3]
            msg = Message.of(TOPIC, f"message {i} ✓", tags=tag, keys=[f"key-{i}", "shared"],
                             properties={"region": f"eu-{i}"})
            result = await producer.send(msg)
            if tag != "TagC":
                wanted.append((msg, result.msg_id))
        big = Message.of(TOPIC, "z" * 20_000, tags="TagA", keys="big", properties={"region": "big"})
        wanted.append((big, (await producer.send(big)).msg_id))
        batch = [Message.of(TOPIC, f"batch {i}", tags="TagB", keys=f"batch-{i}", properties={"region": "batch"})
                 for i in range(5)]
        (result,) = await producer.send_batch(batch)
        wanted += list(zip(batch, result.msg_ids))
    return wanted


def test_cpp_push_consumer_receives_what_we_sent(tmp_path):
    with Cluster(tmp_path) as cluster:
        wanted = run_coroutine(produce(cluster.namesrv_addr))
        done = subprocess.run(
            [CPP_PYTHON, str(SCRIPT), cluster.namesrv_addr, TOPIC, "CG-cpp-interop", "TagA || TagB",
             str(len(wanted)), str(WAIT_S)],
            capture_output=True, text=True, timeout=WAIT_S + 30, cwd=tmp_path,
        )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert lines[0] == "READY"
    got = [json.loads(line) for line in lines[1:]]
    by_id = {g["id"]: g for g in got}
    assert len(by_id) == len(got) == len(wanted)  # each message once
    for msg, msg_id in wanted:
        g = by_id[msg_id]
        assert (g["topic"], g["tags"], g["body"], g["region"], g["uniq_key"]) == (
            TOPIC, msg.tags, msg.body.decode(), msg.properties["region"], msg_id)
        assert g["keys"].split() == msg.keys
    assert not any(g["tags"] == "TagC" for g in got)
