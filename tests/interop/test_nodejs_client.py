"""The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs, pinned by
tests/interop/nodejs/package-lock.json; `make test` installs it under build/node-rocketmq5)
against a real broker's gRPC endpoint: a second implementation beside the Python one.

The FIFO case is the defect it found: its SimpleConsumer asks for queue 0 whatever queue holds
a message group's messages, and an orderly group received nothing from queue 3.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port
from skiff.testing.wire import BrokerWire, with_wire

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "nodejs" / "client.js"
DEFAULT_DIR = REPO / "build" / "node-rocketmq5"
QUEUES = 4


def client_dir() -> Path:
    path = Path(os.environ.get("SKIFF_RMQ5_NODE") or DEFAULT_DIR).resolve()
    if shutil.which("node") is None or not (path / "node_modules" / "rocketmq-client-nodejs").is_dir():
        pytest.skip(f"the RocketMQ 5.x Node.js client is not installed in {path} (run `make test`, which "
                    f"installs it), or node is missing")
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    client_dir()
    port = free_port()
    with Cluster(tmp_path_factory.mktemp("node"), broker_args=[f"--grpcServerPort={port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield c


def run_node(cluster: Cluster, tmp_path: Path, script: Path = SCRIPT, **spec: Any) -> Any:
    env = {**os.environ, "NODE_PATH": str(client_dir() / "node_modules"), "HOME": str(tmp_path)}
    proc = subprocess.run(["node", str(script), json.dumps({"endpoint": cluster.grpc_endpoint, **spec})],  # type: ignore[attr-defined]
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, f"node client failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fifo_messages_of_queue_3_reach_an_orderly_simple_consumer(cluster: Cluster, tmp_path: Path):
    group = next(f"g{i}" for i in range(100) if zlib.crc32(f"g{i}".encode()) % QUEUES == 3)  # lands in queue 3

    async def create(wire: BrokerWire) -> None:
        header = CreateTopicRequestHeader("NodeFifo", "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG")
        assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
        orderly = SubscriptionGroupConfig("G-node-fifo", consume_message_orderly=True)
        resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orderly.to_json())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    with_wire(cluster.broker_addr(), create)
    r = run_node(cluster, tmp_path, scenario="fifo_one_group", topic="NodeFifo", group=group,
                 consumerGroup="G-node-fifo", count=20)
    assert [m["body"] for m in r["got"]] == r["sent"] == [f"{group}-{i:02d}" for i in range(20)]
    assert {m["group"] for m in r["got"]} == {group}
